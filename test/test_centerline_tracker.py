"""Centreline tracker on synthetic masks: arc-length resampling, keypoints, validity, track() bookkeeping.

Every frame here is an exact binary mask drawn from a known centreline (a tube of known
radius: the pixels whose centres lie within ``r`` of the curve), segmented by
:class:`MaskSegmenter`, so the expected keypoints follow from the curve by hand: a
straight band, an arc of known radius, a band leaving the image, a tip under an occluder.
"""

import math
import sys
import types

import cv2
import numpy as np
import pytest

from vid2sid_ros.perception.centerline import (BackgroundSegmenter, CenterlineError, CenterlineResult,
                                               CenterlineTracker, ColorSegmenter, CombinedSegmenter,
                                               _bilinear, _cross_section_offset, _extend_tip, _polyline_length,
                                               _refine_centerline, _smooth, resample_polyline)


class MaskSegmenter:
    """Foreground = red channel above 127 (the frames here are binary masks drawn in white)."""

    def segment(self, frame_rgb):
        return frame_rgb[..., 0] > 127


def tube_mask(shape, pts, r):
    """(H, W) bool: pixels whose centre lies within ``r`` px of the polyline ``pts`` (N, 2) (x, y)."""
    H, W = shape
    yy, xx = np.mgrid[0:H, 0:W].astype(float)
    pts = np.asarray(pts, float)
    best = np.full(shape, np.inf)
    for a, b in zip(pts[:-1], pts[1:]):
        d = b - a
        t = np.clip(((xx - a[0]) * d[0] + (yy - a[1]) * d[1]) / max(d @ d, 1e-12), 0.0, 1.0)
        best = np.minimum(best, np.hypot(xx - a[0] - t * d[0], yy - a[1] - t * d[1]))
    return best <= r


def frame_of(mask):
    f = np.zeros(mask.shape + (3,), np.uint8)
    f[mask] = 255
    return f


def band(x=40.0, y0=10.0, y1=90.0, r=4.0, shape=(120, 80)):
    """A vertical band (tube) from (x, y0) (the base) down to (x, y1) (the tip), radius r."""
    return tube_mask(shape, [[x, y0], [x, y1]], r)


def tracker(base=(40.0, 10.0), K=8, **kw):
    kw.setdefault("base_radius_px", 4.0)
    return CenterlineTracker(base, num_keypoints=K, segmentation=MaskSegmenter(), **kw)


def straight(base, L, K):
    """The K keypoints of a straight vertical body of length L from base: (k + 1) L / K below it."""
    return np.stack([np.full(K, base[0]), base[1] + (np.arange(K) + 1.0) / K * L], axis=1)


# -- arc length -----------------------------------------------------------------------------

def test_polyline_length_and_resampling_at_hand_computed_arc_lengths():
    poly = np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 10.0]])  # segments of 5 and 6 px
    assert _polyline_length(poly) == pytest.approx(11.0)
    assert _polyline_length(poly[:2]) == pytest.approx(5.0)
    assert _polyline_length(poly[:1]) == 0.0
    # 3-4-5 and a vertical leg: hand-computed points; NaN before 0 and beyond the end
    s = np.array([-1.0, 0.0, 0.5, 2.5, 5.0, 8.0, 11.0, 11.5])
    want = np.array([[np.nan, np.nan], [0, 0], [0.3, 0.4], [1.5, 2.0], [3, 4], [3, 7], [3, 10], [np.nan, np.nan]])
    np.testing.assert_allclose(resample_polyline(poly, s), want, atol=1e-12)
    # a zero-length first segment (a repeated point) does not hide the rest
    rep = np.array([[1.0, 1.0], [1.0, 1.0], [4.0, 5.0]])
    np.testing.assert_allclose(resample_polyline(rep, np.array([2.5, 5.0])), [[2.5, 3.0], [4.0, 5.0]])
    # a two-point polyline, and one shorter than 1 px
    np.testing.assert_allclose(resample_polyline(np.array([[0.0, 2.0], [4.0, 2.0]]), np.array([1.0, 4.0])),
                               [[1.0, 2.0], [4.0, 2.0]])
    np.testing.assert_allclose(resample_polyline(np.array([[0.0, 0.0], [0.0, 0.8]]), np.array([0.4])),
                               [[0.0, 0.4]])


def test_resampling_a_polyline_of_no_length_gives_nan():
    dot = np.array([[2.0, 3.0], [2.0, 3.0]])
    out = resample_polyline(dot, np.array([0.0, 1.0]))
    assert out.shape == (2, 2) and np.isnan(out).all()


def test_bilinear_interpolation_matches_hand_computed_values():
    img = np.array([[0.0, 1.0, 4.0, 9.0],
                    [2.0, 3.0, 7.0, 20.0],
                    [5.0, 11.0, 13.0, 17.0]])  # H = 3, W = 4, not separable
    assert _bilinear(img, np.array([1.0, 1.0])) == pytest.approx(3.0)
    # (x, y) = (1.25, 0.5): rows 0/1 at x = 1.25 are 1.75 and 4.0; half way: 2.875
    assert _bilinear(img, np.array([1.25, 0.5])) == pytest.approx(2.875)
    # (2.5, 1.75): row 1 at 2.5 = 13.5, row 2 = 15.0 -> 13.5 + 0.75 * 1.5
    assert _bilinear(img, np.array([2.5, 1.75])) == pytest.approx(14.625)
    # on the last column / row the far neighbour is clamped (no index error)
    assert _bilinear(img, np.array([3.0, 2.0])) == pytest.approx(17.0)
    assert _bilinear(img, np.array([3.0, 0.5])) == pytest.approx(14.5)
    assert _bilinear(img, np.array([2.5, 2.0])) == pytest.approx(15.0)
    # between the last two columns / rows: both neighbours are inside
    assert _bilinear(img, np.array([2.75, 0.0])) == pytest.approx(7.75)
    assert _bilinear(img, np.array([0.0, 1.5])) == pytest.approx(3.5)


# -- curve operations -----------------------------------------------------------------------

def test_smooth_keeps_straight_lines_and_the_ends_and_shrinks_a_circle_as_a_gaussian():
    line = np.array([[0.0, 0.0], [3.0, 4.0], [6.3, 8.4]])  # 10.5 px, unevenly sampled
    out = _smooth(line, 2.0)
    # resampled at (about) 1 px: ceil(10.5) + 1 points, evenly spaced, exactly on the line
    assert out.shape == (12, 2)
    np.testing.assert_allclose(out, resample_polyline(line, np.linspace(0.0, 10.5, 12)), atol=1e-9)
    # a circle of radius R smoothed along its arc by a Gaussian of sigma shrinks to R exp(-sigma^2 / 2 R^2)
    R, sigma = 12.0, 2.0
    th = np.linspace(0.0, 1.5 * np.pi, 4000)
    arc = np.stack([50 + R * np.cos(th), 50 + R * np.sin(th)], axis=1)
    out = _smooth(arc, sigma)
    rad = np.hypot(out[:, 0] - 50, out[:, 1] - 50)
    np.testing.assert_allclose(rad[8:-8], R * math.exp(-sigma ** 2 / (2 * R ** 2)), atol=0.01)
    assert np.all(rad[1:-1] < R)
    # the base (first point) and the tip (point-reflected ends) stay in place
    np.testing.assert_allclose(out[0], arc[0], atol=1e-12)
    np.testing.assert_allclose(out[-1], arc[-1], atol=1e-9)
    assert out.shape == (int(math.ceil(R * 1.5 * np.pi)) + 1, 2)
    # consecutive points stay (about) 1 px apart along the arc
    assert np.abs(np.linalg.norm(np.diff(out, axis=0), axis=1) - 1.0).max() < 0.05


def test_smooth_leaves_short_curves_and_zero_sigma_alone():
    short = np.array([[0.0, 0.0], [0.5, 0.0], [1.5, 0.0]])  # 1.5 px: returned as it is
    assert np.array_equal(_smooth(short, 2.0), short)
    bent = np.array([[0.0, 0.0], [3.0, 0.0], [3.0, 4.0]])
    assert np.array_equal(_smooth(bent, 0.0), bent)
    # a small sigma smooths a corner only a little, but it does smooth it
    out = _smooth(bent, 0.5)
    corner = out[3]
    assert out.shape == (8, 2) and 0.0 < np.hypot(*(corner - [3.0, 0.0])) < 0.3


def test_smooth_of_a_curve_shorter_than_the_kernel_keeps_its_points():
    # regression: with sigma 2 px (kernel half-width 6 px) a curve of under 6 px came out of the
    # convolution with the wrong number of points: a 4 px line as the single point (0, 0)
    np.testing.assert_allclose(_smooth(np.array([[0.0, 0.0], [4.0, 0.0]]), 2.0), [[x, 0.0] for x in range(5)],
                               atol=1e-12)
    np.testing.assert_allclose(_smooth(np.array([[0.0, 0.0], [2.0, 0.0]]), 2.0), [[0, 0], [1, 0], [2, 0]],
                               atol=1e-12)  # 2 px: already smoothed (resampled to 3 points)
    bent = _smooth(np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 2.0]]), 2.0)
    assert bent.shape == (5, 2)
    np.testing.assert_allclose(bent[[0, -1]], [[0.0, 0.0], [2.0, 2.0]], atol=1e-12)  # the ends stay
    np.testing.assert_allclose(bent[3:0:-1], 2.0 - bent[1:4, ::-1], atol=1e-12)  # mirror-symmetric about x + y = 2
    # through the tracker: a 3 px stub below the base was placed up to 15 px beside the body
    r = tracker(K=4).centerline(frame_of(band(y1=13.0)))
    assert r.valid.all() and r.length_px == pytest.approx(3.0, abs=0.5)
    np.testing.assert_allclose(r.keypoints, straight((40, 10), r.length_px, 4), atol=1e-6)


def test_cross_section_offset_measures_both_sides_at_quarter_pixels():
    m = band().astype(np.float32)  # columns 36..44: edges at 35.5 and 44.5
    x = np.array([1.0, 0.0])
    # the first 0.25 px sample outside (bilinear value below 0.5), on each side
    assert _cross_section_offset(m, np.array([40.0, 50.0]), x, 11.0) == (4.75, 4.75)
    assert _cross_section_offset(m, np.array([41.0, 50.0]), x, 11.0) == (3.75, 5.75)
    assert _cross_section_offset(m, np.array([41.0, 50.0]), -x, 11.0) == (5.75, 3.75)
    # the reach is included; a boundary beyond it on either side gives None
    assert _cross_section_offset(m, np.array([40.0, 50.0]), x, 4.75) == (4.75, 4.75)
    assert _cross_section_offset(m, np.array([40.0, 50.0]), x, 4.7) is None
    assert _cross_section_offset(m, np.array([41.0, 50.0]), x, 4.0) is None
    assert _cross_section_offset(m, np.array([40.0, 50.0]), x, 4.0) is None
    # leaving the image counts as a boundary (W = 30, H = 20; last pixel centres 29 and 19)
    full = np.ones((20, 30), np.float32)
    assert _cross_section_offset(full, np.array([28.5, 10.0]), x, 40.0) == (0.75, 28.75)
    assert _cross_section_offset(full, np.array([28.0, 10.0]), x, 40.0) == (1.25, 28.25)
    assert _cross_section_offset(full, np.array([10.0, 18.5]), np.array([0.0, 1.0]), 40.0) == (0.75, 18.75)
    assert _cross_section_offset(full, np.array([10.0, 1.0]), np.array([0.0, -1.0]), 40.0) == (1.25, 18.25)


def test_refine_centres_the_curve_between_the_mask_edges():
    m = tube_mask((120, 80), [[40.5, 10.0], [40.5, 90.0]], 4.0)  # columns 37..44: the axis at 40.5
    P = _refine_centerline(np.array([[40.0, 10.0], [40.0, 90.0]]), m, 4.0)
    # resampled every 2 px; every point but the base moves half a pixel onto the axis
    assert P.shape == (41, 2)
    np.testing.assert_allclose(P[:, 1], np.linspace(10.0, 90.0, 41), atol=1e-9)
    assert P[0].tolist() == [40.0, 10.0]
    np.testing.assert_allclose(P[1:, 0], 40.5, atol=1e-5)
    # a curve a full pixel off moves by the full pixel (the largest shift allowed)
    P = _refine_centerline(np.array([[39.5, 10.0], [39.5, 90.0]]), m, 4.0)
    np.testing.assert_allclose(P[1:, 0], 40.5, atol=1e-5)
    # a 2 px thin body, the curve 0.2 px inside its edge
    thin = np.zeros((60, 60), bool)
    thin[5:55, 40:42] = True
    P = _refine_centerline(np.array([[39.7, 5.0], [39.7, 54.0]]), thin, 2.0)
    np.testing.assert_allclose(P[1:, 0], 40.5, atol=1e-5)
    # a body cut by the image edge: the visible part (columns 0..6) is centred
    edge = np.zeros((60, 60), bool)
    edge[5:55, 0:7] = True
    P = _refine_centerline(np.array([[2.0, 5.0], [2.0, 54.0]]), edge, 4.0)
    np.testing.assert_allclose(P[1:, 0], 3.0, atol=1e-5)
    # a short curve still gets three points
    P = _refine_centerline(np.array([[40.0, 40.0], [40.0, 43.0]]), m, 4.0)
    np.testing.assert_allclose(P, [[40.0, 40.0], [40.5, 41.5], [40.5, 43.0]], atol=1e-5)


def test_refine_does_not_follow_clutter_that_widens_one_side():
    m = tube_mask((120, 80), [[40.5, 10.0], [40.5, 90.0]], 4.0)
    for w, x_at_40 in ((1, 41.0), (2, 40.0), (3, 40.0)):
        mc = m.copy()
        mc[30:50, 45:45 + w] = True  # a blob beside the right edge, rows 30..49
        P = _refine_centerline(np.array([[40.0, 10.0], [40.0, 90.0]]), mc, 4.0)
        # the shift at y = 40 would be 0.5 + w / 2 px: up to 1 px it is applied, beyond it the point stays
        assert P[15, 1] == pytest.approx(40.0) and P[15, 0] == pytest.approx(x_at_40, abs=1e-5), w
        assert P[25, 0] == pytest.approx(40.5, abs=1e-5)  # below the blob: centred as usual


def test_refine_moves_a_diagonal_curve_along_its_normal_onto_the_axis():
    m = tube_mask((100, 100), [[10.0, 10.0], [80.0, 80.0]], 4.0)  # symmetric about y = x
    poly = np.array([[10.0, 10.0], [80.0, 80.0]]) + [0.5, -0.5]  # 0.7 px off the axis
    P = _refine_centerline(poly, m, 4.0)
    assert np.abs(P[1:-1, 0] - P[1:-1, 1]).max() < 0.01
    # along the normal: x + y (the arc-length direction) is unchanged
    np.testing.assert_allclose(P[:, 0] + P[:, 1], np.linspace(20.0, 160.0, P.shape[0]), atol=1e-4)


def _dist(mask):
    return cv2.distanceTransform(mask.astype(np.uint8), cv2.DIST_L2, 5)


def test_extend_tip_marches_to_the_mask_edge_and_pulls_back_by_the_cap_radius():
    m = band()  # tip cap: rows up to 94, edge at 94.5; distance transform 5 on the axis
    poly = np.stack([np.full(8, 40.0), np.linspace(10.0, 80.0, 8)], axis=1)  # the skeleton stops 10 px short
    out, status = _extend_tip(poly, m, _dist(m), 2.4)
    # 1 px steps to (40, 94), the first quarter-pixel sample outside at 94.75, minus the cap radius 5
    assert status == "cap:5.000"
    want = np.concatenate([poly, [[40.0, y] for y in range(81, 90)], [[40.0, 89.75]]])
    np.testing.assert_allclose(out, want, atol=1e-12)
    # a skeleton end between pixel rows: the exit is the first sample outside (94.6), the tip 89.6
    poly = np.stack([np.full(8, 40.0), np.linspace(10.0, 80.6, 8)], axis=1)
    out, status = _extend_tip(poly, m, _dist(m), 2.4)
    assert status == "cap:5.000" and out[-1].tolist() == pytest.approx([40.0, 89.6])
    # a skeleton only 2 px long is continued as well
    out, status = _extend_tip(np.array([[40.0, 78.0], [40.0, 79.0], [40.0, 80.0]]), m, _dist(m), 2.4)
    assert status == "cap:5.000" and out[-1].tolist() == pytest.approx([40.0, 89.75])


def test_extend_tip_recentres_an_off_axis_end_and_follows_a_diagonal():
    m = band()
    poly = np.array([[40.0, 10.0], [40.0, 40.0], [40.5, 60.0], [41.0, 80.0]])  # ends 1 px right of the axis
    out, status = _extend_tip(poly, m, _dist(m), 2.4)
    assert status.startswith("cap:") and float(status[4:]) == pytest.approx(5.0, abs=0.05)
    np.testing.assert_allclose(out[:4], poly)
    np.testing.assert_allclose(out[-1], [40.0, 89.7], atol=0.2)
    assert np.abs(out[5:, 0] - 40.0).max() < 0.2  # back on the axis after one step
    d = tube_mask((100, 100), [[20.0, 10.0], [70.0, 60.0]], 4.0)
    out, status = _extend_tip(np.array([[20.0, 10.0], [40.0, 30.0], [62.0, 52.0]]), d, _dist(d), 2.4)
    assert status.startswith("cap:")
    np.testing.assert_allclose(out[-1], [70.0, 60.0], atol=0.3)
    assert np.abs(out[:, 0] - out[:, 1] - 10.0).max() < 0.05  # on the axis y = x - 10 all the way


def test_extend_tip_statuses():
    m = band()
    dist = _dist(m)
    assert _extend_tip(np.array([[40.0, 10.0], [40.0, 20.0]]), m, dist, 2.4)[1] == "short"  # under 3 points
    still = np.array([[40.0, 80.0], [40.0, 80.0], [40.0, 80.0]])
    out, status = _extend_tip(still, m, dist, 2.4)  # no direction to march in
    assert status == "short" and out is still
    # the body leaves the image: the skeleton end is kept
    deep = band(y1=140.0)
    poly = np.stack([np.full(8, 40.0), np.linspace(10.0, 100.0, 8)], axis=1)
    out, status = _extend_tip(poly, deep, _dist(deep), 2.4)
    assert status == "image_border" and out is poly
    # a tip close to (not at) each image side is found
    shape = (60, 80)
    for a, b in (((60, 30), (5, 30)), ((40, 50), (40, 5)), ((20, 30), (74, 30)), ((40, 10), (40, 54))):
        mk = tube_mask(shape, [a, b], 4.0)
        a, b = np.array(a, float), np.array(b, float)
        out, status = _extend_tip(a + np.linspace(0, 0.7, 6)[:, None] * (b - a), mk, _dist(mk), 2.4)
        assert status == "cap:5.000" and np.linalg.norm(out[-1] - b) < 0.5, (b, status, out[-1])


def test_extend_tip_stops_at_a_wider_part_of_the_body():
    poly = np.stack([np.full(8, 40.0), np.linspace(10.0, 75.0, 8)], axis=1)
    for R, want in ((6.0, "cap:6.197"), (7.0, "cap:7.000"), (8.0, "on_body"), (10.0, "on_body"), (15.0, "on_body")):
        m = band() | tube_mask((120, 80), [[40.0, 88.0], [40.0, 88.0]], R)  # a round end of radius R at y = 88
        out, status = _extend_tip(poly, m, _dist(m), 2.4)
        assert status == want, R
        if want == "on_body":
            assert out is poly
        else:  # the exit beyond the round end, pulled back by its (distance-transform) radius
            assert out[-1, 1] == pytest.approx(88.0 + R + 0.75 - float(want[4:]), abs=0.01)


def test_extend_tip_is_not_pulled_aside_by_clutter_beside_the_tip():
    # a blob on the right of the body near its tip: the cross-section there (4.75 + 10.75 px) is wider than
    # 2.6 r + 2 = 15 px (r = 5 at the skeleton end), so the march keeps its line instead of re-centring into it
    poly = np.stack([np.full(8, 40.0), np.linspace(10.0, 75.0, 8)], axis=1)
    for cols in (slice(44, 51), slice(29, 36)):  # on the right, and mirrored on the left
        m = band()
        m[78:86, cols] = True
        out, status = _extend_tip(poly, m, _dist(m), 2.4)
        assert status == "cap:5.000" and np.abs(out[:, 0] - 40.0).max() < 1e-9, cols
        assert out[-1].tolist() == pytest.approx([40.0, 89.75])


def test_extend_tip_keeps_the_skeleton_end_when_the_body_leaves_the_image_sideways():
    m = tube_mask((60, 80), [[10.0, 30.0], [100.0, 30.0]], 4.0)  # leaves through the right edge (W = 80)
    poly = np.stack([np.linspace(10.0, 60.0, 6), np.full(6, 30.0)], axis=1)
    out, status = _extend_tip(poly, m, _dist(m), 2.4)
    assert status == "image_border" and out is poly


def test_extend_tip_gives_up_after_six_radii_plus_twenty_steps():
    m = band()
    for y_end, status in ((61.0, "cap:5.000"), (60.0, "on_body")):  # 34 steps at radius 2.4
        poly = np.stack([np.full(5, 40.0), np.linspace(10.0, y_end, 5)], axis=1)
        out, got = _extend_tip(poly, m, _dist(m), 2.4)
        assert got == status, y_end
    assert out is poly


# -- configuration --------------------------------------------------------------------------

def test_check_frame_accepts_only_non_empty_uint8_rgb():
    ok = np.zeros((1, 5, 3), np.uint8)
    assert CenterlineTracker._check_frame(ok) is ok
    for bad in (np.zeros((4, 5), np.uint8), np.zeros((4, 5, 4), np.uint8), np.zeros((4, 5, 3), np.float32),
                np.zeros((0, 5, 3), np.uint8), np.zeros((4, 0, 3), np.uint8), np.zeros((2, 4, 5, 3), np.uint8)):
        with pytest.raises(CenterlineError, match=r"non-empty \(H, W, 3\) uint8"):
            CenterlineTracker._check_frame(bad)


def test_constructor_defaults():
    t = CenterlineTracker((160, 40))
    assert t.base_px.tolist() == [160.0, 40.0]
    assert t.num_keypoints == 10 and t.keypoint_names == tuple(f"c{k}" for k in range(10))
    np.testing.assert_allclose(t.fractions, np.arange(1, 11) / 10.0)
    assert t.length_px is None and t.length_tolerance == 0.04
    assert (t.base_radius_px, t.smoothing_px, t.min_area_px) == (6.0, 2.0, 30.0)
    assert t.occluders == []
    # the default segmenter is the tentacle's orange colour model: orange is body, grey is not
    assert isinstance(t.segmenter, ColorSegmenter)
    img = np.array([[[235, 120, 35], [200, 200, 196]]], np.uint8)
    assert t.segmenter.segment(img).tolist() == [[True, False]]
    # a config is built by make_segmenter, a Segmenter object is used as it is
    assert isinstance(CenterlineTracker((1, 2), segmentation={"method": "background"}).segmenter,
                      BackgroundSegmenter)
    seg = MaskSegmenter()
    assert CenterlineTracker((1, 2), segmentation=seg).segmenter is seg
    one = CenterlineTracker((1, 2), num_keypoints=1, keypoint_names=["tip"], length_px=0.5, length_tolerance=0.0,
                            base_radius_px=0.5)
    assert one.keypoint_names == ("tip",) and one.fractions.tolist() == [1.0]
    assert one.length_px == 0.5 and one.length_tolerance == 0.0 and one.base_radius_px == 0.5


@pytest.mark.parametrize("kw, key", [
    ({"base_px": (1.0, 2.0, 3.0)}, "base_px"), ({"base_px": (1.0, float("nan"))}, "base_px"),
    ({"base_px": [160, None]}, "base_px"), ({"base_px": (1.0,)}, "base_px"),
    ({"num_keypoints": 0}, "num_keypoints"), ({"num_keypoints": 2.0}, "num_keypoints"),
    ({"num_keypoints": 3, "keypoint_names": ["a", "b"]}, "keypoint_names"),
    ({"length_px": 0.0}, "length_px"), ({"length_px": -5.0}, "length_px"),
    ({"length_px": float("inf")}, "length_px"), ({"length_px": float("nan")}, "length_px"),
    ({"length_tolerance": -0.01}, "length_tolerance"), ({"length_tolerance": 1.0}, "length_tolerance"),
    ({"base_radius_px": 0.0}, "base_radius_px"), ({"base_radius_px": -1.0}, "base_radius_px"),
    ({"occluders": [[[0, 0], [5, 0]]]}, r"occluders\[0\]"),
    ({"occluders": [[[0, 0], [5, 0], [5, 5]], [[0, 0], [5, 0], [float("nan"), 5]]]}, r"occluders\[1\]"),
    ({"occluders": [[]]}, r"occluders\[0\]"),
])
def test_constructor_refuses_bad_values_naming_the_key(kw, key):
    kw = dict(kw)
    base = kw.pop("base_px", (10.0, 20.0))
    with pytest.raises(CenterlineError, match=key):
        CenterlineTracker(base, **kw)


def test_from_config_passes_every_key_and_refuses_bad_ones():
    cfg = {"kind": "centerline", "base_px": [30, 12], "num_keypoints": 3, "keypoint_names": ["a", "b", "c"],
           "segmentation": {"method": "background", "threshold": 12}, "length_px": 90.0,
           "length_tolerance": 0.1, "base_radius_px": 3.0, "smoothing_px": 1.5, "min_area_px": 40,
           "occluders": [[[0, 0], [4, 0], [4, 4]]]}
    t = CenterlineTracker.from_config(cfg)
    assert t.base_px.tolist() == [30.0, 12.0] and t.keypoint_names == ("a", "b", "c")
    assert isinstance(t.segmenter, BackgroundSegmenter) and t.segmenter.threshold == 12.0
    assert (t.length_px, t.length_tolerance, t.base_radius_px, t.smoothing_px, t.min_area_px) == (90, 0.1, 3, 1.5, 40)
    assert len(t.occluders) == 1 and t.occluders[0].tolist() == [[0, 0], [4, 0], [4, 4]]
    assert cfg["kind"] == "centerline" and "base_px" in cfg  # the caller's mapping is not consumed
    # kind defaults to centerline
    assert CenterlineTracker.from_config({"base_px": [1, 2]}).num_keypoints == 10
    with pytest.raises(CenterlineError, match="kind is 'markers', expected 'centerline'"):
        CenterlineTracker.from_config({"kind": "markers", "base_px": [1, 2]})
    with pytest.raises(CenterlineError, match=r"unknown config key\(s\) \['colour'\]; valid: base_px, num_keypoints"):
        CenterlineTracker.from_config({"base_px": [1, 2], "colour": "red"})
    with pytest.raises(CenterlineError, match="needs 'base_px'"):
        CenterlineTracker.from_config({"kind": "centerline", "num_keypoints": 4})


def test_occluders_are_float32_polygons_any_of_which_hides_the_tip():
    tri = [[10, 10], [20, 10], [15, 20]]
    t = tracker(occluders=[tri, np.array([[50, 50], [60, 50], [60, 60], [50, 60]])])
    assert [o.shape for o in t.occluders] == [(3, 2), (4, 2)] and all(o.dtype == np.float32 for o in t.occluders)
    shape = (100, 100)
    assert t._touches_occluder(np.array([15.0, 14.0]), shape, 1.0)     # inside the triangle
    assert t._touches_occluder(np.array([55.0, 62.9]), shape, 1.0)     # 2.9 px below the square (< 1 + 2 px)
    assert not t._touches_occluder(np.array([55.0, 63.1]), shape, 1.0)  # 3.1 px: clear of it
    assert not t._touches_occluder(np.array([35.0, 35.0]), shape, 1.0)


def test_touches_occluder_margins_at_the_image_border():
    t = tracker()
    shape = (60, 100)  # H, W; the margin is cap radius + 2 px from the outer pixel edge (-0.5 and W - 0.5)
    for (x, y), hit in [((50, 30), False), ((4.4, 30), True), ((4.6, 30), False), ((50, 4.4), True),
                        ((50, 4.6), False), ((94.6, 30), True), ((94.4, 30), False), ((50, 54.6), True),
                        ((50, 54.4), False)]:
        assert t._touches_occluder(np.array([x, y]), shape, 3.0) is hit, (x, y)
    assert t._touches_occluder(np.array([1.4, 30.0]), shape, 0.0)
    assert not t._touches_occluder(np.array([1.6, 30.0]), shape, 0.0)
    # an occluder counts with a signed distance: inside, or outside within the margin
    box = tracker(occluders=[[[40, 20], [60, 20], [60, 40], [40, 40]]])
    for (x, y), hit in [((50, 30), True), ((50, 17.5), True), ((50, 14.9), False), ((30, 30), False)]:
        assert box._touches_occluder(np.array([x, y]), (100, 100), 3.0) is hit, (x, y)


# -- keypoints from a polyline --------------------------------------------------------------

def test_keypoints_follow_the_traced_length_within_tolerance_else_the_expected_one():
    t = tracker(base=(0.0, 0.0), K=4)  # length_tolerance 0.04
    poly = np.array([[0.0, 0.0], [0.0, 40.0], [0.0, 100.0]])  # 100 px
    kp, valid = t.keypoints_from_polyline(poly, None)
    np.testing.assert_allclose(kp, straight((0, 0), 100.0, 4))
    assert valid.all()
    assert valid.dtype == bool and valid.shape == (4,)
    # 3 % short of the expected length: within tolerance, spread over the traced length
    kp, valid = t.keypoints_from_polyline(poly, 100.0 / 0.97)
    np.testing.assert_allclose(kp, straight((0, 0), 100.0, 4))
    assert valid.all()
    # clearly short: keypoints on the expected scale, the ones beyond the traced end invalid
    kp, valid = t.keypoints_from_polyline(poly, 110.0)
    assert valid.tolist() == [True, True, True, False] and np.isnan(kp[3]).all()
    np.testing.assert_allclose(kp[:3], straight((0, 0), 110.0, 4)[:3])
    kp, valid = t.keypoints_from_polyline(poly, 190.0)
    assert valid.tolist() == [True, True, False, False]
    np.testing.assert_allclose(kp[:2], [[0, 47.5], [0, 95.0]])
    # exactly (1 - tolerance) x expected is not "shorter than": the traced length is used
    half = tracker(base=(0.0, 0.0), K=4, length_tolerance=0.5)
    kp, valid = half.keypoints_from_polyline(poly, 200.0)
    assert valid.all() and kp[-1].tolist() == [0.0, 100.0]
    # a longer curve than expected keeps its own length
    kp, valid = t.keypoints_from_polyline(poly, 80.0)
    assert valid.all() and kp[-1].tolist() == [0.0, 100.0]


def test_keypoints_beyond_the_ambiguous_arc_length_are_invalid():
    t = tracker(base=(0.0, 0.0), K=4)
    poly = np.array([[0.0, 0.0], [0.0, 100.0]])
    kp, valid = t.keypoints_from_polyline(poly, None, ambiguous_from_px=60.0)
    assert valid.tolist() == [True, True, False, False] and np.isnan(kp[2:]).all()
    np.testing.assert_allclose(kp[:2], [[0, 25], [0, 50]])
    # a keypoint at the ambiguous arc length is already invalid, one just before it is not
    assert t.keypoints_from_polyline(poly, None, 50.0)[1].tolist() == [True, False, False, False]
    assert t.keypoints_from_polyline(poly, None, 50.5)[1].tolist() == [True, True, False, False]
    # the visible end hidden at the border (ambiguous = traced length): only the tip is invalid
    assert t.keypoints_from_polyline(poly, None, 100.0)[1].tolist() == [True, True, True, False]
    # with an expected length the keypoints stay on the expected scale even if the length fits
    kp, valid = t.keypoints_from_polyline(poly, 120.0, ambiguous_from_px=100.0)
    assert valid.tolist() == [True, True, True, False]
    np.testing.assert_allclose(kp[:3], [[0, 30], [0, 60], [0, 90]])
    kp, valid = t.keypoints_from_polyline(poly, 101.0, ambiguous_from_px=80.0)
    np.testing.assert_allclose(kp[:3], [[0, 25.25], [0, 50.5], [0, 75.75]])
    assert valid.tolist() == [True, True, True, False]


def test_result_is_complete_only_when_traced_to_the_tip_without_doubt():
    kp, ok = np.zeros((2, 2)), np.ones(2, bool)
    poly = np.array([[0.0, 0.0], [0.0, 10.0]])
    assert CenterlineResult(poly, 10.0, kp, ok).complete
    assert not CenterlineResult(None, 0.0, kp, ok).complete
    assert not CenterlineResult(poly, 10.0, kp, ok, ambiguous_from_px=8.0).complete
    assert not CenterlineResult(poly, 10.0, kp, np.array([True, False])).complete
    r = CenterlineResult(poly, 10.0, kp, ok)
    assert (r.junctions, r.ambiguous_from_px, r.mask, r.reason) == (0, None, None, "")


# -- one frame ------------------------------------------------------------------------------

def test_straight_band_gives_evenly_spaced_keypoints_to_the_tip():
    m = band()  # 80 px from (40, 10) to (40, 90), radius 4
    r = tracker().centerline(frame_of(m))
    assert r.reason == "" and r.junctions == 0 and r.ambiguous_from_px is None and r.complete
    assert r.mask.dtype == bool and np.array_equal(r.mask, m)
    assert r.length_px == pytest.approx(80.0, abs=0.5) and r.length_px == pytest.approx(_polyline_length(r.polyline))
    assert r.polyline[0].tolist() == [40.0, 10.0]  # starts at the base
    assert r.keypoints.shape == (8, 2) and r.valid.dtype == bool and r.valid.all()
    np.testing.assert_allclose(r.keypoints, straight((40, 10), 80.0, 8), atol=0.5)
    # detect() is the same keypoints
    xy, valid = tracker().detect(frame_of(m))
    np.testing.assert_array_equal(xy, r.keypoints)
    np.testing.assert_array_equal(valid, r.valid)


def test_arc_of_known_radius_keypoints_lie_on_the_arc():
    # a quarter circle of radius 40 about (60, 10), from the base (20, 10) down to (60, 50): 62.8 px
    R = 40.0
    th = np.linspace(np.pi, np.pi / 2, 200)
    m = tube_mask((80, 80), np.stack([60 + R * np.cos(th), 10 + R * np.sin(th)], axis=1), 4.0)
    r = tracker(base=(20.0, 10.0), K=6).centerline(frame_of(m))
    assert r.valid.all() and r.length_px == pytest.approx(R * np.pi / 2, abs=1.5)
    s = (np.arange(6) + 1.0) / 6 * R * np.pi / 2
    want = np.stack([60 + R * np.cos(np.pi - s / R), 10 + R * np.sin(np.pi - s / R)], axis=1)
    assert np.linalg.norm(r.keypoints - want, axis=1).max() < 0.75
    # every keypoint is on the circle (distance from its centre = R)
    assert np.abs(np.hypot(r.keypoints[:, 0] - 60, r.keypoints[:, 1] - 10) - R).max() < 0.5


def test_expected_length_override_per_call():
    t = tracker()
    r = t.centerline(frame_of(band()), length_px=100.0)  # the 80 px body is clearly short of 100 px
    assert r.valid.tolist() == [True] * 6 + [False] * 2
    np.testing.assert_allclose(r.keypoints[:6], straight((40, 10), 100.0, 8)[:6], atol=0.5)
    assert not r.complete and r.ambiguous_from_px is None
    # the configured length is the default of the call
    r2 = tracker(length_px=100.0).centerline(frame_of(band()))
    np.testing.assert_array_equal(r2.valid, r.valid)
    # and a call's None means "the configured one", not "none"
    assert tracker(length_px=100.0).centerline(frame_of(band()), length_px=None).valid.sum() == 6


def test_band_leaving_the_image_has_its_visible_end_invalid():
    m = band(y1=140.0)  # 130 px body in a 120 px tall image: the tip is below the image
    r = tracker(K=6).centerline(frame_of(m))
    # without a length the keypoints spread over the visible part; the end is not the tip
    assert r.ambiguous_from_px == pytest.approx(r.length_px) and 100.0 < r.length_px < 110.0
    assert r.valid.tolist() == [True] * 5 + [False]
    np.testing.assert_allclose(r.keypoints[:5], straight((40, 10), r.length_px, 6)[:5], atol=0.5)
    # with the true length, the keypoints keep the true spacing and stop where the body leaves
    r = tracker(K=6, length_px=130.0).centerline(frame_of(m))
    assert r.valid.tolist() == [True] * 4 + [False] * 2
    np.testing.assert_allclose(r.keypoints[:4], straight((40, 10), 130.0, 6)[:4], atol=0.5)


def test_rounded_end_within_two_px_of_the_border_is_not_trusted():
    # H = 120: a cap ending 2 px from the image edge may continue beyond it; one 4.5 px away is the tip
    near = tracker().centerline(frame_of(band(y1=113.0)))
    assert near.valid[:-1].all() and not near.valid[-1] and near.ambiguous_from_px == pytest.approx(near.length_px)
    far = tracker().centerline(frame_of(band(y1=110.0)))
    assert far.valid.all() and far.ambiguous_from_px is None
    np.testing.assert_allclose(far.keypoints[-1], [40.0, 110.0], atol=0.5)


def test_tip_hidden_by_a_known_occluder_is_invalid():
    m = band()
    m[70:, :] = False  # the lower part is behind a box (drawn as background)
    box = [[20, 70], [60, 70], [60, 100], [20, 100]]
    plain = tracker().centerline(frame_of(m))
    assert plain.valid.all() and plain.keypoints[-1, 1] == pytest.approx(65.0, abs=1.0)  # squeezed onto the edge
    aware = tracker(occluders=[box]).centerline(frame_of(m))
    assert aware.ambiguous_from_px == pytest.approx(aware.length_px) and aware.valid.tolist() == [True] * 7 + [False]
    np.testing.assert_allclose(aware.keypoints[:7], plain.keypoints[:7])
    # an occluder elsewhere changes nothing
    other = tracker(occluders=[[[0, 0], [5, 0], [5, 5]]]).centerline(frame_of(m))
    assert other.valid.all() and other.ambiguous_from_px is None


def _failed(r, K, shape, reason):
    assert r.reason == reason
    assert r.polyline is None and r.length_px == 0.0 and not r.complete
    assert r.keypoints.shape == (K, 2) and np.isnan(r.keypoints).all()
    assert r.valid.shape == (K,) and r.valid.dtype == bool and not r.valid.any()
    assert r.mask.shape == shape and r.mask.dtype == bool


def test_failures_say_why_and_give_invalid_keypoints():
    t = tracker(K=5)
    shape = (120, 80)
    r = t.centerline(frame_of(np.zeros(shape, bool)))
    _failed(r, 5, shape, "no foreground")
    assert not r.mask.any()
    # a body away from the base is not tracked
    far = tube_mask(shape, [[10, 60], [10, 110]], 4.0)
    r = t.centerline(frame_of(far))
    _failed(r, 5, shape, "no body at the base pixel")
    assert not r.mask.any()
    # a wide block at the base: its skeleton (medial axis) stays farther than 4 r + 4 px from the base
    block = np.zeros(shape, bool)
    block[10:60, 10:70] = True
    r = t.centerline(frame_of(block))
    _failed(r, 5, shape, "no skeleton within 20 px of the base")
    # the cleaned mask: opening by the 3 x 3 ellipse (a cross) cuts the block's four corner pixels
    cut = block.copy()
    cut[[10, 10, 59, 59], [10, 69, 10, 69]] = False
    assert np.array_equal(r.mask, cut)


def test_smallest_accepted_component_is_min_area_px():
    m = band()
    area = int(m.sum())
    assert tracker(min_area_px=area).centerline(frame_of(m)).valid.all()
    r = tracker(min_area_px=area + 1).centerline(frame_of(m))
    _failed(r, 8, m.shape, "body component smaller than min_area_px")
    assert not r.mask.any()
    # the default, 30 px^2: a 29 px blob at the base is refused, a 37 px one (a radius 3.4 disc) is not
    small = tube_mask(m.shape, [[40, 12], [40, 12]], 3.0)  # 29 px
    assert small.sum() == 29
    mask, reason = tracker().body_mask(frame_of(small))
    assert reason == "body component smaller than min_area_px" and mask.shape == m.shape and not mask.any()
    ok_blob = tube_mask(m.shape, [[40, 12], [40, 12]], 3.4)
    mask, reason = tracker().body_mask(frame_of(ok_blob))
    assert reason == "" and np.array_equal(mask, ok_blob)


# -- a clip ---------------------------------------------------------------------------------

def test_track_times_names_and_their_errors():
    t = tracker(K=4)
    clip = [frame_of(band()), frame_of(band(x=41.0))]
    traj = t.track(clip, fps=25.0, source="real", trial_id="swing")
    np.testing.assert_allclose(traj.time, [0.04, 0.08])  # frame k closes period k: (k + 1) / fps
    assert (traj.source, traj.trial_id, traj.names) == ("real", "swing", ("c0", "c1", "c2", "c3"))
    assert traj.meta["tracker"] == "centerline" and traj.valid.all()
    np.testing.assert_allclose(traj.keypoints[0], straight((40, 10), 80.0, 4), atol=0.5)
    # the clip as an array, no fps: frame indices; given times are used as they are
    bare = t.track(np.stack(clip))
    np.testing.assert_array_equal(bare.time, [0.0, 1.0])
    assert (bare.source, bare.trial_id) == ("", "")
    np.testing.assert_array_equal(bare.keypoints, traj.keypoints)
    np.testing.assert_allclose(t.track(clip, time=[0.5, 0.7], fps=10.0).time, [0.5, 0.7])
    with pytest.raises(CenterlineError, match="time has 3 entries for 2 frames"):
        t.track(clip, time=[0.0, 0.1, 0.2])
    with pytest.raises(CenterlineError, match="invalid_frames has 1 entries for 2 frames"):
        t.track(clip, invalid_frames=[False])
    with pytest.raises(CenterlineError, match="no frames to track"):
        t.track([])
    with pytest.raises(CenterlineError, match="uint8"):
        t.track([clip[0], clip[1].astype(np.float32)])


def test_track_marks_dropped_frames_invalid_and_counts_lost_keypoints():
    t = tracker(K=4)
    clip = [frame_of(band())] * 3
    # dropped-frame flags as a 0/1 float array (as a rosbag or a twin's state gives them)
    traj = t.track(clip, invalid_frames=np.array([0.0, 1.0, 0.0]))
    assert traj.valid.tolist() == [[True] * 4, [False] * 4, [True] * 4]
    assert np.isnan(traj.keypoints[1]).all()
    assert traj.meta["lost"] == {"c0": 1, "c1": 1, "c2": 1, "c3": 1}
    assert traj.meta["failures"] == {} and traj.meta["junction_frames"] == 0


def test_track_estimates_the_length_from_the_clip_and_reports_failures():
    blank = frame_of(np.zeros((120, 80), bool))
    full, short = frame_of(band()), frame_of(band(y1=65.0))  # 80 px and 55 px bodies
    traj = tracker(K=8).track([full, blank, blank, full, short])
    # the median traced length over the frames that traced (80, 80, 55): the body's 80 px
    assert traj.meta["length_px"] == pytest.approx(80.0, abs=0.5)
    assert traj.meta["failures"] == {"1": "no foreground", "2": "no foreground"}
    # the short frame keeps the 80 px spacing, its keypoints beyond 55 px are invalid
    assert traj.valid[4].tolist() == [True] * 5 + [False] * 3
    np.testing.assert_allclose(traj.keypoints[4, :5], straight((40, 10), 80.0, 8)[:5], atol=0.5)
    np.testing.assert_allclose(traj.keypoints[0], straight((40, 10), 80.0, 8), atol=0.5)
    assert traj.meta["lost"] == {**{f"c{k}": 2 for k in range(5)}, **{f"c{k}": 3 for k in range(5, 8)}}
    # a configured length is used as it is (no estimate)
    fixed = tracker(K=8, length_px=100.0).track([full, full])
    assert fixed.meta["length_px"] == 100.0 and fixed.valid[:, :6].all() and not fixed.valid[:, 6:].any()
    np.testing.assert_allclose(fixed.keypoints[0, :6], straight((40, 10), 100.0, 8)[:6], atol=0.5)
    # nothing traced: no estimate, no truncation
    none = tracker(K=8).track([blank, blank])
    assert none.meta["length_px"] is None and none.meta["lost"]["c0"] == 2


def _fork(shape=(110, 80)):
    """A body bending left from (40, 50) to (22, 86), and the same with a mirrored branch (clutter)."""
    left = tube_mask(shape, [[40, 10], [40, 50], [22, 86]], 4.0)
    return left, left | tube_mask(shape, [[40, 50], [58, 86]], 4.0)


def test_track_resolves_a_fork_with_the_previous_trusted_frame_only():
    left, fork = _fork()
    t = tracker(K=8)
    alone = t.centerline(frame_of(fork))
    # on its own the fork is a close call: the curve is not trusted beyond the junction
    assert alone.junctions == 1 and alone.ambiguous_from_px == pytest.approx(46.0, abs=4.0)
    assert alone.valid.tolist() == [True] * 4 + [False] * 4
    # after a trusted frame of the left-bending body, the fork follows the left branch to its tip
    traj = t.track([frame_of(left), frame_of(fork)])
    assert traj.valid.all() and traj.meta["junction_frames"] == 1
    np.testing.assert_allclose(traj.keypoints[1, -1], [22.0, 86.0], atol=1.0)
    np.testing.assert_allclose(traj.keypoints[1], traj.keypoints[0], atol=1.0)
    # the length estimate skips the frame with a junction: the left body's 40 + 40.2 px
    assert traj.meta["length_px"] == pytest.approx(80.2, abs=0.5)
    # an untrusted frame is no prior: two forks in a row stay ambiguous, so does a fork after a lost frame
    twice = t.track([frame_of(fork), frame_of(fork)])
    assert twice.meta["lost"] == {f"c{k}": (0 if k < 4 else 2) for k in range(8)}
    assert twice.meta["junction_frames"] == 2 and twice.meta["length_px"] is None
    gap = t.track([frame_of(left), frame_of(np.zeros(left.shape, bool)), frame_of(fork)])
    assert gap.valid[0].all() and not gap.valid[1].any() and gap.valid[2].tolist() == [True] * 4 + [False] * 4


def test_track_fits_a_background_model_from_the_clip_unless_one_is_given():
    grey = np.full((120, 80, 3), 90, np.uint8)
    clip = [grey, grey.copy(), grey.copy()]
    clip[2][band()] = 250  # the body enters in the last frame: the per-pixel median is the empty scene
    white = ColorSegmenter([0, 0, 200], [180, 40, 255])
    for seg in (BackgroundSegmenter(threshold=40), CombinedSegmenter(white, BackgroundSegmenter(threshold=40))):
        traj = CenterlineTracker((40.0, 10.0), num_keypoints=4, segmentation=seg, base_radius_px=4.0).track(clip)
        fitted = seg if isinstance(seg, BackgroundSegmenter) else seg.background
        assert np.array_equal(fitted.background, grey)
        assert traj.valid.tolist() == [[False] * 4] * 2 + [[True] * 4]
        np.testing.assert_allclose(traj.keypoints[2], straight((40, 10), 80.0, 4), atol=0.5)
    # a given background is never refitted, even on a static clip (whose median holds the body)
    static = [clip[2]] * 3
    for seg in (BackgroundSegmenter(threshold=40, background=grey.copy()),
                CombinedSegmenter(white, BackgroundSegmenter(threshold=40, background=grey.copy()))):
        traj = CenterlineTracker((40.0, 10.0), num_keypoints=4, segmentation=seg, base_radius_px=4.0).track(static)
        fitted = seg if isinstance(seg, BackgroundSegmenter) else seg.background
        assert np.array_equal(fitted.background, grey) and traj.valid.all()
    # refitting on the static clip would have hidden the body
    traj = CenterlineTracker((40.0, 10.0), num_keypoints=4, segmentation=BackgroundSegmenter(threshold=40),
                             base_radius_px=4.0).track(static)
    assert not traj.valid.any() and traj.meta["failures"]["0"] == "no foreground"


def test_body_search_reaches_two_radii_plus_three_px_from_the_base():
    t = tracker()  # base (40, 10), base radius 4: the body must come within ceil(2 * 4 + 3) = 11 px
    for top, found in ((18, True), (21, True), (22, False)):  # the body's nearest pixel is (40, top)
        m = band(y0=top + 4.0)
        mask, reason = t.body_mask(frame_of(m))
        assert (reason == "") is found and np.array_equal(mask, m if found else np.zeros_like(m)), top
        if not found:
            assert reason == "no body at the base pixel"
    # in every direction: a body above the base, and one to its right
    up = tube_mask((120, 80), [[40.0, 2.0], [40.0, 30.0]], 4.0)  # lowest pixel (40, 34)
    assert tracker(base=(40.0, 42.0)).body_mask(frame_of(up))[1] == ""  # 8 px above the base
    side = tube_mask((120, 100), [[55.0, 30.0], [95.0, 30.0]], 4.0)  # nearest pixel (51, 30): 11 px right
    assert tracker(base=(40.0, 30.0)).body_mask(frame_of(side))[1] == ""
    assert tracker(base=(39.0, 30.0)).body_mask(frame_of(side))[1] == "no body at the base pixel"


def test_body_is_the_component_with_most_pixels_near_the_base_and_the_mask_is_cleaned():
    m = band()
    clutter = tube_mask(m.shape, [[52.0, 4.0], [75.0, 4.0]], 3.0)  # a blob reaching into the search disc
    speck = np.zeros_like(m)
    speck[60, 10] = speck[100, 70] = True  # single-pixel noise: removed by the opening
    holed = m.copy()
    holed[50, 40] = False  # a one-pixel hole: filled by the closing
    mask, reason = tracker().body_mask(frame_of(holed | clutter | speck))
    assert reason == "" and np.array_equal(mask, m)
    # a cut of one or two rows across the body is closed (only the cut's corner pixels stay off),
    # a wider cut splits it and only the part at the base is kept
    for rows in (1, 2, 3):
        cut = m.copy()
        cut[50:50 + rows] = False
        mask, _ = tracker().body_mask(frame_of(cut))
        assert np.array_equal(mask[:49], m[:49]), rows
        if rows < 3:
            assert np.array_equal(mask[53:], m[53:]) and mask[49:53, 38:43].all(), rows
            assert not (mask & ~m).any() and (m & ~mask).sum() == 4 * rows + 4, rows
        else:
            assert not mask[50:].any()


def test_sam_segmentation_is_prompted_with_the_base_pixel():
    import tempfile

    prompts = []
    body = band()

    class Predictor:  # stands in for segment_anything.SamPredictor (not installed here)
        def __init__(self, model):
            self.model = model

        def set_image(self, image):
            self.image = image

        def predict(self, point_coords, point_labels, multimask_output):
            prompts.append((np.asarray(point_coords).tolist(), np.asarray(point_labels).tolist()))
            return np.stack([np.zeros_like(body), body]), np.array([0.2, 0.9]), None

    class Model:
        def __init__(self, checkpoint):
            self.checkpoint = checkpoint

        def to(self, device):
            self.device = device

    fake = types.ModuleType("segment_anything")
    fake.SamPredictor, fake.sam_model_registry = Predictor, {"vit_b": Model}
    saved = sys.modules.get("segment_anything")
    sys.modules["segment_anything"] = fake
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = f"{tmp}/sam_vit_b.pth"
            open(ckpt, "wb").close()
            t = CenterlineTracker((40.0, 10.0), num_keypoints=4, base_radius_px=4.0,
                                  segmentation={"method": "sam", "checkpoint": ckpt})
            r = t.centerline(frame_of(body))
    finally:
        if saved is None:
            sys.modules.pop("segment_anything", None)
        else:
            sys.modules["segment_anything"] = saved
    assert prompts == [([[40.0, 10.0]], [1])]  # one positive prompt, at the base
    assert r.valid.all()
    np.testing.assert_allclose(r.keypoints, straight((40, 10), 80.0, 4), atol=0.5)


def test_a_walk_stops_at_a_junction_beyond_one_and_a_half_expected_lengths():
    # 70 px to a fork with two 29 px branches; with 40 px expected the walk ends at the fork (> 60 px)
    shape = (130, 80)
    m = tube_mask(shape, [[40, 10], [40, 80], [25, 105]], 4.0) | tube_mask(shape, [[40, 80], [55, 105]], 4.0)
    r = tracker().centerline(frame_of(m), length_px=40.0)
    assert r.junctions == 0 and r.ambiguous_from_px is None and r.valid.all()
    assert np.abs(r.polyline[:, 0] - 40.0).max() < 0.5 and 80.0 <= r.polyline[-1, 1] < 86.0
    # the longer traced curve carries the keypoints (it is not short of the expected length)
    np.testing.assert_allclose(r.keypoints, straight((40, 10), r.length_px, 8), atol=0.5)
    # with the true length (104 px) the walk goes on through the fork, and the two branches are a close call
    r = tracker().centerline(frame_of(m), length_px=104.0)
    assert r.junctions == 1 and r.ambiguous_from_px == pytest.approx(75.0, abs=3.0)


def test_track_estimates_the_length_of_a_long_clip_from_a_sample_of_its_frames():
    # 31 frames: the first pass samples every max(1, T // 30)-th frame for the length estimate
    small = [frame_of(tube_mask((50, 40), [[20.0, 5.0], [20.0 + dx, 35.0]], 3.0)) for dx in np.linspace(-4, 4, 31)]
    t = CenterlineTracker((20.0, 5.0), num_keypoints=3, segmentation=MaskSegmenter(), base_radius_px=3.0)
    traj = t.track(small, fps=31.0)
    assert traj.valid.all() and traj.meta["length_px"] == pytest.approx(30.0, abs=0.6)
    np.testing.assert_allclose(traj.time[[0, -1]], [1 / 31.0, 1.0])


def test_the_expected_length_picks_the_body_at_a_fork():
    # the body bends left at (40, 50) to (25, 76): 70 px; a longer clutter branch goes right to (62, 90)
    shape = (130, 90)
    body = tube_mask(shape, [[40, 10], [40, 50], [25, 76]], 4.0)
    m = body | tube_mask(shape, [[40, 50], [62, 90]], 4.0)
    L = 40.0 + math.hypot(15.0, 26.0)
    r = tracker().centerline(frame_of(m), length_px=L)
    assert r.junctions == 1 and r.ambiguous_from_px is None and r.valid.all()
    np.testing.assert_allclose(r.keypoints[-1], [25.0, 76.0], atol=0.75)
    assert r.length_px == pytest.approx(L, abs=1.0)
    # without a length the longer branch is (nearly) as good: a close call, not trusted past the fork
    r = tracker().centerline(frame_of(m))
    assert r.ambiguous_from_px == pytest.approx(46.0, abs=4.0) and r.valid.tolist() == [True] * 4 + [False] * 4


@pytest.mark.parametrize("r_body, tol", [(5.0, 0.6), (1.5, 0.4)])
def test_tighter_arc_thick_and_thin_bodies_keypoints_on_the_arc(r_body, tol):
    # 135 degrees of a circle of radius 25 about (60, 10) from the base (35, 10): 58.9 px
    R = 25.0
    th = np.linspace(np.pi, np.pi / 4, 300)
    m = tube_mask((110, 110), np.stack([60 + R * np.cos(th), 10 + R * np.sin(th)], axis=1), r_body)
    r = tracker(base=(35.0, 10.0), K=6, base_radius_px=r_body).centerline(frame_of(m))
    assert r.valid.all()
    s = (np.arange(6) + 1.0) / 6 * R * 0.75 * np.pi
    want = np.stack([60 + R * np.cos(np.pi - s / R), 10 + R * np.sin(np.pi - s / R)], axis=1)
    assert np.linalg.norm(r.keypoints - want, axis=1).max() < tol
