"""A process pool and the signals a run receives: Ctrl-C to the whole process group stops the run and its
workers without a hang, and a calling process killed outright leaves no worker behind.

Each case runs a small script in its own session (its own process group), as a terminal would run
``vid2sid benchmark --executor pool``, so the signals never reach pytest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vid2sid_ros.calibration.executor import PARENT_POLL_S, make_executor

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    from vid2sid_ros.calibration.executor import make_executor

    def task(_state, item):
        open(os.path.join({folder!r}, f"worker_{{os.getpid()}}"), "w").close()
        t = time.monotonic()
        while time.monotonic() - t < 60.0:  # busy, in Python and in sleep: a signal may land anywhere
            sum(range(2000))
            time.sleep(0.001)
        return item

    if __name__ == "__main__":
        ex = make_executor("pool", 2)
        try:
            ex.map(task, list(range(8)))
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        finally:
            ex.close()
        print("closed", flush=True)
""")


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie left to a container's init is not running)."""
    try:
        state = Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _start(tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    """The script running, both of its pool workers busy in a task; ``(process, worker pids)``."""
    script = tmp_path / "pool_run.py"
    script.write_text(SCRIPT.format(root=str(ROOT), folder=str(tmp_path)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    t = time.monotonic()
    while time.monotonic() - t < 60.0:
        pids = [int(p.name.split("_")[1]) for p in tmp_path.glob("worker_*")]
        if len(pids) == 2:
            return proc, pids
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the pool's workers never started their tasks")


def test_a_pool_worker_leaves_ctrl_c_to_its_caller():
    with make_executor("pool", 2) as ex:
        got = ex.map(_handlers, [0, 1])
    assert got == [(True, True)] * 2  # SIGINT ignored, SIGTERM the default (dies at once)


def _handlers(_state, _item):
    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.parametrize("attempt", range(3))
def test_ctrl_c_to_the_process_group_stops_the_run_and_its_workers(tmp_path, attempt):
    """Was: a worker interrupted while it held the pool's task queue lock left the caller's shutdown
    waiting for ever (2 of 13 Ctrl-C's to `vid2sid calibrate --executor pool`)."""
    proc, workers = _start(tmp_path)
    time.sleep(0.05 * attempt)  # the interrupt lands at a different moment of the tasks
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: every process of the group
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("the run hung after Ctrl-C") from None
    assert "interrupted" in out and "closed" in out, err
    assert not [w for w in workers if _alive(w)]


def test_a_killed_caller_leaves_no_worker_behind(tmp_path):
    """Was: after SIGKILL of `vid2sid benchmark --executor pool` its workers finished their cells as orphans,
    holding the cells' run directory locks, so the resume run at once was refused ("in use by another run")."""
    proc, workers = _start(tmp_path)
    proc.kill()  # SIGKILL to the caller alone: nothing of it runs any more
    proc.wait(timeout=10)
    t = time.monotonic()
    while time.monotonic() - t < 10.0 and any(_alive(w) for w in workers):
        time.sleep(0.05)
    assert not [w for w in workers if _alive(w)], "orphaned workers still run"
    assert time.monotonic() - t < 20 * PARENT_POLL_S
