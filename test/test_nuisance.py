"""Measurement nuisances: latency (free, sub-frame, either sign, no extra rollout), marker offsets, switches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vid2sid_ros.benchmark.misspecification import MisspecificationError, parse_misspecify
from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, CalibrationError, run_calibration
from vid2sid_ros.calibration.nuisance import (NuisanceConfigError, add_measurement_nuisances, parse_nuisance_config,
                                              shift_trajectory)
from vid2sid_ros.calibration.objective import TrialObjective
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.core.trajectory import Trajectory
from vid2sid_ros.core.trial import RealTrial
from vid2sid_ros.sim.toy import make_rig

FAST = dict(identifiability=False, final_identifiability=False)
TRUTH = {"stiffness": 0.7, "damping": 0.01, "gain": 0.4}


def _sine(rate=30.0, T=90, f=2.0, gaps=()):
    t = (np.arange(T) + 1) / rate
    kp = np.stack([100 + 20 * np.sin(2 * np.pi * f * t), 50 + 10 * np.cos(2 * np.pi * f * t)], axis=1)[:, None, :]
    valid = np.ones((T, 1), bool)
    valid[list(gaps), 0] = False
    return Trajectory(t, kp, valid, ("tip",)), t


@pytest.mark.parametrize("delay_frames", [0.37, -0.62, 1.4])
def test_shift_is_a_sub_frame_delay_of_either_sign(delay_frames):
    traj, t = _sine()
    d = delay_frames / 30.0
    out = shift_trajectory(traj, d)
    inner = (t - d > t[0]) & (t - d < t[-1])
    want = np.stack([100 + 20 * np.sin(2 * np.pi * 2 * (t - d)), 50 + 10 * np.cos(2 * np.pi * 2 * (t - d))], axis=1)
    err = np.linalg.norm(out.keypoints[inner, 0] - want[inner], axis=1)
    assert err.max() < 0.05  # cubic spline: a 2 Hz, 20 px swing at 30 fps, far below a pixel
    assert np.array_equal(out.steps, traj.steps) and np.array_equal(out.time, traj.time)
    assert shift_trajectory(traj, 0.0) is traj


def test_shift_across_a_gap_is_linear_and_invalid_next_to_it():
    traj, t = _sine(gaps=(40,))
    out = shift_trajectory(traj, 0.5 / 30.0)
    assert not out.valid[40, 0] and not out.valid[41, 0]  # both samples interpolate from frame 40
    assert out.valid[39, 0] and out.valid[42, 0]
    assert out.keypoints[42, 0, 0] == pytest.approx(0.5 * (traj.keypoints[41, 0, 0] + traj.keypoints[42, 0, 0]))


def test_shift_of_several_keypoints_is_each_keypoints_own_spline():
    """The fully valid keypoints share one spline call: the values are those of one spline per keypoint, to the
    bit, and a keypoint with a gap between them is still resampled linearly."""
    from scipy.interpolate import CubicSpline

    rng = np.random.default_rng(3)
    T, K, d = 120, 5, 0.37 / 30.0
    t = np.cumsum(rng.uniform(0.02, 0.05, T))
    kp = rng.normal(100.0, 30.0, (T, K, 2))
    valid = np.ones((T, K), bool)
    valid[50, 2] = False  # keypoint 2 has a gap: linear
    out = shift_trajectory(Trajectory(t, kp, valid, tuple(f"k{k}" for k in range(K))), d)
    tq = np.clip(t - d, t[0], t[-1])
    for k in (0, 1, 3, 4):
        assert np.array_equal(out.keypoints[:, k], CubicSpline(t, kp[:, k], axis=0)(tq))
        assert out.valid[:, k].all()
    assert not out.valid[50, 2] and not out.valid[51, 2] and out.valid[49, 2]
    i = 20
    w = (tq[i] - t[i - 1]) / (t[i] - t[i - 1])  # tq[i] lies between frames i-1 and i
    assert out.keypoints[i, 2] == pytest.approx((1 - w) * kp[i - 1, 2] + w * kp[i, 2])


def test_latency_only_evaluations_cost_no_rollout():
    rig = make_rig()
    real = make_sim2sim_trial(rig, TRUTH, seed=1, noise="none")
    params = add_measurement_nuisances(rig.parameters, None, keypoints=("mid", "tip"),
                                       excitations=real.train_excitations, real_trial=False)
    obj = TrialObjective(rig.make_twin(), real.train_excitations, real.train, params)
    a, _ = obj.evaluate(TRUTH)
    b, _ = obj.evaluate({**TRUTH, "latency": 0.01})
    c, _ = obj.evaluate({**TRUTH, "stiffness": 0.71, "latency": 0.01})
    assert (a.rollouts, b.rollouts, c.rollouts) == (2, 0, 2)
    assert a.error_px < 1e-9 < b.error_px  # the latency moved the trajectory the error is computed on


def test_latency_misspecification_is_identified_with_the_physics():
    rig = make_rig()
    real = make_sim2sim_trial(rig, TRUTH, seed=1, noise="keypoint", keypoint_sigma_px=0.2, misspecify="latency=0.023")
    realised = real.meta["misspecification"]["applied"]["latency"]["realised_s"]
    assert realised == pytest.approx(0.0233, abs=2e-3)
    cfg = CalibrationConfig(iterations=8, rollout_budget=60, **FAST)
    free = run_calibration(rig, real, make_proposer("reasoner"), cfg)
    fixed = run_calibration(rig, real, make_proposer("reasoner"),
                            CalibrationConfig(iterations=8, rollout_budget=60, nuisance={"latency": False}, **FAST))
    assert abs(free.values["latency"] - realised) * 30.0 < 0.2  # within 0.2 frame
    rel = lambda r: np.mean([abs(r.values[n] - v) / v for n, v in TRUTH.items()])  # noqa: E731
    assert rel(free) < 0.03 and rel(free) < 0.5 * rel(fixed)
    assert "latency" not in fixed.values


def test_marker_offsets_are_on_for_real_trials_and_recovered():
    rig = make_rig()
    sim = make_sim2sim_trial(rig, TRUTH, seed=2, noise="keypoint", keypoint_sigma_px=0.2)
    shifted = []
    for tr in sim.train + sim.holdout:
        kp = tr.keypoints.copy()
        kp[:, tr.names.index("tip"), 0] += 2.5  # the tip marker sits 2.5 px right of its model site
        shifted.append(Trajectory(tr.time, kp, tr.valid, tr.names, "real", tr.trial_id, tr.steps))
    n = len(sim.train)
    real = RealTrial(shifted[:n], sim.train_excitations, shifted[n:], sim.holdout_excitations, source="recorded")
    assert real.truth is None  # a recorded trial: marker offsets default on
    res = run_calibration(rig, real, make_proposer("reasoner"), CalibrationConfig(iterations=8, rollout_budget=80,
                                                                                  **FAST))
    assert res.values["marker_offset.tip.x"] == pytest.approx(2.5, abs=0.3)
    assert abs(res.values["marker_offset.mid.y"]) < 0.3
    assert res.values["stiffness"] == pytest.approx(TRUTH["stiffness"], rel=0.03)


def test_defaults_and_switches():
    rig = make_rig()
    excs = rig.excitations["train"]
    p = rig.parameters
    assert "latency" in add_measurement_nuisances(p, None, keypoints=("tip",), excitations=excs,
                                                  real_trial=False).names
    still = [Excitation("rest", 30.0, np.full((30, 1), 0.2), ("motor",))]  # nothing commanded: a free swing
    assert "latency" not in add_measurement_nuisances(p, None, keypoints=("tip",), excitations=still,
                                                      real_trial=False).names
    sim_side = add_measurement_nuisances(p, None, keypoints=("tip",), excitations=excs, real_trial=False)
    assert not any(n.startswith("marker_offset") for n in sim_side.names)
    on = add_measurement_nuisances(p, {"marker_offsets": True, "latency": {"bounds": [-0.01, 0.02]}},
                                   keypoints=("tip",), excitations=excs, real_trial=False)
    assert {"marker_offset.tip.x", "marker_offset.tip.y"} <= set(on.names)
    assert (on["latency"].lower, on["latency"].upper, on["latency"].kind) == (-0.01, 0.02, "nuisance")
    off = add_measurement_nuisances(p, {"latency": {"enabled": False}}, keypoints=("tip",), excitations=excs,
                                    real_trial=True)
    assert "latency" not in off.names and "marker_offset.tip.x" in off.names


def test_marker_offsets_stay_on_for_a_recorded_trial_with_a_free_initial_state():
    """A free per-trial initial state (init.qpos, kind nuisance) does not model the camera: a recorded
    trial keeps its marker offsets; a free camera.* nuisance (the pendulum's pixel scale) turns them off."""
    from dataclasses import replace as dc_replace
    from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec
    rig = make_rig()
    excs = rig.excitations["train"]
    init = ParameterSpec("t0_qpos_hinge", "rad", -1.0, 1.0, 0.0, "initial angle", "init.qpos[hinge]@t0",
                         "linear", "nuisance")
    p = dc_replace(rig.parameters, specs=tuple(rig.parameters.specs) + (init,))
    assert isinstance(p, ParameterSet)
    real = add_measurement_nuisances(p, None, keypoints=("tip",), excitations=excs, real_trial=True)
    assert {"marker_offset.tip.x", "marker_offset.tip.y"} <= set(real.names)
    cam = ParameterSpec("px_per_m", "px/m", 100.0, 900.0, 400.0, "scale", "camera.px_per_m", "linear", "nuisance")
    p_cam = dc_replace(p, specs=tuple(p.specs) + (cam,))
    own = add_measurement_nuisances(p_cam, None, keypoints=("tip",), excitations=excs, real_trial=True)
    assert not any(n.startswith("marker_offset") for n in own.names)


def test_describe_free_counts_physics_and_nuisances_and_groups_the_marker_offsets():
    from dataclasses import replace as dc_replace
    from vid2sid_ros.calibration.nuisance import describe_free
    from vid2sid_ros.core.parameters import ParameterSpec
    rig = make_rig()
    init = ParameterSpec("t0_qpos_hinge", "rad", -1.0, 1.0, 0.0, "initial angle", "init.qpos[hinge]@t0",
                         "linear", "nuisance")
    p = dc_replace(rig.parameters, specs=tuple(rig.parameters.specs) + (init,))
    full = add_measurement_nuisances(p, None, keypoints=("tip", "mid"), excitations=rig.excitations["train"],
                                     real_trial=True)
    assert describe_free(full) == ("9 free: 3 physics (stiffness, damping, gain) + 6 nuisance (t0_qpos_hinge, "
                                   "latency, 4 marker offsets)")
    assert describe_free(rig.parameters) == "3 physics (stiffness, damping, gain)"  # frozen pixel_scale not counted


@pytest.mark.parametrize("block, message", [
    ({"latncy": True}, "unknown key(s) ['latncy']"),
    ({"latency": {"bounds": [0.01, 0.05]}}, "nuisance.latency.bounds: expected [lower, upper] with lower < 0 < upper"),
    ({"latency": {"enabled": "yes"}}, "nuisance.latency.enabled: expected true or false"),
    ({"marker_offsets": 3}, "nuisance.marker_offsets: expected true/false or a mapping"),
])
def test_bad_nuisance_blocks_say_which_key(block, message):
    with pytest.raises(NuisanceConfigError) as err:
        parse_nuisance_config(block, source="rig.yaml")
    assert message in str(err.value) and str(err.value).startswith("rig.yaml") and "\n" not in str(err.value)
    with pytest.raises(CalibrationError, match=r"nuisance"):
        CalibrationConfig(nuisance=block)


def test_misspecify_text():
    assert parse_misspecify("latency=0.03, frozen") == {"latency": 0.03, "frozen": 0.3}
    for bad, msg in (("lag=1", "unknown kind 'lag'"), ("latency=abc", "expected a number"),
                     ("drops=0.7", "fraction in [0, 0.5)"), ("camera,camera", "given twice")):
        with pytest.raises(MisspecificationError, match=msg.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
            parse_misspecify(bad)
    assert math.isfinite(parse_misspecify("latency=-0.01")["latency"])


def test_correlation_time_of_white_and_of_correlated_residuals():
    from vid2sid_ros.calibration.identifiability import correlation_time

    rng = np.random.default_rng(0)
    T = 400
    t = (np.arange(T) + 1) / 30.0
    base = np.zeros((T, 1, 2))
    white = base + rng.normal(0, 0.3, size=base.shape)
    ar = np.zeros_like(base)
    for i in range(1, T):  # AR(1), phi = 0.8: tau = (1 + phi) / (1 - phi) = 9 (window-truncated a little)
        ar[i] = 0.8 * ar[i - 1] + rng.normal(0, 0.3, size=(1, 2))
    mk = lambda kp: Trajectory(t, kp, np.ones((T, 1), bool), ("tip",))  # noqa: E731
    assert correlation_time([mk(white)], [mk(base)]) < 1.3
    tau = correlation_time([mk(ar)], [mk(base)])
    assert 5.0 < tau < 10.0


def _yaml_doc(path):
    import yaml

    return yaml.safe_load(path.read_text())


def test_the_rig_configs_nuisance_block_reaches_calibrate_and_benchmark(tmp_path, capsys):
    """Regression: `vid2sid calibrate RIG.yaml` and `benchmark --rig RIG.yaml` ignored the config's nuisance: block."""
    from vid2sid_ros.cli import main

    head = ("rig: toy\nreal: {sim2sim: {seed: 1, noise: keypoint}}\n"
            "calibration: {identifiability: false, final_identifiability: false}\n")
    (tmp_path / "off.yaml").write_text(head + "nuisance: {latency: {enabled: false}}\n")
    (tmp_path / "narrow.yaml").write_text(head + "nuisance: {latency: {bounds: [-0.02, 0.03]}}\n")
    (tmp_path / "bad.yaml").write_text(head + "nuisance: {latency: {enabled: maybe}}\n")
    short = ["--iterations", "1", "--budget", "12"]
    capsys.readouterr()
    assert main(["calibrate", str(tmp_path / "off.yaml"), *short, "--out", str(tmp_path / "off")]) == 0
    assert "nuisance" not in _yaml_doc(tmp_path / "off" / "result.yaml")
    assert "calibrating rig 'toy' (3 physics (stiffness, damping, gain)) with" in capsys.readouterr().out
    assert main(["calibrate", str(tmp_path / "narrow.yaml"), *short, "--out", str(tmp_path / "narrow")]) == 0
    # the header names what is fitted, the latency too (was: the rig's physics only)
    assert "(4 free: 3 physics (stiffness, damping, gain) + 1 nuisance (latency))" in capsys.readouterr().out
    lat = _yaml_doc(tmp_path / "narrow" / "result.yaml")["nuisance"]["latency"]
    assert (lat["lower"], lat["upper"], lat["unit"]) == (-0.02, 0.03, "s")  # the config's bounds, not the default
    capsys.readouterr()
    assert main(["calibrate", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"vid2sid calibrate: {tmp_path / 'bad.yaml'}:nuisance.latency.enabled: expected true or false, "
                   "got 'maybe' (string)")  # the config's schema, at load
    assert not (tmp_path / "bad").exists()
    assert main(["benchmark", "sim2sim", "--rig", str(tmp_path / "off.yaml"), "--methods", "reasoner", "--seeds", "1",
                 "--budget", "12", "--iterations", "1", "--noise", "keypoint", "--no-progress",
                 "--out", str(tmp_path / "bench")]) == 0
    assert "nuisance" not in _yaml_doc(tmp_path / "bench" / "seed_0" / "reasoner" / "result.yaml")


def test_block_sandwich_widens_intervals_when_errors_grow_with_the_sensitivity():
    from vid2sid_ros.calibration.identifiability import analyse_jacobian
    from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec

    params = ParameterSet((ParameterSpec("k", "N/m", 0.0, 2.0, 1.0),))
    rng = np.random.default_rng(3)
    M = 600
    J = np.concatenate([np.full(M // 2, 0.1), np.full(M // 2, 10.0)])[:, None]  # slow half, fast half
    r = rng.normal(0.0, 1.0, M) * np.where(J[:, 0] > 1, 3.0, 0.1)  # errors large exactly where J is large
    r -= J[:, 0] * (J[:, 0] @ r) / (J[:, 0] @ J[:, 0])  # at the optimum: no remaining Gauss-Newton step
    plain = analyse_jacobian(J, params, {"k": 1.0}, residuals=r, warn=False)
    blocks = analyse_jacobian(J, params, {"k": 1.0}, residuals=r, warn=False, clusters=np.arange(M) // 4)
    assert blocks.uncertainty["k"] > 1.3 * plain.uncertainty["k"]
    homo = rng.normal(0.0, 1.0, M)  # homoscedastic, white: both agree (the sandwich never narrows it)
    homo -= J[:, 0] * (J[:, 0] @ homo) / (J[:, 0] @ J[:, 0])
    a = analyse_jacobian(J, params, {"k": 1.0}, residuals=homo, warn=False)
    b = analyse_jacobian(J, params, {"k": 1.0}, residuals=homo, warn=False, clusters=np.arange(M) // 4)
    assert a.uncertainty["k"] <= b.uncertainty["k"] < 1.3 * a.uncertainty["k"]


def test_intervals_are_centred_on_the_remaining_gauss_newton_step():
    from vid2sid_ros.calibration.identifiability import Z95, analyse_jacobian
    from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec

    params = ParameterSet((ParameterSpec("k", "N/m", 0.0, 2.0, 1.0),))
    rng = np.random.default_rng(4)
    J = rng.normal(0.0, 5.0, size=(400, 1))
    noise = rng.normal(0.0, 0.1, 400)
    at_optimum = noise - J[:, 0] * (J[:, 0] @ noise) / (J[:, 0] @ J[:, 0])  # orthogonal to J: step 0
    away = at_optimum + J[:, 0] * 0.05  # stopped 0.05 (normalised) short of the optimum
    a = analyse_jacobian(J, params, {"k": 1.0}, residuals=at_optimum, warn=False)
    b = analyse_jacobian(J, params, {"k": 1.0}, residuals=away, warn=False)
    assert a.centre["k"] == pytest.approx(1.0, abs=1e-9) and b.centre["k"] == pytest.approx(0.9, abs=1e-9)
    lo, hi = b.interval["k"]
    # 0.05 normalised = 0.1 N/m on a [0, 2] range: the interval about 0.9 would leave the reported 1.0 outside;
    # the stated one is extended to it (the note names the optimum)
    assert lo < 0.9 < hi == pytest.approx(1.0) and "0.9" in b.interval_note["k"]
    assert b.interval_raw["k"][1] == pytest.approx(a.interval_raw["k"][1], rel=1e-6)  # same noise, same width
    assert b.uncertainty["k"] == pytest.approx((1.0 - lo) / Z95) and b.uncertainty["k"] > 0.1 / Z95 > a.uncertainty["k"]
