"""What a trial's measurements lost, and a colour range that follows something else (perception/quality.py).

Synthetic frames drawn with cv2 (a green disc marker, a blue bar for an upper arm) and trajectories
built by hand: the tracked fraction per keypoint with its causes and frame ranges, the warning below
the threshold, jumps, blobs unlike a marker, and the threshold's parsing.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vid2sid_ros.core.trajectory import Trajectory
from vid2sid_ros.perception.markers import MarkerSpec, MarkerTracker
from vid2sid_ros.perception.quality import (DEFAULT_MIN_TRACKED_FRACTION, check_tracking, check_trials, frame_ranges,
                                            min_tracked_fraction)

GREEN = MarkerSpec("tip", (45, 120, 80), (80, 255, 255))
BLUE = MarkerSpec("tip", (100, 120, 80), (130, 255, 255))


def _traj(xy, valid, names=("tip",), kind="image", meta=None):
    xy = np.asarray(xy, float)
    return Trajectory(np.arange(xy.shape[0]) / 30.0, xy, np.asarray(valid, bool), names, "real", "t0",
                      meta=meta or {}, kind=kind)


def _circle_path(T=60, r=20.0):
    a = np.linspace(0, 2 * np.pi, T)
    return np.stack([80 + r * np.cos(a), 60 + r * np.sin(a)], axis=1)[:, None, :]


def test_frame_ranges_groups_runs():
    assert frame_ranges([3, 4, 5, 9, 11, 12]) == "3-5, 9, 11-12"
    assert frame_ranges([]) == ""
    assert frame_ranges(range(0, 20, 2), limit=3) == "0, 2, 4, +7 more range(s)"


def test_tracked_fraction_is_reported_and_warned_below_the_threshold_with_its_frames():
    xy = _circle_path()
    valid = np.ones((60, 1), bool)
    valid[10:25] = False  # 15 of 60 lost: 75 %
    chk = check_tracking(_traj(xy, valid))
    assert chk.tracked == {"tip": 0.75} and chk.frames == 60 and chk.lost == {"tip": {"lost": 15}}
    assert chk.warnings == ["marker 'tip' tracked in 75 % of 60 frames (below 90 %): 15 lost in frames "
                            "10-24; those samples are excluded from every error"]
    assert chk.to_dict()["tracked"] == {"tip": 0.75} and chk.to_dict()["min_tracked_fraction"] == 0.9
    # at the threshold: reported, not warned; a lower threshold silences it; 1.0 warns on any loss
    valid[16:25] = True  # 6 lost: exactly 90 %
    assert check_tracking(_traj(xy, valid)).warnings == []
    assert check_tracking(_traj(xy, valid), min_fraction=1.0).warnings[0].startswith("marker 'tip' tracked in 90 %")
    big = np.ones((200, 1), bool)  # 179 of 200 = 89.5 %: one decimal where the rounded share reads as the threshold
    big[:21] = False
    w = check_tracking(_traj(np.repeat(xy[:1], 200, axis=0), big)).warnings
    assert w[0].startswith("marker 'tip' tracked in 89.5 % of 200 frames (below 90 %)")
    with pytest.raises(ValueError, match=r"min_fraction must be in \[0, 1\]"):
        check_tracking(_traj(xy, valid), min_fraction=1.5)


def test_the_causes_come_from_the_tracker_log_and_the_dropped_frames():
    xy = _circle_path(20)
    valid = np.ones((20, 1), bool)
    valid[[2, 3, 4, 8, 9, 15]] = False
    status = [""] * 20
    status[2] = status[3] = status[4] = "partly hidden"
    status[8] = status[9] = "at the image border"
    blobs = {"tip": {"status": status, "area": [50.0] * 20, "elongation": [1.0] * 20}}
    dropped = np.zeros(20, bool)
    dropped[15] = True
    chk = check_tracking(_traj(xy, valid, meta={"blobs": blobs, "dropped": dropped.tolist()}))
    assert chk.lost == {"tip": {"partly hidden": 3, "at the image border": 2, "frame dropped": 1}}
    assert chk.tracked["tip"] == pytest.approx(0.7)
    assert "6 lost (3 partly hidden, 2 at the image border, 1 frame dropped) in frames 2-4, 8-9, 15" in chk.warnings[0]


def test_a_jump_far_beyond_the_trajectory_steps_is_named_with_its_frames():
    xy = _circle_path().copy()  # steps ~2.1 px
    xy[30:34, 0] += [60.0, 0.0]  # frames 30-33: another object 60 px away
    chk = check_tracking(_traj(xy, np.ones((60, 1), bool)))
    assert [s["frames"] for s in chk.suspect["tip"]] == [[30, 34]]
    assert chk.warnings == [f"marker 'tip': {chk.suspect['tip'][0]['what']} in frames 30, 34: the colour range may "
                            "match another object (check its hsv_lower/hsv_upper), or frames may be missing from the "
                            "recording"]
    assert "jumps of up to 60" in chk.warnings[0] and "px" in chk.warnings[0]
    # joints: the same test in rad, with the joint's noise (0.005 rad) as the floor of a step
    q = np.sin(np.linspace(0, 3, 60))[:, None]
    assert check_tracking(_traj(q, np.ones((60, 1), bool), names=("q1",), kind="joints")).warnings == []
    q[40] += 1.0
    w = check_tracking(_traj(q, np.ones((60, 1), bool), names=("q1",), kind="joints")).warnings
    assert len(w) == 1 and w[0].startswith("joint 'q1': jumps of up to 1") and "rad" in w[0] and "in frames 40:" in w[0]


def _frames(T=30, arm=None, marker=True, other=()):
    """120x160 frames: a green (or blue) disc marker of radius 6 px on a circle, optionally a blue bar
    (an upper arm); in frames ``other`` the marker is hidden and a larger green card is in view."""
    out = []
    for t in range(T):
        f = np.full((120, 160, 3), 40, np.uint8)
        a = 2 * np.pi * t / T
        c = (int(round(80 + 25 * np.cos(a))), int(round(60 + 25 * np.sin(a))))
        if arm is not None:  # a blue limb from the shoulder to the marker
            cv2.line(f, (80, 60), c, (20, 40, 230), 9)
        if marker and t not in other:
            cv2.circle(f, c, 6, (20, 230, 20) if arm is None else (230, 30, 30), -1)
        if t in other:  # the marker is hidden; something else of its colour is in view
            cv2.rectangle(f, (5, 5), (30, 20), (20, 230, 20), -1)
        out.append(f)
    return out


def test_a_colour_range_that_matches_the_upper_arm_is_warned_about_in_every_frame():
    """The user's blue-arm case: the marker is red, the range is blue, so the blob is the limb: a long,
    thin blob the marker's motion cannot smear that far."""
    traj = MarkerTracker([BLUE]).track(_frames(arm=True))
    assert traj.valid.all()  # the tracker itself sees nothing wrong
    chk = check_tracking(traj)
    elongated = [s for s in chk.suspect["tip"] if s["what"].startswith("an elongated blob")]
    assert len(elongated) == 1 and elongated[0]["frames"] == list(range(30))
    assert any(w.startswith("marker 'tip': an elongated blob (elongation") and "in frames 0-29" in w
               and "hsv_lower/hsv_upper" in w for w in chk.warnings), chk.warnings
    # the right range on the same frames (the red marker): nothing to say
    red = MarkerSpec("tip", (170, 120, 80), (10, 255, 255))
    clean = check_tracking(MarkerTracker([red]).track(_frames(arm=True)))
    assert clean.warnings == [] and clean.tracked == {"tip": 1.0}


def test_a_larger_object_of_the_marker_colour_in_some_frames_is_named_with_those_frames():
    traj = MarkerTracker([GREEN]).track(_frames(other=range(12, 17)))
    chk = check_tracking(traj)
    assert traj.valid.all()  # the tracker took the card for the marker
    whats = {s["what"].split(" ")[0]: s["frames"] for s in chk.suspect["tip"]}
    assert whats["a"] == list(range(12, 17))  # "a blob of 416 px² where the marker's median is 113 px²"
    assert whats["jumps"] == [12, 17]  # to the card and back
    assert any("a blob of" in w and "in frames 12-16" in w for w in chk.warnings), chk.warnings


@pytest.mark.parametrize("speed, explained", [(20, True), (6, False)])
def test_a_motion_blur_streak_is_suspect_only_when_the_motion_cannot_explain_its_length(speed, explained):
    """A 20 px streak (a 10 px marker smeared over the exposure) on a marker moving 20 px per frame is blur;
    the same streak on one moving 6 px per frame is not the marker."""
    frames = []
    for t in range(12):
        f = np.full((120, 300, 3), 40, np.uint8)
        x = 20 + speed * t
        cv2.line(f, (x - 10, 60), (x + 10, 60), (20, 230, 20), 10)
        frames.append(f)
    chk = check_tracking(MarkerTracker([GREEN]).track(frames))
    assert (chk.suspect == {}) is explained, chk.suspect
    if not explained:
        assert chk.suspect["tip"][0]["frames"] == list(range(12))
        assert "its motion smears it by at most 6.0 px" in chk.suspect["tip"][0]["what"]


def test_min_tracked_fraction_reads_the_rig_config():
    assert min_tracked_fraction(None) == DEFAULT_MIN_TRACKED_FRACTION == 0.9
    assert min_tracked_fraction({"tracking": {"min_tracked_fraction": 0.5}}) == 0.5
    assert min_tracked_fraction({"tracking": {"min_tracked_fraction": 0}}) == 0.0
    for bad in (1.2, -0.1, "most", True, None):
        with pytest.raises(ValueError, match=r"^rig.yaml:tracking.min_tracked_fraction: expected a number in \[0, 1\]"):
            min_tracked_fraction({"tracking": {"min_tracked_fraction": bad}}, "rig.yaml")


def test_check_trials_keys_by_trial_and_keeps_a_summary_already_made():
    xy = _circle_path(20)
    valid = np.ones((20, 1), bool)
    valid[:10] = False
    a = _traj(xy, valid)
    b = Trajectory(a.time, a.keypoints, a.valid, a.names, "real", "t1", meta={"tracking": {"tracked": {"tip": 1.0},
                                                                                        "warnings": ["w"]}})
    summary, warnings = check_trials([a, b])
    assert summary["t0"]["tracked"] == {"tip": 0.5} and summary["t1"] == {"tracked": {"tip": 1.0}, "warnings": ["w"]}
    assert warnings[0].startswith("trial 't0': marker 'tip' tracked in 50 %") and warnings[1] == "trial 't1': w"


def test_a_fast_but_smooth_step_response_is_not_a_jump():
    """A rig at rest, then a step response (100 px in about 6 frames, speed rising and falling frame by
    frame), then at rest: 90 % of the steps are noise, so "4 x the 90th-percentile step" alone called the
    fastest step a jump to another object. Its neighbours are as fast: it is motion."""
    t = np.arange(90)
    x = 40 + 100 / (1 + np.exp(-(t - 33) / 1.2))
    rng = np.random.default_rng(3)
    xy = np.stack([x, np.full(90, 60.0)], axis=1)[:, None, :] + rng.normal(0, 0.3, (90, 1, 2))
    chk = check_tracking(_traj(xy, np.ones((90, 1), bool)))
    assert chk.suspect == {} and chk.warnings == []
    xy[50:53, 0, 1] += 40.0  # the same clip with a 3-frame hop to another object: named
    assert [s["frames"] for s in check_tracking(_traj(xy, np.ones((90, 1), bool))).suspect["tip"]] == [[50, 53]]
