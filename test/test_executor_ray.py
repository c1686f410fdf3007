"""The ray backend on a private local Ray bound to 127.0.0.1 (skipped where Ray is not installed:
``pip install -r requirements-ray.txt``)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from vid2sid_ros.calibration import sweep  # noqa: E402
from vid2sid_ros.calibration.benchmark import run_benchmark  # noqa: E402
from vid2sid_ros.calibration.executor import make_executor  # noqa: E402
from vid2sid_ros.sim.toy import make_rig  # noqa: E402

KW = dict(budget=12, iterations=2, noise="keypoint", progress=False)


@pytest.fixture(scope="module")
def ray_executor():
    ex = make_executor("ray", 2)
    yield ex
    ex.close()
    ray.shutdown()


def _cells(res):
    return {(s["seed"], m): {k: v for k, v in r.items() if k != "wall_s"}
            for s in res["per_seed"] for m, r in s["methods"].items()}


def test_local_ray_listens_on_loopback_only(ray_executor):
    node = ray.nodes()[0]
    assert node["NodeManagerAddress"] == "127.0.0.1"


def test_sweep_on_ray_gives_exactly_the_serial_cells(ray_executor, tmp_path):
    serial = run_benchmark(make_rig(), ["reasoner", "random"], 2, out=tmp_path / "serial", **KW)
    on_ray = run_benchmark(make_rig(), ["reasoner", "random"], 2, out=tmp_path / "ray", executor=ray_executor, **KW)
    assert _cells(on_ray) == _cells(serial)
    assert on_ray["executor"]["backend"] == "ray" and on_ray["failed_cells"] == []


def _die_once(marker: str, item: int) -> int:
    mark = Path(marker) / f"ray_died_{item}"
    if item == 1 and not mark.exists():
        mark.write_text("x")
        os.kill(os.getpid(), signal.SIGKILL)
    return item * 10


def test_ray_worker_killed_mid_task_is_restarted_and_the_task_retried(ray_executor, tmp_path):
    import sys

    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import a test module
    assert ray_executor.map(_die_once, [0, 1, 2, 3], state=str(tmp_path)) == [0, 10, 20, 30]
    assert (tmp_path / "ray_died_1").exists()
