"""Every ``bench/`` script runs, at a tiny size, so a figure the docs cite can be reproduced.

These are smoke runs, not timings: each script is started as a user would start it (its own
process, the checkout's interpreter) with the smallest arguments that still run its whole
path, and must exit 0 and print the table or line its docstring promises. ``bench/mutation.py``
is exercised by ``test_mutation_ledger.py`` (with a stand-in mutmut).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"

#: (script, arguments, text the output must contain); ``{out}`` is a fresh temporary folder
CASES = [
    ("bench_calibration.py", ["--rig", "finger", "--methods", "reasoner", "--seeds", "1", "--budget", "6",
                              "--iterations", "2", "--out", "{out}"], "reasoner"),
    ("bench_coverage.py", ["--rig", "finger", "--seeds", "1", "--budget", "6", "--out", "{out}"], "coverage"),
    ("bench_custom_rigs.py", ["--rigs", "urdf_arm", "--methods", "reasoner", "--seeds", "1", "--budget", "6",
                              "--out", "{out}"], "| urdf_arm | reasoner |"),
    ("bench_diagnosis.py", ["--rig", "finger", "--seeds", "1", "--budget", "6", "--kinds", "latency",
                            "--out", "{out}"], "latency"),
    ("bench_finger.py", ["--repeats", "1"], "rollout+render+track"),
    ("bench_mocap_parse.py", ["--rows", "200", "--markers", "2", "--csv", "{out}/m.csv", "--out", "{out}/m.json"],
     "rows"),
    ("bench_mocap_rod.py", ["--seeds", "1", "--takes", "3", "--no-diagnosis", "--out", "{out}"], "%"),
    ("bench_peers.py", ["--rig", "finger", "--seeds", "1", "--budgets", "6", "--out", "{out}"], "| mujoco-sysid |"),
    ("bench_pendulum.py", ["--variants", "1", "--budget", "12", "--iterations", "2", "--no-diagnosis"], "holdout"),
    ("bench_ros_pipeline.py", ["--rates", "30", "--duration", "2", "--propose-calls", "1"], "Hz"),
    ("bench_replay_vs_live.py", ["--iterations", "1"], "relative difference"),
    ("bench_tentacle.py", ["--repeats", "1", "--skip-cold", "--rig", "tentacle", "--duration", "1"], "tentacle"),
    # Ray's own rows are run by test_executor_ray.py (starting a Ray here would double this case's time)
    ("bench_tentacle_scaling.py", ["--tiny", "--cases", "overhead,jacobian,cmaes,sweep", "--backends", "serial,pool"],
     "sweep (toy): pool(2) is"),
    ("bench_run_dir_race.py", ["--races", "1", "--iterations", "1", "--work", "{out}"], "race"),
    ("bench_track_memory.py", ["--seconds", "1", "--width", "320", "--height", "240", "--work", "{out}"],
     "peak RSS"),
    ("bench_video_calibrate_memory.py", ["--seconds", "2", "--width", "320", "--height", "180", "--render-width",
                                         "160", "--work", "{out}"], "vid2sid calibrate, 60 frames of 320x180"),

    ("bench_convergence.py", ["--seeds", "1", "--budget", "12", "--iterations", "2",
                              "--methods", "reasoner,least-squares"], "reasoner"),
    ("bench_node_signals.py", ["--runs", "1", "--random", "1"], "1/1"),
    ("bench_active_learning.py", ["--seeds", "1", "--budget", "30", "--iterations", "3"], "least-squares"),
    ("bench_sysid_cost.py", ["--tiny"], "spring_mass: vid2sid calibrate takes"),
    ("bench_fixed_cost.py", ["--tiny"], "floor: a process that only starts Python and imports numpy and mujoco"),
    ("bench_sysid_intervals.py", ["--problem", "spring_mass", "--nstep", "100"], "| spring_mass | mass | 1 |"),
]

#: scripts whose smoke run is a test of its own (it checks more than the exit code)
COVERED_ELSEWHERE = {"bench_executor.py": "test_bench_executor.py",
                     "bench_misspecification.py": "test_bench_misspecification.py"}


def test_every_bench_script_has_a_smoke_case():
    scripts = {p.name for p in BENCH.glob("bench_*.py")}
    assert scripts == {c[0] for c in CASES} | set(COVERED_ELSEWHERE), "add a smoke case for each new bench script"
    for test in COVERED_ELSEWHERE.values():
        assert (Path(__file__).parent / test).is_file()


@pytest.mark.parametrize("script,args,expect", CASES, ids=[c[0] for c in CASES])
def test_bench_script_runs_at_a_tiny_size(script, args, expect, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    cmd = [sys.executable, str(BENCH / script)] + [a.replace("{out}", str(out)) for a in args]
    env = dict(os.environ, PYTHONPATH=str(REPO), MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{text[-3000:]}"
    assert expect in text, f"{script}: {expect!r} not in its output:\n{text[-3000:]}"
