"""Domain randomisation exported from a finger calibration, loaded back and applied to the MuJoCo model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.cli import main
from vid2sid_ros.report.randomization import (RandomizationError, apply_to_mujoco_model, export_randomization,
                                              load_randomization)
from vid2sid_ros.sim.registry import make_rig


@pytest.fixture(scope="module")
def finger_run(tmp_path_factory):
    rig = make_rig("finger")
    truth = draw_ground_truth(rig.parameters, 3)
    real = make_sim2sim_trial(rig, truth, seed=3, noise="keypoint", keypoint_sigma_px=0.3)
    rd = tmp_path_factory.mktemp("finger_run")
    run_calibration(rig, real, make_proposer("reasoner"),
                    CalibrationConfig(iterations=6, rollout_budget=40, identifiability=False, final_identifiability=True,
                                      diagnosis=False), rd)
    return rig, truth, rd


def test_export_load_and_apply_to_the_finger_model(finger_run, capsys):
    rig, truth, rd = finger_run
    # a 40-rollout run stops on its budget: exported only when the user accepts that (and told again)
    assert main(["export-randomization", str(rd)]) in (0, 2)
    capsys.readouterr()
    assert main(["export-randomization", str(rd), "--accept-unreliable"]) == 0
    assert "written:" in capsys.readouterr().out
    doc_yaml = yaml.safe_load((rd / "randomization.yaml").read_text())
    assert doc_yaml == json.loads((rd / "randomization.json").read_text())  # the same document twice
    rnd = load_randomization(rd / "randomization.yaml")
    result = yaml.safe_load((rd / "result.yaml").read_text())
    assert set(rnd.parameters) == set(rig.parameters.free_names)  # physics only: no latency, no frozen armature
    for name, p in rnd.parameters.items():
        spec = rig.parameters[name]
        std = result["calibration"]["uncertainty"][name]["std"]
        assert p.unit == spec.unit and p.std == pytest.approx(std)
        assert spec.lower <= p.low < p.identified < p.high <= spec.upper
        half = max(1.96 * std, 0.02 * p.identified)
        assert p.high - p.low == pytest.approx(min(p.identified + half, spec.upper) - max(p.identified - half, spec.lower))
        assert p.distribution == ("log_uniform" if spec.scale == "log" else "uniform")
    twin = rig.make_twin()
    drawn = apply_to_mujoco_model(twin.model, rnd, np.random.default_rng(7))
    again = apply_to_mujoco_model(rig.make_twin().model, rnd, np.random.default_rng(7))
    assert drawn == again  # seeded
    assert drawn != apply_to_mujoco_model(rig.make_twin().model, rnd, np.random.default_rng(8))
    m = twin.model
    assert m.jnt_stiffness[1] == pytest.approx(0.6 * drawn["joint_stiffness"])  # ratios of the spec's target kept
    assert m.dof_damping[2] == pytest.approx(drawn["joint_damping"])
    assert m.actuator_gainprm[0, 0] == pytest.approx(drawn["actuator_gain"])
    for name, v in drawn.items():
        assert rnd.parameters[name].low <= v <= rnd.parameters[name].high
    res = twin.rollout(rig.excitations["train"][0])  # the randomised model still simulates
    assert not res.diverged


def test_normal_distribution_and_widening(finger_run, tmp_path):
    _, _, rd = finger_run
    rnd, _ = export_randomization(rd, distribution="normal", widen=3.0, out=tmp_path)
    back = load_randomization(tmp_path / "randomization.json")
    for p in back.parameters.values():
        assert p.distribution == "normal" and p.sigma == pytest.approx(3.0 * p.std)
        draws = [p.sample(np.random.default_rng(i)) for i in range(200)]
        assert p.low <= min(draws) and max(draws) <= p.high


def test_bad_inputs_are_one_line(tmp_path, capsys):
    assert main(["export-randomization", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "no result.yaml" in err and len(err.splitlines()) == 1
    bad = tmp_path / "r.yaml"
    bad.write_text("version: 1\nparameters:\n  k: {distribution: gamma, identified: 1, low: 0.5, high: 2}\n")
    with pytest.raises(RandomizationError, match=r"r.yaml: parameters.k.distribution: expected one of"):
        load_randomization(bad)
    bad.write_text("version: 1\nparameters:\n  k: {distribution: uniform, identified: 1, low: 2, high: 0.5}\n")
    with pytest.raises(RandomizationError, match=r"parameters.k: expected low < high"):
        load_randomization(bad)


def test_name_indexed_targets_are_applied_like_the_twin_reads_them(tmp_path):
    """A user rig's targets index by name (`dof_damping[j1]`, `actuator_gear[m1,0]`): the calibration accepted
    them, apply_to_mujoco_model raised "cannot parse target 'dof_damping[j1]'" (it used the finger's numeric-only
    parser). Both now read targets with the one parser (sim.user_model.parse_user_target)."""
    import mujoco

    m = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body name="a"><joint name="j0" type="hinge"/><geom size="0.1" mass="1"/>'
        '<body name="b"><joint name="j1" type="slide"/><geom size="0.1" mass="1"/></body></body></worldbody>'
        '<actuator><motor name="m0" joint="j0"/><motor name="m1" joint="j1" gear="2"/></actuator></mujoco>')
    path = tmp_path / "randomization.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "rig": "two", "parameters": {
        "damping_1": {"target": "dof_damping[j1]", "identified": 0.3, "low": 0.2, "high": 0.4, "distribution": "uniform"},
        "gear_1": {"target": "actuator_gear[m1,0]*2", "identified": 1.0, "low": 0.9, "high": 1.1,
                   "distribution": "uniform"},
        "density": {"target": "opt.density", "identified": 1.2, "low": 1.0, "high": 1.4, "distribution": "uniform"}}}))
    drawn = apply_to_mujoco_model(m, load_randomization(path), np.random.default_rng(0))
    assert m.dof_damping[1] == pytest.approx(drawn["damping_1"]) and m.dof_damping[0] == 0.0
    assert m.actuator_gear[1, 0] == pytest.approx(2 * drawn["gear_1"]) and m.actuator_gear[0, 0] == 1.0
    assert m.opt.density == pytest.approx(drawn["density"])
    path.write_text(yaml.safe_dump({"version": 1, "parameters": {
        "d": {"target": "dof_damping[j9]", "identified": 0.3, "low": 0.2, "high": 0.4, "distribution": "uniform"}}}))
    with pytest.raises(RandomizationError, match=r"parameters.d.target: parameter .d.: no joint named 'j9'"):
        apply_to_mujoco_model(m, load_randomization(path), np.random.default_rng(0))
    path.write_text(yaml.safe_dump({"version": 1, "parameters": {
        "x0": {"target": "init.qpos[j0]", "identified": 0.3, "low": 0.2, "high": 0.4, "distribution": "uniform"}}}))
    with pytest.raises(RandomizationError, match=r"parameters.x0.target: 'init.qpos\[j0\]' sets a qpos value, not a"):
        apply_to_mujoco_model(m, load_randomization(path), np.random.default_rng(0))


def test_a_run_the_diagnosis_flagged_is_not_exported_without_accept_unreliable(tmp_path, capsys):
    """Was: ranges from a run whose diagnosis said "the model is probably wrong" (or that had not converged)
    were written with no warning, the way wrong numbers reach a policy trained in simulation."""
    import json
    import shutil

    from vid2sid_ros.cli import main

    src = tmp_path / "src"
    src.mkdir()
    (src / "result.json").write_text(json.dumps({"stopped": "converged", "residual_diagnosis": {
        "misspecified": True, "verdict": "named"}, "intervals": {}}))
    from vid2sid_ros.commands.export_randomization import unreliable_reasons

    assert unreliable_reasons(str(src)) == ["its residual diagnosis says the model is probably wrong (named)"]
    (src / "result.json").write_text(json.dumps({"stopped": "iterations (10 of 10 iterations)",
                                                "intervals": {"k": {"reliable": False}}}))
    assert len(unreliable_reasons(str(src))) == 2
    (src / "result.json").write_text(json.dumps({"stopped": "converged", "intervals": {"k": {"reliable": True}}}))
    assert unreliable_reasons(str(src)) == []
    shutil.rmtree(src)
