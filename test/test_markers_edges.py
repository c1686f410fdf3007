"""Marker tracker edges the synthetic-disc tests left open (survivors of ``bench/mutation.py --only markers``).

Every spec and tracker here is built inside the test (a module-level constant is built once,
before any mutant is switched on, so it cannot catch a mutant of the constructor): the HSV
and area bounds at their limits, what ``from_config`` passes on, the footprint rule at its
exact limits, the elongation formula on known moments, what ``track`` copies into the
trajectory, and that a marker moving slowly is found in its search window (the whole-frame
search runs once, not every frame).
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
from test_markers import _disc_frame

from vid2sid_ros.perception.markers import (ArucoMarkerSpec, MarkerSpec, MarkerTracker, MarkerTrackerError, _Blob,
                                            _elongation)

GREEN_LO, GREEN_HI = (45, 120, 80), (80, 255, 255)
G = (20, 230, 20)


def _green(**kw) -> MarkerSpec:
    return MarkerSpec("green", GREEN_LO, GREEN_HI, **kw)


def test_elongation_of_known_second_moments():
    assert _elongation({"mu20": 4.0, "mu11": 0.0, "mu02": 1.0}) == pytest.approx(2.0)  # axes 2:1
    assert _elongation({"mu20": 1.0, "mu11": 0.0, "mu02": 9.0}) == pytest.approx(3.0)  # the other way round
    # the same 2:1 ellipse turned 45 degrees: mu20 = mu02 = 2.5, mu11 = 1.5 (eigenvalues 4 and 1)
    assert _elongation({"mu20": 2.5, "mu11": 1.5, "mu02": 2.5}) == pytest.approx(2.0)
    assert _elongation({"mu20": 3.0, "mu11": 0.0, "mu02": 3.0}) == pytest.approx(1.0)
    assert _elongation({"mu20": 4.0, "mu11": 0.0, "mu02": 0.0}) == math.inf  # a line: no width
    assert _elongation({"mu20": 0.0, "mu11": 0.0, "mu02": 0.0}) == math.inf  # one pixel: no shape
    # the degeneracy threshold is relative (1e-9 of the major axis), so the result is scale-free
    assert _elongation({"mu20": 1e6, "mu11": 0.0, "mu02": 1e-6}) == math.inf
    assert _elongation({"mu20": 1e-3, "mu11": 0.0, "mu02": 1e-11}) == pytest.approx(1e4)


def test_hsv_bounds_are_inclusive_at_the_opencv_limits():
    spec = MarkerSpec("edge", [0, 0, 0], np.array([180, 255, 255]))  # lists / arrays are accepted ...
    assert spec.hsv_lower == (0, 0, 0) and spec.hsv_upper == (180, 255, 255)
    assert type(spec.hsv_lower) is tuple and type(spec.hsv_upper) is tuple  # ... and stored as int tuples
    assert all(type(v) is int for v in spec.hsv_lower + spec.hsv_upper)
    for hi in [(181, 255, 255), (180, 256, 255), (180, 255, 256)]:
        with pytest.raises(MarkerTrackerError, match=r"marker 'edge': hsv_upper .* outside OpenCV HSV"):
            MarkerSpec("edge", (0, 0, 0), hi)
    with pytest.raises(MarkerTrackerError, match=r"marker 'edge': hsv_lower .* outside OpenCV HSV"):
        MarkerSpec("edge", (0, -1, 0), (10, 255, 255))
    with pytest.raises(MarkerTrackerError, match=r"marker 'edge': hsv_upper must be 3 integers"):
        MarkerSpec("edge", (0, 0, 0), (10, 255))
    # equal S and V bounds select one saturation/value: allowed
    one = MarkerSpec("one", (10, 100, 50), (20, 100, 50))
    assert one.hsv_lower[1:] == one.hsv_upper[1:] == (100, 50)


def test_area_bounds_at_their_limits_and_stored_as_ints():
    assert MarkerSpec("a", GREEN_LO, GREEN_HI, min_area_px=1).min_area_px == 1
    spec = MarkerSpec("a", GREEN_LO, GREEN_HI, min_area_px=6.0, max_area_px=6)
    assert spec.min_area_px == 6 and type(spec.min_area_px) is int and spec.max_area_px == 6
    with pytest.raises(MarkerTrackerError, match="min_area_px must be >= 1"):
        MarkerSpec("a", GREEN_LO, GREEN_HI, min_area_px=0)
    with pytest.raises(MarkerTrackerError, match="max_area_px 5 < min_area_px"):
        MarkerSpec("a", GREEN_LO, GREEN_HI, min_area_px=6, max_area_px=5)
    assert MarkerSpec("a", GREEN_LO, GREEN_HI).max_area_px is None


def test_aruco_id_zero_is_valid_and_stored_as_int():
    spec = ArucoMarkerSpec("base", np.int64(0))
    assert spec.marker_id == 0 and type(spec.marker_id) is int
    assert ArucoMarkerSpec("base", "7").marker_id == 7
    with pytest.raises(MarkerTrackerError, match="marker_id must be >= 0, got -1"):
        ArucoMarkerSpec("base", -1)


def test_from_config_passes_every_setting_on():
    cfg = {"kind": "markers", "min_area_px": 9, "max_area_px": 500, "roi_radius_px": 11,
           "footprint_tolerance": 0.25, "footprint_window": 5,
           "markers": [{"name": "tip", "hsv_lower": [170, 120, 80], "hsv_upper": [10, 255, 255]},
                       {"name": "mid", "hsv_lower": list(GREEN_LO), "hsv_upper": list(GREEN_HI),
                        "min_area_px": 4, "max_area_px": 90}],
           "aruco": [{"name": "base", "id": 3, "dictionary": "DICT_5X5_50"}, {"name": "top", "id": 0}]}
    tr = MarkerTracker.from_config(cfg)
    assert tr.names == ("tip", "mid", "base", "top")
    tip, mid = tr.markers
    assert (tip.name, tip.hsv_lower, tip.hsv_upper, tip.min_area_px, tip.max_area_px) == \
        ("tip", (170, 120, 80), (10, 255, 255), 9, 500)  # the tracker-wide defaults
    assert (mid.name, mid.hsv_lower, mid.hsv_upper, mid.min_area_px, mid.max_area_px) == \
        ("mid", GREEN_LO, GREEN_HI, 4, 90)  # per-marker values win
    assert [(a.name, a.marker_id, a.dictionary) for a in tr.aruco] == [("base", 3, "DICT_5X5_50"),
                                                                        ("top", 0, "DICT_4X4_50")]
    assert (tr.roi_radius_px, tr.footprint_tolerance, tr.footprint_window) == (11, 0.25, 5)
    # the defaults of an otherwise empty config
    d = MarkerTracker.from_config({"markers": [{"name": "m", "hsv_lower": GREEN_LO, "hsv_upper": GREEN_HI}]})
    assert (d.markers[0].min_area_px, d.markers[0].max_area_px, d.aruco) == (6, None, ())
    assert (d.roi_radius_px, d.footprint_tolerance, d.footprint_window) == (24, 0.3, 9)
    assert MarkerTracker.from_config({"markers": None, "aruco": [{"name": "a", "id": 1}]}).markers == ()
    with pytest.raises(MarkerTrackerError, match=r"markers\[0\]: unknown key\(s\) \['size'\], missing \[\]"):
        MarkerTracker.from_config({"markers": [{"name": "m", "hsv_lower": GREEN_LO, "hsv_upper": GREEN_HI,
                                                "size": 3}]})
    for bad in [{"name": "a"}, {"id": 1}, ["a", 1]]:
        with pytest.raises(MarkerTrackerError, match=r"aruco\[0\] must be a mapping with 'name' and 'id'"):
            MarkerTracker.from_config({"aruco": [bad]})


def _footprint_tracker(tol: float = 0.5, window: int = 3) -> MarkerTracker:
    return MarkerTracker([_green()], footprint_tolerance=tol, footprint_window=window)


def _b(area: float, asymmetry: float = 0.0) -> _Blob:
    return _Blob(50.0, 50.0, (45, 45, 10, 10), area, 1.0, asymmetry)


def test_footprint_limits_are_inclusive_and_checked_from_the_third_detection():
    # tol = 0.5: partly hidden = area below 0.5 x the reference AND asymmetry above it by more than 0.035
    for blob, ok in [(_b(50.0, 0.09), True), (_b(49.0, 0.09), False), (_b(49.0, 0.035), True),
                     (_b(49.0, 0.0351), False), (_b(10.0), True), (_b(1000.0, 0.09), True), (_b(100.0, 0.5), True)]:
        tr = _footprint_tracker(window=9)
        assert all(tr._footprint_ok(0, _b(100.0)) for _ in range(3))
        assert tr._footprint_ok(0, blob) is ok, blob
        assert tr.occluded == [0 if ok else 1]
    tr = _footprint_tracker()
    assert tr._footprint_ok(0, _b(100.0)) and tr._footprint_ok(0, _b(100.0))
    assert tr._footprint_ok(0, _b(10.0, 0.5))  # only two known: no reference yet, accepted
    tr = _footprint_tracker(window=9)
    assert all(tr._footprint_ok(0, _b(100.0)) for _ in range(3))
    assert not tr._footprint_ok(0, _b(10.0, 0.5))  # the fourth is checked against the median of three
    # the reference is the median of the history: one outlier accepted early does not move it
    tr = _footprint_tracker(window=9)
    for a, s in ((100.0, 0.0), (100.0, 0.0), (180.0, 0.2), (100.0, 0.0)):
        assert tr._footprint_ok(0, _b(a, s))
    assert tr._footprint_ok(0, _b(50.0, 0.09)) and not tr._footprint_ok(0, _b(49.9, 0.0351))
    # a marker that is always a little lopsided (a lit crescent): the limit is relative to its own asymmetry
    tr = _footprint_tracker(window=9)
    assert all(tr._footprint_ok(0, _b(100.0, 0.0625)) for _ in range(3))
    assert tr._footprint_ok(0, _b(40.0, 0.0975)) and not tr._footprint_ok(0, _b(40.0, 0.0976))


def test_footprint_resets_count_every_rebuild():
    tr = _footprint_tracker(window=3)
    seq = [_b(100.0)] * 3 + [_b(40.0, 0.09)] * 3 + [_b(16.0, 0.2)] * 3
    got = [tr._footprint_ok(0, b) for b in seq]
    # (40, 0.09): flagged twice, then the third in a row rebuilds the reference from it; (16, 0.2) then
    # finds fewer than three known footprints: no reference yet, accepted
    assert got == [True] * 3 + [False, False, True] + [True, True, True]
    assert tr.footprint_resets == [1] and tr.occluded == [2]
    got = [tr._footprint_ok(0, _b(6.0, 0.3)) for _ in range(3)]
    assert got == [False, False, True] and tr.footprint_resets == [2] and tr.occluded == [4]
    off = MarkerTracker([_green()], footprint_tolerance=None)
    assert all(off._footprint_ok(0, _b(a, s)) for a, s in ((100.0, 0), (100.0, 0), (100.0, 0), (1.0, 0.5), (1e6, 0)))
    assert off.occluded == [0]


def test_the_reference_is_the_median_of_the_last_window_only():
    # window 3: after 100, 100, 100, 150, 150, 150 the reference area is 150 (not 125 over all six), so a
    # lopsided blob of 70 px² (below 0.5 x 150, above 0.5 x 125) is partly hidden
    tr = _footprint_tracker(window=3)
    assert all(tr._footprint_ok(0, _b(a)) for a in (100.0, 100.0, 100.0, 150.0, 150.0, 150.0))
    assert not tr._footprint_ok(0, _b(70.0, 0.09))


def test_a_partly_hidden_marker_beside_clutter_is_measured_by_its_own_component():
    """A second, smaller blob of the marker's colour in the search window sends the measurement through
    connected components: the marker's own area, elongation and asymmetry are used there too."""
    frames = []
    for t in range(12):
        f = np.full((120, 160, 3), 40, np.uint8)
        cv2.circle(f, (80, 60), 8, G, -1)
        cv2.circle(f, (98, 60), 2, G, -1)  # clutter: 13 px² of the same green, inside the window
        if t >= 8:
            f[:, 81:92] = 255  # the marker's right half hidden (the clutter stays in view)
        frames.append(f)
    tr = MarkerTracker([_green()])
    traj = tr.track(frames)
    log = tr.frame_log()["green"]
    assert log["status"] == [""] * 8 + ["partly hidden"] * 4
    assert traj.valid[:, 0].tolist() == [True] * 8 + [False] * 4
    whole = int(np.count_nonzero(cv2.circle(np.zeros((120, 160), np.uint8), (80, 60), 8, 1, -1)))
    assert log["area"][:8] == [float(whole)] * 8 and log["area"][8] < 0.7 * whole
    assert all(1.0 <= e < 1.1 for e in log["elongation"][:8]) and log["elongation"][8] > 1.5


def test_the_frame_log_says_why_each_frame_was_lost():
    frames = [_disc_frame([(40.0 + 2 * t, 50.0)], [G]) for t in range(4)]
    frames.append(np.full_like(frames[0], 40))  # the marker gone
    edge = np.full_like(frames[0], 40)
    cv2.circle(edge, (2, 50), 5, G, -1)  # cut by the left border
    frames.append(edge)
    tr = MarkerTracker([_green()])
    tr.track(frames)
    log = tr.frame_log()
    assert list(log) == ["green"] and log["green"]["status"] == ["", "", "", "", "not found", "at the image border"]
    assert math.isnan(log["green"]["area"][4]) and math.isnan(log["green"]["elongation"][4])
    assert 70.0 < log["green"]["area"][0] < 90.0 and 1.0 <= log["green"]["elongation"][0] < 1.1  # a disc of r = 5
    assert 0 < log["green"]["area"][5] < 70.0


def test_asymmetry_of_known_third_moments():
    from vid2sid_ros.perception.markers import _asymmetry

    # a centrally symmetric shape (every odd moment zero) has none, whatever its size or elongation
    assert _asymmetry({"m00": 50.0, "mu20": 400.0, "mu02": 25.0, "mu30": 0.0, "mu12": 0.0, "mu21": 0.0,
                       "mu03": 0.0}) == 0.0
    # |E[|d|^2 d]| / E[|d|^2]^1.5: E[|d|^2] = (mu20 + mu02) / m00 = 4; E[|d|^2 d] = (mu30 + mu12, mu21 + mu03) / m00
    m = {"m00": 10.0, "mu20": 30.0, "mu02": 10.0, "mu30": 24.0, "mu12": 8.0, "mu21": 0.0, "mu03": 24.0}
    assert _asymmetry(m) == pytest.approx(math.hypot(3.2, 2.4) / 8.0)
    # every third moment enters with its sign: (mu30 + mu12, mu21 + mu03) = (32, 32) / 10
    assert _asymmetry({**m, "mu21": 8.0}) == pytest.approx(math.hypot(3.2, 3.2) / 8.0)
    assert _asymmetry({**m, "mu20": 0.0, "mu02": 0.0}) == 0.0 and _asymmetry({**m, "m00": 0.0}) == 0.0
    # a drawn half disc is lopsided, the whole disc is not (values in the module doc)
    whole = np.zeros((60, 60), np.uint8)
    cv2.circle(whole, (30, 30), 12, 1, -1)
    half = whole.copy()
    half[:, 31:] = 0
    assert _asymmetry(cv2.moments(whole, True)) < 0.005
    assert 0.08 < _asymmetry(cv2.moments(half, True)) < 0.1


def test_track_copies_times_names_and_flags_into_the_trajectory():
    frames = [_disc_frame([(40.0 + 2 * t, 50.0)], [G]) for t in range(4)]
    tr = MarkerTracker([_green()])
    traj = tr.track(frames, time=[0.5, 0.75, 1.0, 1.25], source="cam0", trial_id="run3")
    assert np.array_equal(traj.time, [0.5, 0.75, 1.0, 1.25])
    assert (traj.source, traj.trial_id, traj.names) == ("cam0", "run3", ("green",))
    assert traj.meta["tracker"] == "markers"
    assert np.allclose(traj.keypoints[:, 0, 0], [40.0, 42.0, 44.0, 46.0], atol=0.2)
    plain = tr.track(frames)
    assert (plain.source, plain.trial_id) == ("", "") and np.array_equal(plain.time, [0.0, 1.0, 2.0, 3.0])
    # invalid_frames given as 0/1 integers: flags, not row indices
    flagged = tr.track(frames, invalid_frames=[0, 1, 0, 1])
    assert flagged.valid[:, 0].tolist() == [True, False, True, False]
    assert flagged.meta["lost"] == {"green": 2}
    with pytest.raises(MarkerTrackerError, match="time has 3 entries for 4 frames"):
        tr.track(frames, time=[0.0, 1.0, 2.0])


@pytest.mark.parametrize("transpose", [False, True], ids=["along_x", "along_y"])
def test_a_slowly_moving_marker_is_found_in_its_window_without_a_whole_frame_search(transpose):
    """The speed claim of the module doc: after the first frame, a marker moving at constant
    velocity is found in the window around its predicted position (no whole-frame search), and
    a compact blob costs no connected-components pass."""
    tr = MarkerTracker([_green()], roi_radius_px=12)
    calls = _spied(tr)
    # speeding up from 4 to 13 px a frame: the window (half-size 12 px, a radius-5 disc must lie inside it)
    # holds the marker only around the constant-velocity prediction, never around the last position
    truth = [(20.0 + 4 * t + 0.5 * t * (t - 1), 30.0 + 1.75 * t) for t in range(11)]
    if transpose:  # the same motion down the image: x and y must not be mixed up
        truth = [(y, x) for x, y in truth]
    traj = tr.track([_disc_frame([c], [G]) for c in truth])
    assert traj.valid.all()
    assert np.abs(traj.keypoints[:, 0] - np.array(truth)).max() < 0.2
    assert calls == {"coarse": 1, "components": 1}  # the first frame's whole-frame search only


def test_a_speck_inside_the_search_window_does_not_pull_the_centroid():
    """A window holding the marker and a same-coloured speck is not one compact blob: the largest
    component is measured, not the moment of everything in range; its footprint (area, elongation)
    matches the one the compact-blob path measured on the frames before the speck appeared."""
    frames, truth = [], []
    for t in range(8):
        c = (60.0 + 1.5 * t, 60.0 + 0.5 * t)
        f = _disc_frame([c], [G])
        if t >= 4:
            x = int(round(c[0]))
            f[69:72, x + 9:x + 12] = G  # 9 px speck 9-11 px right of and below the centre, inside the window
        frames.append(f)
        truth.append(c)
    tr = MarkerTracker([_green()], roi_radius_px=12)
    traj = tr.track(frames)
    assert traj.valid.all() and tr.occluded == [0]
    assert np.abs(traj.keypoints[:, 0] - np.array(truth)).max() < 0.2


def _spied(tracker: MarkerTracker) -> dict[str, int]:
    """Count the whole-frame searches and connected-component passes ``tracker`` makes."""
    calls = {"coarse": 0, "components": 0}
    coarse, components = tracker._coarse_search, tracker._largest_component

    def _coarse(*a, **k):
        calls["coarse"] += 1
        return coarse(*a, **k)

    def _components(*a, **k):
        calls["components"] += 1
        return components(*a, **k)

    tracker._coarse_search, tracker._largest_component = _coarse, _components
    return calls


def _square(rows: slice, cols: slice) -> np.ndarray:
    f = np.full((120, 160, 3), 40, np.uint8)
    f[rows, cols] = G
    return f


@pytest.mark.parametrize("rows, cols, min_area, max_area, components", [
    (slice(41, 44), slice(61, 64), 5, None, 2),  # 3x3: one pixel left after 2x subsampling: found at full res
    (slice(40, 45), slice(60, 65), 10, None, 1),  # 5x5: 9 px subsampled = 36 px at full scale >= 10
    (slice(40, 42), slice(60, 62), 4, 4, 1),  # 2x2 = exactly min_area = max_area: accepted
    (slice(40, 45), slice(140, 145), 10, None, 1),  # far right: a wrong subsampled x would miss the re-search window
], ids=["vanishes_when_subsampled", "subsampled_area_is_scaled", "area_at_both_limits", "far_right"])
def test_small_markers_and_area_limits_in_the_whole_frame_search(rows, cols, min_area, max_area, components):
    tr = MarkerTracker([_green(min_area_px=min_area, max_area_px=max_area)])
    calls = _spied(tr)
    xy, valid = tr.detect(_square(rows, cols))
    centre = ((cols.start + cols.stop - 1) / 2, (rows.start + rows.stop - 1) / 2)
    assert valid[0] and np.allclose(xy[0], centre, atol=1e-6)
    assert calls == {"coarse": 1, "components": components}


def test_the_largest_blob_is_picked_wherever_it_is_in_scan_order():
    f = _disc_frame([(135.0, 100.0)], [G], radius=6)  # far from the image centre (the background's centroid)
    f[10:13, 20:23] = G  # a speck above the marker: the first component in row-major order
    f[110:112, 40:42] = G  # a 4 px speck below min_area_px, after it
    xy, valid = MarkerTracker([_green()]).detect(f)
    assert valid[0] and np.allclose(xy[0], (135.0, 100.0), atol=0.2)
    only_speck = _square(slice(50, 52), slice(50, 52))  # 4 px < min_area_px 6, with a max_area set too
    assert not MarkerTracker([_green(max_area_px=400)]).detect(only_speck)[1][0]


def test_both_blob_paths_measure_the_same_footprint():
    """The compact-blob fast path and the connected-components path give one area and elongation."""
    yy, xx = np.mgrid[0:60, 0:80]
    ellipse = ((((xx - 40.3) / 12.0) ** 2 + ((yy - 30.6) / 4.0) ** 2) <= 1).astype(np.uint8) * 255
    tr = MarkerTracker([_green()])
    spec = tr.markers[0]
    comp = tr._largest_component(ellipse, spec)
    assert comp.area == float((ellipse > 0).sum()) and 2.7 < comp.elongation < 3.3  # axes 12 : 4
    rgb = np.full((60, 80, 3), 40, np.uint8)
    rgb[ellipse > 0] = G
    fast = tr._blob(rgb, spec)
    assert fast.area == comp.area and fast.elongation == pytest.approx(comp.elongation, rel=1e-9)
    assert fast.bbox == comp.bbox and (fast.cx, fast.cy) == pytest.approx((comp.cx, comp.cy))


def test_wrapped_hue_mask_keeps_the_saturation_and_value_bounds():
    spec = MarkerSpec("red", (170, 100, 50), (10, 200, 250))
    pixels = {(175, 150, 150): 255, (5, 150, 150): 255, (0, 100, 50): 255, (179, 200, 250): 255,
              (150, 150, 150): 0, (20, 150, 150): 0,  # hue outside the wrapped range
              (175, 90, 150): 0, (5, 90, 150): 0, (175, 210, 150): 0, (5, 210, 150): 0,  # saturation
              (175, 150, 40): 0, (5, 150, 40): 0, (175, 150, 255): 0, (5, 150, 255): 0}  # value
    hsv = np.array([list(pixels)], np.uint8)
    assert spec.mask(hsv)[0].tolist() == list(pixels.values())


@pytest.mark.parametrize("step", [(13.0, 0.0), (-13.0, 0.0), (0.0, 13.0), (0.0, -13.0)],
                         ids=["right", "left", "down", "up"])
def test_a_marker_cut_by_the_search_window_edge_is_measured_whole(step):
    """A jump that puts the marker across the window's edge: the part inside the window would give a
    biased centroid; the tracker must measure the whole blob (full-frame fallback) instead."""
    truth = [(70.0 + 2 * t, 60.0 + t) for t in range(3)]  # predicted next: (76, 63)
    truth.append((76.0 + step[0], 63.0 + step[1]))        # the disc straddles the window (half-size 12) edge
    traj = MarkerTracker([_green()], roi_radius_px=12).track([_disc_frame([c], [G]) for c in truth])
    assert traj.valid.all()
    assert np.abs(traj.keypoints[:, 0] - np.array(truth)).max() < 0.2


def test_search_window_wholly_outside_the_frame_finds_nothing():
    frame = _disc_frame([(150.0, 110.0)], [G])  # 160 x 120
    tr = MarkerTracker([_green()])
    spec = tr.markers[0]
    for centre in [(172.0, 50.0), (175.0, 50.0), (50.0, 132.0), (50.0, 140.0)]:  # window starts at/after W or H
        assert tr._search_window(frame, spec, centre, 12) is None
    assert tr._search_window(frame, spec, (150.0, 110.0), 12) is not None


@pytest.mark.parametrize("axis", [0, 1], ids=["left", "top"])
def test_marker_reaching_the_image_edge_from_a_window_one_pixel_inside_is_invalid(axis):
    """The window (half-size 12 around the last position 13.5) starts at column/row 1; the marker
    now reaches column/row 0: the window shows it cut, the image border makes it invalid."""
    first, now = [60.0, 60.0], [60.0, 60.0]
    first[axis], now[axis] = 13.5, 4.6
    traj = MarkerTracker([_green()], roi_radius_px=12).track([_disc_frame([tuple(first)], [G]),
                                                              _disc_frame([tuple(now)], [G])])
    assert traj.valid[:, 0].tolist() == [True, False]


def test_tracker_settings_defaults_and_limits():
    tr = MarkerTracker([_green()])
    assert (tr.roi_radius_px, tr.footprint_tolerance, tr.footprint_window) == (24, 0.3, 9)
    edge = MarkerTracker([_green()], roi_radius_px=0, footprint_window=3, footprint_tolerance=0.999)
    assert (edge.roi_radius_px, edge.footprint_window) == (0, 3)
    assert edge.track([_disc_frame([(50.0, 50.0)], [G])] * 2).valid.all()  # roi 0: whole-frame search each frame
    for tol in (0.0, 1.0, -0.1):
        with pytest.raises(MarkerTrackerError, match=r"footprint_tolerance must be a number in \(0, 1\)"):
            MarkerTracker([_green()], footprint_tolerance=tol)
    for window in (5.0, True, "9"):
        with pytest.raises(MarkerTrackerError, match="footprint_window must be an integer >= 3"):
            MarkerTracker([_green()], footprint_window=window)
    assert MarkerTracker([_green()], footprint_window=np.int64(4)).footprint_window == 4
    with pytest.raises(MarkerTrackerError, match="roi_radius_px must be >= 0, got -1"):
        MarkerTracker([_green()], roi_radius_px=-1)


def test_frame_shape_checks_name_each_bad_dimension():
    tr = MarkerTracker([_green()])
    for shape in [(0, 5, 3), (5, 0, 3)]:
        with pytest.raises(MarkerTrackerError, match=r"H, W > 0, got \(%d, %d, 3\)" % shape[:2]):
            tr.detect(np.zeros(shape, np.uint8))
    with pytest.raises(MarkerTrackerError, match=r"shape \(H, W, 3\).*got \(10, 10, 4\)"):
        tr.detect(np.zeros((10, 10, 4), np.uint8))
    for shape in [(1, 10, 3), (10, 1, 3)]:  # one row or one column is a (tiny) image: nothing found, no error
        xy, valid = tr.detect(np.zeros(shape, np.uint8))
        assert not valid[0] and np.isnan(xy[0]).all()


def _aruco_frame(tags, size=(200, 320), offset=(0.0, 0.0)):
    """White frame with ArUco tags ``[(dictionary, id, x0, y0)]`` of 60 px, shifted by a sub-pixel ``offset``."""
    canvas = np.full(size, 255, np.uint8)
    for dname, mid, x0, y0 in tags:
        d = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, dname))
        canvas[y0:y0 + 60, x0:x0 + 60] = cv2.aruco.generateImageMarker(d, mid, 60)
    m = np.float32([[1, 0, offset[0]], [0, 1, offset[1]]])
    g = cv2.warpAffine(canvas, m, size[::-1], flags=cv2.INTER_LINEAR, borderValue=255)
    return np.repeat(g[..., None], 3, axis=2)


def test_aruco_markers_of_two_dictionaries_beside_a_colour_marker():
    tr = MarkerTracker([_green()], aruco=[ArucoMarkerSpec("a", 7), ArucoMarkerSpec("b", 3, "DICT_5X5_50")])
    frame = _aruco_frame([("DICT_4X4_50", 7, 20, 20), ("DICT_5X5_50", 3, 200, 110)])
    frame[150:161, 95:106] = G  # an 11x11 px green square, centre (100, 155)
    xy, valid = tr.detect(frame)
    assert valid.all()
    assert np.allclose(xy, [(100.0, 155.0), (49.5, 49.5), (229.5, 139.5)], atol=0.1)
    # a frame holding only one dictionary's tag: the other dictionary finding nothing does not stop the search
    only_a = tr.detect(_aruco_frame([("DICT_4X4_50", 7, 20, 20)]))[1]
    only_b = tr.detect(_aruco_frame([("DICT_5X5_50", 3, 200, 110)]))[1]
    assert only_a.tolist() == [False, True, False] and only_b.tolist() == [False, False, True]
    # one detector per dictionary, built once and reused
    dets = dict(tr._aruco_detectors)
    assert sorted(dets) == ["DICT_4X4_50", "DICT_5X5_50"] and all(d is not None for d in dets.values())
    tr.detect(frame)
    assert all(tr._aruco_detectors[k] is dets[k] for k in dets)


@pytest.mark.parametrize("offset", [(0.5, 0.25), (0.3, 0.6)])
def test_aruco_centre_is_sub_pixel(offset):
    """Corner refinement: a tag drawn at a sub-pixel shift is located to < 0.12 px (integer corners: 0.15-0.25)."""
    tr = MarkerTracker([], aruco=[ArucoMarkerSpec("b", 3, "DICT_5X5_50")])
    xy, valid = tr.detect(_aruco_frame([("DICT_5X5_50", 3, 100, 70)], offset=offset))
    assert valid[0]
    assert np.abs(xy[0] - (129.5 + offset[0], 99.5 + offset[1])).max() < 0.12


def test_a_marker_larger_than_the_search_window_is_measured_on_the_full_frame():
    truth = [(80.0, 60.0), (81.0, 60.5), (82.0, 61.0)]
    tr = MarkerTracker([_green()], roi_radius_px=8)  # re-search window half-size 2 * 8 = 16 < radius 25
    traj = tr.track([_disc_frame([c], [G], radius=25.0) for c in truth])
    assert traj.valid.all()
    assert np.abs(traj.keypoints[:, 0] - np.array(truth)).max() < 0.2


def test_a_blob_the_subsampled_search_accepts_but_the_full_frame_refuses_is_lost_quietly():
    """A 5x5 square at odd rows/columns is 4 px (x4 = 16) subsampled but 25 px in full; with
    max_area_px 20 the whole-frame search finds it, the full-resolution measure refuses it."""
    tr = MarkerTracker([_green(max_area_px=20)])
    traj = tr.track([_square(slice(41, 46), slice(61, 66))] * 3)
    assert not traj.valid.any()
