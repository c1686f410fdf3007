"""Fixed cost of ``vid2sid calibrate``: the whole process's CPU against the CPU of the rollouts it charged.

A calibration pays for two things: the rollouts charged to its budget (the fit) and everything
else (interpreter and imports, loading the rig and its real trial, the identifiability checks,
the residual diagnosis, the trial curves, writing the results and the report). This bench runs
``vid2sid calibrate --rig RIG`` as its own process (``--repeat`` times, the median printed), takes
the process's CPU time (user + system, from ``getrusage``), reads ``result.json``'s ``phases``
(wall, CPU, charged and diagnostic rollouts per phase) and measures, in this process, the CPU of
one twin rollout of each training excitation at the calibrated values (the median of ``--probe``
repetitions after one warm-up). The CPU the charged rollouts cost is the charged count times that
per-rollout CPU; the ratio printed is the whole process's CPU over it (the target: at most 2).
The reasoner watches no video, so no render is charged; renders of the report are diagnostic and
part of the fixed cost.

    nice .venv/bin/python bench/bench_fixed_cost.py --rig finger
    .venv/bin/python bench/bench_fixed_cost.py --rig finger --tiny      # one run, 2 iterations
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sysid_cost import compile_like_an_install, timed_process  # noqa: E402  (one timing of a child process)


def rollout_cpu(rig_name: str, run_dir: Path, probe: int) -> float:
    """CPU s of one rollout of a training excitation of ``run_dir``'s run (its real trial, its calibrated
    values), the median over ``probe`` repetitions after a warm-up, averaged over the training excitations."""
    from vid2sid_ros.core.trial import RealTrial
    from vid2sid_ros.rigs import load_rig

    rig = load_rig(rig_name)
    real = RealTrial.load(run_dir / "real_trial.json") if (run_dir / "real_trial.json").is_file() else None
    if real is None:
        raise SystemExit(f"{run_dir}: no real_trial.json (run a rig with a stand-in trial, e.g. --rig finger)")
    values = json.loads((run_dir / "result.json").read_text())["values"]
    twin = rig.make_twin()
    twin.set_parameters(rig.parameters.complete({k: v for k, v in values.items() if k in rig.parameters}))
    per = []
    for exc in real.train_excitations:
        twin.rollout(exc)  # warm-up (first-call allocations)
        cpu = []
        for _ in range(probe):
            c0 = time.process_time()
            twin.rollout(exc)
            cpu.append(time.process_time() - c0)
        per.append(statistics.median(cpu))
    close = getattr(twin, "close", None)
    if callable(close):
        close()
    return float(sum(per) / len(per))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rig", default="finger")
    ap.add_argument("--repeat", type=int, default=2, help="calibrate processes (the median CPU is printed)")
    ap.add_argument("--probe", type=int, default=5, help="timed rollouts per training excitation")
    ap.add_argument("--tiny", action="store_true", help="smoke size: one run of 2 iterations")
    a = ap.parse_args(argv)
    if a.tiny:
        a.repeat, a.probe = 1, 2
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
           "ROS_AUTOMATIC_DISCOVERY_RANGE": os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST"),
           "ROS_DOMAIN_ID": os.environ.get("ROS_DOMAIN_ID", "112")}
    compile_like_an_install(env)
    print(f"{len(os.sched_getaffinity(0))} CPUs; load average {os.getloadavg()[0]:.1f} (CPU times are the "
          "measure here: wall times on a shared machine include waiting)")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.repeat):
            out = Path(tmp) / f"run{i}"
            cmd = [sys.executable, "-m", "vid2sid_ros.cli", "calibrate", "--rig", a.rig, "--out", str(out), "-q"]
            if a.tiny:
                cmd += ["--iterations", "2"]
            wall, cpu, _ = timed_process(cmd, env)
            runs.append((wall, cpu, json.loads((out / "result.json").read_text())["phases"], out))
        per_rollout = rollout_cpu(a.rig, runs[0][3], a.probe)
        runs.sort(key=lambda r: r[1])
        wall, cpu, phases, _ = runs[len(runs) // 2]
    charged = sum(int(p["charged_rollouts"]) for p in phases.values())
    diagnostic = sum(int(p["diagnostic_rollouts"]) for p in phases.values())
    print(f"\n`vid2sid calibrate --rig {a.rig}` (median of {a.repeat} by CPU): {wall:.1f} s wall, {cpu:.2f} s CPU "
          f"(the whole process)\n")
    print("| phase | wall s | CPU s | charged rollouts | diagnostic rollouts |")
    print("|---|---|---|---|---|")
    for k, p in phases.items():
        print(f"| {k} | {p['wall_s']:.2f} | {p['cpu_s']:.2f} | {p['charged_rollouts']} | {p['diagnostic_rollouts']} |")
    in_phases = sum(float(p["cpu_s"]) for p in phases.values())
    print(f"| (interpreter start and imports before `load`) | | {cpu - in_phases:.2f} | | |")
    charged_cpu = charged * per_rollout
    print(f"\none rollout: {1000 * per_rollout:.1f} ms CPU; {charged} charged rollouts = {charged_cpu:.2f} s CPU; "
          f"{diagnostic} diagnostic rollouts; renders charged: 0")
    print(f"{a.rig}: total CPU {cpu:.2f} s = {cpu / charged_cpu:.2f}x the CPU of the rollouts it charged "
          f"(target at most 2x); the iterations phase took {float(phases['iterations']['cpu_s']):.2f} s CPU")
    all_cpu = (charged + diagnostic) * per_rollout  # diagnostic renders cost more than a rollout: a lower bound
    print(f"{a.rig}: total CPU {cpu:.2f} s = {cpu / all_cpu:.2f}x the CPU of every rollout it made, charged and "
          f"diagnostic ({charged + diagnostic} x {1000 * per_rollout:.1f} ms = {all_cpu:.2f} s)")
    floor = bare_interpreter_cpu(env, a.repeat)
    print(f"floor: a process that only starts Python and imports numpy and mujoco takes {floor:.2f} s CPU = "
          f"{floor / charged_cpu:.2f}x the CPU of the rollouts charged (median of {a.repeat}); with them "
          f"{(floor + charged_cpu) / charged_cpu:.2f}x before any other work")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


def bare_interpreter_cpu(env: dict, repeat: int) -> float:
    """CPU s of a whole process that starts Python and imports numpy and mujoco and does nothing else (the
    median of ``repeat`` processes): the least any process that steps a MuJoCo twin from Python pays."""
    cpus = [timed_process([sys.executable, "-c", "import numpy, mujoco"], env)[1] for _ in range(max(1, repeat))]
    return statistics.median(cpus)


if __name__ == "__main__":
    raise SystemExit(main())
