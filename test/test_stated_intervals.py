"""A stated interval holds its own value, and is never zero-width on a bound.

Each pattern below was seen in a run (intervals that excluded their value or collapsed onto a
bound) and is rebuilt at unit level; the invariant is then checked over real identifiability
checks of the toy rig at several points (interior, at a bound, off the optimum).
"""

import numpy as np
import pytest

from vid2sid_ros.calibration.identifiability import Z95, analyse_jacobian, check_identifiability, stated_interval
from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec


def _spec(lower, upper, nominal, scale="linear", name="p"):
    return ParameterSpec(name, "1", lower, upper, nominal, "test parameter", f"x[{name}]", scale, "physics")


def _ok(lo, hi, v, kind):
    assert lo <= v <= hi, (lo, v, hi)
    assert hi > lo or kind.startswith("zero width"), (lo, hi, kind)


def test_a_centre_far_beyond_the_lower_bound_no_longer_collapses_onto_it():
    """Was: `length = 0.409 m 95 % [0.2, 0.2] (the identified value lies outside it)`."""
    s = _spec(0.2, 1.2, 0.5)
    lo, hi, kind, note = stated_interval(s, 0.409, centre_u=-3.0, half_u=0.1)
    _ok(lo, hi, 0.409, kind)
    assert lo == pytest.approx(0.2) and kind == "one-sided (lower bound)" and "extended" in note


def test_a_value_below_its_own_bound_is_inside_its_interval():
    """Was: `damping 1.5e-4, [0.01, 0.01]` (log scale)."""
    s = _spec(0.01, 1.0, 0.1, scale="log")
    lo, hi, kind, note = stated_interval(s, 1.5e-4, centre_u=-0.8, half_u=0.05)
    _ok(lo, hi, 1.5e-4, kind)


def test_drag_at_zero_width_on_the_bound():
    """Was: `drag 0.59, [0, 0]`."""
    s = _spec(0.0, 2.0, 1.0)
    lo, hi, kind, _ = stated_interval(s, 0.59, centre_u=-0.4, half_u=0.02)
    _ok(lo, hi, 0.59, kind)
    assert lo == 0.0 and kind == "one-sided (lower bound)"


def test_a_bias_corrected_centre_away_from_the_value_is_reported_with_it():
    """Was (mocap): `damping 0.130, [0.154, 0.166]`: centred on the bias-corrected optimum, value outside."""
    s = _spec(0.0, 1.0, 0.5)
    lo, hi, kind, note = stated_interval(s, 0.130, centre_u=0.160, half_u=0.006, biased=True)
    _ok(lo, hi, 0.130, kind)
    assert hi == pytest.approx(0.166) and lo == pytest.approx(0.130)
    assert "tracker's bias" in note and "0.16" in note and kind == "two-sided"


def test_a_value_on_the_bound_with_the_optimum_beyond_gets_the_truncated_one_sided_interval():
    s = _spec(0.0, 1.0, 0.5)
    sigma = 0.05
    lo, hi, kind, note = stated_interval(s, 0.0, centre_u=-0.1, half_u=Z95 * sigma)
    assert lo == 0.0 and hi > 0.0 and kind == "one-sided (lower bound)" and "truncated" in note
    # 95 % of the Gaussian N(-0.1, 0.05) truncated to [0, 1] lies in [0, hi]
    from scipy.stats import norm

    cdf = norm(-0.1, sigma).cdf
    mass = (cdf(hi) - cdf(0.0)) / (cdf(1.0) - cdf(0.0))
    assert mass == pytest.approx(0.95, abs=1e-6)
    # far beyond (exponential tail): still a positive width; upper bound mirrored
    lo, hi, kind, _ = stated_interval(s, 1.0, centre_u=3.0, half_u=Z95 * 0.01)
    assert hi == 1.0 and 0.99 < lo < 1.0 and kind == "one-sided (upper bound)"


def test_an_interval_wider_than_the_range_is_not_identified():
    s = _spec(0.0, 1.0, 0.5)
    assert stated_interval(s, 0.3, centre_u=0.5, half_u=0.9)[2:] == (
        "not identified", "the 95 % interval spans the whole search range: the data do not determine it")
    assert stated_interval(s, 0.3, centre_u=0.5, half_u=float("inf"))[:2] == (0.0, 1.0)


def test_analyse_jacobian_at_a_bound_states_a_one_sided_interval():
    """A linear problem whose optimum lies below parameter a's lower bound, analysed at that bound."""
    rng = np.random.default_rng(1)
    params = ParameterSet([_spec(0.0, 1.0, 0.5, name="a"), _spec(0.0, 1.0, 0.5, name="b")])
    J = rng.normal(size=(300, 2))
    u_star = np.array([-0.3, 0.6])
    u = np.array([0.0, 0.6])
    r = J @ (u - u_star) + 0.01 * rng.normal(size=300)
    rep = analyse_jacobian(J, params, {"a": 0.0, "b": 0.6}, residuals=r, warn=False)
    lo, hi = rep.interval["a"]
    assert lo == 0.0 < hi and rep.interval_kind["a"] == "one-sided (lower bound)"
    assert rep.interval_kind["b"] == "two-sided" and rep.interval["b"][0] < 0.6 < rep.interval["b"][1]
    d = rep.to_dict()
    assert d["interval_kind"]["a"] == "one-sided (lower bound)" and "a" in d["interval_note"]


@pytest.mark.parametrize("where", ["truth", "off", "at_bound"])
def test_every_stated_interval_holds_its_value(where):
    """The invariant over real checks of the toy rig: value inside, width > 0 or flagged."""
    from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
    from vid2sid_ros.calibration.objective import TrialObjective
    from vid2sid_ros.sim.toy import make_rig

    rig = make_rig()
    truth = {"stiffness": 0.25, "damping": 0.012, "gain": 0.14}
    real = make_sim2sim_trial(rig, truth, seed=4, noise="keypoint", keypoint_sigma_px=0.3)
    params = rig.parameters
    point = {"truth": truth, "off": {"stiffness": 0.3, "damping": 0.02, "gain": 0.15},
             "at_bound": {"stiffness": params["stiffness"].lower, "damping": 0.012, "gain": 0.14}}[where]
    obj = TrialObjective(rig.make_twin(), real.train_excitations, real.train, params)
    rep = check_identifiability(obj, params.complete(point), warn=False)
    assert rep.interval
    for name, (lo, hi) in rep.interval.items():
        _ok(lo, hi, rep.point[name], rep.interval_kind[name])
