"""core/trajectory.py: validation, invalid samples, align, metrics, JSON round trip."""

import json

import numpy as np
import pytest

from vid2sid_ros.core.trajectory import (Trajectory, TrajectoryError, align, mae_px, per_keypoint_mae_px,
                                         residuals_px)


def _traj(T=5, K=2, offset=0.0, steps=None, valid=None, names=("a", "b"), rate=30.0, source="sim"):
    kp = np.zeros((T, K, 2))
    kp[..., 0] = np.arange(T)[:, None] * 2.0 + offset
    kp[..., 1] = np.arange(K)[None, :] * 10.0
    steps = np.arange(T) if steps is None else np.asarray(steps)
    return Trajectory(time=steps / rate, keypoints=kp, valid=np.ones((T, K), bool) if valid is None else valid,
                      names=names, source=source, trial_id="t", steps=steps)


def test_shape_validation_errors():
    with pytest.raises(TrajectoryError, match=r"\(T, K, 2\)"):
        Trajectory(np.zeros(3), np.zeros((3, 2)), np.ones((3, 2), bool), ("a", "b"))
    with pytest.raises(TrajectoryError, match="time has 2 entries but keypoints have T=3"):
        Trajectory(np.zeros(2), np.zeros((3, 2, 2)), np.ones((3, 2), bool), ("a", "b"))
    with pytest.raises(TrajectoryError, match="valid must have shape"):
        Trajectory(np.zeros(3), np.zeros((3, 2, 2)), np.ones((3, 1), bool), ("a", "b"))
    with pytest.raises(TrajectoryError, match="1 names for K=2"):
        Trajectory(np.zeros(3), np.zeros((3, 2, 2)), np.ones((3, 2), bool), ("a",))
    with pytest.raises(TrajectoryError, match="steps has 2 entries"):
        Trajectory(np.zeros(3), np.zeros((3, 2, 2)), np.ones((3, 2), bool), ("a", "b"), steps=[0, 1])


def test_invalid_samples_become_nan_and_nan_samples_become_invalid():
    kp = np.ones((3, 2, 2))
    kp[2, 1, 0] = np.nan
    valid = np.ones((3, 2), bool)
    valid[0, 0] = False
    t = Trajectory(np.arange(3.0), kp, valid, ("a", "b"))
    assert t.valid.tolist() == [[False, True], [True, True], [True, False]]
    assert np.isnan(t.keypoints[0, 0]).all() and np.isnan(t.keypoints[2, 1]).all()
    assert t.steps.tolist() == [0, 1, 2]
    assert kp[0, 0, 0] == 1.0  # the caller's array is not modified
    with pytest.raises(ValueError):
        t.keypoints[1, 1, 0] = 5.0  # read-only


def test_select_slice_and_keypoint():
    t = _traj(T=6)
    assert t.num_frames == 6 and t.num_keypoints == 2
    b = t.select(["b"])
    assert b.names == ("b",) and np.array_equal(b.keypoints[:, 0], t.keypoints[:, 1])
    s = t.slice(2, 4)
    assert s.steps.tolist() == [2, 3] and s.num_frames == 2
    assert np.array_equal(t.keypoint("a"), t.keypoints[:, 0])
    with pytest.raises(KeyError, match="valid: a, b"):
        t.keypoint("c")


def test_align_by_step_drops_unpaired_frames_without_shifting():
    a = _traj(T=6)
    b = _traj(T=4, steps=[1, 2, 4, 7], offset=1.0)
    a2, b2 = align(a, b)
    assert a2.steps.tolist() == b2.steps.tolist() == [1, 2, 4]
    assert np.allclose(a2.keypoints[:, 0, 0], [2, 4, 8]) and np.allclose(b2.keypoints[:, 0, 0], [1, 3, 5])


def test_align_by_step_of_equal_steps_pairs_every_frame_in_place():
    a = _traj(T=5)
    b = _traj(T=5, names=("b", "a"), offset=1.0)
    a2, b2 = align(a, b)
    assert a2 is a and b2.names == ("a", "b") and b2.steps.tolist() == [0, 1, 2, 3, 4]
    assert np.array_equal(b2.keypoints[:, 0], b.keypoints[:, 1])
    c = _traj(T=4, steps=[0, 1, 1, 2])  # a repeated step pairs once (the first frame of it), as intersect1d does
    c2, d2 = align(c, _traj(T=4, steps=[0, 1, 1, 2], offset=1.0))
    assert c2.steps.tolist() == d2.steps.tolist() == [0, 1, 2]


def test_align_by_time_with_tolerance_and_name_reordering():
    a = _traj(T=5, rate=10.0)
    b = _traj(T=5, rate=10.0, names=("b", "a"))
    jittered = Trajectory(b.time + np.array([0, 1e-7, 0.02, 0, 0]), b.keypoints, b.valid, b.names)
    a2, b2 = align(a, jittered, by="time", tolerance_s=1e-6)
    assert a2.steps.tolist() == [0, 1, 3, 4]
    assert b2.names == ("a", "b")  # reordered to a's order
    assert np.array_equal(b2.keypoints[:, 0], jittered.keypoints[[0, 1, 3, 4], 1])
    with pytest.raises(TrajectoryError, match="by must be"):
        align(a, b, by="frame")
    with pytest.raises(TrajectoryError, match="names differ"):
        align(a, _traj(names=("a", "c")))


def test_metrics_exclude_invalid_samples():
    a = _traj(T=4)
    kp = a.keypoints.copy()
    kp[..., 0] += 3.0
    kp[..., 1] += 4.0  # every sample 5 px away
    kp[1, 0] += 100.0  # a gross error on a sample that is invalid in `a`
    valid_a = np.ones((4, 2), bool)
    valid_a[1, 0] = False
    a = Trajectory(a.time, a.keypoints, valid_a, a.names)
    b = Trajectory(a.time, kp, np.ones((4, 2), bool), a.names)
    d, mask = residuals_px(a, b)
    assert mask.sum() == 7 and np.isnan(d[1, 0])
    assert np.allclose(d[mask], 5.0)
    assert mae_px(a, b) == pytest.approx(5.0)
    assert per_keypoint_mae_px(a, b) == pytest.approx({"a": 5.0, "b": 5.0})
    lost = Trajectory(a.time, a.keypoints, np.zeros((4, 2), bool), a.names)
    assert np.isnan(mae_px(lost, b))
    assert all(np.isnan(v) for v in per_keypoint_mae_px(lost, b).values())
    with pytest.raises(TrajectoryError, match="not aligned"):
        residuals_px(a, _traj(T=3))


def test_metrics_align_by_step_first():
    a = _traj(T=5)
    idx = [0, 2, 4]
    b = Trajectory(a.time[idx], a.keypoints[idx], a.valid[idx], a.names, steps=a.steps[idx])
    assert mae_px(a, b) == 0.0  # frames paired by command step, not by position in the array
    assert mae_px(a, _traj(T=3, steps=[10, 11, 12])) != mae_px(a, _traj(T=3, steps=[10, 11, 12]))  # NaN: no overlap


def test_json_round_trip_keeps_lost_samples_as_null():
    valid = np.ones((3, 2), bool)
    valid[1, 1] = False
    t = _traj(T=3, valid=valid)
    d = json.loads(json.dumps(t.to_dict()))
    assert d["keypoints"][1][1] == [None, None] and d["valid"][1][1] is False
    back = Trajectory.from_dict(d)
    assert back.names == t.names and back.trial_id == "t" and back.source == "sim"
    assert np.array_equal(back.valid, t.valid)
    assert np.allclose(back.keypoints, t.keypoints, equal_nan=True)
    assert np.allclose(back.time, t.time) and back.steps.tolist() == t.steps.tolist()
    empty = Trajectory.from_dict({"names": ["a"], "time": [], "keypoints": [], "valid": []})
    assert empty.num_frames == 0 and empty.keypoints.shape == (0, 1, 2)


def test_errors_are_mae_and_per_keypoint_mae_to_the_bit():
    """One pairing and one set of residuals give the MAE and the per-keypoint MAEs, to the bit: every sample
    valid (each keypoint's distances summed as a row), with gaps, unpaired frames and a keypoint never valid."""
    from vid2sid_ros.core.trajectory import errors

    rng = np.random.default_rng(4)
    for case in range(30):
        T, K = int(rng.integers(1, 300)), int(rng.integers(1, 5))
        names = tuple(f"k{i}" for i in range(K))
        a_valid = np.ones((T, K), bool) if case % 2 else rng.random((T, K)) > 0.3
        if case % 7 == 0:
            a_valid[:, 0] = False
        a = Trajectory(np.arange(T) / 30.0, rng.normal(size=(T, K, 2)) * 100, a_valid, names)
        steps = np.arange(T) if case % 3 else np.arange(T) + int(rng.integers(0, 3))
        b = Trajectory(steps / 30.0, rng.normal(size=(T, K, 2)) * 100, np.ones((T, K), bool), names, steps=steps)
        total, per = errors(a, b)
        want_total, want_per = mae_px(a, b), per_keypoint_mae_px(a, b)
        assert np.array_equal(total, want_total, equal_nan=True)
        assert list(per) == list(want_per)
        assert all(np.array_equal(per[n], want_per[n], equal_nan=True) for n in names)
