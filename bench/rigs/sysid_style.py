"""Problems built like ``mujoco.sysid``'s own integration tests, solved by vid2sid and by ``mujoco.sysid``.

Two problems from ``mujoco/sysid/tests/test_integration.py`` (MuJoCo 4.0), with the same
models, excitations, truths, starts and bounds:

- ``spring_mass``: a slide-joint spring-mass (k 100 N/m, c 5 N·s/m), a motor on the slide,
  the ball's mass free (truth 1.0 kg, start 2.0, bounds [0.3, 3.0]), 3 s at 500 Hz;
- ``arm``: a 5-joint serial arm, a motor per joint, the five joint armatures free (truth
  0.5, 0.4, 0.3, 0.2, 0.1 kg·m², start 0.01, bounds [0.001, 1.0]), 2 s at 500 Hz.

The measurement is the joint positions (m or rad), one row per physics step (0.002 s), as a
``joint_csv`` trial for vid2sid; the same numbers (with the same Gaussian noise, when asked)
are handed to ``mujoco.sysid`` as ``jointpos`` sensor readings. Both sides simulate the same
model at the same timestep with the command of row k held over step k, and both parameterise
linearly (vid2sid: ``scale: linear``, so its normalised coordinate is an affine map of the
value; ``mujoco.sysid``: the value itself), so a Gauss–Newton interval means the same on both.

Time convention. vid2sid's row k is the state before command k acts (sample, then act).
``mujoco.rollout`` records the sensors computed inside step k (before its integration, so
the same ``q_k``) with the time after the step, ``(k+1)·dt``; the readings are handed to
``mujoco.sysid`` stamped that way, which is how its own tests build the measured data.

Used by ``bench/bench_sysid_intervals.py``, ``bench/bench_sysid_cost.py`` and ``test/test_sysid_intervals.py``.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import mujoco
import numpy as np
import yaml

__all__ = ["Problem", "spring_mass", "arm", "PROBLEMS", "simulate", "write_rig", "spec_field", "run_vid2sid",
           "run_mujoco_sysid", "reference_half_widths"]

#: physics (and sample) timestep of both problems, s
DT = 0.002

SPRING_MASS_XML = """<mujoco model="spring_mass">
  <option timestep="0.002"><flag contact="disable"/></option>
  <worldbody>
    <body name="ball" pos="0 0 0.1">
      <inertial pos="0 0 0" mass="MASS_ball" diaginertia="0.001 0.001 0.001"/>
      <joint name="slide" type="slide" axis="1 0 0" stiffness="100" damping="5.0"/>
      <geom type="sphere" size="0.05"/>
    </body>
  </worldbody>
  <actuator><motor name="push" joint="slide"/></actuator>
  <sensor><jointpos name="slide_pos" joint="slide"/></sensor>
</mujoco>
"""

ARM_XML = """<mujoco model="arm">
  <compiler angle="radian" autolimits="true"/>
  <option integrator="implicitfast" timestep="0.002"><flag contact="disable"/></option>
  <worldbody>
    <body name="link1" pos="0 0 0.1">
      <inertial pos="0 0 0.05" mass="1.0" diaginertia="0.01 0.01 0.005"/>
      <joint name="joint1" type="hinge" axis="0 0 1" range="-3.14 3.14" armature="ARM_joint1" damping="1.0"/>
      <geom type="capsule" fromto="0 0 0 0 0 0.1" size="0.04"/>
      <body name="link2" pos="0 0 0.1">
        <inertial pos="0 0 0.05" mass="0.8" diaginertia="0.008 0.008 0.004"/>
        <joint name="joint2" type="hinge" axis="0 1 0" range="-3.14 3.14" armature="ARM_joint2" damping="0.8"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.1" size="0.035"/>
        <body name="link3" pos="0 0 0.1">
          <inertial pos="0 0 0.05" mass="0.6" diaginertia="0.006 0.006 0.003"/>
          <joint name="joint3" type="hinge" axis="0 1 0" range="-3.14 3.14" armature="ARM_joint3" damping="0.6"/>
          <geom type="capsule" fromto="0 0 0 0 0 0.1" size="0.03"/>
          <body name="link4" pos="0 0 0.1">
            <inertial pos="0 0 0.04" mass="0.4" diaginertia="0.004 0.004 0.002"/>
            <joint name="joint4" type="hinge" axis="0 0 1" range="-3.14 3.14" armature="ARM_joint4" damping="0.4"/>
            <geom type="capsule" fromto="0 0 0 0 0 0.08" size="0.025"/>
            <body name="link5" pos="0 0 0.08">
              <inertial pos="0 0 0.03" mass="0.2" diaginertia="0.002 0.002 0.001"/>
              <joint name="joint5" type="hinge" axis="0 1 0" range="-3.14 3.14" armature="ARM_joint5" damping="0.2"/>
              <geom type="capsule" fromto="0 0 0 0 0 0.06" size="0.02"/>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="act1" joint="joint1"/><motor name="act2" joint="joint2"/><motor name="act3" joint="joint3"/>
    <motor name="act4" joint="joint4"/><motor name="act5" joint="joint5"/>
  </actuator>
  <sensor>
    <jointpos name="joint1_pos" joint="joint1"/><jointpos name="joint2_pos" joint="joint2"/>
    <jointpos name="joint3_pos" joint="joint3"/><jointpos name="joint4_pos" joint="joint4"/>
    <jointpos name="joint5_pos" joint="joint5"/>
  </sensor>
</mujoco>
"""


@dataclass(frozen=True)
class Problem:
    """One identification problem (module docstring).

    Attributes:
        name: ``spring_mass`` | ``arm``.
        xml: MJCF with a placeholder per free parameter (``MASS_<body>`` / ``ARM_<joint>``).
        params: ``{name: (vid2sid target, placeholder)}``, e.g. ``{"mass": ("body_mass[ball]", "MASS_ball")}``.
        unit: the parameters' unit (kg or kg*m^2).
        truth, start: ``{name: value}``; lower, upper: bounds (same for every parameter).
        joints, actuators: model names, in column order; joint_unit: ``m`` or ``rad``.
        ctrl: ``t (T,) s -> (T, nu)`` commands (N or N·m).
        duration: s (the tests' own length).
    """

    name: str
    xml: str
    params: Mapping[str, tuple[str, str]]
    unit: str
    truth: Mapping[str, float]
    start: Mapping[str, float]
    lower: float
    upper: float
    joints: tuple[str, ...]
    actuators: tuple[str, ...]
    joint_unit: str
    ctrl: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    duration: float = 2.0

    def model_xml(self, values: Mapping[str, float]) -> str:
        """The MJCF with ``values`` (full precision) in place of the placeholders."""
        text = self.xml
        for n, (_, ph) in self.params.items():
            text = text.replace(ph, repr(float(values[n])))
        return text


def spring_mass() -> Problem:
    """``test_spring_mass_recover_mass``: the ball's mass, truth 1.0 kg, start 2.0 kg."""
    return Problem("spring_mass", SPRING_MASS_XML, {"mass": ("body_mass[ball]", "MASS_ball")}, "kg",
                   {"mass": 1.0}, {"mass": 2.0}, 0.3, 3.0, ("slide",), ("push",), "m",
                   lambda t: (5.0 * np.sin(2 * np.pi * 1.5 * t) + 3.0 * np.sin(2 * np.pi * 3.7 * t)).reshape(-1, 1),
                   3.0)


def arm() -> Problem:
    """``test_arm_recover_armature``: five joint armatures, truth 0.5..0.1 kg·m², start 0.01."""
    joints = tuple(f"joint{i}" for i in range(1, 6))
    truth = dict(zip((f"{j}_armature" for j in joints), (0.5, 0.4, 0.3, 0.2, 0.1)))
    return Problem("arm", ARM_XML, {f"{j}_armature": (f"dof_armature[{j}]", f"ARM_{j}") for j in joints},
                   "kg*m^2", truth, {k: 0.01 for k in truth}, 0.001, 1.0, joints, tuple(f"act{i}" for i in range(1, 6)),
                   "rad",
                   lambda t: np.column_stack([5.0 * np.sin(2 * np.pi * 0.5 * t),
                                              4.0 * np.sin(2 * np.pi * 0.7 * t + 0.5),
                                              3.0 * np.sin(2 * np.pi * 0.4 * t + 1.0),
                                              2.0 * np.sin(2 * np.pi * 0.9 * t + 1.5),
                                              1.0 * np.sin(2 * np.pi * 0.6 * t + 2.0)]),
                   2.0)


PROBLEMS: dict[str, Callable[[], Problem]] = {"spring_mass": spring_mass, "arm": arm}


def simulate(problem: Problem, values: Mapping[str, float], nstep: int | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The truth's motion: ``(t (T,) s, u (T, nu), q (T, nj))``, row k = the state before command k.

    ``nstep`` rows (default ``duration / DT``); command k is held over physics step k.
    """
    m = mujoco.MjModel.from_xml_string(problem.model_xml(values))
    d = mujoco.MjData(m)
    T = int(nstep or round(problem.duration / DT))
    t = np.arange(T) * DT
    u = np.asarray(problem.ctrl(t), float)
    qadr = [m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in problem.joints]
    q = np.empty((T, len(qadr)))
    for k in range(T):
        q[k] = d.qpos[qadr]
        d.ctrl[:] = u[k]
        mujoco.mj_step(m, d)
    return t, u, q


def write_rig(problem: Problem, folder: Path, t: np.ndarray, u: np.ndarray, q: np.ndarray, *,
              noise: float | None = None, calibration: Mapping[str, Any] | None = None) -> Path:
    """Write ``model.xml`` (at the start values), ``joints.csv`` and ``rig.yaml`` into ``folder``; returns the rig.

    ``joints.csv`` has the columns ``time`` (s), one per joint (m or rad) and ``cmd_<actuator>``
    (N or N·m), one row per sample of ``t (T,)``, ``q (T, nj)``, ``u (T, nu)``.
    ``noise``: the trial's declared joint noise (1 σ, m or rad); it weights nothing here (one trial).
    ``calibration``: the rig's ``calibration`` section (e.g. ``{"iterations": 30}`` for
    ``vid2sid calibrate``); none by default.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.xml").write_text(problem.model_xml(problem.start))
    cols = list(problem.joints) + [f"cmd_{a}" for a in problem.actuators]
    rows = [",".join(["time"] + cols)]
    rows += [",".join([f"{tk:.6f}"] + [repr(float(x)) for x in (*qk, *uk)]) for tk, qk, uk in zip(t, q, u)]
    (folder / "joints.csv").write_text("\n".join(rows) + "\n")
    src: dict[str, Any] = {"path": "joints.csv", "joints": list(problem.joints), "units": problem.joint_unit,
                           "commands": {f"cmd_{a}": a for a in problem.actuators}}
    if noise:
        src["noise"] = float(noise)
    doc = {"rig": f"sysid_{problem.name}", "model": "model.xml", "max_physics_timestep": DT,
           "keypoints": {b: b for b in (["ball"] if problem.name == "spring_mass" else ["link5"])},
           "parameters": {n: {"unit": problem.unit, "lower": problem.lower, "upper": problem.upper,
                              "nominal": float(problem.start[n]), "scale": "linear", "target": tgt}
                          for n, (tgt, _) in problem.params.items()},
           "trials": [{"name": "drive", "source": {"joint_csv": src}}],
           "nuisance": {"latency": False}}
    if calibration is not None:
        doc["calibration"] = dict(calibration)
    path = folder / "rig.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def spec_field(target: str) -> tuple[str, str, str]:
    """``mujoco.MjSpec`` accessor, element name and attribute of a vid2sid target.

    ``"body_mass[ball]"`` -> ``("body", "ball", "mass")``; ``"dof_armature[joint1]"`` ->
    ``("joint", "joint1", "armature")`` (a ``mujoco.sysid`` modifier sets ``spec.<accessor>(name).<attribute>``).

    Raises:
        ValueError: a target kind these problems do not use.
    """
    kind, obj = target.split("[")
    fields = {"body_mass": ("body", "mass"), "dof_armature": ("joint", "armature")}
    if kind not in fields:
        raise ValueError(f"target {target!r}: expected body_mass[...] or dof_armature[...]")
    accessor, attr = fields[kind]
    return accessor, obj.rstrip("]"), attr


def run_vid2sid(rig_path: Path, *, budget: int = 200, iterations: int = 30, proposer: str = "reasoner"
                ) -> dict[str, Any]:
    """Calibrate ``rig_path`` with vid2sid; ``{values, interval {name: [lo, hi]}, kind, stopped, rollouts}``."""
    from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
    from vid2sid_ros.calibration.nuisance import rig_nuisance
    from vid2sid_ros.calibration.proposers import make_proposer
    from vid2sid_ros.rigs import build_real_trial, load_rig

    rig = load_rig(str(rig_path))
    real = build_real_trial(rig)
    res = run_calibration(rig, real, make_proposer(proposer),
                          CalibrationConfig(iterations=iterations, rollout_budget=budget, identifiability=False,
                                            final_identifiability=True, diagnosis=False,
                                            nuisance=rig_nuisance(rig)))
    rep = res.final_identifiability
    return {"values": {n: float(res.values[n]) for n in rig.parameters.free_names},
            "interval": {n: [float(a), float(b)] for n, (a, b) in rep.interval.items()},
            "kind": dict(rep.interval_kind), "centre": dict(rep.centre), "stopped": res.stopped,
            "rollouts": res.rollouts}


def run_mujoco_sysid(problem: Problem, t: np.ndarray, u: np.ndarray, q: np.ndarray, *, normalise: bool = True,
                     max_iters: int = 200) -> dict[str, Any]:
    """``mujoco.sysid.optimize`` (mujoco backend, its defaults) and ``calculate_intervals`` on the same data.

    Args:
        t, u, q: as from :func:`simulate` (plus noise); q row k is stamped ``t_k + DT`` (module docstring).
        normalise: ``True``: ``mujoco.sysid``'s default residual, each sensor divided by
            ``‖measured‖/√2``; ``False``: ``sensor_weights`` that cancel that division, so the
            residual is in m / rad like vid2sid's (the same least-squares problem).

    Returns:
        ``{values, half {name: 95 % half-width}, interval {name: [lo, hi]}, s2, n_residuals, jac, row_weight}``:
        ``jac`` (M, n) the Jacobian ``calculate_intervals`` used (of the weighted residual),
        ``row_weight`` (M,) the factor each residual row applies to a joint error in m / rad
        (``√2 / ‖q_j‖`` for joint j with ``normalise``, else 1; rows are time-major, joint-minor).
    """
    from mujoco import sysid

    spec = mujoco.MjSpec.from_string(problem.model_xml(problem.start))
    model = spec.compile()
    data = mujoco.MjData(model)
    init = sysid.create_initial_state(model, data.qpos, data.qvel, data.act)
    control = sysid.TimeSeries(t, u)
    names = [f"{j}_pos" for j in problem.joints]
    sensor = sysid.TimeSeries.from_names(t + DT, q, model, names=names)
    params = sysid.ParameterDict()
    for n, (tgt, _) in problem.params.items():
        accessor, obj, attr = spec_field(tgt)
        mod = (lambda s, p, acc=accessor, o=obj, at=attr: setattr(getattr(s, acc)(o), at, p.value[0]))
        params.add(sysid.Parameter(n, nominal=float(problem.truth[n]), min_value=problem.lower,
                                   max_value=problem.upper, modifier=mod))
        params[n].value[:] = float(problem.start[n])
    ms = sysid.ModelSequences(problem.name, spec, "measured", init, control, sensor)
    kw: dict[str, Any] = {}
    if not normalise:
        kw["sensor_weights"] = np.linalg.norm(q, axis=0) / np.sqrt(2.0)
    residual_fn = sysid.build_residual_fn(models_sequences=[ms], **kw)
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        opt, result = sysid.optimize(params, residual_fn, optimizer="mujoco", verbose=False, max_iters=max_iters,
                                     output=io.StringIO())
    finally:
        absl.setLevel(level)
    r_star, _, _ = residual_fn(result.x, opt)
    _, half = sysid.calculate_intervals(r_star, result.jac)
    r = np.concatenate(r_star)
    x = np.asarray(result.x, float)
    out_names = list(problem.params)
    w = np.sqrt(2.0) / np.linalg.norm(q, axis=0) if normalise else np.ones(q.shape[1])
    return {"values": {n: float(x[i]) for i, n in enumerate(out_names)},
            "half": {n: float(half[i]) for i, n in enumerate(out_names)},
            "interval": {n: [float(x[i] - half[i]), float(x[i] + half[i])] for i, n in enumerate(out_names)},
            "s2": float(r @ r / (r.size - x.size)), "n_residuals": int(r.size),
            "jac": np.asarray(result.jac, float), "row_weight": np.tile(w, r.size // q.shape[1])}


def reference_half_widths(jac: np.ndarray, row_weight: np.ndarray, sigma: float) -> np.ndarray:
    """The 95 % half-width an estimator *should* state when the noise is i.i.d. N(0, σ²) in m / rad.

    For the weighted least-squares estimate that minimises ``‖w ⊙ (y − f(θ))‖²`` with Jacobian
    ``J_w`` (rows already weighted), the linearised covariance is the sandwich
    ``σ² A⁻¹ J_wᵀ diag(w²) J_w A⁻¹``, ``A = J_wᵀ J_w`` (e.g. Seber & Wild, *Nonlinear
    Regression*, §2.1); with ``w ≡ 1`` it is ``σ² A⁻¹``, what both tools state when the noise
    is white and shared. The known σ replaces any estimate of it.

    Args:
        jac: (M, n); row_weight: (M,); sigma: the noise σ added to the data (m or rad).

    Returns:
        (n,) ``1.96 · sqrt(diag(cov))`` in the parameters' unit.
    """
    J = np.asarray(jac, float)
    A = np.linalg.inv(J.T @ J)
    G = J.T @ (J * (np.asarray(row_weight, float) ** 2)[:, None])
    return 1.959963984540054 * sigma * np.sqrt(np.diag(A @ G @ A))
