"""calibration/objective.py on a twin whose error is known in closed form.

The stand-in twin shifts every image keypoint by ``(a, 0)`` px and every 3-D point by
``(b, 0, 0)`` m from the real trial, so the trajectory MAE is exactly ``|a|`` px (or
``|b|`` m), the residuals are exactly ``a`` (x) and 0 (y), and failures happen on demand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from vid2sid_ros.calibration.objective import (NOISE_UNIT, TrialObjective, measurement_unit, residual_vector,
                                               trajectory_vector)
from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.core.parameters import ParameterSet
from vid2sid_ros.core.trajectory import Trajectory, TrajectoryError
from vid2sid_ros.sim.base import RolloutResult

T, K = 12, 2
SPEC = ParameterSet.from_dict({"parameters": [
    {"name": "a", "unit": "px", "lower": -10.0, "upper": 10.0, "nominal": 2.0},
    {"name": "b", "unit": "m", "lower": -1.0, "upper": 1.0, "nominal": 0.0},
    {"name": "c", "unit": "1", "lower": 0.0, "upper": 1.0, "nominal": 0.5, "frozen": True}]})
BASE = np.stack([np.stack([10.0 + np.arange(T), 20.0 + 2 * np.arange(T)], axis=1)] * K, axis=1)  # (T, K, 2) px
BASE3 = np.concatenate([BASE / 100.0, np.ones((T, K, 1))], axis=2)  # (T, K, 3) m


def _exc(name: str) -> Excitation:
    return Excitation(name, 30.0, np.zeros((T, 1)))


def _real(name: str, *, valid=None, kind="image") -> Trajectory:
    kp = BASE if kind == "image" else BASE3
    v = np.ones((T, K), bool) if valid is None else valid
    return Trajectory(np.arange(1, T + 1) / 30.0, np.where(v[:, :, None], kp, np.nan), v, ("p", "q"), "real", name,
                      kind=kind, frame=None if kind == "image" else "world")


class _Shift:
    """Image keypoints shifted by (a, 0) px, world points by (b, 0, 0) m; failures on request."""

    keypoint_names = ("p", "q")

    def __init__(self, *, refuse=False, raise_on=None, diverge_on=None, lose_q=False):
        self.parameters = SPEC
        self.values: dict[str, float] = {}
        self.refuse, self.raise_on, self.diverge_on, self.lose_q = refuse, raise_on, diverge_on, lose_q
        self.rollouts = 0

    def set_parameters(self, values):
        if self.refuse:
            raise ValueError("a out of the model's range")
        self.values = dict(values)

    def rollout(self, excitation, *, render=False):
        self.rollouts += 1
        if excitation.name == self.raise_on:
            raise FloatingPointError("solver blew up")
        kp = BASE + np.array([self.values["a"], 0.0])
        valid = np.ones((T, K), bool)
        if self.lose_q:
            kp[:, 1], valid[:, 1] = np.nan, False
        traj = Trajectory(np.arange(1, T + 1) / 30.0, kp, valid, ("p", "q"), "sim", excitation.name)
        frames = np.zeros((T, 4, 4, 3), np.uint8) if render else None
        return RolloutResult(traj, frames, excitation.name == self.diverge_on, "boom" if excitation.name ==
                             self.diverge_on else "", {"keypoints_world": BASE3 + np.array([self.values["b"], 0, 0])})


def test_error_is_the_mae_per_keypoint_and_trial_and_costs_one_rollout_per_trial():
    twin = _Shift()
    obj = TrialObjective(twin, [_exc("t1"), _exc("t2")], [_real("t1"), _real("t2")])
    assert obj.cost == 2 and obj.unit == "px"
    ev, frames = obj.evaluate({"a": -3.5})
    assert ev.error_px == pytest.approx(3.5) and not ev.failed and frames is None
    assert ev.per_keypoint_px == pytest.approx({"p": 3.5, "q": 3.5})
    assert ev.values == {"a": -3.5, "b": 0.0, "c": 0.5}  # completed with nominals
    assert ev.rollouts == 2 and twin.rollouts == 2 and len(ev.sim) == 2
    ev, frames = obj.evaluate({}, render_first=True)
    assert ev.error_px == pytest.approx(2.0) and frames.shape == (T, 4, 4, 3)


def test_keypoints_valid_in_only_some_frames_are_averaged_over_those():
    valid = np.ones((T, K), bool)
    valid[:6, 0] = False  # p seen in half the frames of trial 2
    twin = _Shift()
    obj = TrialObjective(twin, [_exc("t1"), _exc("t2")], [_real("t1"), _real("t2", valid=valid)])
    ev, _ = obj.evaluate({"a": 1.0})
    assert ev.error_px == pytest.approx(1.0) and ev.per_keypoint_px == pytest.approx({"p": 1.0, "q": 1.0})
    lost = TrialObjective(_Shift(lose_q=True), [_exc("t1")], [_real("t1")])
    ev, _ = lost.evaluate({"a": 4.0})
    assert ev.error_px == pytest.approx(4.0) and ev.per_keypoint_px["p"] == pytest.approx(4.0)
    assert math.isnan(ev.per_keypoint_px["q"])  # never seen in the sim: NaN, not 0


@pytest.mark.parametrize("twin, message, rollouts", [
    (_Shift(refuse=True), "set_parameters: ValueError: a out of the model's range", 0),
    (_Shift(raise_on="t2"), "rollout 't2' raised FloatingPointError: solver blew up", 2),
    (_Shift(diverge_on="t1"), "rollout 't1' diverged: boom", 1),
])
def test_failures_are_failed_evaluations_with_the_reason(twin, message, rollouts):
    obj = TrialObjective(twin, [_exc("t1"), _exc("t2")], [_real("t1"), _real("t2")])
    ev, _ = obj.evaluate({"a": 1.0})
    assert ev.failed and ev.error_px == math.inf and ev.message == message and ev.rollouts == rollouts


def test_no_overlap_with_the_real_trial_is_a_failed_evaluation():
    obj = TrialObjective(_Shift(), [_exc("t1")], [_real("t1", valid=np.zeros((T, K), bool))])
    ev, _ = obj.evaluate({"a": 1.0})
    assert ev.failed and ev.message == "rollout 't1': no valid keypoint overlaps the real trial"


def test_mixed_units_are_weighed_by_their_noise():
    obj = TrialObjective(_Shift(), [_exc("img"), _exc("mocap")], [_real("img"), _real("mocap", kind="points")],
                         noise={"px": 2.0})
    assert obj.unit == NOISE_UNIT
    ev, _ = obj.evaluate({"a": 3.0, "b": 0.004})
    # image: 3 px / 2 px; mocap: 4 mm / 1 mm (default); mean over trials
    assert ev.error_px == pytest.approx(0.5 * (1.5 + 4.0))
    assert ev.per_keypoint_px == pytest.approx({"p": 0.5 * (1.5 + 4.0), "q": 0.5 * (1.5 + 4.0)})
    with pytest.raises(TrajectoryError, match="noise level of unit 'px' must be a number > 0"):
        TrialObjective(_Shift(), [_exc("img"), _exc("mocap")], [_real("img"), _real("mocap", kind="points")],
                       noise={"px": 0.0})


def test_one_unit_is_not_weighed():
    obj = TrialObjective(_Shift(), [_exc("m1")], [_real("m1", kind="points")], noise={"m": 0.5})
    assert obj.unit == "m"
    ev, _ = obj.evaluate({"b": -0.25})
    assert ev.error_px == pytest.approx(0.25)


def test_measurement_unit_and_bad_arguments():
    assert measurement_unit([]) == "px"
    assert measurement_unit([_real("a"), _real("b")]) == "px"
    assert measurement_unit([_real("a", kind="points")]) == "m"
    assert measurement_unit([_real("a"), _real("b", kind="points")]) == NOISE_UNIT
    with pytest.raises(ValueError, match="2 excitations but 1 real trajectories"):
        TrialObjective(_Shift(), [_exc("t1"), _exc("t2")], [_real("t1")])


def test_residual_and_trajectory_vectors():
    twin = _Shift()
    twin.set_parameters({"a": 1.5, "b": 0.0})
    valid = np.ones((T, K), bool)
    valid[3, 1] = False
    real = _real("t1", valid=valid)
    sim = twin.rollout(_exc("t1")).trajectory
    r = residual_vector([sim], [real])
    assert r.shape == (2 * (T * K - 1),)  # x and y of every real-valid sample
    assert np.allclose(r[0::2], 1.5) and np.allclose(r[1::2], 0.0)  # sim - real
    v = trajectory_vector([sim], [real])
    assert v.shape == r.shape and np.allclose(v, sim.keypoints[valid].ravel())
    assert residual_vector([], []).shape == (0,) and trajectory_vector([], []).shape == (0,)
    mocap = _real("m", kind="points")
    res = twin.rollout(_exc("m"))
    from vid2sid_ros.sim.measurement import measure

    sim3 = measure(twin, res, mocap)
    mixed = residual_vector([sim, sim3], [real, mocap], noise={"px": 0.5})
    assert np.allclose(mixed[:r.size][0::2], 3.0)  # 1.5 px / 0.5 px
    assert np.allclose(mixed[r.size:], 0.0)  # b = 0
    tv = trajectory_vector([sim, sim3], [real, mocap])
    assert np.allclose(tv[:r.size], sim.keypoints[valid].ravel() / 1.0)  # default 1 px
    assert np.allclose(tv[r.size:], sim3.keypoints.reshape(-1) / 0.001)


def test_repeated_physics_points_cost_no_rollout_and_the_cache_is_bounded():
    from vid2sid_ros.calibration.objective import ROLLOUT_CACHE_POINTS

    twin = _Shift()
    obj = TrialObjective(twin, [_exc("t1"), _exc("t2")], [_real("t1"), _real("t2")])
    first, _ = obj.evaluate({"a": 1.0})
    again, _ = obj.evaluate({"a": 1.0})
    assert first.rollouts == 2 and again.rollouts == 0 and twin.rollouts == 2  # served from the cache
    assert again.error_px == first.error_px and len(again.sim) == 2
    assert obj.cache_points == max(ROLLOUT_CACHE_POINTS, len(obj.parameters.free_names) + 2)
    for k in range(obj.cache_points):  # push a=1 out of the cache
        obj.evaluate({"a": 2.0 + k})
    n = twin.rollouts
    back, _ = obj.evaluate({"a": 1.0})
    assert back.rollouts == 2 and twin.rollouts == n + 2
    kept, _ = obj.evaluate({"a": 2.0 + obj.cache_points - 1})  # the most recent point is still cached
    assert kept.rollouts == 0


def test_the_rollout_cache_keeps_the_recently_used_point_and_a_whole_jacobian():
    """Regression: the cache dropped the oldest *inserted* point and kept 4, so on the finger (4 free physics
    parameters) a forward-difference Jacobian pushed its own base out before the latency probe, which then paid a
    full rollout set; a point just re-used is now the last to go, and a base + one probe per physics parameter fit."""
    from vid2sid_ros.calibration.nuisance import add_measurement_nuisances

    twin = _Shift()
    excs = [Excitation(n, 30.0, np.sin(np.arange(T) / 3.0)[:, None]) for n in ("t1", "t2")]  # commanded
    four = ParameterSet.from_dict({"parameters": [  # four free physics parameters, like the finger
        {"name": n, "unit": "1", "lower": -10.0, "upper": 10.0, "nominal": 1.0} for n in ("a", "b", "d", "e")]})
    params = add_measurement_nuisances(four, None, keypoints=("p", "q"), excitations=excs, real_trial=False)
    assert params.free_names == ["a", "b", "d", "e", "latency"]
    obj = TrialObjective(twin, excs, [_real("t1"), _real("t2")], params)
    assert obj.cache_points == 6
    base = {n: params[n].nominal for n in params.free_names}
    obj.evaluate(base)
    for n in ("a", "b", "d", "e"):  # a forward-difference set...
        obj.evaluate({**base, n: base[n] + 0.5})
    lat, _ = obj.evaluate({**base, "latency": 0.01})  # ...then the latency probe at its base
    assert lat.rollouts == 0
    for k in range(obj.cache_points - 1):  # the base was just used: everything older goes first
        obj.evaluate({**base, "a": 1.0 + 0.01 * k})
    again, _ = obj.evaluate(base)
    assert again.rollouts == 0


def test_a_failed_evaluation_carries_the_values_and_the_trials_run_so_far():
    obj = TrialObjective(_Shift(raise_on="t2"), [_exc("t1"), _exc("t2")], [_real("t1"), _real("t2")])
    ev, _ = obj.evaluate({"a": 1.0})
    assert ev.values == {"a": 1.0, "b": 0.0, "c": 0.5} and ev.failed and len(ev.sim) == 1
    ev, _ = TrialObjective(_Shift(diverge_on="t1"), [_exc("t1")], [_real("t1")]).evaluate({"a": 1.0})
    assert ev.values["a"] == 1.0 and len(ev.sim) == 1 and ev.sim[0].trial_id == "t1"


def test_vectors_of_one_non_pixel_unit_are_not_weighed():
    """One unit (here metres): values and residuals stay in metres, not in noise units (1 mm)."""
    from vid2sid_ros.sim.measurement import measure

    twin = _Shift()
    twin.set_parameters({"a": 0.0, "b": 0.002})
    mocap = _real("m", kind="points")
    sim3 = measure(twin, twin.rollout(_exc("m")), mocap)
    assert np.allclose(trajectory_vector([sim3], [mocap]), sim3.keypoints.reshape(-1))
    r = residual_vector([sim3], [mocap], noise={"m": 0.5})
    assert np.allclose(r[0::3], 0.002) and np.allclose(r[1::3], 0.0)


class _Renders(_Shift):
    """Records the ``render`` flag of every rollout."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.renders: list = []

    def rollout(self, excitation, *, render=False):
        self.renders.append(render)
        return super().rollout(excitation, render=render)


def test_only_the_first_trial_is_rendered_and_only_when_asked_and_a_render_is_paid_for():
    twin = _Renders()
    obj = TrialObjective(twin, [_exc("t1"), _exc("t2")], [_real("t1"), _real("t2")])
    ev, frames = obj.evaluate({"a": 1.0})
    assert twin.renders == [False, False] and frames is None and ev.rollouts == 2
    twin.renders.clear()
    ev, frames = obj.evaluate({"a": 1.0}, render_first=True)  # t2 is cached; t1 is rendered anew (never cached)
    assert twin.renders == [True] and frames.shape == (T, 4, 4, 3) and ev.rollouts == 1


def test_failed_evaluations_carry_values_infinite_error_the_trials_so_far_and_their_cost():
    # no valid overlap in the second trial
    empty = np.zeros((T, K), bool)
    ev, _ = TrialObjective(_Shift(), [_exc("t1"), _exc("t2")], [_real("t1"), _real("t2", valid=empty)]).evaluate(
        {"a": 1.0})
    assert ev.failed and ev.error_px == math.inf and ev.values == {"a": 1.0, "b": 0.0, "c": 0.5}
    assert ev.rollouts == 2 and [s.trial_id for s in ev.sim] == ["t1", "t2"]
    # the twin refuses the values
    ev, _ = TrialObjective(_Shift(refuse=True), [_exc("t1")], [_real("t1")]).evaluate({"a": 1.0})
    assert ev.values == {"a": 1.0, "b": 0.0, "c": 0.5} and ev.error_px == math.inf and ev.sim == []
    # the rollout cannot be measured like the sensor (a 3-D trial in a frame other than the twin's world)
    cam = _real("m", kind="points")
    cam = Trajectory(cam.time, cam.keypoints, cam.valid, cam.names, "real", "m", kind="points", frame="camera")
    ev, _ = TrialObjective(_Shift(), [_exc("t1"), _exc("m")], [_real("t1"), cam]).evaluate({"a": 1.0})
    assert ev.failed is True and ev.error_px == math.inf and ev.values["a"] == 1.0
    assert ev.message.startswith("rollout 'm': TwinError: 3-D measurement of trial 'm' is in frame 'camera'")
    assert ev.rollouts == 2 and [s.trial_id for s in ev.sim] == ["t1"]


def test_per_keypoint_error_over_trials_is_nanmean_to_the_bit():
    """A keypoint's error over the trials: every keypoint at once when all are finite, np.nanmean's value
    to the bit, and NaN where no trial's is finite."""
    from vid2sid_ros.calibration.objective import _over_trials

    rng = np.random.default_rng(2)
    for n in (1, 2, 3, 8, 9, 20):
        per = {f"k{i}": list(rng.exponential(size=n) * 10 ** rng.uniform(-3, 3)) for i in range(4)}
        got = _over_trials(per)
        assert list(got) == list(per)
        assert all(got[k] == float(np.nanmean(v)) for k, v in per.items())
    got = _over_trials({"a": [1.0, math.nan, 2.5], "b": [math.nan, math.nan], "c": [0.1, 0.2]})
    assert got["a"] == float(np.nanmean([1.0, math.nan, 2.5])) and math.isnan(got["b"]) and got["c"] == 0.15000000000000002
