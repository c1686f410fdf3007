"""Test-wide isolation for vid2sid_ros.

Runs before any test module imports rclpy:

* DDS discovery stays on this machine (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, no
  static peers) and each pytest run gets its own ``ROS_DOMAIN_ID`` (1-232, from the pid),
  so parallel runs do not see each other. Override with ``VID2SID_TEST_DOMAIN_ID``. Under
  pytest-xdist (``-n N``) each worker gets a domain of its own, spread from that base.
  Both go into ``os.environ``, so every subprocess a test starts inherits them.
* ``MUJOCO_GL`` defaults to ``egl`` (``osmesa`` when only OSMesa is installed).

Fixtures: ``ros`` -- an initialised rclpy context with node/executor helpers that
cleans up after itself; ``ros_env`` -- the isolated environment for subprocesses.
"""

from __future__ import annotations

import ctypes.util
import os
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
TEST_DIR = Path(__file__).resolve().parent


def _isolate_ros_env() -> None:
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_STATIC_PEERS"] = ""
    os.environ.pop("ROS_LOCALHOST_ONLY", None)  # deprecated; would conflict with the range above
    given = os.environ.get("VID2SID_TEST_DOMAIN_ID")
    # under pytest-xdist (-n N) every worker is a process of its own; the N workers of one run share
    # PYTEST_XDIST_TESTRUNUID, and worker k takes the domain k * (232 // N) above their common base
    run_uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = int(given) - 1 if given else (int(run_uid, 16) if run_uid else os.getpid()) % 232
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit():
        base += int(worker[2:]) * (232 // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
    os.environ["ROS_DOMAIN_ID"] = str(1 + base % 232)
    os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")


def _default_mujoco_gl() -> None:
    if "MUJOCO_GL" in os.environ:
        return
    if ctypes.util.find_library("EGL") is None and ctypes.util.find_library("OSMesa") is not None:
        os.environ["MUJOCO_GL"] = "osmesa"
    else:
        os.environ["MUJOCO_GL"] = "egl"


_isolate_ros_env()
_default_mujoco_gl()
# Tests import the checkout's vid2sid_ros (its __init__ extends the path to the installed
# msg/srv); make that hold however pytest was started.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def pytest_report_header(config):
    return (f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} "
            f"ROS_AUTOMATIC_DISCOVERY_RANGE={os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE']} "
            f"MUJOCO_GL={os.environ['MUJOCO_GL']}")


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    """Under pytest-xdist: name the test a worker died in, at once. (pytest-xdist 3.8's file-wise scheduling can
    stall for good after a worker dies, before its summary would name the test: the log must say it first.)"""
    sys.stderr.write(f"\nvid2sid tests: a pytest worker died while running {crashitem}\n")
    sys.stderr.flush()


@pytest.fixture
def ros_env() -> dict[str, str]:
    """A copy of the isolated environment, for ``subprocess`` calls."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def mutmut_stand_in(tmp_path, monkeypatch):
    """``ensure(mutation_module)``: bench/mutation.py's main() looks for mutmut beside the interpreter
    before anything else; mutmut is a dev extra (requirements-dev.txt, not in `make setup`), so where it
    is absent a stand-in goes beside a stand-in interpreter path (for tests that never let mutmut run)."""

    def ensure(mutation) -> None:
        if not Path(mutation.sys.executable).with_name("mutmut").exists():
            fake = tmp_path / "mutmut_stand_in"
            fake.mkdir(exist_ok=True)
            (fake / "mutmut").write_text("#!/bin/sh\nexit 99\n")
            monkeypatch.setattr(mutation.sys, "executable", str(fake / "python"))

    return ensure


class RosHarness:
    """An rclpy context of its own, plus the nodes and executor created in it."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self._rclpy = rclpy
        self.context = Context()
        rclpy.init(context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.nodes: list = []

    def node(self, name: str, **kwargs):
        """Create a node in this context and add it to the executor."""
        node = self._rclpy.create_node(name, context=self.context, **kwargs)
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def spin_until(self, predicate, timeout: float = 10.0, step: float = 0.05) -> bool:
        """Spin the executor until ``predicate()`` is true; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            self.executor.spin_once(timeout_sec=step)
        return bool(predicate())

    def spin_future(self, future, timeout: float = 10.0):
        """Spin until ``future`` is done and return its result (TimeoutError if not)."""
        if not self.spin_until(future.done, timeout):
            future.cancel()
            raise TimeoutError(f"no result within {timeout} s")
        return future.result()

    def close(self) -> None:
        for node in self.nodes:
            try:
                self.executor.remove_node(node)
            except Exception:  # noqa: BLE001 - best-effort teardown
                pass
            node.destroy_node()
        self.nodes.clear()
        self.executor.shutdown(timeout_sec=1.0)
        if self.context.ok():
            self._rclpy.shutdown(context=self.context)


@pytest.fixture
def ros():
    """An initialised rclpy context; nodes made with ``ros.node(name)`` are destroyed after."""
    from vid2sid_ros._interfaces import require_interfaces

    require_interfaces()
    harness = RosHarness()
    try:
        yield harness
    finally:
        harness.close()
