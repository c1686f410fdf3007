"""Whole-process cost of `vid2sid calibrate` against a script calling mujoco.sysid, same data.

The problems are those of mujoco.sysid's own integration tests, built by
``bench/rigs/sysid_style.py`` (the same models, excitations, truths, starts and bounds):

- ``spring_mass``: a slide-joint spring-mass (stiffness 100 N/m, damping 5 N*s/m), its mass free
  (truth 1.0 kg, start 2.0 kg, bounds 0.3-3 kg), driven by 5 sin(2 pi 1.5 t) + 3 sin(2 pi 3.7 t) N
  for 3 s;
- ``arm``: a 5-joint arm, the five joint armatures free (truth 0.5 ... 0.1 kg*m^2, start 0.01,
  bounds 0.001-1), five sinusoidal torques for 2 s.

The "real" data is the true model's motion at its own 2 ms timestep, written once as a
joint-state CSV (time, joint positions, commands) beside the model at the start values. Both sides
read those files: ``vid2sid calibrate`` through the rig config's ``joint_csv`` trial (joint
positions are the measurement, parameters on a linear scale like mujoco.sysid's), the mujoco.sysid
script through ``TimeSeries`` of the same columns (``jointpos`` sensors, built as its tests build
them: the readings of steps 0..T-2 stamped with the time after each step). Each side runs as its
own Python process, timed from start to exit (interpreter start, imports, loading, fitting,
writing results); the wall time is the median of ``--repeat`` runs, CPU is that of the child
process. The accuracy of both results against the truth is printed beside it: the ratio means
something only when vid2sid's error is no worse than mujoco.sysid's (or within mujoco.sysid's
own test tolerance, 1e-4 absolute).

A vid2sid run writes its whole run directory (result.json, result.yaml, iterations.jsonl,
trials.json, the calibrated model, report.html) and runs its diagnostics (identifiability at the
start and at the result, the residual diagnosis); mujoco.sysid's script only fits. Two more rows
per problem run vid2sid with the documented ``--no-report`` flag (no report.html: what the report
costs) and with ``--executor threads --workers W`` (the finite differences batched through
``mujoco.rollout`` on W threads).

    nice .venv/bin/python bench/bench_sysid_cost.py
    .venv/bin/python bench/bench_sysid_cost.py --tiny        # a smoke run (spring-mass, one repeat)

vid2sid_ros is byte-compiled first, as an installation is (``compile_like_an_install``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rigs import sysid_style as S  # noqa: E402

#: the rig's calibration section for ``vid2sid calibrate`` (the CLI's run length; no rollout cap)
CALIBRATION = {"iterations": 30, "rollout_budget": None}


def write_problem(d: Path, name: str) -> dict[str, float]:
    """Write ``d``/model.xml, joints.csv, rig.yaml (``sysid_style.write_rig``) and sysid_fit.py; return the truth.

    Raises:
        KeyError: ``name`` is not one of ``sysid_style.PROBLEMS``.
    """
    problem = S.PROBLEMS[name]()
    t, u, q = S.simulate(problem, problem.truth)
    S.write_rig(problem, d, t, u, q, calibration=CALIBRATION)
    (d / "sysid_fit.py").write_text(_sysid_script(problem))
    return dict(problem.truth)


def _sysid_script(problem: S.Problem) -> str:
    """A stand-alone script fitting ``problem``'s parameters with mujoco.sysid on joints.csv (prints JSON)."""
    lines = []
    for p, (target, _) in problem.params.items():
        accessor, obj, attr = S.spec_field(target)
        start = float(problem.start[p])
        setter = f"setattr(s.{accessor}({obj!r}), {attr!r}, p.value[0])"
        lines.append(f"p = sysid.Parameter({p!r}, nominal={start!r}, min_value={problem.lower!r}, "
                     f"max_value={problem.upper!r},\n"
                     f"                    modifier=lambda s, p: {setter})\n"
                     f"params.add(p)\nparams[{p!r}].value[:] = {start!r}")
    joints, acts, names = list(problem.joints), list(problem.actuators), list(problem.params)
    adds = textwrap.indent("\n".join(lines), "        ").lstrip()
    return textwrap.dedent(f'''\
        """mujoco.sysid on joints.csv (written by bench/bench_sysid_cost.py)."""
        import json
        import sys
        from pathlib import Path

        import mujoco
        import numpy as np
        from mujoco import sysid

        here = Path(sys.argv[1])
        table = np.genfromtxt(here / "joints.csv", delimiter=",", names=True)
        t = table["time"]
        q = np.column_stack([table[j] for j in {joints!r}])
        u = np.column_stack([table["cmd_" + a] for a in {acts!r}])
        spec = mujoco.MjSpec.from_file(str(here / "model.xml"))
        model = spec.compile()
        data = mujoco.MjData(model)
        dt = model.opt.timestep
        initial_state = sysid.create_initial_state(model, data.qpos, data.qvel, data.act)
        control_ts = sysid.TimeSeries(t, u)
        # mujoco.rollout's convention: the sensor row of step k (the position at t_k) carries the time after it
        sensor_ts = sysid.TimeSeries.from_names(t[:-1] + dt, q[:-1], model)
        params = sysid.ParameterDict()
        {adds}
        ms = sysid.ModelSequences("fit", spec, "measured", initial_state, control_ts, sensor_ts)
        residual_fn = sysid.build_residual_fn(models_sequences=[ms])
        opt, _ = sysid.optimize(initial_params=params, residual_fn=residual_fn, optimizer="mujoco", verbose=False)
        print(json.dumps({{k: float(opt[k].value[0]) for k in {names!r}}}))
        ''')


def timed_process(cmd: list[str], env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, child CPU s, completed process) of one whole process.

    Raises:
        SystemExit: the process failed (its stderr's tail is shown).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return wall, cpu, out


def _errors(values: dict, truth: dict) -> float:
    return max(abs(values[k] - v) for k, v in truth.items())


def compile_like_an_install(env: dict) -> None:
    """Byte-compile vid2sid_ros (``python -m compileall``, as ``pip install`` does) and let the timed processes
    use the cached bytecode: with ``PYTHONDONTWRITEBYTECODE`` set (as on some CI machines) a source checkout
    would otherwise compile every module it imports on every run, which an installed package never does
    (mujoco.sysid's modules are installed, compiled)."""
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "vid2sid_ros")], check=True, env=env,
                   capture_output=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="spring_mass,arm")
    ap.add_argument("--repeat", type=int, default=3, help="runs per side (the median wall time is printed)")
    ap.add_argument("--tiny", action="store_true", help="smoke size: the spring-mass, one run per side, no "
                    "--no-report row")
    ap.add_argument("--workers", type=int, default=2, help="threads of the --executor threads row")
    ap.add_argument("--profile", metavar="DIR", help="also write a cProfile of one vid2sid run per problem to DIR")
    a = ap.parse_args(argv)
    if a.tiny:
        a.problems, a.repeat = "spring_mass", 1
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
           "ROS_AUTOMATIC_DISCOVERY_RANGE": os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST"),
           "ROS_DOMAIN_ID": os.environ.get("ROS_DOMAIN_ID", "109")}
    compile_like_an_install(env)
    print(f"{len(os.sched_getaffinity(0))} CPUs; load average {os.getloadavg()[0]:.1f} (other work on this machine "
          "slows both sides alike)")
    print("| problem | run | wall s (median) | CPU s | max abs error vs truth | wall vs mujoco.sysid |")
    print("|---|---|---|---|---|---|")
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.problems.split(","):
            d = Path(tmp) / name
            truth = write_problem(d, name)
            rows = {}
            sides = {
                "mujoco.sysid script": lambda: [sys.executable, str(d / "sysid_fit.py"), str(d)],
                "vid2sid calibrate": lambda i: [sys.executable, "-m", "vid2sid_ros.cli", "calibrate",
                                                str(d / "rig.yaml"), "--out", str(d / f"run{i}"), "-q"],
                "vid2sid calibrate --no-report": lambda i: [sys.executable, "-m", "vid2sid_ros.cli", "calibrate",
                                                            str(d / "rig.yaml"), "--out", str(d / f"runnr{i}"), "-q",
                                                            "--no-report"],
                "vid2sid calibrate --executor threads": lambda i: [
                    sys.executable, "-m", "vid2sid_ros.cli", "calibrate", str(d / "rig.yaml"), "--out",
                    str(d / f"runth{i}"), "-q", "--executor", "threads", "--workers", str(a.workers)],
            }
            if a.tiny:
                del sides["vid2sid calibrate --no-report"], sides["vid2sid calibrate --executor threads"]
            for side, cmd in sides.items():
                walls, cpus = [], []
                for i in range(a.repeat):
                    wall, cpu, out = timed_process(cmd() if side.startswith("mujoco") else cmd(i), env)
                    walls.append(wall)
                    cpus.append(cpu)
                if side.startswith("mujoco"):
                    values = json.loads(out.stdout.strip().splitlines()[-1])
                else:
                    prefix = {"vid2sid calibrate": "run", "vid2sid calibrate --no-report": "runnr",
                              "vid2sid calibrate --executor threads": "runth"}[side]
                    run_dir = d / f"{prefix}{a.repeat - 1}"
                    values = json.loads((run_dir / "result.json").read_text())["values"]
                rows[side] = (statistics.median(walls), statistics.median(cpus), _errors(values, truth))
            ref = rows["mujoco.sysid script"][0]
            for side, (wall, cpu, err) in rows.items():
                print(f"| {name} ({len(truth)} free) | {side} | {wall:.2f} | {cpu:.2f} | {err:.2e} "
                      f"| {wall / ref:.2f}x |", flush=True)
            summary.append((name, rows))
            if a.profile:
                prof = Path(a.profile) / f"{name}.prof"
                prof.parent.mkdir(parents=True, exist_ok=True)
                timed_process([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "vid2sid_ros.cli", "calibrate",
                      str(d / "rig.yaml"), "--out", str(d / "profiled"), "-q"], env)
    print()
    for name, rows in summary:
        s, v = rows["mujoco.sysid script"], rows["vid2sid calibrate"]
        acc = ("both within mujoco.sysid's own test tolerance 1e-4" if max(v[2], s[2]) <= 1e-4 else
               "vid2sid no worse" if v[2] <= s[2] else "vid2sid LESS ACCURATE: the ratio is not at equal accuracy")
        print(f"{name}: vid2sid calibrate takes {v[0] / s[0]:.2f}x mujoco.sysid's whole-process wall time "
              f"({v[0]:.2f} s vs {s[0]:.2f} s) and {v[1] / s[1]:.2f}x its CPU time; max abs error {v[2]:.1e} vs "
              f"{s[2]:.1e} ({acc}); target at most 2x")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
