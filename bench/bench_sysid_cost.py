"""Whole-process cost of `vid2sid calibrate` against a script calling mujoco.sysid, same data.

The problems are built like mujoco.sysid's own integration tests:

- ``spring_mass``: a slide-joint spring-mass (stiffness 100 N/m, damping 5 N*s/m), its mass free
  (truth 1.0 kg, start 2.0 kg, bounds 0.3-3 kg), driven by 5 sin(2 pi 1.5 t) + 3 sin(2 pi 3.7 t) N
  for 3 s;
- ``arm``: a 5-joint arm, the five joint armatures free (truth 0.5 ... 0.1 kg*m^2, start 0.01,
  bounds 0.001-1), five sinusoidal torques for 2 s.

The "real" data is the true model rolled out by ``mujoco.rollout`` at its own 2 ms timestep,
written once as a joint-state CSV (time, joint positions, commands). Both sides read that file:
``vid2sid calibrate`` through the rig config's ``joint_csv`` trial (joint positions are the
measurement), the mujoco.sysid script through ``TimeSeries`` of the same columns (``jointpos``
sensors). Each side runs as its own Python process, timed from start to exit (interpreter start,
imports, loading, fitting, writing results); the wall time is the median of ``--repeat`` runs,
CPU is that of the child process. The accuracy of both results against the truth is printed
beside it: the ratio means something only when vid2sid's error is no worse than mujoco.sysid's
(or within mujoco.sysid's own test tolerance, 1e-4 absolute).

A vid2sid run writes its whole run directory (result.json, result.yaml, iterations.jsonl,
trials.json, the calibrated model, report.html) and runs its diagnostics (identifiability at the
start and at the result, the residual diagnosis); mujoco.sysid's script only fits. Two more rows
per problem run vid2sid with the documented ``--no-report`` flag (no report.html: what the report
costs) and with ``--executor threads --workers W`` (the finite differences batched through
``mujoco.rollout`` on W threads).

    nice .venv/bin/python bench/bench_sysid_cost.py
    .venv/bin/python bench/bench_sysid_cost.py --tiny        # a smoke run (spring-mass, one repeat)
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

SPRING_MASS_XML = """<mujoco model="spring_mass">
  <option timestep="0.002">
    <flag contact="disable"/>
  </option>
  <worldbody>
    <body name="ball" pos="0 0 0.1">
      <inertial pos="0 0 0" mass="1.0" diaginertia="0.001 0.001 0.001"/>
      <joint name="slide" type="slide" axis="1 0 0" stiffness="100" damping="5.0"/>
      <geom type="sphere" size="0.05"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="push" joint="slide"/>
  </actuator>
  <sensor>
    <jointpos name="slide_pos" joint="slide"/>
  </sensor>
</mujoco>
"""

_LINKS = [  # name, parent offset z, inertial z, mass, diaginertia, axis, armature, damping, capsule length, radius
    ("1", 0.1, 0.05, 1.0, "0.01 0.01 0.005", "0 0 1", 0.5, 1.0, 0.1, 0.04),
    ("2", 0.1, 0.05, 0.8, "0.008 0.008 0.004", "0 1 0", 0.4, 0.8, 0.1, 0.035),
    ("3", 0.1, 0.05, 0.6, "0.006 0.006 0.003", "0 1 0", 0.3, 0.6, 0.1, 0.03),
    ("4", 0.1, 0.04, 0.4, "0.004 0.004 0.002", "0 0 1", 0.2, 0.4, 0.08, 0.025),
    ("5", 0.08, 0.03, 0.2, "0.002 0.002 0.001", "0 1 0", 0.1, 0.2, 0.06, 0.02),
]


def _arm_xml() -> str:
    body = ""
    for name, off, iz, mass, inertia, axis, arm, damp, length, radius in reversed(_LINKS):
        body = (f'<body name="link{name}" pos="0 0 {off}"><inertial pos="0 0 {iz}" mass="{mass}" '
                f'diaginertia="{inertia}"/><joint name="joint{name}" type="hinge" axis="{axis}" range="-3.14 3.14" '
                f'armature="{arm}" damping="{damp}"/><geom type="capsule" fromto="0 0 0 0 0 {length}" '
                f'size="{radius}"/>{body}</body>')
    acts = "".join(f'<motor name="act{n}" joint="joint{n}"/>' for n, *_ in _LINKS)
    sens = "".join(f'<jointpos name="joint{n}_pos" joint="joint{n}"/>' for n, *_ in _LINKS)
    return (f'<mujoco model="arm"><compiler angle="radian" autolimits="true"/>'
            f'<option integrator="implicitfast" timestep="0.002"><flag contact="disable"/></option>'
            f'<worldbody>{body}</worldbody><actuator>{acts}</actuator><sensor>{sens}</sensor></mujoco>')


def _problems():
    """name -> (model xml, joints, actuators, params {name: (field target, truth, start, lower, upper, unit)},
    control function of t (s) -> (T, nu), duration s)."""
    import numpy as np

    arm_truth = {f"joint{n}": a for n, _, _, _, _, _, a, *_ in _LINKS}
    return {
        "spring_mass": (
            SPRING_MASS_XML, ["slide"], ["push"],
            {"mass": ("body_mass[ball]", 1.0, 2.0, 0.3, 3.0, "kg", "body", "ball", "mass")},
            lambda t: (5.0 * np.sin(2 * np.pi * 1.5 * t) + 3.0 * np.sin(2 * np.pi * 3.7 * t)).reshape(-1, 1), 3.0),
        "arm": (
            _arm_xml(), list(arm_truth), [f"act{n}" for n, *_ in _LINKS],
            {f"{j}_armature": (f"dof_armature[{j}]", a, 0.01, 0.001, 1.0, "kg*m^2", "joint", j, "armature")
             for j, a in arm_truth.items()},
            lambda t: np.column_stack([5.0 * np.sin(2 * np.pi * 0.5 * t), 4.0 * np.sin(2 * np.pi * 0.7 * t + 0.5),
                                       3.0 * np.sin(2 * np.pi * 0.4 * t + 1.0), 2.0 * np.sin(2 * np.pi * 0.9 * t + 1.5),
                                       1.0 * np.sin(2 * np.pi * 0.6 * t + 2.0)]), 2.0),
    }


def write_problem(d: Path, name: str) -> dict:
    """Write ``d``/model.xml, joints.csv (the true model's motion), rig.yaml and sysid_fit.py; return the truth."""
    import mujoco
    import mujoco.rollout as rollout
    import numpy as np

    xml, joints, acts, params, ctrl_fn, duration = _problems()[name]
    d.mkdir(parents=True, exist_ok=True)
    (d / "model.xml").write_text(xml)
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    n = int(round(duration / model.opt.timestep))
    t = np.arange(n) * model.opt.timestep
    ctrl = ctrl_fn(t)
    state0 = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(model, data, state0, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    _, sensor = rollout.rollout(model, data, state0[None], ctrl[None])  # sensor row k: the position at t_k
    q = sensor[0]
    cols = ["time"] + joints + [f"u_{a}" for a in acts]
    rows = [",".join(cols)] + [",".join(f"{v:.17g}" for v in [ti, *qi, *ui]) for ti, qi, ui in zip(t, q, ctrl)]
    (d / "joints.csv").write_text("\n".join(rows) + "\n")
    unit = "m" if name == "spring_mass" else "rad"
    spec_lines = "\n".join(f"  {p}: {{unit: {u}, lower: {lo}, upper: {hi}, nominal: {start}, scale: log, "
                           f"target: \"{target}\"}}"
                           for p, (target, _, start, lo, hi, u, *_) in params.items())
    kp = "ball" if name == "spring_mass" else "link5"
    (d / "rig.yaml").write_text("\n".join([
        f"rig: {name}",
        "model: model.xml",
        "parameters:",
        spec_lines,
        f"keypoints: {{tip: {kp}}}",
        "trials:",
        "  - name: measured",
        "    source:",
        "      joint_csv:",
        "        path: joints.csv",
        f"        joints: {{{', '.join(f'{j}: {j}' for j in joints)}}}",
        f"        units: {unit}",
        f"        commands: {{{', '.join(f'u_{a}: {a}' for a in acts)}}}",
        "nuisance: {latency: false}",
        "calibration: {iterations: 30, rollout_budget: null}",
    ]) + "\n")
    (d / "sysid_fit.py").write_text(_sysid_script(joints, acts, params))
    return {p: v[1] for p, v in params.items()}


def _sysid_script(joints: list[str], acts: list[str], params: dict) -> str:
    """A stand-alone script fitting the same parameters with mujoco.sysid on joints.csv (prints JSON)."""
    adds = "\n".join(
        f"p = sysid.Parameter({p!r}, nominal={start!r}, min_value={lo!r}, max_value={hi!r},\n"
        f"                    modifier=lambda s, p: setattr(s.{kind}({obj!r}), {attr!r}, p.value[0]))\n"
        f"params.add(p)\nparams[{p!r}].value[:] = {start!r}"
        for p, (_, _, start, lo, hi, _, kind, obj, attr) in params.items())
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
        u = np.column_stack([table["u_" + a] for a in {acts!r}])
        spec = mujoco.MjSpec.from_file(str(here / "model.xml"))
        model = spec.compile()
        data = mujoco.MjData(model)
        dt = model.opt.timestep
        initial_state = sysid.create_initial_state(model, data.qpos, data.qvel, data.act)
        control_ts = sysid.TimeSeries(t, u)
        # mujoco.rollout's convention: the sensor row of step k (the position at t_k) carries the time after it
        sensor_ts = sysid.TimeSeries.from_names(t[:-1] + dt, q[:-1], model)
        params = sysid.ParameterDict()
        {textwrap.indent(adds, "        ").lstrip()}
        ms = sysid.ModelSequences("fit", spec, "measured", initial_state, control_ts, sensor_ts)
        residual_fn = sysid.build_residual_fn(models_sequences=[ms])
        opt, _ = sysid.optimize(initial_params=params, residual_fn=residual_fn, optimizer="mujoco", verbose=False)
        print(json.dumps({{k: float(opt[k].value[0]) for k in {list(params)!r}}}))
        ''')


def _run(cmd: list[str], env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, child CPU s, completed process) of one whole process."""
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
                    wall, cpu, out = _run(cmd() if side.startswith("mujoco") else cmd(i), env)
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
                _run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "vid2sid_ros.cli", "calibrate",
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
