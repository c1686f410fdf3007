"""Colour-marker tracker: accuracy on rendered finger video, hue wrap, lost markers, bad input."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from vid2sid_ros.core.trajectory import per_keypoint_mae_px  # noqa: E402
from vid2sid_ros.perception.markers import (ArucoMarkerSpec, MarkerSpec, MarkerTracker,  # noqa: E402
                                            MarkerTrackerError)
from vid2sid_ros.sim.camera_model import SensorNoiseModel  # noqa: E402
from vid2sid_ros.sim.registry import make_rig  # noqa: E402

RED = MarkerSpec("red", (170, 120, 80), (10, 255, 255), min_area_px=6)
GREEN = MarkerSpec("green", (45, 120, 80), (80, 255, 255), min_area_px=6)


@pytest.fixture(scope="module")
def rig():
    return make_rig("finger")


@pytest.fixture(scope="module")
def rendered(rig):
    """Rendered rollouts (ground truth + frames) of one training and one holdout excitation, 320x240."""
    twin = rig.make_twin()
    out = {ex.name: twin.rollout(ex, render=True) for ex in (rig.excitations["train"][0], rig.excitations["holdout"][0])}
    twin.close()
    return out


def _disc_frame(centres, colours, radius=5.0, size=(120, 160), background=(40, 40, 40), supersample=8):
    """Anti-aliased discs at sub-pixel centres (pixel-centre convention) on a flat background."""
    H, W = size
    s = supersample
    yy, xx = np.mgrid[0:H * s, 0:W * s]
    xx = (xx + 0.5) / s - 0.5
    yy = (yy + 0.5) / s - 0.5
    img = np.empty((H * s, W * s, 3), np.float32)
    img[:] = background
    for (cx, cy), col in zip(centres, colours):
        img[(xx - cx) ** 2 + (yy - cy) ** 2 <= radius ** 2] = col
    return cv2.resize(img, (W, H), interpolation=cv2.INTER_AREA).round().astype(np.uint8)


def test_tracking_rendered_video_recovers_ground_truth_without_noise(rig, rendered):
    tracker = MarkerTracker.from_config(rig.tracker)
    for name, r in rendered.items():
        traj = tracker.track(r.frames, time=r.trajectory.time, trial_id=name)
        assert traj.valid.all(), name
        mae = per_keypoint_mae_px(traj, r.trajectory)
        for marker, err in mae.items():
            assert err < 0.5, (name, marker, err)
        # the projected sphere centre is the blob centre: no systematic offset
        bias = np.nanmean(traj.keypoints - r.trajectory.keypoints, axis=0)
        assert np.abs(bias).max() < 0.1, (name, bias)


def test_tracking_with_default_sensor_noise_within_1_5_px(rig, rendered):
    tracker = MarkerTracker.from_config(rig.tracker)
    noise = SensorNoiseModel(**{**SensorNoiseModel.default().to_dict(), "drop_prob": 0.05, "seed": 3})
    n_dropped = 0
    for k, (name, r) in enumerate(rendered.items()):
        frames, dropped = noise.apply(r.frames, seed=k)
        n_dropped += int(dropped.sum())
        traj = tracker.track(frames, time=r.trajectory.time, invalid_frames=dropped)
        assert not traj.valid[dropped].any()
        assert traj.valid[~dropped].all(), name
        for marker, err in per_keypoint_mae_px(traj, r.trajectory).items():
            assert err < 1.5, (name, marker, err)
    assert n_dropped > 0  # the drop path was exercised


def test_default_rig_noise_config_is_the_default_model(rig):
    assert SensorNoiseModel.from_config(rig.config["noise"]) == SensorNoiseModel.default()


def test_subpixel_centroid_on_synthetic_discs():
    truth = [(40.3, 50.7), (101.55, 63.25)]
    frame = _disc_frame(truth, [(230, 20, 20), (20, 230, 20)])
    tracker = MarkerTracker([RED, GREEN])
    xy, valid = tracker.detect(frame)
    assert valid.all()
    assert np.abs(xy - np.array(truth)).max() < 0.15


def test_red_hue_wraps_through_zero():
    # one red disc whose pixels straddle hue 0: half slightly magenta-red (H~175), half orange-red (H~3)
    frame = _disc_frame([(60.0, 40.0)], [(230, 20, 40)])
    frame2 = _disc_frame([(60.0, 40.0)], [(230, 30, 20)])
    hsv = cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)[40, 60]
    hsv2 = cv2.cvtColor(frame2, cv2.COLOR_RGB2HSV)[40, 60]
    assert hsv[0] > 170 and hsv2[0] < 10  # the two sides of the wrap
    assert RED.wraps_hue and not GREEN.wraps_hue
    for f in (frame, frame2):
        xy, valid = MarkerTracker([RED]).detect(f)
        assert valid[0] and np.allclose(xy[0], (60.0, 40.0), atol=0.2)
    half = frame.copy()
    half[:, 60:] = frame2[:, 60:]
    xy, valid = MarkerTracker([RED]).detect(half)  # both hues in one blob
    assert valid[0] and np.allclose(xy[0], (60.0, 40.0), atol=0.3)


def test_lost_marker_is_nan_and_invalid_then_recovered():
    tracker = MarkerTracker([RED, GREEN], roi_radius_px=12)
    frames = [
        _disc_frame([(40, 40), (100, 60)], [(230, 20, 20), (20, 230, 20)]),
        _disc_frame([(100, 60)], [(20, 230, 20)]),  # red marker occluded
        _disc_frame([(120.5, 90.5), (100, 60)], [(230, 20, 20), (20, 230, 20)]),  # red back, far away
    ]
    traj = tracker.track(np.stack(frames), fps=30.0)
    assert traj.valid.tolist() == [[True, True], [False, True], [True, True]]
    assert np.isnan(traj.keypoints[1, 0]).all()
    assert np.allclose(traj.keypoints[2, 0], (120.5, 90.5), atol=0.2)
    assert np.allclose(traj.time, [1 / 30, 2 / 30, 3 / 30])
    assert traj.meta["lost"] == {"red": 1, "green": 0}


def test_marker_jumping_outside_search_window_is_found_by_full_frame_fallback():
    tracker = MarkerTracker([GREEN], roi_radius_px=6)
    a = _disc_frame([(20, 20)], [(20, 230, 20)])
    b = _disc_frame([(140, 100)], [(20, 230, 20)])
    traj = tracker.track([a, b, a])
    assert traj.valid.all()
    assert np.allclose(traj.keypoints[:, 0], [[20, 20], [140, 100], [20, 20]], atol=0.2)


@pytest.mark.parametrize("centre, inside", [((2.0, 50.0), (7.0, 50.0)), ((157.0, 50.0), (152.0, 50.0)),
                                            ((80.0, 2.0), (80.0, 7.0)), ((80.0, 117.0), (80.0, 112.0))],
                         ids=["left", "right", "top", "bottom"])
def test_marker_at_image_border_is_invalid_not_biased(centre, inside):
    frame = _disc_frame([centre], [(20, 230, 20)])  # partly out of the 160x120 frame
    xy, valid = MarkerTracker([GREEN]).detect(frame)
    assert not valid[0] and np.isnan(xy[0]).all()
    # a radius-5 disc one pixel clear of the same edge is valid and unbiased
    xy, valid = MarkerTracker([GREEN]).detect(_disc_frame([inside], [(20, 230, 20)]))
    assert valid[0] and np.allclose(xy[0], inside, atol=0.2)


def test_marker_walking_onto_the_right_and_bottom_edges_turns_invalid_in_a_track():
    """Through the windowed search (not only the first full-frame detection)."""
    centres = [(140.0, 60.0), (150.0, 60.0), (157.5, 60.0), (150.0, 100.0), (150.0, 117.5), (150.0, 100.0)]
    traj = MarkerTracker([GREEN], roi_radius_px=12).track([_disc_frame([c], [(20, 230, 20)]) for c in centres])
    assert traj.valid[:, 0].tolist() == [True, True, False, True, False, True]


def test_largest_blob_wins_over_clutter_and_small_specks_are_ignored():
    frame = _disc_frame([(50, 50), (120, 80)], [(20, 230, 20), (20, 230, 20)], radius=6)
    frame[100:103, 10:13] = (20, 230, 20)  # 9 px speck
    small = _disc_frame([(120, 80)], [(20, 230, 20)], radius=2)
    frame[70:91, 110:131] = small[70:91, 110:131]  # shrink the second disc
    xy, valid = MarkerTracker([GREEN]).detect(frame)
    assert valid[0] and np.allclose(xy[0], (50, 50), atol=0.2)
    only_speck = np.full((120, 160, 3), 40, np.uint8)
    only_speck[100:102, 10:12] = (20, 230, 20)  # 4 px < min_area_px
    assert not MarkerTracker([GREEN]).detect(only_speck)[1][0]


def test_max_area_rejects_large_same_coloured_objects():
    frame = _disc_frame([(80, 60)], [(20, 230, 20)], radius=30)
    spec = MarkerSpec("green", (45, 120, 80), (80, 255, 255), min_area_px=6, max_area_px=400)
    assert not MarkerTracker([spec]).detect(frame)[1][0]


def test_aruco_marker_centre():
    dictionary = cv2.aruco.getPredefinedDictionary(cv2.aruco.DICT_4X4_50)
    tag = cv2.aruco.generateImageMarker(dictionary, 7, 60)
    frame = np.full((200, 240, 3), 255, np.uint8)
    frame[70:130, 100:160] = tag[..., None]
    tracker = MarkerTracker.from_config({"markers": [], "aruco": [{"name": "base", "id": 7}]})
    xy, valid = tracker.detect(frame)
    assert valid[0]
    assert np.allclose(xy[0], (129.5, 99.5), atol=0.6)  # centre of the 60x60 px tag
    other = MarkerTracker([], aruco=[ArucoMarkerSpec("x", 8)])
    assert not other.detect(frame)[1][0]


def test_empty_or_malformed_frames_raise_clear_errors():
    tracker = MarkerTracker([RED])
    with pytest.raises(MarkerTrackerError, match="H, W > 0"):
        tracker.detect(np.zeros((0, 0, 3), np.uint8))
    with pytest.raises(MarkerTrackerError, match="uint8"):
        tracker.detect(np.zeros((10, 10, 3), np.float32))
    with pytest.raises(MarkerTrackerError, match="numpy array"):
        tracker.detect(None)
    with pytest.raises(MarkerTrackerError, match="shape"):
        tracker.detect(np.zeros((10, 10), np.uint8))
    with pytest.raises(MarkerTrackerError, match="no frames"):
        tracker.track([])
    with pytest.raises(MarkerTrackerError, match="invalid_frames"):
        tracker.track(np.zeros((2, 8, 8, 3), np.uint8), invalid_frames=[True])
    black = tracker.track(np.zeros((3, 8, 8, 3), np.uint8))  # a blank frame is not an error: markers lost
    assert not black.valid.any()


def test_config_errors_name_the_problem():
    with pytest.raises(MarkerTrackerError, match="unknown key.*colour"):
        MarkerTracker.from_config({"markers": [], "colour": "red"})
    with pytest.raises(MarkerTrackerError, match=r"markers\[0\].*missing \['hsv_upper'\]"):
        MarkerTracker.from_config({"markers": [{"name": "a", "hsv_lower": [0, 0, 0]}]})
    with pytest.raises(MarkerTrackerError, match="outside OpenCV HSV"):
        MarkerSpec("a", (0, 0, 0), (200, 255, 255))
    with pytest.raises(MarkerTrackerError, match="3 integers"):
        MarkerSpec("a", (0, 0), (10, 255, 255))
    with pytest.raises(MarkerTrackerError, match="S and V"):
        MarkerSpec("a", (0, 200, 0), (10, 100, 255))
    with pytest.raises(MarkerTrackerError, match="at least one marker"):
        MarkerTracker([])
    with pytest.raises(MarkerTrackerError, match="duplicate"):
        MarkerTracker([RED, RED])
    with pytest.raises(MarkerTrackerError, match="dictionary"):
        ArucoMarkerSpec("a", 1, "DICT_9X9_1")
    with pytest.raises(MarkerTrackerError, match="not a marker tracker"):
        MarkerTracker.from_config({"kind": "centerline"})


def _occlusion_clip(occluded=range(10, 15), n=30, radius=8.0, mask_side="right"):
    """A green disc moving right 1.5 px/frame; in frames ``occluded`` a white card hides half of it."""
    frames, truth = [], []
    for t in range(n):
        c = (30.0 + 1.5 * t, 60.0 + 0.5 * t)
        f = _disc_frame([c], [(20, 230, 20)], radius=radius, supersample=4)
        if t in occluded:
            x = int(round(c[0]))
            if mask_side == "right":
                f[:, x:x + 20] = 255
            else:
                f[int(round(c[1])) - 20:int(round(c[1])), :] = 255  # upper half hidden
        frames.append(f)
        truth.append(c)
    return frames, np.array(truth)


@pytest.mark.parametrize("side", ["right", "top"])
def test_half_occluded_marker_is_invalid_and_counted(side):
    frames, truth = _occlusion_clip(mask_side=side)
    # without the footprint check the half disc is "valid" with a biased centroid (issue 12 item 10)
    plain = MarkerTracker([GREEN], footprint_tolerance=None).track(frames)
    assert plain.valid.all()
    bias = np.linalg.norm(plain.keypoints[10:15, 0] - truth[10:15], axis=1)
    assert bias.min() > 2.5  # 4r/(3 pi) = 3.4 px for r = 8
    traj = MarkerTracker([GREEN]).track(frames)
    assert traj.valid[:, 0].tolist() == [not (10 <= t < 15) for t in range(30)]
    assert traj.meta["occluded"] == {"green": 5} and traj.meta["lost"] == {"green": 5}
    ok = traj.valid[:, 0]
    assert np.abs(traj.keypoints[ok, 0] - truth[ok]).max() < 0.2  # the visible frames stay unbiased


def test_footprint_check_follows_gradual_change_and_accepts_a_lasting_one():
    tracker = MarkerTracker([GREEN], footprint_window=5)
    growing = [_disc_frame([(80.0, 60.0)], [(20, 230, 20)], radius=5.0 + 0.15 * t, supersample=4) for t in range(40)]
    traj = tracker.track(growing)  # radius 5 -> 10.9 px: area x 4.7 over the clip, ~3 % per frame
    assert traj.valid.all() and traj.meta["occluded"] == {"green": 0}
    # a marker whose lit side turns away: from now on a smaller, lopsided blob (a crescent) every frame;
    # flagged while the reference is the whole disc, then the new look is accepted
    disc = _disc_frame([(80.0, 60.0)], [(20, 230, 20)], radius=8.0, supersample=4)
    crescent = disc.copy()
    crescent[:, 80:] = 40
    traj = tracker.track([disc] * 6 + [crescent] * 10)
    assert traj.valid[:, 0].tolist() == [True] * 6 + [False] * 4 + [True] * 6
    assert tracker.occluded == [4] and tracker.footprint_resets == [1]


def _approach_clip(radius, centre=lambda t: (80.0, 60.0), n=16, blur=None):
    """A green disc of ``radius(t)`` px at ``centre(t)``; ``blur(t)`` px: motion blur of that length along x
    (the frame is the mean of 9 sub-frame discs over the exposure)."""
    frames = []
    for t in range(n):
        cx, cy = centre(t)
        L = blur(t) if blur else 0.0
        subs = [_disc_frame([(cx + s, cy)], [(20, 230, 20)], radius=radius(t), supersample=4).astype(float)
                for s in (np.linspace(-L / 2, L / 2, 9) if L else [0.0])]
        frames.append(np.mean(subs, axis=0).round().astype(np.uint8))
    return frames


@pytest.mark.parametrize("case", ["closer", "farther", "blur"])
def test_fully_visible_marker_that_changes_size_or_blurs_is_never_called_partly_hidden(case):
    """Regression: a whole marker that came closer (radius 5 -> 9 px), went farther (9 -> 5 px) or moved fast
    (a motion-blur streak of 14 px after slow frames) was flagged "partly hidden" for footprint_window - 1 =
    8 frames (the area ratio and the elongation both left the old footprint limits). Occlusion only removes
    pixels from one side; these blobs stay centrally symmetric, so every frame is valid and unbiased."""
    radius = {"closer": lambda t: 5.0 if t < 6 else 9.0, "farther": lambda t: 9.0 if t < 6 else 5.0,
              "blur": lambda t: 6.0}[case]
    blur = (lambda t: 0.0 if t < 6 else 14.0) if case == "blur" else None
    frames = _approach_clip(radius, blur=blur)
    tracker = MarkerTracker([GREEN])
    traj = tracker.track(frames)
    assert traj.valid[:, 0].tolist() == [True] * 16
    assert tracker.occluded == [0] and traj.meta["occluded"] == {"green": 0}
    assert np.abs(traj.keypoints[:, 0] - [80.0, 60.0]).max() < 0.2
    assert traj.meta["blobs"]["green"]["status"] == [""] * 16


def test_marker_entering_at_the_image_edge_nearer_than_it_left_is_valid_once_inside():
    """Regression: the reference footprint outlives a loss; a marker that left the frame small and came back in
    at the left edge larger (nearer the camera) was rejected as partly hidden once fully inside."""
    def centre(t):
        return (100.0 + 30 * t, 60.0) if t < 4 else (-8.0 + 4 * (t - 4), 60.0)

    frames = _approach_clip(lambda t: 5.0 if t < 4 else 8.0, centre=centre, n=20)
    tracker = MarkerTracker([GREEN])
    traj = tracker.track(frames)
    status = traj.meta["blobs"]["green"]["status"]
    inside = [t for t in range(20) if 8.0 + 1 < centre(t)[0] < 160 - 8.0 - 1]
    assert all(traj.valid[t, 0] for t in inside), status
    assert tracker.occluded == [0]
    # the frames it was cut by the border are invalid and say so
    cut = [t for t in range(4, 20) if centre(t)[0] - 8.0 < 0.5]
    assert cut and all(status[t] == "at the image border" for t in cut if np.isfinite(traj.meta["blobs"]["green"]["area"][t]))
    truth = np.array([centre(t) for t in inside])
    assert np.abs(traj.keypoints[inside, 0] - truth).max() < 0.2


def test_footprint_settings_are_validated():
    with pytest.raises(MarkerTrackerError, match="footprint_tolerance must be a number in \\(0, 1\\)"):
        MarkerTracker.from_config({"markers": [], "aruco": [{"name": "a", "id": 1}], "footprint_tolerance": 1.5})
    with pytest.raises(MarkerTrackerError, match="footprint_tolerance.*'lots'"):
        MarkerTracker([GREEN], footprint_tolerance="lots")
    with pytest.raises(MarkerTrackerError, match="footprint_window must be an integer >= 3"):
        MarkerTracker([GREEN], footprint_window=2)
    assert MarkerTracker.from_config({"markers": [], "aruco": [{"name": "a", "id": 1}],
                                      "footprint_tolerance": None}).footprint_tolerance is None


def test_track_command_reports_partly_hidden_frames(tmp_path, capsys):
    """Through `vid2sid track` on an mp4 I write: the summary line says how many frames were hidden."""
    from vid2sid_ros.cli import main
    from vid2sid_ros.io.video import write_video

    frames, _ = _occlusion_clip(radius=9.0)  # green = the finger rig's "middle" marker
    video = write_video(tmp_path / "occluded.mp4", np.stack(frames), 30.0)
    out = tmp_path / "traj.json"
    assert main(["track", str(video), "--rig", "finger", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "middle 83% (5 frame(s) partly hidden: invalid)" in err, err
    assert ("warning: marker 'middle' tracked in 83 % of 30 frames (below 90 %): 5 lost (5 partly hidden) in frames "
            "10-14;") in err, err
    import json

    valid = [v[1] for v in json.loads(out.read_text())["valid"]]
    assert [t for t, v in enumerate(valid) if not v] == [10, 11, 12, 13, 14]
