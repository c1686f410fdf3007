"""A soft segmented rod of our own for the lab-data tests and bench: MuJoCo chain of capsules.

Six capsule links hang from a ceiling mount (z = 0.5 m), each joined to the previous by
two hinges (bending about x and y) with joint stiffness and damping; two fixed tendons
(``bend_x``, ``bend_y``) couple all x- (y-) hinges like the cables of a cable-driven trunk,
each driven by a torque motor (idle in the free-decay trials). A trial starts from a bent
pose (every x-hinge at angle a, every y-hinge at b: the uniform bend a cable pull gives),
at rest, and is let go: free decay, no commands. Three marker sites (``disk1..3``) sit at
the ends of links 2, 4, 6.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_LINKS = 6
LINK_M = 0.06
MARKERS = {"disk1": "disk1", "disk2": "disk2", "disk3": "disk3"}
TRUTH = {"stiffness": 0.45, "damping": 0.004}


def rod_mjcf() -> str:
    """The MJCF text (SI units)."""
    body = ""
    close = ""
    for i in range(N_LINKS):
        pos = "0 0 0" if i == 0 else f"0 0 {-LINK_M}"
        marker = (f'<site name="disk{(i + 1) // 2}" pos="0 0 {-LINK_M}" size="0.015"/>' if i % 2 == 1 else "")
        body += (f'<body name="link{i}" pos="{pos}">'
                 f'<joint name="j{i}x" type="hinge" axis="1 0 0" stiffness="0.5" damping="0.005"/>'
                 f'<joint name="j{i}y" type="hinge" axis="0 1 0" stiffness="0.5" damping="0.005"/>'
                 f'<geom type="capsule" fromto="0 0 0 0 0 {-LINK_M}" size="0.012" density="1000"/>{marker}')
        close += "</body>"
    tx = "".join(f'<joint joint="j{i}x" coef="1"/>' for i in range(N_LINKS))
    ty = "".join(f'<joint joint="j{i}y" coef="1"/>' for i in range(N_LINKS))
    return f"""<mujoco model="soft_rod">
  <option timestep="0.002" integrator="implicitfast"/>
  <worldbody><body name="mount" pos="0 0 0.5">{body}{close}</body></worldbody>
  <tendon><fixed name="bend_x">{tx}</fixed><fixed name="bend_y">{ty}</fixed></tendon>
  <actuator><motor name="bend_x" tendon="bend_x" gear="1" ctrlrange="-1 1"/>
            <motor name="bend_y" tendon="bend_y" gear="1" ctrlrange="-1 1"/></actuator>
</mujoco>
"""


def rod_parameters_yaml() -> str:
    """Parameter spec: joint stiffness and damping shared by every hinge."""
    st = ", ".join(f"jnt_stiffness[j{i}{a}]" for i in range(N_LINKS) for a in "xy")
    dm = ", ".join(f"dof_damping[j{i}{a}]" for i in range(N_LINKS) for a in "xy")
    return f"""rig: soft_rod
parameters:
  - name: stiffness
    unit: N*m/rad
    lower: 0.15
    upper: 1.5
    nominal: 0.6
    scale: log
    meaning: bending stiffness of every hinge between two links
    target: {st}
  - name: damping
    unit: N*m*s/rad
    lower: 0.001
    upper: 0.02
    nominal: 0.008
    scale: log
    meaning: viscous damping of every hinge
    target: {dm}
"""


def write_rod(directory: Path) -> tuple[Path, Path]:
    """Write ``rod.xml`` and ``rod_parameters.yaml`` into ``directory``; returns both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    xml, spec = directory / "rod.xml", directory / "rod_parameters.yaml"
    xml.write_text(rod_mjcf())
    spec.write_text(rod_parameters_yaml())
    return xml, spec


def make_twin(directory: Path):
    """The rod as a :class:`~vid2sid_ros.sim.user_model.UserModelTwin` (keypoints = the 3 disks)."""
    from vid2sid_ros.sim.user_model import UserModelTwin

    xml, spec = write_rod(directory)
    return UserModelTwin(model_path=xml, parameters=spec, keypoints=MARKERS, max_physics_timestep=0.002,
                         name="soft_rod")


#: initial bends (a, b) rad per hinge about x and y, one per trial
POSES = [(0.12, 0.0), (0.0, 0.12), (-0.09, 0.07), (0.07, -0.10), (-0.06, -0.11)]


def pose_init(pose) -> dict[str, float]:
    """``{"qpos[j<i>x]": a, "qpos[j<i>y]": b}`` for every link: the trial's initial state."""
    a, b = pose
    return {**{f"qpos[j{i}x]": float(a) for i in range(N_LINKS)}, **{f"qpos[j{i}y]": float(b) for i in range(N_LINKS)}}


def release_excitation(name: str, pose, *, rate: float = 100.0, hold_s: float = 0.0, free_s: float = 2.0):
    """A free-decay trial from the bent ``pose`` (a, b) rad: zero commands for ``free_s`` s,
    the initial state in ``meta["init"]`` (read by the user twin, as a rig config's ``init``)."""
    from vid2sid_ros.core.excitation import Excitation

    n = int(round((hold_s + free_s) * rate))
    return Excitation(name, rate, np.zeros((n, 2)), ("bend_x", "bend_y"),
                      meta={"kind": "free_decay", "init": pose_init(pose), "trial": name})


def record_motive_takes(twin, truth, excitations, out_dir: Path, *, seed: int, noise_m: float = 0.0003,
                        dropout: float = 0.01, gap_s: float = 0.08) -> list[Path]:
    """Roll the twin out at ``truth`` and write each trial as an OptiTrack Motive CSV take.

    Mocap-like noise: Gaussian ``noise_m`` (1 sigma, m) per coordinate, a fraction
    ``dropout`` of single samples lost, and one occlusion gap of ``gap_s`` on ``disk2``
    per take; Motive's Y-up world in millimetres.

    Returns:
        One CSV path per excitation.
    """
    from vid2sid_ros.io.mocap import write_motive_csv

    rng = np.random.default_rng([seed, 14])
    twin.set_parameters(truth)
    paths = []
    for exc in excitations:
        res = twin.rollout(exc)
        pts = np.array(res.state["keypoints_world"], dtype=float)
        pts += rng.normal(0.0, noise_m, size=pts.shape)
        T = pts.shape[0]
        pts[rng.random(pts.shape[:2]) < dropout] = np.nan
        n_gap = int(round(gap_s * exc.rate))
        g0 = int(rng.integers(0, T - n_gap))
        pts[g0:g0 + n_gap, 1] = np.nan
        paths.append(write_motive_csv(out_dir / f"{exc.name}.csv", np.arange(T) / exc.rate, pts, list(MARKERS),
                                      take=exc.name))
    return paths


def real_trial_from_takes(paths, excitations, *, holdout: int = 1):
    """The :class:`RealTrial` read back from the takes with :func:`load_mocap` (last ``holdout`` held out)."""
    from vid2sid_ros.core.trial import RealTrial
    from vid2sid_ros.io.mocap import load_mocap

    trajs = []
    for p, exc in zip(paths, excitations):
        rec = load_mocap(p, markers=MARKERS, frame={"up_axis": "y"})
        trajs.append(rec.trajectory(exc.name, rate=exc.rate))
    n = len(trajs) - holdout
    return RealTrial(trajs[:n], list(excitations[:n]), trajs[n:], list(excitations[n:]), source="motive takes")


def write_rig_config(directory: Path, takes, excitations, *, holdout: int = 1, extra_trial: str = "") -> Path:
    """A rig config (``rig.yaml``) of the rod whose trials are the Motive takes (mocap sources),
    each a free decay (``excitation: none``) from its initial bend (``init``)."""
    write_rod(directory)
    lines = ["rig: soft_rod", "description: a soft segmented rod (six capsules) hanging from a mount, "
             "three motion-capture markers", "model: rod.xml", "parameters: rod_parameters.yaml",
             "keypoints: {disk1: disk1, disk2: disk2, disk3: disk3}", "max_physics_timestep: 0.002"]
    lines.append("trials:")
    n = len(takes) - holdout
    for i, (p, exc) in enumerate(zip(takes, excitations)):
        split = "train" if i < n else "holdout"
        init = ", ".join(f'"{k}": {v:g}' for k, v in exc.meta["init"].items())
        lines.append(f"  - {{name: {exc.name}, source: {{mocap: {{path: {p}, frame: {{up_axis: y}}, "
                     f"markers: {{disk1: 'rod:disk1', disk2: 'rod:disk2', disk3: 'rod:disk3'}}}}}}, "
                     f"excitation: none, init: {{{init}}}, split: {split}}}")
    if extra_trial:
        lines.append(extra_trial)
    lines.append("calibration: {iterations: 8, rollout_budget: 160, seed: 0}")
    cfg = directory / "rig.yaml"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg
