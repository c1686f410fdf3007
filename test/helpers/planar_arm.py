"""A two-link arm swinging in a vertical plane, recorded as joint-state CSV files from a changed copy of its model.

The arm: ``shoulder`` and ``elbow`` hinges about y (parallel axes), links of 0.5 kg and 0.3 kg (0.3 m and
0.25 m capsules) hanging under gravity, a motor on each hinge (``m_sh`` gear 5, ``m_el`` gear 2), timestep
2 ms, contacts off. The rig frees the shoulder motor's gain, both dampings, the elbow's friction and the
forearm's mass; what :func:`record_csv` changes beyond them (a stronger elbow motor, an encoder's zero or
scale, the initial pose, the shoulder's armature) is a model or measurement error the rig was not told about.
A trial is 5 s at 30 Hz of smooth commands with steps, the joint angles with 2 mrad Gaussian noise.

Used by ``test/test_diagnosis_joint_readings.py``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

__all__ = ["MODEL", "TRUTH", "PARAMETERS", "record_csv", "write_rig"]

MODEL = """<mujoco model="planar_arm">
  <option timestep="0.002" gravity="0 0 -9.81"><flag contact="disable"/></option>
  <worldbody>
    <body name="upper" pos="0 0 1.0">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.05" armature="0.002"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02" mass="0.5"/>
      <body name="fore" pos="0 0 -0.3">
        <joint name="elbow" type="hinge" axis="0 1 0" damping="0.02" frictionloss="0.01" armature="0.001"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.015" mass="0.3"/>
        <site name="tip" pos="0 0 -0.25" size="0.01"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m_sh" joint="shoulder" gear="5"/>
    <motor name="m_el" joint="elbow" gear="2"/>
  </actuator>
</mujoco>
"""

#: the values the recordings are made at (the rig's free parameters), SI
TRUTH = {"sh_gain": 4.7, "sh_damping": 0.02, "el_damping": 0.025, "el_friction": 0.012, "fore_mass": 0.2}

#: the rig config's ``parameters`` block
PARAMETERS = {
    "sh_gain": {"unit": "N*m", "lower": 2.0, "upper": 10.0, "nominal": 4.0, "scale": "log",
                "target": "actuator_gear[m_sh,0]"},
    "sh_damping": {"unit": "N*m*s/rad", "lower": 0.01, "upper": 0.3, "nominal": 0.08, "scale": "log",
                   "target": "dof_damping[shoulder]"},
    "el_damping": {"unit": "N*m*s/rad", "lower": 0.005, "upper": 0.1, "nominal": 0.03, "scale": "log",
                   "target": "dof_damping[elbow]"},
    "el_friction": {"unit": "N*m", "lower": 0.001, "upper": 0.05, "nominal": 0.008, "scale": "log",
                    "target": "dof_frictionloss[elbow]"},
    "fore_mass": {"unit": "kg", "lower": 0.15, "upper": 0.6, "nominal": 0.25, "scale": "log",
                  "target": "body_mass[fore]"},
}

RATE = 30.0
SECONDS = 5.0


def _commands() -> np.ndarray:
    """(T, 2) motor commands: sines with steps, both signs."""
    t = np.arange(int(SECONDS * RATE)) / RATE
    u_sh = 0.05 * np.sin(2 * np.pi * 0.6 * t) + 0.03 * np.sign(np.sin(2 * np.pi * 0.35 * t))
    u_el = 0.04 * np.sin(2 * np.pi * 1.1 * t + 0.4) + 0.02 * np.sign(np.sin(2 * np.pi * 0.5 * t + 1.0))
    return np.stack([u_sh, u_el], axis=1)


def record_csv(path: Path, *, el_gain: float = 2.0, el_offset: float = 0.0, sh_scale: float = 1.0,
               q0: tuple[float, float] = (0.0, 0.0), sh_armature: float = 0.002, noise: float = 0.002,
               seed: int = 0) -> Path:
    """Write ``time,shoulder,elbow,m_sh,m_el`` (s, rad, command) of the arm at :data:`TRUTH` with the changes
    given: the elbow motor's gear ``el_gain``, the elbow reading's zero ``el_offset`` (rad, added), the shoulder
    reading's scale ``sh_scale``, the initial joint angles ``q0`` (rad) and the shoulder's armature (kg·m²).
    Row k is the state before command k acts; each command is held 1/30 s."""
    import mujoco

    m = mujoco.MjModel.from_xml_string(MODEL)
    sh, el = m.joint("shoulder").dofadr[0], m.joint("elbow").dofadr[0]
    m.actuator_gear[0, 0], m.actuator_gear[1, 0] = TRUTH["sh_gain"], el_gain
    m.dof_damping[sh], m.dof_damping[el] = TRUTH["sh_damping"], TRUTH["el_damping"]
    m.dof_frictionloss[el] = TRUTH["el_friction"]
    m.body_mass[m.body("fore").id] = TRUTH["fore_mass"]
    m.dof_armature[sh] = sh_armature
    mujoco.mj_setConst(m, mujoco.MjData(m))
    nsub = math.ceil(1.0 / RATE / 0.002 - 1e-9)
    m.opt.timestep = 1.0 / RATE / nsub
    d = mujoco.MjData(m)
    d.qpos[:2] = q0
    cmd = _commands()
    rows = []
    for k in range(len(cmd)):
        rows.append(d.qpos[:2].copy())
        d.ctrl[:] = cmd[k]
        mujoco.mj_step(m, d, nsub)
    q = np.array(rows) + np.random.default_rng(seed).normal(0.0, noise, (len(rows), 2))
    q[:, 1] += el_offset
    q[:, 0] *= sh_scale
    lines = ["time,shoulder,elbow,m_sh,m_el"] + [
        f"{k / RATE:.6f},{q[k, 0]:.6f},{q[k, 1]:.6f},{cmd[k, 0]:.6f},{cmd[k, 1]:.6f}" for k in range(len(cmd))]
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path


def write_rig(folder: Path, csv: str = "t0.csv", *, parameters: dict | None = None, **extra) -> Path:
    """``arm.xml`` and ``rig.yaml`` (one joint_csv trial of ``csv``, 70 % trained) in ``folder``; ``extra``: more
    top-level blocks (``calibration``...). Returns the rig config's path."""
    import yaml

    folder = Path(folder)
    (folder / "arm.xml").write_text(MODEL)
    doc = {"rig": "planar_arm", "model": "arm.xml", "actuators": ["m_sh", "m_el"], "keypoints": {"tip": "tip"},
           "parameters": parameters if parameters is not None else PARAMETERS,
           "trials": [{"name": "log", "source": {"joint_csv": {
               "path": csv, "joints": {"shoulder": "shoulder", "elbow": "elbow"},
               "commands": {"m_sh": "m_sh", "m_el": "m_el"}, "noise": 0.002}}, "split": {"train_fraction": 0.7}}],
           "calibration": {"iterations": 10, "rollout_budget": 60, "seed": 0}, "proposer": "reasoner"}
    doc.update(extra)
    path = folder / "rig.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
