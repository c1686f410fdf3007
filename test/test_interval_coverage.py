"""Intervals that hold: coverage of the stated 95 % interval on a linear model whose truth is known,
and the tracker-bias term (the twin filmed like the robot) wired through the identifiability check."""

from __future__ import annotations

import numpy as np
import pytest

from vid2sid_ros.calibration.identifiability import (Z95, analyse_jacobian, check_identifiability, correlation_time,
                                                     residual_blocks, residual_correlation_time)
from vid2sid_ros.calibration.objective import TrialObjective, residual_vector
from vid2sid_ros.calibration.tracker_bias import TwinCamera, add_bias, twin_camera_for, twin_tracker_bias
from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec
from vid2sid_ros.core.trajectory import Trajectory

T = 120  # frames per trial of the linear model


def _linear_problem(rng: np.random.Generator):
    """Two keypoints, x and y, over T frames; two parameters (one linear, one log) entering linearly
    in normalised coordinates: y = y0 + J u. Returns (params, J (M, 2), y0 (T, 2, 2))."""
    params = ParameterSet((ParameterSpec("k", "N/m", 0.5, 2.5, 1.0),
                           ParameterSpec("c", "N*s/m", 0.01, 1.0, 0.1, scale="log")))
    t = np.arange(T) / 30.0
    basis_k = np.stack([np.sin(2 * np.pi * 0.7 * t), np.cos(2 * np.pi * 1.1 * t)], -1)  # (T, 2)
    basis_c = np.stack([np.exp(-t) * np.cos(2 * np.pi * 1.9 * t), np.sin(2 * np.pi * 0.3 * t)], -1)
    Jk = np.stack([8.0 * basis_k, 5.0 * basis_k[:, ::-1]], 1)  # (T, K=2, D=2) px per unit move
    Jc = np.stack([6.0 * basis_c, 9.0 * basis_c[:, ::-1]], 1)
    return params, np.stack([Jk.reshape(-1), Jc.reshape(-1)], 1), np.zeros((T, 2, 2))


def _traj(kp: np.ndarray, source: str) -> Trajectory:
    return Trajectory(np.arange(1, T + 1) / 30.0, kp, np.ones(kp.shape[:2], bool), ("a", "b"), source, "lin")


def _ar1(rng: np.random.Generator, shape, phi: float, sigma: float) -> np.ndarray:
    """AR(1) noise along the first axis (correlated over frames), stationary std ``sigma``."""
    e = rng.normal(0.0, sigma * np.sqrt(1 - phi ** 2), size=shape)
    out = np.empty(shape)
    out[0] = rng.normal(0.0, sigma, size=shape[1:])
    for i in range(1, shape[0]):
        out[i] = phi * out[i - 1] + e[i]
    return out


def _coverage(trials: int, *, film_twin: bool, centre: bool = True, stop_short: float = 0.0) -> np.ndarray:
    """Fraction of ``trials`` in which each parameter's stated 95 % interval holds the truth.

    The robot is measured with a systematic, pose-dependent tracker bias ``b`` plus AR(1) noise;
    the twin is projected (no bias). ``film_twin`` measures the bias on the twin the way
    :mod:`~vid2sid_ros.calibration.tracker_bias` does: the same bias plus a noise draw of its own.
    The "optimiser" stops at the biased least-squares optimum, or ``stop_short`` (normalised)
    before it.
    """
    rng = np.random.default_rng(11)
    params, J, y0 = _linear_problem(rng)
    free = params.free
    hits = np.zeros(2)
    # a tracker bias the parameters can absorb (along J: a scale error, like motion blur on a swing) plus a
    # pose-dependent pattern they cannot
    bias = ((J @ np.array([0.03, -0.03])).reshape(T, 2, 2)
            + 0.25 * np.sign(np.sin(np.arange(T) * 0.21))[:, None, None] * np.array([[1.0, -0.5], [0.3, 0.8]]))
    for _ in range(trials):
        u_true = rng.uniform(0.2, 0.8, 2)
        truth = {s.name: s.from_unit(u) for s, u in zip(free, u_true)}
        real = y0 + (J @ u_true).reshape(T, 2, 2) + bias + _ar1(rng, (T, 2, 2), 0.6, 0.3)
        yr = real.reshape(-1)
        u_hat = np.linalg.lstsq(J, yr - y0.reshape(-1), rcond=None)[0] + stop_short
        sim = _traj(y0 + (J @ u_hat).reshape(T, 2, 2), "sim")
        sims = [sim]
        if film_twin:
            filmed = _traj(bias + 0.3 * rng.normal(size=(T, 2, 2)), "sim")
            sims = add_bias([sim], [filmed])
        reals = [_traj(real, "real")]
        r = residual_vector(sims, reals)
        if not centre:  # what an interval centred on the reported point would say: no remaining step
            r = r - J @ np.linalg.lstsq(J, r, rcond=None)[0]
        tau = correlation_time(sims, reals)
        point = {s.name: s.from_unit(u) for s, u in zip(free, u_hat)}
        rep = analyse_jacobian(J, params, point, residuals=r, warn=False,  # as check_identifiability calls it
                               correlation_time_of=lambda v: residual_correlation_time(v, reals),
                               clusters=residual_blocks(reals, max(2, int(np.ceil(2 * tau)))))
        for j, s in enumerate(free):
            lo, hi = rep.interval[s.name]
            hits[j] += lo <= truth[s.name] <= hi
    return hits / trials


def test_stated_95_percent_intervals_hold_on_a_linear_model_with_tracker_bias_and_correlated_noise():
    cov = _coverage(300, film_twin=True)
    assert np.all((cov >= 0.90) & (cov <= 0.99)), cov


def test_without_the_twin_filmed_the_tracker_bias_breaks_coverage():
    cov = _coverage(300, film_twin=False)
    assert cov.min() < 0.6, cov  # the bias moves the estimate by several of its standard deviations


def test_interval_is_centred_on_the_gauss_newton_optimum_not_the_reported_point():
    held = _coverage(200, film_twin=True, stop_short=0.02)
    assert np.all(held >= 0.90), held
    assert _coverage(200, film_twin=True, stop_short=0.02, centre=False).min() < 0.5


def test_interval_maps_through_the_log_scale_and_std_holds_it_symmetrically():
    params = ParameterSet((ParameterSpec("c", "N*s/m", 0.01, 1.0, 0.1, scale="log"),))
    rng = np.random.default_rng(2)
    J = rng.normal(0.0, 4.0, size=(300, 1))
    noise = rng.normal(0.0, 0.5, 300)
    r = noise - J[:, 0] * (J[:, 0] @ noise) / (J[:, 0] @ J[:, 0]) + J[:, 0] * 0.03  # 0.03 short of the optimum
    rep = analyse_jacobian(J, params, {"c": 0.1}, residuals=r, warn=False)
    lo, hi = rep.interval["c"]
    centre = 0.01 * 100.0 ** (params["c"].to_unit(0.1) - 0.03)
    assert rep.centre["c"] == pytest.approx(centre, rel=1e-6)
    # the Gauss-Newton interval about the optimum (0.03 normalised lower) would leave the reported 0.1 outside:
    # the stated interval is extended to it, and its note says where the optimum is
    assert lo < centre < hi and hi == pytest.approx(0.1)
    assert "extended to the identified value" in rep.interval_note["c"] and rep.interval_kind["c"] == "two-sided"
    c_u, h_u = rep.interval_raw["c"]
    spec = params["c"]
    assert lo == pytest.approx(spec.from_unit(c_u - h_u))
    assert np.sqrt(spec.from_unit(c_u - h_u) * spec.from_unit(c_u + h_u)) == pytest.approx(centre, rel=1e-9)  # log
    assert rep.uncertainty["c"] == pytest.approx(max(hi - 0.1, 0.1 - lo) / Z95)
    d = rep.to_dict()
    assert d["interval"]["c"] == [lo, hi] and d["centre"]["c"] == rep.centre["c"]


def _toy(noise: str):
    from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
    from vid2sid_ros.sim.toy import make_rig

    rig = make_rig(("stiffness", "damping", "gain"))
    twin = rig.make_twin()
    truth = rig.parameters.nominal()
    real = make_sim2sim_trial(rig, truth, seed=3, noise=noise, twin=twin)
    return rig, twin, real, truth


def test_twin_filmed_through_the_camera_model_and_the_tracker_adds_its_bias():
    rig, twin, real, truth = _toy("camera")
    camera, why = twin_camera_for(rig, real)
    assert camera is not None and why == "" and camera.sensor_model is not None
    bias, spent = twin_tracker_bias(twin, real.train_excitations, truth, camera)
    assert spent == len(real.train_excitations) == len(bias)
    b = np.concatenate([t.keypoints[t.valid] for t in bias])
    assert 0.0 < np.sqrt(np.mean(b ** 2)) < 1.5  # sub-pixel-ish tracker error, not zero, not a failure
    obj = TrialObjective(twin, real.train_excitations, real.train, rig.parameters)
    plain = check_identifiability(obj, truth, warn=False)
    filmed = check_identifiability(obj, truth, warn=False, twin_camera=camera)
    assert filmed.rollouts == plain.rollouts + len(real.train_excitations)
    refined = check_identifiability(obj, truth, warn=False, twin_camera=camera, refine=2)
    assert refined.rollouts in (filmed.rollouts + 2, filmed.rollouts + 4)  # one evaluation per chord step taken
    assert refined.point == filmed.point and refined.interval != filmed.interval
    mb = filmed.measurement_bias
    assert mb["applied"] and mb["rollouts"] == 2 and mb["rms_px"] == pytest.approx(np.sqrt(np.mean(b ** 2)))
    assert filmed.centre != plain.centre and set(filmed.interval) == set(rig.parameters.free_names)
    assert plain.measurement_bias == {}


def test_no_bias_term_without_a_tracker_in_the_loop_and_a_twin_without_frames_is_reported():
    rig, twin, real, truth = _toy("keypoint")
    assert twin_camera_for(rig, real) == (None, "the real keypoints were not tracked (sim2sim noise 'keypoint')")
    assert twin_camera_for(None, real)[0] is None
    real.meta["noise"] = None  # a real video: only when asked for, and then with clean renders
    assert twin_camera_for(rig, real)[0] is None
    cam, _ = twin_camera_for(rig, real, real_video=True)
    assert cam is not None and cam.sensor_model is None

    class Blind:  # a twin that cannot render
        def __getattr__(self, name):
            return getattr(twin, name)

        def rollout(self, exc, render=False):
            return twin.rollout(exc, render=False)

    obj = TrialObjective(Blind(), real.train_excitations, real.train, rig.parameters)
    rep = check_identifiability(obj, truth, warn=False, twin_camera=cam)
    assert rep.measurement_bias["applied"] is False
    assert "returned no frames" in rep.measurement_bias["reason"] and rep.interval  # the interval without it


def test_calibration_reports_the_tracker_bias_and_the_switch_is_validated(tmp_path):
    from vid2sid_ros.calibration.loop import CalibrationConfig, CalibrationError, run_calibration
    from vid2sid_ros.calibration.proposers import make_proposer

    rig, _, real, _ = _toy("camera")
    cfg = dict(iterations=1, rollout_budget=6, identifiability=False, diagnosis=False)
    on = run_calibration(rig, real, make_proposer("reasoner"), CalibrationConfig(**cfg), tmp_path / "on")
    assert on.final_identifiability.measurement_bias["applied"] is True
    off = run_calibration(rig, real, make_proposer("reasoner"), CalibrationConfig(**cfg, tracker_bias=False),
                          tmp_path / "off")
    assert off.final_identifiability.measurement_bias == {"applied": False,
                                                          "reason": "calibration.tracker_bias is false"}
    # the proposer's point never depends on the renders; the estimate is that point moved to the least-squares
    # optimum with the tracker's bias modelled (the interval's centre), when that lowers the sum of squares
    corr = on.bias_correction
    assert corr["before"] == off.values and off.bias_correction is None
    assert on.values == (corr["values"] if corr["applied"] else off.values)
    assert corr["applied"] is True and corr["ssr_after"] < corr["ssr_before"]
    assert on.rollouts == off.rollouts
    # the renders (one per trial), the correction's evaluations, and the moved point's own (not cached)
    assert on.diagnostic_rollouts >= off.diagnostic_rollouts + 2 + corr["rollouts"] > off.diagnostic_rollouts + 2
    # the stated interval reaches result.json and the report's parameter rows, labelled for what it is
    from vid2sid_ros.report.insights import parameter_rows
    from vid2sid_ros.report.run import load_run

    rows = {r.name: r for r in parameter_rows(load_run(tmp_path / "on"))}
    for name, (lo, hi) in on.final_identifiability.interval.items():
        assert rows[name].interval == (lo, hi) and "the twin filmed like the robot" in rows[name].interval_method
    assert "tracker bias" not in parameter_rows(load_run(tmp_path / "off"))[0].interval_method
    with pytest.raises(CalibrationError, match=r"^config 'tracker_bias' must be true, false or null, got 'yes'$"):
        CalibrationConfig(tracker_bias="yes")


def _bench_coverage():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "bench_coverage.py"
    spec = importlib.util.spec_from_file_location("bench_coverage", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_coverage_counts_the_stated_interval_and_reads_a_partial_results_file(tmp_path, capsys):
    import json

    bench = _bench_coverage()
    rec = lambda values, interval, std: {"methods": {"reasoner": {  # noqa: E731
        "values": values, "interval": interval, "uncertainty": std, "measurement_bias": {"applied": True}}}}
    per_seed = [  # truth inside the interval but outside value ± 1.96 std; then outside; then no interval
        {"truth": {"k": 1.0}, **rec({"k": 1.2}, {"k": [0.95, 1.25]}, {"k": 0.05})},
        {"truth": {"k": 1.0}, **rec({"k": 1.1}, {"k": [1.05, 1.15]}, {"k": 0.1})},
        {"truth": {"k": 1.0}, **rec({"k": 1.0}, {}, {})},
    ]
    cov = bench.coverage(per_seed, "reasoner", ["k"])
    assert cov["value_outside"] == []
    assert cov["counted"] == {"k": 2} and cov["inside"] == {"k": 1} and cov["inside_symmetric"] == {"k": 1}
    assert cov["coverage"] == 0.5 and cov["bias_applied"] == 3
    assert cov["half_width_rel"]["k"] == pytest.approx(float(np.median([0.15 / 1.2, 0.05 / 1.1])))
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"rig": "toy", "budget_rollouts": 8, "free_parameters": ["k"], "seeds": [0, 1, 2],
                                   "noise": "camera", "per_seed": per_seed,
                                   "methods": {"reasoner": {"mean_rel_param_error": 0.1}}}))
    assert bench.main(["--from-results", str(results)]) == 0
    assert "95 % interval coverage 50.0 % (1/2 parameter-seeds)" in capsys.readouterr().out
    assert json.loads((tmp_path / "coverage.json").read_text())["coverage"] == 0.5
    # a reported value outside its own stated interval is counted and named
    bad = [{"seed": 7, "truth": {"k": 1.0}, **rec({"k": 1.3}, {"k": [0.9, 1.1]}, {"k": 0.2})}]
    assert bench.coverage(bad, "reasoner", ["k"])["value_outside"] == ["seed 7: k = 1.3 outside [0.9, 1.1]"]
    (tmp_path / "bad.json").write_text("{}")
    assert bench.main(["--from-results", str(tmp_path / "bad.json")]) == 2
    assert capsys.readouterr().err.startswith(f"bench_coverage: {tmp_path / 'bad.json'}: not a benchmark results.json")
