"""Residual diagnosis on a model we make wrong on purpose (toy arm), and the misspecification benchmark."""

from __future__ import annotations

import json

import pytest

from vid2sid_ros.benchmark.run import run_benchmark
from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.cli import main
from vid2sid_ros.sim.toy import make_rig

TRUTH = {"stiffness": 0.7, "damping": 0.01, "gain": 0.4}


def _calibrate(misspecify=None, nuisance=None, seed=1, budget=60, free=("stiffness", "damping", "gain")):
    rig = make_rig(free)
    real = make_sim2sim_trial(rig, TRUTH, seed=seed, noise="keypoint", keypoint_sigma_px=0.2, misspecify=misspecify)
    cfg = CalibrationConfig(iterations=8, rollout_budget=budget, seed=seed, identifiability=False,
                            final_identifiability=False, nuisance=nuisance)
    return run_calibration(rig, real, make_proposer("reasoner"), cfg)


def test_a_correct_model_raises_no_warning():
    res = _calibrate()
    d = res.diagnosis
    assert d["misspecified"] is False and not [f for f in d["findings"] if f["severity"] == "warning"]
    assert "no structure" in d["summary"] and d["verdict"] == "none"
    # was: a caveat (and then an 'unchecked' verdict) that the free gain rests on the motor's command gain, which
    # is the free gain itself on this one-drive twin
    assert not d["caveat"] and "actuator 'motor' gain" not in {c["cause"] for c in d["consider"]["candidates"]}
    causes = {c["cause"]: c for c in d["statistics"]["causes"]}
    assert {"frozen parameter 'friction'", "frozen parameter 'inertia'"} <= set(causes)  # probed, found innocent
    assert not any(c.get("significant") for c in causes.values())


def test_a_wrong_frozen_gain_is_reported_with_what_it_cannot_be_told_apart_from():
    # the actuator gain is 30 % higher on the real side; the twin keeps it frozen at 0.3 N*m. Only the product
    # gain x transmission acts (and a command scale is the same thing), so no trial can name one of them: the
    # diagnosis reports the three together, the truth among them, and recommends none. (It named 'gain'.)
    res = _calibrate("frozen=0.3", free=("stiffness", "damping"))
    d = res.diagnosis
    assert d["verdict"] == "indistinguishable" and d["recommendation"] is None, d["text"]
    (f,) = [f for f in d["findings"] if f["kind"] == "indistinguishable"]
    members = {c["cause"]: c for c in f["evidence"]["causes"]}
    assert {"frozen parameter 'gain'", "frozen parameter 'transmission'", "actuator 'motor' gain"} <= set(members)
    assert all(c["share"] > 0.9 for c in members.values())
    assert members["frozen parameter 'gain'"]["size_text"] == "gain = 0.39 N·m"  # the truth, 0.39 N·m
    assert "None is recommended" in f["message"] and "their probe columns are parallel" in f["message"]


def test_latency_without_the_nuisance_is_a_lag_warning_and_with_it_a_note():
    without = _calibrate("latency=0.03", nuisance={"latency": False})
    lag = [f for f in without.diagnosis["findings"] if f["kind"] == "latency" and f["severity"] == "warning"]
    # the free physics absorb part of the delay (a phase lag), so the remaining shift is smaller than 30 ms
    assert lag and 0.005 < lag[0]["evidence"]["shift_s"] <= 0.035
    with_it = _calibrate("latency=0.03")
    note = [f for f in with_it.diagnosis["findings"] if f["kind"] == "latency"]
    assert note and note[0]["severity"] == "note" and not with_it.diagnosis["misspecified"]


def test_a_camera_offset_and_dropped_frames_are_named():
    cam = _calibrate("camera=3")
    assert "camera" in cam.diagnosis["kinds"] and cam.diagnosis["misspecified"]  # it said 'offset' (a marker)
    drops = _calibrate("drops=0.08")
    assert "timing" in drops.diagnosis["kinds"]


def test_benchmark_counts_detections_and_latency_error(tmp_path):
    res = run_benchmark(make_rig(), ["reasoner"], seeds=1, budget=40, iterations=6, noise="keypoint", out=tmp_path,
                        misspecify="latency=0.02", progress=False)
    r = res["methods"]["reasoner"]
    assert r["detected"] == {"latency": 1} and r["latency_error_frames"]["max"] < 0.2
    assert res["misspecification"] == {"latency": 0.02}
    md = (tmp_path / "results.md").read_text()
    assert "latency 1/1" in md and "misspecified: latency=0.02" in md
    seed = json.loads((tmp_path / "results.json").read_text())["per_seed"][0]
    assert seed["misspecification"]["applied"]["latency"]["realised_s"] == pytest.approx(0.02)


def test_benchmark_cli_rejects_a_bad_misspecification_in_one_line(tmp_path, capsys):
    code = main(["benchmark", "sim2sim", "--rig", "finger", "--methods", "reasoner", "--misspecify", "lag=2",
                 "--out", str(tmp_path / "b"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "unknown kind 'lag'; valid: latency, frozen, friction, camera, rolling_shutter, drops" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "b").exists()


def test_unmodelled_tendon_friction_on_the_finger_is_not_blamed_on_one_named_cause():
    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth
    from vid2sid_ros.sim.registry import make_rig as make_registered

    rig = make_registered("finger")
    truth = draw_ground_truth(rig.parameters, 0)
    real = make_sim2sim_trial(rig, truth, seed=0, noise="camera", misspecify="friction=0.3")  # as the benchmark
    res = run_calibration(rig, real, make_proposer("reasoner"),
                          CalibrationConfig(iterations=10, rollout_budget=40, identifiability=False,
                                            final_identifiability=False))
    d = res.diagnosis
    # friction against damping is what this excitation cannot separate: reported together, the tendon's
    # friction among them, nothing recommended, and the trial that would separate them named
    assert d["verdict"] == "indistinguishable" and d["recommendation"] is None, d["text"]
    members = [c["cause"] for f in d["findings"] for c in f["evidence"].get("causes", [])]
    assert "frictionloss of tendon 'flexor'" in members and "friction" in d["kinds"]
    assert "frozen" not in d["kinds"]  # the frozen armature explains less: not blamed
    causes = {c["cause"] for c in d["statistics"]["causes"]}
    assert "frictionloss of joint 'mcp'" in causes and "frozen parameter 'joint_armature'" in causes
    assert "slow and fast motions of the same amplitude" in d["text"]


def test_the_rig_configs_nuisance_block_reaches_the_benchmark_calibrations():
    rig = make_rig()
    rig.nuisance = {"latency": False}  # what the rig loader sets from a config's `nuisance:` block
    res = run_benchmark(rig, ["reasoner"], seeds=1, budget=10, iterations=2, noise="keypoint", progress=False)
    assert res["per_seed"][0]["methods"]["reasoner"]["nuisance"] == {}
    rig.nuisance = {}
    res = run_benchmark(rig, ["reasoner"], seeds=1, budget=10, iterations=2, noise="keypoint", progress=False)
    assert "latency" in res["per_seed"][0]["methods"]["reasoner"]["nuisance"]


def _finger_with(model_error, seed=0):
    """Calibrate the finger (reasoner, budget 40) against a real side with an error no parameter covers."""
    from dataclasses import replace

    import mujoco
    import numpy as np

    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth
    from vid2sid_ros.sim.registry import make_rig as make_registered

    rig = make_registered("finger")
    real_twin = rig.make_twin()
    if model_error == "mass":  # the middle link 20 % heavier (mass and inertia)
        mass, inertia = real_twin.model.body_mass[2], real_twin.model.body_inertia[2].copy()
        set_parameters = real_twin.set_parameters

        def heavier(values):
            set_parameters(values)
            real_twin.model.body_mass[2], real_twin.model.body_inertia[2] = 1.2 * mass, 1.2 * inertia
            mujoco.mj_setConst(real_twin.model, mujoco.MjData(real_twin.model))
        real_twin.set_parameters = heavier
    else:  # a 0.15 dead-zone in the tendon drive (commands 0.1 .. 0.4)
        rollout = real_twin.rollout

        def dead_zone(exc, **kw):
            v = np.asarray(exc.values, float)
            return rollout(replace(exc, values=np.sign(v) * np.maximum(np.abs(v) - 0.15, 0.0)), **kw)
        real_twin.rollout = dead_zone
    real = make_sim2sim_trial(rig, draw_ground_truth(rig.parameters, seed), seed=seed, noise="keypoint",
                              keypoint_sigma_px=0.3, twin=real_twin)
    cfg = CalibrationConfig(iterations=10, rollout_budget=40, seed=seed, identifiability=False,
                            final_identifiability=False)
    return run_calibration(rig, real, make_proposer("reasoner"), cfg).diagnosis


def test_a_heavier_middle_link_on_the_finger_is_named_not_blamed_on_the_armature():
    # was: "joint_armature is probably wrong ... points to 0.000367" in 5/5 seeds, and freeing it hid the error;
    # then: tied with the armature and the link masses, because the tie bound was 10 % of the best cause's
    # reduction; on refined refits the middle link's mass explains the residual by many noise variances more
    d = _finger_with("mass")
    assert d["verdict"] == "named", d["text"]
    rec = d["recommendation"]
    assert rec["cause"] == "mass of body 'middle' (mass and inertia together)", d["text"]
    assert rec["held_out"]["improved"], d["text"]
    size = d["findings"][0]["evidence"]  # the size found is the injected +20 %
    assert "+0.2 relative" in d["text"] and size["cause"] == rec["cause"]
    assert "noise variances larger (the likelihood ratio)" in d["text"]


def test_a_drive_dead_zone_on_the_finger_is_an_actuator_error_not_the_armature():
    # was: named "joint_armature" in 4/5 seeds
    d = _finger_with("deadzone")
    warn = [f for f in d["findings"] if f["severity"] == "warning"]
    assert warn and warn[0]["kind"] == "actuator" and d["recommendation"] is None, d["text"]
    members = {c["cause"] for c in warn[0]["evidence"]["causes"]}
    assert members == {"actuator 'flexor_motor' dead-zone", "actuator 'flexor_motor' bias"}  # one effect here
    assert "frozen" not in d["kinds"]
