"""A small user rig on joint data: a pan-tilt head (two hinges driven by position servos) whose trials are
joint-state CSV files (``joint_csv``) recorded from the twin itself at hidden parameters.

The head: ``pan`` (hinge about z) carries ``tilt`` (hinge about y) and a 0.1 m arm with a site ``tip``; each
hinge has a position servo (``pan_servo``, ``tilt_servo``, kp 2 N·m/rad in the file), damping 0.05
N·m·s/rad, timestep 2 ms. The free parameters are the two servos' stiffness ``pan_kp``, ``tilt_kp``
(N·m/rad, 0.5-8, nominal 2; each sets the servo's gain and its bias together, as MuJoCo's ``kp`` does).
A trial is 2 s at 50 Hz of smooth position commands with the joint angles they produced.

Used by ``test/test_go_on_resume.py``, ``test/test_rig_config_typos.py`` and
``test/test_diagnosis_joint_candidates.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["TRUTH", "MODEL", "PARAMETERS", "head_xml", "record_csv", "write_rig"]

#: the hidden parameters the CSV files are recorded at (N·m/rad)
TRUTH = {"pan_kp": 3.1, "tilt_kp": 1.4}

MODEL = """<mujoco model="pan_tilt">
  <option timestep="0.002"/>
  <worldbody>
    <body name="base" pos="0 0 0.1">
      <geom type="cylinder" size="0.04 0.01" mass="0.5"/>
      <body name="pan_link" pos="0 0 0.02">
        <joint name="pan" type="hinge" axis="0 0 1" damping="0.05"/>
        <geom type="cylinder" size="0.03 0.01" mass="0.2"/>
        <body name="tilt_link" pos="0 0 0.03">
          <joint name="tilt" type="hinge" axis="0 1 0" damping="0.05"/>
          <geom type="box" size="0.05 0.02 0.01" pos="0.05 0 0" mass="0.15"/>
          <site name="tip" pos="0.1 0 0"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="pan_servo" joint="pan" kp="PAN_KP"/>
    <position name="tilt_servo" joint="tilt" kp="TILT_KP"/>
  </actuator>
</mujoco>
"""

#: the rig config's ``parameters`` block (servo kp: the gain and minus the bias's position term share one value)
PARAMETERS = {
    "pan_kp": {"unit": "N*m/rad", "lower": 0.5, "upper": 8.0, "nominal": 2.0, "scale": "log",
               "target": "actuator_gainprm[pan_servo,0],actuator_biasprm[pan_servo,1]*-1"},
    "tilt_kp": {"unit": "N*m/rad", "lower": 0.5, "upper": 8.0, "nominal": 2.0, "scale": "log",
                "target": "actuator_gainprm[tilt_servo,0],actuator_biasprm[tilt_servo,1]*-1"},
}


def head_xml(pan_kp: float = 2.0, tilt_kp: float = 2.0) -> str:
    """The head's MJCF with the servos' kp (N·m/rad)."""
    return MODEL.replace("PAN_KP", repr(float(pan_kp))).replace("TILT_KP", repr(float(tilt_kp)))


def record_csv(path: Path, truth: dict[str, float] = TRUTH, *, seconds: float = 2.0, rate: float = 50.0,
               phase: float = 0.0, noise: float = 0.002, seed: int = 0) -> Path:
    """Write a joint-state CSV (``time,pan,tilt,cmd_pan,cmd_tilt``; rad) of the head at ``truth``.

    Row k is the state before command k acts (the twin's sample-then-act convention); each command is
    held for 1/rate s. The angles carry Gaussian noise of ``noise`` rad (1 sigma, seeded by ``seed``).
    """
    import mujoco

    m = mujoco.MjModel.from_xml_string(head_xml(truth["pan_kp"], truth["tilt_kp"]))
    d = mujoco.MjData(m)
    n = int(round(seconds * rate))
    t = np.arange(n) / rate
    u_pan = 0.6 * np.sin(2 * np.pi * 0.8 * t + phase) + 0.3 * np.sign(np.sin(2 * np.pi * 0.5 * t))
    u_tilt = 0.4 * np.sin(2 * np.pi * 1.3 * t + 0.5 + phase) + 0.2 * np.sign(np.sin(2 * np.pi * 0.7 * t + 1.0))
    sub = int(round(1.0 / (rate * m.opt.timestep)))
    e = np.random.default_rng(seed).normal(0.0, noise, (n, 2))
    lines = ["time,pan,tilt,cmd_pan,cmd_tilt"]
    for k in range(n):
        q = d.qpos[:2] + e[k]
        lines.append(f"{t[k]:.4f},{float(q[0])!r},{float(q[1])!r},{float(u_pan[k])!r},{float(u_tilt[k])!r}")
        d.ctrl[:] = (u_pan[k], u_tilt[k])
        mujoco.mj_step(m, d, sub)
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path


def joint_trial(name: str, csv: str, **extra) -> dict:
    """A ``trials`` entry reading ``csv`` (written by :func:`record_csv`) as a joint_csv source."""
    return {"name": name, "source": {"joint_csv": {"path": csv, "joints": ["pan", "tilt"],
                                                  "commands": {"cmd_pan": "pan_servo", "cmd_tilt": "tilt_servo"}}},
            **extra}


def write_rig(folder: Path, *, trials: list | None = None, parameters: dict | None = None, text: str | None = None,
              **extra) -> Path:
    """Write ``head.xml`` (kp 2 in the file), a recorded trial ``t0.csv`` and ``rig.yaml`` into ``folder``.

    Args:
        trials: the ``trials`` block (default: one joint_csv trial of ``t0.csv``).
        parameters: the ``parameters`` block (default :data:`PARAMETERS`).
        text: the rig config's text, written as given instead (a config with a typo in it).
        extra: more top-level blocks (``calibration``, ``nuisance``...).

    Returns:
        the rig config's path.
    """
    import yaml

    folder = Path(folder)
    (folder / "head.xml").write_text(head_xml())
    if not (folder / "t0.csv").is_file():
        record_csv(folder / "t0.csv")
    path = folder / "rig.yaml"
    if text is not None:
        path.write_text(text)
        return path
    doc = {"rig": "pan_tilt", "model": "head.xml", "max_physics_timestep": 0.002, "keypoints": {"tip": "tip"},
           "parameters": parameters if parameters is not None else PARAMETERS,
           "trials": trials if trials is not None else [joint_trial("t0", "t0.csv")], **extra}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
