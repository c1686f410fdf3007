"""Trajectory copies and JSON round trips keep every field, for every measurement kind.

Written against survivors of the mutation run (bench/mutation.py): ``select``/``slice``/
``take`` dropped fields unnoticed, the non-image JSON fields (kind, unit, frame) were never
round-tripped by the core tests, and ``align``'s time pairing at the tolerance edge and its
kind/frame check were not exercised.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from vid2sid_ros.core.trajectory import Trajectory, TrajectoryError, align, mae, per_keypoint_mae


def _points() -> Trajectory:
    T = 5
    kp = np.arange(T * 2 * 3, dtype=float).reshape(T, 2, 3) / 10.0
    valid = np.ones((T, 2), bool)
    valid[2, 1] = False
    kp[2, 1] = np.nan
    return Trajectory(np.arange(T) / 100.0, kp, valid, ("tip", "mid"), "real", "take1", np.arange(T) + 3,
                      {"noise": 0.002}, kind="points", frame="world")


def _joints() -> Trajectory:
    T = 4
    return Trajectory(np.arange(T) * 0.1, np.ones((T, 2, 1)), np.ones((T, 2), bool), ("shoulder", "slide"), "real",
                      "j", kind="joints", unit=("rad", "m"))


def _same(a: Trajectory, b: Trajectory, *, meta: bool = True) -> None:
    assert (a.names, a.source, a.trial_id, a.kind, a.unit, a.frame) == (b.names, b.source, b.trial_id, b.kind, b.unit,
                                                                        b.frame)
    if meta:  # meta is not part of the JSON form
        assert dict(a.meta) == dict(b.meta)
    np.testing.assert_array_equal(a.time, b.time)
    np.testing.assert_array_equal(a.steps, b.steps)
    np.testing.assert_array_equal(a.valid, b.valid)
    np.testing.assert_array_equal(a.keypoints, b.keypoints)


@pytest.mark.parametrize("make", [_points, _joints], ids=["points", "joints"])
def test_json_round_trip_keeps_kind_unit_frame(make):
    t = make()
    d = json.loads(json.dumps(t.to_dict()))
    assert d["kind"] == t.kind and d["frame"] == t.frame
    assert d["unit"] == (t.unit if isinstance(t.unit, str) or t.unit is None else list(t.unit))
    _same(Trajectory.from_dict(d), t, meta=False)


def test_image_json_keeps_its_historic_format():
    t = Trajectory(np.arange(3) / 30.0, np.zeros((3, 1, 2)), np.ones((3, 1), bool), ("tip",), "sim", "x")
    d = t.to_dict()
    assert "kind" not in d and "unit" not in d and "frame" not in d
    _same(Trajectory.from_dict(d), t)


def test_copies_keep_every_field():
    t = _points()
    s = t.slice(1, 4)
    assert s.num_frames == 3 and s.steps.tolist() == [4, 5, 6] and s.time.tolist() == pytest.approx([0.01, 0.02, 0.03])
    _same(s, t.take(np.array([1, 2, 3])))
    for c in (s, t.take(np.array([4, 0])), t.select(["mid"])):
        assert (c.source, c.trial_id, c.kind, c.frame, dict(c.meta)) == ("real", "take1", "points", "world",
                                                                         {"noise": 0.002})
    m = t.select(["mid", "tip"])
    assert m.names == ("mid", "tip") and m.valid[2].tolist() == [False, True]
    np.testing.assert_array_equal(m.keypoints[:, 1], t.keypoints[:, 0])
    j = _joints().select(["slide"])
    assert j.unit == ("m",) and j.units == ("m",)
    assert _joints().select(["slide", "shoulder"]).unit == ("m", "rad")


def test_align_pairs_by_time_within_the_tolerance_and_checks_kind_and_frame():
    a = Trajectory(np.array([0.0, 0.1, 0.2, 0.3]), np.zeros((4, 1, 2)), np.ones((4, 1), bool), ("k",))
    b = Trajectory(np.array([0.1, 0.2 + 0.5e-6, 0.3 + 3e-6]), np.ones((3, 1, 2)), np.ones((3, 1), bool), ("k",))
    ra, rb = align(a, b, by="time", tolerance_s=1e-6)
    assert ra.time.tolist() == pytest.approx([0.1, 0.2]) and rb.num_frames == 2  # 0.5e-6 in, 3e-6 out
    c = Trajectory(np.array([0.0]), np.zeros((1, 1, 2)), np.ones((1, 1), bool), ("k",))
    ra, rb = align(c, b, by="time")
    assert ra.num_frames == 0  # b starts later: nothing pairs, no index error
    with pytest.raises(TrajectoryError):
        align(_points(), Trajectory(np.arange(5) / 100.0, np.zeros((5, 2, 3)), np.ones((5, 2), bool), ("tip", "mid"),
                                    kind="points", frame="camera"))
    with pytest.raises(TrajectoryError):
        align(a, _points())


def test_errors_with_no_overlap_are_nan():
    a = Trajectory(np.arange(2.0), np.zeros((2, 1, 2)), np.zeros((2, 1), bool), ("k",))
    assert math.isnan(mae(a, a)) and math.isnan(per_keypoint_mae(a, a)["k"])


def test_from_dict_defaults_missing_fields_and_bad_frames_name_the_kind():
    d = {"time": [0.0, 0.1], "keypoints": [[[1.0, 2.0, 3.0]], [[None, None, None]]], "valid": [[True], [False]],
         "names": ["tip"], "kind": "points", "frame": "mocap_rig"}
    t = Trajectory.from_dict(d)
    assert (t.source, t.trial_id, t.frame, t.steps.tolist()) == ("", "", "mocap_rig", [0, 1])  # a non-default frame
    assert Trajectory.from_dict({**d, "source": "cam", "trial_id": "t7"}).source == "cam"
    assert Trajectory.from_dict({**d, "source": "cam", "trial_id": "t7"}).trial_id == "t7"
    for k in ("time", "keypoints", "valid", "names"):
        with pytest.raises(TrajectoryError, match=rf"missing field\(s\) \['{k}'\]"):
            Trajectory.from_dict({x: v for x, v in d.items() if x != k})
    for kind, frame, what in [("image", [[1.0, "a"]], r"\[x, y\] px pairs"),
                              ("points", [[1.0, 2.0, {}]], r"\[x, y, z\] m triples"),
                              ("joints", [["q"]], r"\[q\] rad/m values")]:
        bad = {**d, "kind": kind, "keypoints": [frame, frame]}
        with pytest.raises(TrajectoryError, match=rf"'keypoints' frame 0 must be a list of {what} \(or null\)"):
            Trajectory.from_dict(bad)


def test_construction_normalises_every_field():
    t = Trajectory([0, 1, 2], [[[1, 2]], [[3, 4]], [[5, 6]]], [[1], [0], [1]], ["tip"], steps=[4.0, 5.0, 6.0])
    assert isinstance(t.time, np.ndarray) and t.time.dtype == float and not t.time.flags.writeable
    assert t.keypoints.dtype == float and t.valid.dtype == bool and t.steps.dtype == int
    assert t.valid[:, 0].tolist() == [True, False, True]  # 0/1 flags, not indices
    assert np.isnan(t.keypoints[1]).all() and t.keypoints[2, 0].tolist() == [5.0, 6.0]  # int keypoints, one lost
    assert t.names == ("tip",) and t.steps.tolist() == [4, 5, 6]
    # defaults per kind: unit and frame
    img = Trajectory(np.zeros(2), np.zeros((2, 1, 2)), np.ones((2, 1), bool), ("a",))
    pts = Trajectory(np.zeros(2), np.zeros((2, 2, 3)), np.ones((2, 2), bool), ("a", "b"), kind="points")
    jts = Trajectory(np.zeros(2), np.zeros((2, 2)), np.ones((2, 2), bool), ("a", "b"), kind="joints")  # (T, K)
    assert (img.unit, img.frame) == ("px", "image")
    assert (pts.unit, pts.frame) == ("m", "world")
    assert (jts.unit, jts.frame, jts.keypoints.shape) == ("rad", "", (2, 2, 1))
    assert Trajectory(np.zeros(2), np.zeros((2, 2, 3)), np.ones((2, 2), bool), ("a", "b"), kind="points",
                      frame=7).frame == "7"
    mixed = Trajectory(np.zeros(2), np.zeros((2, 2)), np.ones((2, 2), bool), ("a", "b"), kind="joints",
                       unit=["rad", "m"])
    assert mixed.unit == ("rad", "m") and mixed.unit_label == "rad|m"
    same = Trajectory(np.zeros(2), np.zeros((2, 2)), np.ones((2, 2), bool), ("a", "b"), kind="joints",
                      unit=("m", "m"))
    assert same.unit == ("m", "m")  # a per-keypoint tuple stays a tuple
    with pytest.raises(TrajectoryError, match="unit 'deg' is not a unit of kind 'joints'; expected rad or m"):
        Trajectory(np.zeros(2), np.zeros((2, 1)), np.ones((2, 1), bool), ("a",), kind="joints", unit="deg")


def test_a_copy_with_one_field_changed_keeps_all_the_others():
    t = _points()
    for change in ({"trial_id": "other"}, {"meta": {"noise": 0.5}}, {"source": "sim"}):
        c = t._with(**change)
        for k, v in change.items():
            assert getattr(c, k) == v
        rest = {k: getattr(t, k) for k in ("source", "trial_id", "meta") if k not in change}
        assert all(getattr(c, k) == v for k, v in rest.items())
        assert (c.names, c.kind, c.unit, c.frame) == (t.names, t.kind, t.unit, t.frame)
        for k in ("time", "keypoints", "valid", "steps"):
            np.testing.assert_array_equal(getattr(c, k), getattr(t, k))
    j = _joints()._with(trial_id="x")
    assert j.unit == ("rad", "m") and j.frame == ""
    rig = Trajectory(t.time, t.keypoints, t.valid, t.names, kind="points", frame="mocap_rig")
    assert rig._with(trial_id="y").frame == "mocap_rig"  # a non-default frame is kept too


def test_align_by_time_at_the_exact_tolerance_and_past_the_end():
    def traj(times):
        n = len(times)
        return Trajectory(np.asarray(times, float), np.zeros((n, 1, 2)), np.ones((n, 1), bool), ("p",))

    a, b = align(traj([1.0, 2.0]), traj([0.75, 2.25]), by="time", tolerance_s=0.25)  # |dt| == tolerance: paired
    assert a.time.tolist() == [1.0, 2.0] and b.time.tolist() == [0.75, 2.25]
    a, b = align(traj([0.0, 1.0, 5.0, 6.0]), traj([0.0, 1.0]), by="time", tolerance_s=0.1)  # a runs past b's end
    assert a.time.tolist() == [0.0, 1.0] and b.time.tolist() == [0.0, 1.0]
