"""Targets checked at the start of a calibration, and what the training data cannot see stays put.

The issue's slide-joint spring-mass (MJCF, a motor on the slide, joint positions through a
``joint_csv`` trial) with ``target: body_mass[ball]``, start 2.0 kg, truth 1.0 kg: the mass
stayed at 2.0 (MuJoCo 4 ignored the in-place write), the run said ``converged`` and the
exported model held ``mass="2"``. A free physics parameter that changes nothing is now refused
at the start; a nuisance only held-out data could show is held at its start value.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np
import pytest
import yaml

from vid2sid_ros.calibration.loop import CalibrationConfig, CalibrationError, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.rigs import RigConfigError, build_real_trial, load_rig

MODEL = textwrap.dedent("""\
    <mujoco model="spring_mass">
      <option timestep="0.002" gravity="0 0 -9.81"/>
      <worldbody>
        <body name="anchor" pos="0 0.3 0.1"><geom type="box" size="0.02 0.02 0.02" mass="1"/></body>
        <body name="ball" pos="0 0 0.1">
          <joint name="slide" type="slide" axis="1 0 0" stiffness="10" damping="0.5"/>
          <geom type="sphere" size="0.05" mass="MASS" contype="0" conaffinity="0"/>
          <site name="ball_site"/>
        </body>
      </worldbody>
      <actuator><motor name="push" joint="slide" gear="1"/></actuator>
    </mujoco>
""")

#: identifiability diagnostics are not what these tests check (the effect check runs without them too)
FAST = dict(identifiability=False, final_identifiability=False, diagnosis=False)


def _record(path: Path, *, mass: float, v0: float = 0.0, T: int = 300, seed_phase: float = 0.0) -> None:
    """Joint-state CSV of the truth, simulated by MuJoCo from a model compiled with ``mass``."""
    m = mujoco.MjModel.from_xml_string(MODEL.replace("MASS", repr(mass)))
    d = mujoco.MjData(m)
    d.qvel[0] = v0
    t = np.arange(T) / 100.0
    u = 2.0 * np.sin(2 * np.pi * (0.3 + 0.6 * t) * t + seed_phase)
    lines = ["time,slide,cmd"]
    for k in range(T):  # row k = the state before command k (the twin's sample-then-act convention)
        lines.append(f"{t[k]:.4f},{float(d.qpos[0])!r},{float(u[k])!r}")
        d.ctrl[0] = u[k]
        mujoco.mj_step(m, d, 5)
    path.write_text("\n".join(lines) + "\n")


def _rig(tmp_path: Path, parameters: dict, trials: list, **extra) -> Path:
    (tmp_path / "model.xml").write_text(MODEL.replace("MASS", "2"))
    doc = {"rig": "spring_mass", "model": "model.xml", "max_physics_timestep": 0.002,
           "keypoints": {"ball": "ball_site"},
           "camera": {"width": 320, "height": 240, "fx": 300.0,
                      "pose": {"position": [0, -1, 0.1], "look_at": [0, 0, 0.1]}},
           "parameters": parameters, "trials": trials, **extra}
    p = tmp_path / "rig.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def _joint_trial(name: str, csv: str, **extra) -> dict:
    return {"name": name, "source": {"joint_csv": {"path": csv, "joints": ["slide"], "units": "m",
                                                  "commands": {"cmd": "push"}}}, **extra}


MASS = {"mass": {"unit": "kg", "lower": 0.5, "upper": 4.0, "nominal": 2.0, "scale": "log",
                 "target": "body_mass[ball]", "meaning": "ball mass"}}


def test_the_slide_joint_mass_is_recovered_and_exported(tmp_path):
    """Was: mass stayed at 2.0 kg (truth 1.0), 'converged', calibrated_model.xml with mass="2"."""
    _record(tmp_path / "t0.csv", mass=1.0)
    rig = load_rig(_rig(tmp_path, MASS, [_joint_trial("t0", "t0.csv")]))
    real = build_real_trial(rig)
    res = run_calibration(rig, real, make_proposer("reasoner"),
                          CalibrationConfig(iterations=6, rollout_budget=40, **FAST), tmp_path / "run")
    assert res.values["mass"] == pytest.approx(1.0, rel=1e-5)
    exported = mujoco.MjModel.from_xml_path(str(res.files["model"]))
    bid = mujoco.mj_name2id(exported, mujoco.mjtObj.mjOBJ_BODY, "ball")
    assert exported.body_mass[bid] == pytest.approx(res.values["mass"], rel=1e-9)  # MJCF text: 12 digits
    # the exported model, reloaded into a fresh rig that writes nothing into it, re-simulates the fit
    (tmp_path / "again").mkdir()
    _rig(tmp_path / "again", {"cam": {"unit": "m", "lower": -1.0, "upper": 0.0, "nominal": -1.0, "kind": "nuisance",
                                      "target": "camera.y"}}, [_joint_trial("t0", str(tmp_path / "t0.csv"))])
    (tmp_path / "again" / "model.xml").write_text(Path(res.files["model"]).read_text())
    fresh = load_rig(tmp_path / "again" / "rig.yaml")
    a = rig.make_twin()
    a.set_parameters({"mass": res.values["mass"]})
    exc = real.train_excitations[0]
    fitted = a.rollout(exc).state["qpos"]
    # within 1e-9 of the motion's amplitude: MJCF text holds 12 significant digits of the mass
    np.testing.assert_allclose(fresh.make_twin().rollout(exc).state["qpos"], fitted, rtol=0,
                               atol=1e-9 * np.abs(fitted).max())


def test_a_free_physics_parameter_without_effect_is_refused_at_the_start(tmp_path, capsys):
    _record(tmp_path / "t0.csv", mass=1.0)
    params = {**MASS, "anchor_mass": {"unit": "kg", "lower": 0.5, "upper": 2.0, "nominal": 1.0,
                                      "target": "body_mass[anchor]"}}
    rig = load_rig(_rig(tmp_path, params, [_joint_trial("t0", "t0.csv")]))
    real = build_real_trial(rig)
    with pytest.raises(CalibrationError) as err:
        run_calibration(rig, real, make_proposer("reasoner"), CalibrationConfig(iterations=2, rollout_budget=20),
                        tmp_path / "run")
    msg = str(err.value)
    assert msg.splitlines() == [msg]
    assert ("free parameter 'anchor_mass' (target body_mass[anchor]) at 0.5 and 2 kg gives identical training "
            "rollouts: body 'anchor' is welded to the world") in msg
    assert not (tmp_path / "run").exists()  # refused before the run directory is written
    from vid2sid_ros.cli import main

    assert main(["calibrate", str(tmp_path / "rig.yaml"), "--out", str(tmp_path / "cli"), "--no-report",
                 "--quiet"]) == 2
    out = capsys.readouterr().err.strip().splitlines()
    assert any("'anchor_mass' (target body_mass[anchor])" in line for line in out)
    assert not (tmp_path / "cli" / "run.json").exists()


def test_a_held_out_trials_free_initial_state_is_refused_at_load(tmp_path):
    """Was: a held-out trial's free initial state (never fitted) moved to its bounds at iteration 4."""
    _record(tmp_path / "t0.csv", mass=1.0)
    _record(tmp_path / "h.csv", mass=1.0, v0=0.2, seed_phase=1.0)
    path = _rig(tmp_path, MASS, [_joint_trial("t0", "t0.csv"),
                                 _joint_trial("h", "h.csv", split="holdout", init={"qvel[slide]": "free"})])
    with pytest.raises(RigConfigError) as err:
        load_rig(path)
    msg = str(err.value)
    assert msg.splitlines() == [msg]
    assert "rig.yaml:trials[1].init.qvel[slide]: a held-out trial's initial state cannot be free" in msg
    assert "give its measured value" in msg and "make it a training trial" in msg


@pytest.mark.parametrize("proposer", ["reasoner", "random", "least-squares"])
def test_a_parameter_only_the_holdout_sees_is_never_moved(tmp_path, proposer):
    """A held-out trial's own initial velocity, declared in the spec (``init.qvel[slide]@h``): its
    Jacobian column on the training trials is zero. No proposer moves it; the run reports it."""
    _record(tmp_path / "t0.csv", mass=1.0)
    _record(tmp_path / "h.csv", mass=1.0, v0=0.2, seed_phase=1.0)
    params = {**MASS, "h_v0": {"unit": "m/s", "lower": -1.0, "upper": 1.0, "nominal": 0.0, "kind": "nuisance",
                               "target": "init.qvel[slide]@h"}}
    rig = load_rig(_rig(tmp_path, params, [_joint_trial("t0", "t0.csv"), _joint_trial("h", "h.csv", split="holdout")]))
    real = build_real_trial(rig)
    res = run_calibration(rig, real, make_proposer(proposer), CalibrationConfig(iterations=4, rollout_budget=40,
                                                                                 seed=3, **FAST), tmp_path / "run")
    for rec in res.history:
        assert rec.values.get("h_v0", 0.0) == 0.0, (rec.iteration, rec.values)
        for e in rec.extra.get("evaluations", []):
            assert e["values"].get("h_v0", 0.0) == 0.0
    assert res.values["h_v0"] == 0.0
    import json

    doc = json.loads((tmp_path / "run" / "result.json").read_text())
    assert "h_v0" in doc["unobservable_on_training"]
    assert "h_v0" in yaml.safe_load((tmp_path / "run" / "result.yaml").read_text())["calibration"][
        "unobservable_on_training"]
    assert any("unobservable on the training data" in n and "h_v0 = 0 m/s" in n for n in res.history[0].notes)
    from vid2sid_ros.report.insights import parameter_rows
    from vid2sid_ros.report.run import load_run

    row = next(r for r in parameter_rows(load_run(tmp_path / "run")) if r.name == "h_v0")
    assert row.interval_method.startswith("held at its start value: unobservable on the training data")


def test_the_start_checks_advice_is_not_given_for_what_the_loop_holds(tmp_path, recwarn):
    """A camera pose nuisance on joint trials changes nothing: held, and the start check's "add an
    excitation or freeze one of them" is not repeated for it; a physics parameter without effect is
    refused before that advice too (it would blame the excitation for a welded body). (Joint trials get
    no marker offsets at all: ``test_joint_trial_nuisances.py``.)"""
    _record(tmp_path / "t0.csv", mass=1.0)
    camera_x = {"cam_x": {"unit": "m", "lower": -0.05, "upper": 0.05, "nominal": 0.0, "kind": "nuisance",
                          "target": "camera.x", "meaning": "camera position error along x"}}
    rig = load_rig(_rig(tmp_path, {**MASS, **camera_x}, [_joint_trial("t0", "t0.csv")]))
    res = run_calibration(rig, build_real_trial(rig), make_proposer("reasoner"),
                          CalibrationConfig(iterations=1, rollout_budget=20, final_identifiability=False,
                                            diagnosis=False))
    held = next(n for n in res.history[0].notes if "unobservable on the training data" in n)
    assert "cam_x = 0 m" in held and "marker_offset" not in held
    assert res.values["mass"] != 2.0 and res.values["cam_x"] == 0.0  # the mass itself is fitted, cam_x held
    assert res.identifiability is not None and "cam_x" in (res.identifiability.warning or "")
    assert not [w for w in recwarn.list if "barely affects" in str(w.message)]
