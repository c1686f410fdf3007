"""The diagnosis's verdict and the causes it states: a camera pose tied with its intrinsics is no named cause, and
a residual at the noise level that rests on nominal values the trials cannot check is an ``unchecked`` caveat (a
small set, never a warning)."""

from __future__ import annotations

import numpy as np

from vid2sid_ros.calibration.diagnosis.causes import CameraPose, Composite, Intrinsic
from vid2sid_ros.calibration.diagnosis.compare import Score
from vid2sid_ros.calibration.diagnosis.core import _pose_against_intrinsics, _unchecked
from vid2sid_ros.calibration.diagnosis.result import THRESHOLDS, Diagnosis, Finding


def _pose(axis=2):
    return CameraPose("camera position along the image z axis", "camera", ("camera.z",), "m", 0.002, (-0.1, 0.1),
                      axis=axis)


def _focal():
    return Intrinsic("camera focal length (fx and fy together)", "camera", ("camera.fx", "camera.fy"), "relative",
                     0.01, (-0.3, 0.3), field="f")


def test_a_camera_moved_along_its_axis_tied_with_a_longer_focal_length_is_not_named():
    # was: named "camera position (x, y, z)" for a 3 % longer focal length on the finger (the two fit the residual
    # within 4 noise variances), and the recommendation freed the position
    position = Composite("camera position (x, y, z)", "camera", ("camera.x", "camera.y", "camera.z"), "m", 0.0,
                         (0.0, 0.0), parts=(_pose(0), _pose(1), _pose(2)))
    col = np.ones(4)
    assert _pose_against_intrinsics([Score(position, col), Score(_pose(), col), Score(_focal(), col)])
    # within the pose, or within the lens, the camera group is still one cause (freed together)
    roll = CameraPose("camera roll", "camera", ("camera.roll", "camera.pitch", "camera.yaw"), "rad", 0.002,
                      (-0.1, 0.1), axis=5)
    assert not _pose_against_intrinsics([Score(position, col), Score(_pose(), col), Score(roll, col)])
    fx = Intrinsic("camera focal length fx", "camera", ("camera.fx",), "relative", 0.01, (-0.3, 0.3), field="fx")
    assert not _pose_against_intrinsics([Score(_focal(), col), Score(fx, col)])
    assert not _pose_against_intrinsics([Score(_focal(), col)])


def test_the_unchecked_statement_lists_a_capped_set_and_the_trial_that_would_check_it():
    cap = int(THRESHOLDS["set_max_causes"])
    sets = [{"cause": f"mass of body 'b{i}' (mass and inertia together)", "kind": "inertia", "fields": [],
             "parameters": ["gain"], "parameter_kinds": ["joint"], "max_shift_relative": 0.2 - 0.01 * i, "max_shift_over_half_width": 9.0 - i}
            for i in range(cap + 2)]
    lead, listed, sep = _unchecked(sets)
    assert len(listed) == cap and listed[0]["cause"] == sets[0]["cause"]
    assert lead.startswith("Nothing beyond the noise, but these trials cannot check 7 nominal value(s)")
    assert "and 2 more" in lead and "moves gain by up to 20 %" in lead
    assert "static poses at several angles against gravity" in sep  # a link's mass against a joint field
    d = Diagnosis([Finding("consider", "caveat", lead, {"causes": listed})], {}, verdict="unchecked",
                  causes=listed, set_size=len(sets))
    out = d.to_dict()
    assert out["verdict"] == "unchecked" and out["misspecified"] is False and out["caveat"] is True
    assert out["set_size"] == cap + 2 and [c["cause"] for c in out["causes"]] == [c["cause"] for c in listed]
    assert "Nothing beyond the noise" in out["text"]
