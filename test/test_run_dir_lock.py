"""One run per run directory: the run lock (calibration/run_lock.py) and the CLI's refusal."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vid2sid_ros import cli
from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, CalibrationError, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.calibration.run_lock import LOCK_NAME, RunDirBusy, lock_holder, run_dir_lock
from vid2sid_ros.rigs import load_rig

REPO = Path(__file__).resolve().parents[1]

_HOLD = ("import sys, time\n"
         "from vid2sid_ros.calibration.run_lock import run_dir_lock\n"
         "with run_dir_lock(sys.argv[1], command='holder-of-the-test'):\n"
         "    print('held', flush=True)\n"
         "    time.sleep(120)\n")


@pytest.fixture
def holder(ros_env):
    """Start a process holding a run directory's lock; yields (start(dir) -> Popen)."""
    procs = []

    def start(run_dir: Path) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", _HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True,
                             env=ros_env)
        procs.append(p)
        assert p.stdout.readline().strip() == "held"
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_second_comer_refused_naming_holder_and_a_killed_holder_does_not_block(tmp_path, holder):
    rd = tmp_path / "run"
    p = holder(rd)
    with pytest.raises(RunDirBusy) as e:
        with run_dir_lock(rd):
            pass
    msg = str(e.value)
    assert "\n" not in msg
    assert f"pid {p.pid}" in msg and "holder-of-the-test" in msg and "started" in msg
    assert lock_holder(rd)["pid"] == p.pid
    p.send_signal(signal.SIGKILL)  # no clean-up runs: the kernel releases the flock
    p.wait()
    assert (rd / LOCK_NAME).exists()
    with run_dir_lock(rd) as got:
        assert got == rd and lock_holder(rd)["pid"] == os.getpid()
    assert lock_holder(rd) is None  # released: no stale holder details


def test_lock_is_reentrant_in_a_thread_and_exclusive_between_threads(tmp_path):
    rd = tmp_path / "run"
    errors = []
    with run_dir_lock(rd):
        with run_dir_lock(rd):  # the CLI holds it, run_calibration takes it again
            pass

        def other():
            try:
                with run_dir_lock(rd):
                    pass
            except RunDirBusy as err:
                errors.append(str(err))

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert len(errors) == 1 and "in use by another run in this process" in errors[0]
    with run_dir_lock(rd):  # released after the outer block
        pass


def test_refused_fresh_run_leaves_no_directory_behind(tmp_path):
    rd = tmp_path / "new_run"
    with pytest.raises(RuntimeError):
        with run_dir_lock(rd):
            raise RuntimeError("a check refused the run")
    assert not rd.exists()


@pytest.mark.parametrize("resume", [False, True])
def test_calibrate_into_a_locked_directory_refused_in_one_line(tmp_path, holder, capsys, resume):
    rd = tmp_path / "run"
    p = holder(rd)
    rc = cli.main(["calibrate", "--rig", "toy", "--iterations", "1", "--out", str(rd), "--quiet", "--no-report"]
                  + (["--resume"] if resume else []))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and "in use by another run" in err[0] and f"pid {p.pid}" in err[0]
    assert sorted(x.name for x in rd.iterdir()) == [LOCK_NAME]  # nothing written


def test_run_calibration_refused_while_another_thread_runs_there(tmp_path):
    rig = load_rig("toy")
    real = make_sim2sim_trial(rig, rig.parameters.nominal(), seed=0, noise="none")
    rd = tmp_path / "run"
    with run_dir_lock(rd):
        box = []
        t = threading.Thread(target=lambda: box.append(_try_run(rig, real, rd)))
        t.start()
        t.join()
    assert isinstance(box[0], CalibrationError) and "in use by another run" in str(box[0])
    assert not (rd / "run.json").exists()


def _try_run(rig, real, rd):
    try:
        return run_calibration(rig, real, make_proposer("reasoner"), CalibrationConfig(iterations=1), rd)
    except CalibrationError as err:
        return err


def test_two_calibrate_runs_raced_into_one_directory(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_run_dir_race", REPO / "bench" / "bench_run_dir_race.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    alone = bench.run_alone(tmp_path / "alone", 2)
    assert alone.returncode == 0, alone.stderr
    reference = bench.timeless(tmp_path / "alone" / "iterations.jsonl")
    res = bench.race(tmp_path / "race", 2, tmp_path / "go")
    assert bench.judge(res, tmp_path / "race", reference) is None


def test_a_directory_holding_only_the_lock_file_counts_as_empty_for_demo(tmp_path):
    from vid2sid_ros.commands.demo import _is_replaceable

    rd = tmp_path / "run"
    rd.mkdir()
    (rd / LOCK_NAME).write_text("")
    assert _is_replaceable(rd)
    (rd / "notes.txt").write_text("mine")
    assert not _is_replaceable(rd)


def test_a_symlink_planted_as_the_lock_file_is_refused_and_its_target_kept(tmp_path):
    """Was: the lock followed a symlink at RUN_DIR/.vid2sid.lock and truncated its target."""
    from vid2sid_ros.calibration.run_lock import run_dir_lock

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / ".vid2sid.lock").symlink_to(victim)
    with pytest.raises(OSError):
        with run_dir_lock(run):
            pass
    assert victim.read_text() == "precious\n"


def test_a_refused_run_removes_the_parents_it_created_and_keeps_the_others(tmp_path, monkeypatch):
    """A node's session directory sessions/<name> created for a refused session: both go; an empty folder
    that existed before stays (the walk stops at the first directory this run created)."""
    from vid2sid_ros.calibration.run_lock import run_dir_lock

    monkeypatch.chdir(tmp_path)
    (tmp_path / "kept").mkdir()
    with run_dir_lock("kept/sessions/s1"):
        pass
    assert (tmp_path / "kept").is_dir() and not (tmp_path / "kept" / "sessions").exists()
