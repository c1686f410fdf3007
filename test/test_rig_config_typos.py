"""A misspelt name in a rig config is one line naming the file, the key, what was expected and the closest
valid name; no key is silently ignored.

Was, on a user's pan-tilt head (two position servos, joint_csv trials): ``calibration: {iteratons: 3}``,
``nuisance: {latncy: false}``, ``report: {titel: ...}`` and ``noise: {...}`` typos loaded without a word (the
``calibration``/``nuisance`` ones surfaced only once ``calibrate`` ran, without the closest name; the others
never); a misspelt joint, body, actuator or MuJoCo option in a ``target`` listed the names but did not say
which was meant; ``dof_armatrue[pna]`` complained about the joint, not the field.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers.pan_tilt import PARAMETERS, joint_trial, write_rig  # noqa: E402
from vid2sid_ros.cli import main  # noqa: E402
from vid2sid_ros.rigs import RigConfigError, load_rig  # noqa: E402


def _target(t):
    return {"parameters": {**PARAMETERS, "pan_kp": {**PARAMETERS["pan_kp"], "target": t}}}


CASES = [  # (what the config adds, the error after "FILE:")
    (_target("dof_armatrue[pan]"), "parameters.pan_kp.target: target field 'dof_armatrue' is not a real-valued "
     "MjModel field (did you mean dof_armature?)"),
    (_target("dof_armatrue[pna]"), "parameters.pan_kp.target: target field 'dof_armatrue' is not a real-valued "
     "MjModel field (did you mean dof_armature?)"),  # the field first, not its index
    (_target("dof_armature[pna]"), "parameters.pan_kp.target: no joint named 'pna' for field 'dof_armature' "
     "(did you mean pan?); joints: ['pan', 'tilt']"),
    (_target("actuator_gainprm[pan_sevro,0]"), "parameters.pan_kp.target: no actuator named 'pan_sevro' for field "
     "'actuator_gainprm' (did you mean pan_servo?); actuators: ['pan_servo', 'tilt_servo']"),
    (_target("body_mass[tilt_lnk]"), "parameters.pan_kp.target: no body named 'tilt_lnk' for field 'body_mass' "
     "(did you mean tilt_link?); bodies: ['world', 'base', 'pan_link', 'tilt_link']"),
    (_target("opt.densty"), "parameters.pan_kp.target: 'opt.densty' is not a real-valued MuJoCo option (did you "
     "mean opt.density?); options: "),
    (_target("init.qpos[tlit]"), "parameters.pan_kp.target: no joint named 'tlit' (did you mean tilt?); joints: "),
    ({"trials": [{**joint_trial("t0", "t0.csv"), "init": {"qpos[pna]": 0.1}}]}, "trials[0].init: no joint named "
     "'pna' (did you mean pan?); joints: ['pan', 'tilt']"),  # was: parameters.trial_init.t0.target
    ({"calibraton": {"iterations": 3}}, "calibraton: unknown key (did you mean calibration?); valid keys here: "),
    ({"calibration": {"iteratons": 3}}, "calibration.iteratons: unknown key (did you mean iterations?); valid keys "
     "here: active_learning, condition_threshold, "),
    ({"calibration": {"rollout_budjet": 30}}, "calibration.rollout_budjet: unknown key (did you mean "
     "rollout_budget?)"),
    ({"calibration": {"noise": {"radd": 0.01}}}, "calibration.noise.radd: unknown key (did you mean rad?); valid "
     "keys here: m, px, rad"),
    ({"nuisance": {"latncy": False}}, "nuisance.latncy: unknown key (did you mean latency?); valid keys here: "
     "latency, marker_offsets"),
    ({"nuisance": {"latency": {"enabeld": False}}}, "nuisance.latency.enabeld: unknown key (did you mean "
     "enabled?); valid keys here: bounds, enabled"),
    ({"report": {"titel": "head"}}, "report.titel: unknown key (did you mean title?); valid keys here: title"),
    ({"noise": {"gausian_sigma": 2.0}}, "noise.gausian_sigma: unknown key (did you mean gaussian_sigma?)"),
    ({"parameters": {**PARAMETERS, "pan_kp": {**PARAMETERS["pan_kp"], "uper": 9.0}}},
     "parameters.pan_kp.uper: unknown key (did you mean upper?); valid keys here: unit, lower, upper, nominal, "),
    ({"parameters": {**PARAMETERS, "pan_kp": {**PARAMETERS["pan_kp"], "scale": "lgo"}}},
     "parameters: parameter 'pan_kp': scale must be one of ('linear', 'log'), got 'lgo' (did you mean log?)"),
    ({"excitations": {"wave": {"kind": "sien", "amplitude": 0.3}}}, "excitations.wave: unknown excitation kind "
     "'sien' (did you mean sine?); valid kinds: "),
    ({"trials": [{**joint_trial("t0", "t0.csv"), "source": {"joint_csv": {
        **joint_trial("t0", "t0.csv")["source"]["joint_csv"], "commands": {"cmd_pan": "pan_sevro",
                                                                          "cmd_tilt": "tilt_servo"}}}}]},
     "trials[0].source.joint_csv.commands: command column(s) name 'pan_sevro', which is not an actuator of the "
     "model (did you mean pan_servo?); its actuators: pan_servo, tilt_servo"),
]


@pytest.mark.parametrize("extra, message", CASES, ids=[m.split(":")[0] + "|" + m.split("'")[1 if "'" in m else 0]
                                                        for _, m in CASES])
def test_a_typo_is_one_line_with_the_closest_name(tmp_path, extra, message):
    rig = write_rig(tmp_path, **extra)
    with pytest.raises(RigConfigError) as err:
        load_rig(rig)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{rig}:{message}"), text


def _calibrate_error(tmp_path, capsys, **extra) -> str:
    rig = write_rig(tmp_path, **extra)
    assert main(["calibrate", str(rig), "--out", str(tmp_path / "run"), "--no-report", "-q"]) == 2
    assert not (tmp_path / "run").exists()  # refused before anything was written
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    return err


def test_typos_the_calibration_finds_before_it_starts(tmp_path, capsys):
    rig = tmp_path / "rig.yaml"
    assert _calibrate_error(tmp_path, capsys, calibration={"start": {"pan_k": 2.5}}) == (
        f"vid2sid calibrate: {rig}:calibration.start.pan_k: unknown parameter (did you mean pan_kp?); valid: pan_kp, "
        "tilt_kp (or kind, points, guess, or a measurement nuisance: latency, marker_offset.<keypoint>.<axis>)")
    assert _calibrate_error(tmp_path, capsys, proposer="reasonr").startswith(
        "vid2sid calibrate: unknown proposer 'reasonr' (did you mean reasoner?); valid proposers: reasoner, ")
    assert _calibrate_error(tmp_path, capsys, proposer_options={"initial_radus": 0.3}).startswith(
        f"vid2sid calibrate: {rig}:proposer_options.initial_radus: unknown option of proposer 'reasoner' (did you "
        "mean initial_radius?); its options: ")


def test_every_calibration_setting_and_noise_field_is_a_key_of_the_schema():
    """The schema lists the calibration block's keys one by one (was: ``calibration.*``, any key accepted):
    every setting a config may give is there, and nothing else."""
    from vid2sid_ros.calibration.loop import CalibrationConfig
    from vid2sid_ros.rigs.schema import all_keys
    from vid2sid_ros.sim.camera_model import SensorNoiseModel

    paths = {k.path for k in all_keys()}
    assert not {p for p in paths if p.endswith(".*") and p.split(".")[0] in ("calibration", "nuisance", "noise",
                                                                            "report")} - {"calibration.start.*"}
    settings = {f.name for f in dataclasses.fields(CalibrationConfig)} - {"resume", "resume_changed", "resume_extend"}
    assert {p.split(".")[1] for p in paths if p.startswith("calibration.")} == settings | {"active_learning"}
    assert {p.split(".")[1] for p in paths if p.startswith("noise.")} == {
        f.name for f in dataclasses.fields(SensorNoiseModel)}


def test_a_correct_config_still_loads(tmp_path):
    rig = write_rig(tmp_path, calibration={"iterations": 3, "rollout_budget": 30, "noise": {"rad": 0.004},
                                           "far_refit": "converged", "start": {"pan_kp": 2.5}},
                    nuisance={"latency": {"enabled": True, "bounds": [-0.02, 0.02]}}, report={"title": "head"})
    assert load_rig(rig).parameters.names == ["pan_kp", "tilt_kp"]
    assert yaml.safe_load(rig.read_text())["calibration"]["far_refit"] == "converged"


def test_typos_in_a_tracker_a_built_in_twins_options_and_a_stand_in(tmp_path, capsys):
    """Were: the tracker's unknown key without the closest one, a built-in twin's option as a bare TypeError
    (no file, no key), ``real.sim2sim`` keys without the closest one."""
    write_rig(tmp_path)
    rig = tmp_path / "rig.yaml"
    rig.write_text(rig.read_text() + "tracker: {markrs: [{name: tip, hsv_lower: [0, 0, 0], hsv_upper: [9, 9, 9]}]}\n")
    with pytest.raises(RigConfigError) as err:
        load_rig(rig)
    assert str(err.value).startswith(f"{rig}:tracker: tracker config: unknown key(s) ['markrs'] (did you mean "
                                     "markers?)")
    toy = tmp_path / "toy.yaml"
    toy.write_text("rig: toy2\nmodel: {builtin: toy, options: {substep: 3}}\n")
    with pytest.raises(RigConfigError) as err:
        load_rig(toy)
    assert str(err.value) == (f"{toy}:model.options.substep: unknown option of the built-in twin (did you mean "
                              "substeps?); its options: width, height, substeps, link_lengths")
    stand_in = tmp_path / "stand_in.yaml"
    stand_in.write_text("rig: toy\nreal: {sim2sim: {sed: 3}}\n")
    assert main(["calibrate", str(stand_in), "--out", str(tmp_path / "run"), "-q"]) == 2
    assert capsys.readouterr().err.strip() == (f"vid2sid calibrate: {stand_in}: real.sim2sim: unknown key(s) ['sed'] "
                                               "(did you mean seed?); valid: seed, truth, noise, truth_range")
