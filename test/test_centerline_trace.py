"""Centreline tracker internals: thinning, segmenters, the skeleton graph and the walk through it.

Checked against independent references: a direct per-pixel transcription of Zhang & Suen
(1984, Commun. ACM 27(3) 236-239: neighbours P2..P9 clockwise from north, B = number of
foreground neighbours, A = number of 0->1 patterns in P2, P3, ..., P9, P2), OpenCV's own
HSV conversion for the colour box, hand-drawn one-pixel skeletons (a line, a T, an X, a
loop) whose graphs are derived by hand, and hand-computed arc-length formulas. No
rendering: synthetic masks and frames only.
"""

from __future__ import annotations

import math
import re
import sys
import types

import cv2
import numpy as np
import pytest

from vid2sid_ros.perception import centerline as cl
from vid2sid_ros.perception.centerline import (BackgroundSegmenter, CenterlineError, ColorSegmenter,
                                               CombinedSegmenter, SamSegmenter, make_segmenter, skeletonize,
                                               trace_centerline)

# -- an independent Zhang-Suen ------------------------------------------------------------

#: the paper's 3 x 3 layout:  P9 P2 P3 / P8 P1 P4 / P7 P6 P5, as (dy, dx) from P1
_PAPER = {"P2": (-1, 0), "P3": (-1, 1), "P4": (0, 1), "P5": (1, 1), "P6": (1, 0), "P7": (1, -1), "P8": (0, -1),
          "P9": (-1, -1)}
_ORDER = ("P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9")


def _paper_conditions(P: dict[str, int]) -> tuple[bool, bool]:
    """(delete in the first sub-iteration, delete in the second) for a foreground P1, per the paper."""
    B = sum(P[k] for k in _ORDER)
    seq = [P[k] for k in _ORDER] + [P["P2"]]
    A = sum(1 for u, v in zip(seq, seq[1:]) if (u, v) == (0, 1))
    common = 2 <= B <= 6 and A == 1
    first = common and P["P2"] * P["P4"] * P["P6"] == 0 and P["P4"] * P["P6"] * P["P8"] == 0
    second = common and P["P2"] * P["P4"] * P["P8"] == 0 and P["P2"] * P["P6"] * P["P8"] == 0
    return first, second


def _reference_zhang_suen(mask: np.ndarray, skip_border: bool = False) -> np.ndarray:
    """Zhang-Suen, one pixel at a time (outside the image = background).

    ``skip_border`` leaves the image's outermost rows/columns alone, as OpenCV's
    ``ximgproc.thinning`` does (it only visits pixels 1..n-2).
    """
    img = np.pad((np.asarray(mask) > 0).astype(int), 1)
    H, W = img.shape
    lo, hi = (2, 2) if skip_border else (1, 1)
    while True:
        changed = False
        for sub in (0, 1):
            marked = []
            for y in range(lo, H - hi):
                for x in range(lo, W - hi):
                    if img[y, x]:
                        P = {k: int(img[y + dy, x + dx]) for k, (dy, dx) in _PAPER.items()}
                        if _paper_conditions(P)[sub]:
                            marked.append((y, x))
            for y, x in marked:
                img[y, x] = 0
            changed |= bool(marked)
        if not changed:
            return img[1:-1, 1:-1].astype(bool)


def _blobs(seed: int, shape=(36, 44)) -> np.ndarray:
    """A seeded union of discs and bars (thick and thin parts, holes between them)."""
    rng = np.random.default_rng(seed)
    m = np.zeros(shape, np.uint8)
    for _ in range(4):
        cx, cy = rng.integers(4, shape[1] - 4), rng.integers(4, shape[0] - 4)
        cv2.circle(m, (int(cx), int(cy)), int(rng.integers(2, 8)), 1, -1)
    for _ in range(3):
        p, q = rng.integers(0, shape[1], 2), rng.integers(0, shape[0], 2)
        cv2.line(m, (int(p[0]), int(q[0])), (int(p[1]), int(q[1])), 1, int(rng.integers(1, 5)))
    return m.astype(bool)


def _all_windows():
    """Every 3 x 3 neighbourhood of a foreground pixel, as (image 5 x 5 with P1 at (2, 2), P by name)."""
    for bits in range(256):
        P = {k: (bits >> i) & 1 for i, k in enumerate(_ORDER)}
        img = np.zeros((5, 5), np.uint8)
        img[2, 2] = 1
        for k, (dy, dx) in _PAPER.items():
            img[2 + dy, 2 + dx] = P[k]
        yield img, P


def test_zhang_suen_tables_are_the_papers_conditions_for_every_neighbourhood():
    lut1, lut2 = cl._zhang_suen_luts()
    for lut in (lut1, lut2):  # one boolean entry per 8-bit neighbour code
        assert lut.shape == (256,) and lut.dtype == bool
    codes = set()
    for img, P in _all_windows():
        code = int(cl._neighbour_code(img)[2, 2])
        codes.add(code)
        first, second = _paper_conditions(P)
        assert (bool(lut1[code]), bool(lut2[code])) == (first, second), P
    assert codes == set(range(256))  # the code tells every neighbourhood apart
    # the module's tables are these
    assert np.array_equal(cl._ZS_LUT1, lut1) and np.array_equal(cl._ZS_LUT2, lut2)
    # a sanity anchor of the paper's rules: an end of a line (B = 1) and a pixel whose removal would
    # split the line (A = 2) are kept; a corner of a thick blob (B = 3, A = 1, P4 = 0) is deleted
    assert not any(_paper_conditions(dict.fromkeys(_ORDER, 0) | {"P4": 1}))
    assert not any(_paper_conditions(dict.fromkeys(_ORDER, 0) | {"P4": 1, "P8": 1}))
    assert _paper_conditions(dict.fromkeys(_ORDER, 0) | {"P4": 1, "P5": 1, "P6": 1})[0]


def test_neighbour_code_bits_and_the_image_border():
    img = np.ones((2, 2), np.uint8)
    code = cl._neighbour_code(img)
    assert code.dtype == np.uint8 and code.shape == (2, 2)
    # bit i = P(i + 2): top-left sees E (P4, bit 2), SE (P5, bit 3), S (P6, bit 4); outside is background
    assert code[0, 0] == 4 + 8 + 16
    assert code[1, 1] == 1 + 64 + 128  # N (P2), W (P8), NW (P9)
    assert code[0, 1] == 16 + 32 + 64  # S, SW, W
    one = np.zeros((3, 3), np.uint8)
    one[1, 1] = 1
    assert cl._neighbour_code(one)[1, 1] == 0 and cl._neighbour_code(one)[0, 0] == 8  # P1 is not its own neighbour


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_zhang_suen_thinning_equals_the_direct_transcription(seed, monkeypatch):
    mask = _blobs(seed)
    ref = _reference_zhang_suen(mask)
    assert ref.sum() > 10 and ref.sum() < mask.sum() // 2  # thinned, not erased
    got = cl._zhang_suen(mask.astype(np.uint8) * 7)  # any non-zero value is foreground
    assert got.dtype == bool and np.array_equal(got, ref)
    monkeypatch.setattr(cl, "SKELETON_BACKEND", "zhang-suen")
    assert np.array_equal(skeletonize(mask), ref)
    # the same shape touching all four image borders: the bounding-box crop must not cut it
    edge = mask[3:-3, 3:-3].copy()
    edge[0, :] = edge[-1, :] = edge[:, 0] = edge[:, -1] = True
    assert np.array_equal(skeletonize(edge), _reference_zhang_suen(edge))


def test_zhang_suen_known_results():
    # a one-pixel-wide line, diagonal or bent, is already thin: unchanged
    line = np.zeros((12, 12), bool)
    line[2, 2:9] = True
    line[np.arange(3, 9), np.arange(8, 2, -1)] = True
    assert np.array_equal(cl._zhang_suen(line), line)
    # the paper's known defect (Lu & Wang 1986): a 2 x 2 square is erased completely
    sq = np.zeros((6, 6), bool)
    sq[2:4, 2:4] = True
    assert not cl._zhang_suen(sq).any()
    # a 3-px-thick bar thins to its middle row
    bar = np.zeros((9, 20), bool)
    bar[3:6, 2:18] = True
    sk = cl._zhang_suen(bar)
    assert set(np.nonzero(sk)[0]) == {4} and sk[4, 4:16].all()


def test_skeletonize_empty_and_uint8_masks():
    out = skeletonize(np.zeros((7, 9), np.uint8))
    assert out.shape == (7, 9) and out.dtype == bool and not out.any()
    m = np.zeros((9, 20), np.uint8)
    m[3:6, 2:18] = 255
    assert np.array_equal(skeletonize(m), _reference_zhang_suen(m > 0))


def _fake_module(name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


def test_skeleton_backend_prefers_opencv_contrib_then_skimage_then_own(monkeypatch):
    thinning = types.SimpleNamespace(thinning=lambda *a, **k: None)
    no_thinning = types.SimpleNamespace()
    skimage = _fake_module("skimage")
    skimage.morphology = _fake_module("skimage.morphology", skeletonize=lambda m: m)

    def setup(ximgproc, have_skimage):
        fake_cv2 = types.SimpleNamespace() if ximgproc is None else types.SimpleNamespace(ximgproc=ximgproc)
        monkeypatch.setattr(cl, "cv2", fake_cv2)
        monkeypatch.setitem(sys.modules, "skimage", skimage if have_skimage else None)
        monkeypatch.setitem(sys.modules, "skimage.morphology", skimage.morphology if have_skimage else None)
        return cl._skeleton_backend()

    assert setup(thinning, True) == "cv2.ximgproc"
    assert setup(thinning, False) == "cv2.ximgproc"
    assert setup(no_thinning, True) == "skimage"   # an old contrib without thinning
    assert setup(None, True) == "skimage"
    assert setup(no_thinning, False) == "zhang-suen"
    assert setup(None, False) == "zhang-suen"
    monkeypatch.undo()
    assert cl.SKELETON_BACKEND == cl._skeleton_backend()


def test_skeletonize_through_the_opencv_and_skimage_backends(monkeypatch):
    """The other backends get the mask's bounding box with a one-pixel margin (OpenCV's thinning
    never touches a sub-image's outermost pixels) and their result lands back in place."""
    calls = []

    def thinning(src, thinningType):
        calls.append((src.dtype, set(np.unique(src).tolist()), thinningType))
        return _reference_zhang_suen(src > 0, skip_border=True).astype(np.uint8) * 255

    ximgproc = types.SimpleNamespace(thinning=thinning, THINNING_ZHANGSUEN=17)
    monkeypatch.setattr(cv2, "ximgproc", ximgproc, raising=False)
    monkeypatch.setattr(cl, "SKELETON_BACKEND", "cv2.ximgproc")
    mask = np.zeros((40, 50), bool)
    mask[5:30, 8:40] = _blobs(5, (25, 32))
    ref = _reference_zhang_suen(mask)
    assert np.array_equal(skeletonize(mask), ref)
    assert calls == [(np.dtype(np.uint8), {0, 255}, 17)]

    seen = []

    def sk_skeletonize(sub):
        seen.append(sub.copy())
        return _reference_zhang_suen(sub)

    skimage = _fake_module("skimage")
    skimage.morphology = _fake_module("skimage.morphology", skeletonize=sk_skeletonize)
    monkeypatch.setitem(sys.modules, "skimage", skimage)
    monkeypatch.setitem(sys.modules, "skimage.morphology", skimage.morphology)
    monkeypatch.setattr(cl, "SKELETON_BACKEND", "skimage")
    assert np.array_equal(skeletonize(mask), ref)
    ys, xs = np.nonzero(mask)
    assert seen[0].dtype == bool and np.array_equal(seen[0], mask[ys.min() - 1:ys.max() + 2, xs.min() - 1:xs.max() + 2])


# -- segmenters ---------------------------------------------------------------------------

def test_hsv_triplet_ranges_and_shapes():
    assert np.array_equal(cl._hsv_triplet([0, 0, 0], "hsv_lower"), [0.0, 0.0, 0.0])
    got = cl._hsv_triplet((180, 255, 255), "hsv_upper")
    assert got.dtype == float and np.array_equal(got, [180.0, 255.0, 255.0])
    assert np.array_equal(cl._hsv_triplet([[10, 20, 30]], "hsv_lower"), [10.0, 20.0, 30.0])  # any shape of 3
    for bad in ([181, 0, 0], [-1, 0, 0], [0, 256, 0], [0, -1, 0], [0, 0, 256], [0, 0, -0.5]):
        with pytest.raises(CenterlineError, match=r"'hsv_upper' out of range"):
            cl._hsv_triplet(bad, "hsv_upper")
    for bad in ([1, 2], [1, 2, 3, 4], [np.nan, 0, 0], [0, np.inf, 0], None):
        with pytest.raises(CenterlineError, match=r"'hsv_lower' must be three numbers"):
            cl._hsv_triplet(bad, "hsv_lower")


def test_hsv_triplet_non_numbers_are_a_config_error_naming_the_field():
    # regression: these escaped as a bare ValueError / TypeError ("could not convert string to float")
    for bad in ("red", [0, "a", 3], {"h": 1}, [0, [1, 2], 3]):
        with pytest.raises(CenterlineError, match=r"'hsv_upper' must be three numbers"):
            cl._hsv_triplet(bad, "hsv_upper")
    with pytest.raises(CenterlineError, match=r"'hsv_lower' must be three numbers"):
        make_segmenter({"method": "color", "hsv_lower": "orange"})


def _colour_grid(seed=0, n=128):
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (n, n, 3), dtype=np.uint8)
    img[0, 0], img[0, 1] = (255, 0, 0), (0, 0, 255)  # pure red (H 0), pure blue (H 120)
    return img


def _box(hsv, lo, hi):
    h, s, v = (hsv[..., i].astype(int) for i in range(3))
    hue = (h >= lo[0]) & (h <= hi[0]) if lo[0] <= hi[0] else (h >= lo[0]) | (h <= hi[0])
    return hue & (s >= lo[1]) & (s <= hi[1]) & (v >= lo[2]) & (v <= hi[2])


def test_colour_segmenter_is_an_inclusive_hsv_box_on_rgb_frames():
    img = _colour_grid()
    hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV)  # OpenCV's convention: H in [0, 180), S, V in [0, 255]
    h, s, v = (hsv[..., i].ravel() for i in range(3))
    # bounds taken from pixel values present, so every bound is met exactly by some pixel
    lo = [int(np.quantile(h, 0.2)), int(np.quantile(s, 0.3)), int(np.quantile(v, 0.25))]
    hi = [int(np.quantile(h, 0.7)), int(np.quantile(s, 0.9)), int(np.quantile(v, 0.8))]
    got = ColorSegmenter(lo, hi).segment(img)
    assert got.dtype == bool and got.shape == img.shape[:2]
    exp = _box(hsv, lo, hi)
    assert np.array_equal(got, exp) and 50 < exp.sum() < exp.size - 50
    for k in range(3):  # pixels exactly on a bound are in
        assert (got & (hsv[..., k] == lo[k])).any() and (got & (hsv[..., k] == hi[k])).any()
    # the frame is RGB: red is hue 0, blue is 120
    red = ColorSegmenter([0, 200, 200], [5, 255, 255]).segment(img)
    blue = ColorSegmenter([115, 200, 200], [125, 255, 255]).segment(img)
    assert red[0, 0] and not red[0, 1] and blue[0, 1] and not blue[0, 0]
    # a hue box through 0 (reds): lower > upper wraps
    wrap_lo, wrap_hi = [170, 60, 60], [10, 255, 255]
    wrap = ColorSegmenter(wrap_lo, wrap_hi).segment(img)
    assert np.array_equal(wrap, _box(hsv, wrap_lo, wrap_hi))
    assert wrap[0, 0] and (wrap & (hsv[..., 0] >= 170)).any() and (wrap & (hsv[..., 0] <= 10)).any()
    assert not (wrap & (hsv[..., 0] > 10) & (hsv[..., 0] < 170)).any()
    # a single hue (lower = upper) is that hue only, not a wrap through 0
    single = ColorSegmenter([120, 200, 200], [120, 255, 255]).segment(img)
    assert single[0, 1] and not single[0, 0] and np.array_equal(single, _box(hsv, [120, 200, 200], [120, 255, 255]))
    with pytest.raises(CenterlineError, match="'hsv_upper' out of range"):
        ColorSegmenter([0, 0, 0], [0, 300, 0])
    with pytest.raises(CenterlineError, match="'hsv_lower' must be three numbers"):
        ColorSegmenter([0, 0], [0, 255, 255])


def _bg_frames(T, H=16, W=12):
    bg = np.zeros((H, W, 3), np.uint8)
    bg[:] = (90, 140, 60)
    frames = np.repeat(bg[None], T, axis=0)
    return bg, frames


def test_background_fit_is_the_per_pixel_median():
    bg, frames = _bg_frames(3, H=120)  # (a tall frame: the clip is short, every frame counts)
    frames[2, 4:9, 3:6] = (250, 20, 20)  # the body in one frame of three
    seg = BackgroundSegmenter(threshold=30.0)
    assert seg.fit(frames) is seg
    assert seg.background.dtype == np.uint8 and np.array_equal(seg.background, bg)
    # a long clip is thinned to about 60 frames; the body sits on each pixel in a third of the frames
    bg, frames = _bg_frames(120, H=120)
    for t in range(120):
        frames[t, (t % 3) * 40:(t % 3) * 40 + 30, 2:8] = (10, 250, 250)
    assert np.array_equal(BackgroundSegmenter().fit(frames).background, bg)
    # one frame (an empty scene) is its own background
    assert np.array_equal(BackgroundSegmenter().fit(bg[None]).background, bg)
    for bad in (bg, np.zeros((0, 16, 12, 3), np.uint8)):
        with pytest.raises(CenterlineError, match=r"expected frames \(T, H, W, 3\)"):
            BackgroundSegmenter().fit(bad)


def test_background_segment_threshold_is_strict_and_per_channel():
    bg, _ = _bg_frames(1)
    seg = BackgroundSegmenter(threshold=30.0, background=bg)
    f = bg.copy()
    f[1, 1] = (120, 140, 60)   # +30 in R: not more than the threshold
    f[2, 2] = (90, 171, 60)    # +31 in G
    f[3, 3] = (90, 140, 29)    # -31 in B
    f[4, 4] = (110, 160, 80)   # +20 in each: the max over channels counts, not the sum
    got = seg.segment(f)
    assert got.dtype == bool and np.array_equal(np.argwhere(got), [[2, 2], [3, 3]])
    with pytest.raises(CenterlineError, match=r"background \(16, 12, 3\) vs frame \(8, 12, 3\)"):
        seg.segment(f[:8])


def test_combined_segmenter_is_the_intersection_once_fitted():
    bg, frames = _bg_frames(3)
    orange, grey = (235, 120, 35), (128, 128, 128)
    bg[0:4, 0:4] = orange          # static orange clutter
    frames[:] = bg
    frames[2, 8:12, 4:8] = orange  # the orange body, in one frame
    frames[2, 12:14, 0:3] = grey   # something grey moving
    seg = CombinedSegmenter(ColorSegmenter([0, 110, 60], [28, 255, 255]), BackgroundSegmenter(threshold=30.0))
    colour_only = seg.segment(frames[2])  # not fitted: the colour model alone
    assert colour_only[0:4, 0:4].all() and colour_only[8:12, 4:8].all() and colour_only.sum() == 32
    assert seg.fit(frames) is seg and np.array_equal(seg.background.background, bg)
    got = seg.segment(frames[2])
    exp = np.zeros(bg.shape[:2], bool)
    exp[8:12, 4:8] = True
    assert np.array_equal(got, exp)


class _FakeSam:
    """Stand-in for the ``segment_anything`` package (not installed here): records its calls."""

    def __init__(self):
        self.log = []
        fake = self

        class Model:
            def __init__(self, kind, checkpoint):
                self.kind, self.checkpoint, self.device = kind, checkpoint, None

            def to(self, device):
                self.device = device
                return self

        class Predictor:
            def __init__(self, model):
                self.model = model

            def set_image(self, img):
                fake.log.append(("set_image", img))

            def predict(self, point_coords, point_labels, multimask_output):
                fake.log.append(("predict", point_coords, point_labels, multimask_output))
                masks = np.zeros((3, 4, 5), np.uint8)
                masks[0, 0, 0] = masks[1, 1, 1] = masks[2, 2, 2] = 1
                return masks, np.array([0.2, 0.9, 0.5]), None

        self.module = _fake_module("segment_anything", SamPredictor=Predictor, sam_model_registry={
            k: (lambda checkpoint, _k=k: Model(_k, checkpoint)) for k in ("vit_b", "vit_l", "vit_h")})


@pytest.fixture
def fake_sam(monkeypatch, tmp_path):
    sam = _FakeSam()
    monkeypatch.setitem(sys.modules, "segment_anything", sam.module)
    ckpt = tmp_path / "sam_vit_l.pth"
    ckpt.write_bytes(b"weights")
    return sam, ckpt


def test_sam_segmenter_without_the_package_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "segment_anything", None)
    ckpt = tmp_path / "sam.pth"
    ckpt.write_bytes(b"weights")
    with pytest.raises(ImportError, match=f"SAM weights found at {ckpt} but the 'segment_anything' package"):
        SamSegmenter(ckpt)
    with pytest.raises(FileNotFoundError, match=f"SAM weights not found at {tmp_path / 'missing.pth'}"):
        SamSegmenter(tmp_path / "missing.pth")


def test_sam_segmenter_builds_the_model_and_takes_the_best_mask(fake_sam, monkeypatch):
    sam, ckpt = fake_sam
    seg = SamSegmenter(ckpt, model_type="vit_l", prompt_px=[12.0, 7.5], device="cuda:1")
    model = seg._predictor.model
    assert (model.kind, model.checkpoint, model.device) == ("vit_l", str(ckpt), "cuda:1")
    assert seg.prompt_px.shape == (1, 2) and seg.prompt_px.dtype == float
    assert np.array_equal(seg.prompt_px, [[12.0, 7.5]])
    frame = np.zeros((4, 5, 3), np.uint8)
    mask = seg.segment(frame)
    assert mask.dtype == bool and np.array_equal(np.argwhere(mask), [[1, 1]])  # the mask scored 0.9
    (op1, img), (op2, coords, labels, multi) = sam.log
    assert op1 == "set_image" and img is frame
    assert op2 == "predict" and np.array_equal(coords, [[12.0, 7.5]]) and np.array_equal(labels, [1]) and multi
    default = SamSegmenter(ckpt)  # vit_b on the CPU
    assert (default._predictor.model.kind, default._predictor.model.device) == ("vit_b", "cpu")
    assert default.prompt_px is None
    with pytest.raises(CenterlineError, match="no prompt pixel"):
        default.segment(frame)
    with pytest.raises(CenterlineError, match=r"SAM model_type 'vit_x' unknown; valid: vit_b, vit_l, vit_h"):
        SamSegmenter(ckpt, model_type="vit_x")
    # '~' is the user's home
    monkeypatch.setenv("HOME", str(ckpt.parent))
    assert SamSegmenter("~/" + ckpt.name)._predictor.model.checkpoint == str(ckpt)


def test_make_segmenter_methods_fields_and_defaults(fake_sam):
    seg = make_segmenter(None)
    assert isinstance(seg, ColorSegmenter) and (seg.hsv_lower, seg.hsv_upper) == ([0, 110, 60], [28, 255, 255])
    cfg = {"method": "color", "hsv_lower": [100, 50, 50], "hsv_upper": [130, 255, 255]}
    seg = make_segmenter(cfg)
    assert (seg.hsv_lower, seg.hsv_upper) == ([100, 50, 50], [130, 255, 255])
    assert cfg["method"] == "color"  # the caller's mapping is not consumed
    seg = make_segmenter({"method": "background"})
    assert isinstance(seg, BackgroundSegmenter) and seg.threshold == 30.0 and seg.background is None
    assert make_segmenter({"method": "background", "threshold": "12.5"}).threshold == 12.5
    seg = make_segmenter({"method": "color+background", "hsv_upper": [20, 255, 255], "threshold": 7})
    assert isinstance(seg, CombinedSegmenter) and seg.background.threshold == 7.0
    assert (seg.color.hsv_lower, seg.color.hsv_upper) == ([0, 110, 60], [20, 255, 255])
    assert make_segmenter({"method": "color+background"}).background.threshold == 30.0
    for method, field in (("color", "threshold"), ("background", "hsv_lower"), ("color+background", "device"),
                          ("sam", "hsv_upper")):
        with pytest.raises(CenterlineError, match=rf"segmentation \({re.escape(method)}\): unknown field\(s\) "
                                                  rf"\['{field}'\]"):
            make_segmenter({"method": method, field: 1})
    with pytest.raises(CenterlineError, match="valid: color, background, color[+]background, sam"):
        make_segmenter({"method": "grabcut"})
    sam, ckpt = fake_sam
    with pytest.raises(CenterlineError, match="field 'checkpoint'"):
        make_segmenter({"method": "sam"}, base_px=(3, 4))
    seg = make_segmenter({"method": "sam", "checkpoint": str(ckpt)}, base_px=(3, 4))
    assert isinstance(seg, SamSegmenter) and np.array_equal(seg.prompt_px, [[3.0, 4.0]])
    assert seg.prompt_px.dtype == float  # pixel coordinates, from integers too
    assert (seg._predictor.model.kind, seg._predictor.model.device) == ("vit_b", "cpu")
    seg = make_segmenter({"method": "sam", "checkpoint": str(ckpt), "model_type": "vit_h", "device": "cuda",
                          "prompt_px": [5, 6]}, base_px=(3, 4))
    assert np.array_equal(seg.prompt_px, [[5.0, 6.0]])  # an explicit prompt wins over the base
    assert (seg._predictor.model.kind, seg._predictor.model.device) == ("vit_h", "cuda")
    assert make_segmenter({"method": "sam", "checkpoint": str(ckpt)}).prompt_px is None


# -- the skeleton graph -------------------------------------------------------------------

def _sk(shape, *runs):
    """A one-pixel skeleton from runs of (y, x) pixels."""
    sk = np.zeros(shape, bool)
    for run in runs:
        for y, x in run:
            sk[y, x] = True
    return sk


def _row(y, x0, x1):
    return [(y, x) for x in range(x0, x1 + 1)]


def _col(x, y0, y1):
    return [(y, x) for y in range(y0, y1 + 1)]


def _edge_set(edges):
    """Edges as {(ends, ((x, y), ...))}: each edge runs from the end met first in raster order."""
    return {(e.ends, tuple(map(tuple, e.pixels.astype(int).tolist()))) for e in edges}


def _xy(pixels):
    return tuple((x, y) for y, x in pixels)


def test_crossing_number_counts_branches_around_a_pixel():
    sk = _sk((21, 21), _row(10, 0, 20), _col(10, 10, 20))  # a T
    cn, nb = cl._crossing_number(sk)
    assert np.array_equal(np.argwhere(sk & (cn >= 3)), [[10, 10]])
    assert (cn[10, 10], nb[10, 10]) == (3, 3)
    assert (cn[10, 0], nb[10, 0]) == (1, 1)    # a free end
    assert (cn[10, 4], nb[10, 4]) == (2, 2)    # inside a branch
    assert (cn[11, 10], nb[11, 10]) == (2, 4)  # beside the junction: 4 neighbours, still one strand
    assert cl._crossing_number(sk.astype(np.uint8) * 255)[0][10, 10] == 3  # any non-zero is skeleton
    x = _sk((9, 9), [(k, k) for k in range(9)], [(k, 8 - k) for k in range(9)])
    assert cl._crossing_number(x)[0][4, 4] == 4


def test_graph_of_a_line_and_of_a_closed_ring():
    edges, zones, centres = cl._skeleton_graph(_sk((11, 15), _row(5, 2, 12)), 2.0)
    assert _edge_set(edges) == {((-1, -1), _xy(_row(5, 2, 12)))}
    assert zones.dtype.kind == "i" and zones.shape == (11, 15) and not zones.any() and centres == {}
    ring = _row(2, 2, 8) + _col(8, 3, 8) + _row(8, 2, 7)[::-1] + _col(2, 3, 7)[::-1]
    edges, zones, centres = cl._skeleton_graph(_sk((11, 11), ring), 2.0)
    assert len(edges) == 1 and edges[0].ends == (-1, -1) and not centres and zones.dtype.kind == "i"
    px = edges[0].pixels
    assert {tuple(p) for p in px.astype(int).tolist()} == set(_xy(ring)) and len(px) == len(ring)
    # it starts at the ring's first pixel in raster order and goes east first (4-neighbours N, E, S, W in turn)
    assert tuple(px[0]) == (2, 2) and tuple(px[1]) == (3, 2) and tuple(px[-1]) == (2, 3)
    assert np.all(np.abs(np.diff(px, axis=0)).max(axis=1) == 1)  # each step to a neighbour
    edges, _, _ = cl._skeleton_graph(_sk((5, 5), [(2, 3)]), 2.0)  # one isolated pixel
    assert _edge_set(edges) == {((-1, -1), ((3, 2),))}


def test_graph_of_a_t_zone_is_the_skeleton_within_the_zone_radius():
    sk = _sk((21, 21), _row(10, 0, 20), _col(10, 10, 20))
    edges, zones, centres = cl._skeleton_graph(sk, 2.0)
    assert set(centres) == {1} and np.array_equal(centres[1], [10.0, 10.0])
    assert zones.dtype.kind == "i"
    assert {tuple(p) for p in np.argwhere(zones == 1).tolist()} == {(10, 8), (10, 9), (10, 10), (10, 11), (10, 12),
                                                                   (11, 10), (12, 10)}
    assert not (zones & ~sk).any() and set(np.unique(zones)) == {0, 1}
    assert _edge_set(edges) == {((-1, 1), _xy(_row(10, 0, 7))), ((1, -1), _xy(_row(10, 13, 20))),
                                ((1, -1), _xy(_col(10, 13, 20)))}
    # radius 1 (also what a radius below 1 becomes): the junction and its 4-neighbours
    for radius in (1.0, 0.4):
        edges, zones, _ = cl._skeleton_graph(sk, radius)
        assert {tuple(p) for p in np.argwhere(zones == 1).tolist()} == {(10, 9), (10, 10), (10, 11), (11, 10)}
        assert _edge_set(edges) == {((-1, 1), _xy(_row(10, 0, 8))), ((1, -1), _xy(_row(10, 12, 20))),
                                    ((1, -1), _xy(_col(10, 12, 20)))}
    # a one-pixel branch beyond the zone: an edge of one pixel, both ends at that zone
    edges, _, _ = cl._skeleton_graph(_sk((21, 21), _row(10, 0, 20), _col(10, 10, 12)), 1.0)
    assert ((1, 1), ((10, 12),)) in _edge_set(edges)


def test_graph_of_a_diagonal_crossing():
    diag = [(k, k) for k in range(2, 19)]
    anti = [(k, 20 - k) for k in range(2, 19)]
    sk = _sk((21, 21), diag, anti)
    for radius, inner in ((2.0, 1), (3.0, 2)):  # zone = pixels within the radius (Euclidean) of the junction
        edges, zones, centres = cl._skeleton_graph(sk, radius)
        zone = {tuple(p) for p in np.argwhere(zones == 1).tolist()}
        assert zone == {(10 + a * k, 10 + b * k) for k in range(inner + 1) for a in (-1, 1) for b in (-1, 1)}
        assert np.array_equal(centres[1], [10.0, 10.0])
        k0 = inner + 1
        assert _edge_set(edges) == {
            ((-1, 1), tuple((k, k) for k in range(2, 10 - k0 + 1))),
            ((-1, 1), tuple((20 - k, k) for k in range(2, 10 - k0 + 1))),
            ((1, -1), tuple((20 - k, k) for k in range(10 + k0, 19))),
            ((1, -1), tuple((k, k) for k in range(10 + k0, 19)))}


def test_graph_of_a_loop_with_a_tail_and_of_two_zones():
    ring = _row(5, 5, 15) + _col(15, 6, 15) + _row(15, 5, 14) + _col(5, 6, 14)
    sk = _sk((30, 21), ring, _col(10, 16, 25))
    edges, zones, centres = cl._skeleton_graph(sk, 2.0)
    loop = _row(15, 5, 7)[::-1] + _col(5, 5, 14)[::-1] + _row(5, 6, 15) + _col(15, 6, 15) + _row(15, 13, 14)[::-1]
    assert _edge_set(edges) == {((1, 1), _xy(loop)), ((1, -1), _xy(_col(10, 18, 25)))}
    assert np.array_equal(centres[1], [10.0, 15.0])
    # two T junctions 14 px apart: two zones, each centred on its own junction
    sk = _sk((21, 40), _row(10, 0, 39), _col(10, 11, 20), _col(24, 0, 9))
    edges, zones, centres = cl._skeleton_graph(sk, 2.0)
    assert set(centres) == {1, 2}
    assert {tuple(c) for c in centres.values()} == {(10.0, 10.0), (24.0, 10.0)}
    z_left, z_right = zones[10, 10], zones[10, 24]
    assert {z_left, z_right} == {1, 2}
    assert _edge_set(edges) == {((-1, z_left), _xy(_row(10, 0, 7))), ((z_left, z_right), _xy(_row(10, 13, 21))),
                                ((z_right, -1), _xy(_row(10, 27, 39))), ((z_left, -1), _xy(_col(10, 13, 20))),
                                ((-1, z_right), _xy(_col(24, 0, 7)))}


def test_a_one_pixel_bridge_between_two_zones_joins_them():
    # regression: the bridge was recorded as a loop at one zone, so the walk could not cross to the other
    sk = _sk((21, 30), _row(10, 0, 29), _col(10, 10, 20), _col(16, 0, 10))  # junctions 6 px apart, zones 1 px apart
    edges, zones, _ = cl._skeleton_graph(sk, 2.0)
    bridge = [e for e in edges if len(e.pixels) == 1]
    assert len(bridge) == 1 and tuple(bridge[0].pixels[0]) == (13, 10)
    assert sorted(bridge[0].ends) == sorted([int(zones[10, 12]), int(zones[10, 14])]) and zones[10, 12] != zones[10, 14]
    # traced from the left end, the straight row (x 5..44, 39 px) is followed across both junctions
    m = np.zeros((40, 50), bool)
    m[20, 5:45] = True
    m[20:35, 15] = True
    m[8:21, 21] = True
    poly, info = trace_centerline(m, (5.0, 20.0), radius_px=2.5, expected_px=39.0)
    assert info["junctions"] == 2  # the bridge, then the rest of the row
    assert np.allclose(poly[:, 1], 20.0) and poly[0, 0] == 5.0 and poly[-1, 0] == 44.0
    # and the other way, from the right end across the bridge to the left
    poly, info = trace_centerline(m, (44.0, 20.0), radius_px=2.5, expected_px=39.0)
    assert info["junctions"] == 2 and np.allclose(poly[:, 1], 20.0) and poly[-1, 0] == 5.0


# -- walks through the graph, their cost, the prior ---------------------------------------

def _line(p, q, n=None):
    p, q = np.asarray(p, float), np.asarray(q, float)
    n = n or int(round(np.linalg.norm(q - p))) + 1
    return p + np.linspace(0, 1, n)[:, None] * (q - p)


def _star():
    """Zone 1 at the origin, entered from (0, -10) going +y; branches straight on (+y), right (+x),
    at 45 deg, and one turning back."""
    E = cl._Edge
    return [E(_line((0, -10), (0, 0)), (-1, 1)), E(_line((0, 1), (0, 12)), (1, -1)),
            E(_line((1, 0), (12, 0)), (1, -1)), E(_line((-1, -1), (-8, -12)), (1, -1)),
            E(_line((1, 1), (8, 8)), (1, -1))]


def _walks(edges, prior=None, max_length_px=None, radius=2.0):
    start = [edges[0].pixels[:1], edges[0].pixels]
    return cl._enumerate_walks(edges, 1, np.array([0.0, 1.0]), start, frozenset([0]), 5.0, radius, prior,
                               max_length_px)


def test_walks_take_each_branch_with_its_turn_and_skip_a_branch_turning_back():
    walks = _walks(_star())
    ends = [tuple(w["poly"][-1]) for w in walks]
    assert ends == [(0.0, 12.0), (12.0, 0.0), (8.0, 8.0)]  # not the branch back to (-8, -12)
    turns = [w["turns"] for w in walks]  # 1 - cos(angle between the way in and the branch)
    assert turns[0] == [0.0] and turns[1] == [pytest.approx(1.0)] and turns[2] == [pytest.approx(1 - math.sqrt(0.5))]
    assert all(w["junctions"] == 1 and w["misses"] == [] for w in walks)
    # each walk's polyline is the way in followed by its branch
    edges = _star()
    assert np.array_equal(walks[1]["poly"], np.concatenate([edges[0].pixels[:1], edges[0].pixels, edges[2].pixels]))
    # the prior's misfit over the next 3 radii (6 px): 0 straight on; a branch at angle a from the prior
    # parts from it by 2 sin(a / 2) per px of arc, a mean of 3 px x 2 sin(a / 2) over 0..6 px
    prior = _line((0, -10), (0, 30))
    misses = [w["misses"] for w in _walks(_star(), prior=prior)]
    assert misses[0] == [pytest.approx(0.0, abs=1e-9)]
    assert misses[1] == [pytest.approx(3 * 2 * math.sin(math.pi / 4))]
    assert misses[2] == [pytest.approx(3 * 2 * math.sin(math.pi / 8))]
    # a prior too short to compare with is no evidence: no miss recorded
    assert [w["misses"] for w in _walks(_star(), prior=_line((0, -10), (0, -8)))] == [[], [], []]


def test_walks_end_at_free_ends_at_used_up_zones_and_beyond_the_length_limit():
    edges = _star()
    # the way in is 10 px long: a limit below it stops at the zone; at exactly 10 px it goes on
    stopped = _walks(edges, max_length_px=9.5)
    assert len(stopped) == 1 and stopped[0]["junctions"] == 0 and tuple(stopped[0]["poly"][-1]) == (0.0, 0.0)
    assert len(_walks(edges, max_length_px=10.0)) == 3
    # a walk that arrives at a free end is not continued, even with unused branches left
    free = cl._enumerate_walks(edges, -1, np.array([0.0, 1.0]), [edges[0].pixels], frozenset([0]), 5.0, 2.0, None,
                               None)
    assert len(free) == 1 and free[0]["junctions"] == 0 and free[0]["turns"] == []
    # a branch once used is not taken again: from zone 2, back to zone 1 by the second parallel edge
    # turns back, so the walks are exactly the two ways through the pair
    E = cl._Edge
    pair = [E(_line((0, -10), (0, 0)), (-1, 1)), E(_line((1, 1), (1, 9)), (1, 2)), E(_line((-1, 1), (-1, 9)), (1, 2)),
            E(_line((0, 10), (0, 20)), (2, -1))]
    walks = _walks(pair)
    assert [w["junctions"] for w in walks] == [2, 2]
    assert [tuple(w["poly"][-1]) for w in walks] == [(0.0, 20.0), (0.0, 20.0)]
    assert walks[0]["poly"][12][0] == 1.0 and walks[1]["poly"][12][0] == -1.0


def test_walks_through_a_loop_in_both_directions_and_a_one_pixel_spur_once():
    E = cl._Edge
    loop = np.array([(1, -1), (3, -2), (5, -1), (5, 1), (3, 2), (1, 1)], float)
    edges = [E(_line((-10, 0), (0, 0)), (-1, 1)), E(loop, (1, 1))]
    start = [edges[0].pixels]
    walks = cl._enumerate_walks(edges, 1, np.array([1.0, 0.0]), start, frozenset([0]), 5.0, 2.0, None, None)
    assert len(walks) == 2 and all(w["junctions"] == 1 for w in walks)
    assert tuple(walks[0]["poly"][-1]) == (1.0, 1.0) and tuple(walks[1]["poly"][-1]) == (1.0, -1.0)
    two = [edges[0], E(np.array([(1.0, -1.0), (1.0, 1.0)]), (1, 1))]  # a two-pixel loop: both ways too
    walks = cl._enumerate_walks(two, 1, np.array([1.0, 0.0]), start, frozenset([0]), 5.0, 2.0, None, None)
    assert sorted(tuple(w["poly"][-1]) for w in walks) == [(1.0, -1.0), (1.0, 1.0)]
    spur = [edges[0], E(np.array([[1.0, 0.0]]), (1, 1))]
    walks = cl._enumerate_walks(spur, 1, np.array([1.0, 0.0]), start, frozenset([0]), 5.0, 2.0, None, None)
    assert len(walks) == 1 and walks[0]["junctions"] == 1 and tuple(walks[0]["poly"][-1]) == (1.0, 0.0)


def test_walks_are_capped():
    # a ladder of 8 zones joined by two parallel rungs each: 2**7 ways through, at most _MAX_WALKS kept
    E = cl._Edge
    edges = [E(_line((0, -10), (0, 0)), (-1, 1))]
    for z in range(1, 8):
        y = 10.0 * (z - 1)
        edges += [E(_line((1, y + 1), (1, y + 9)), (z, z + 1)), E(_line((-1, y + 1), (-1, y + 9)), (z, z + 1))]
    walks = _walks(edges)
    assert len(walks) == cl._MAX_WALKS == 64
    assert all(w["junctions"] == 7 for w in walks)
    assert len({tuple(w["poly"][:, 0]) for w in walks}) == 64  # all different


def test_walk_cost_formula():
    """cost = 2 |L - expected| / expected + 0.5 mean(turns) + 0.2 mean(misses) / radius, or -0.002 L
    (longer is better) without an expected length."""
    walk = {"poly": np.array([[0.0, 0.0], [30.0, 40.0]]), "turns": [0.2, 0.4], "misses": [1.0, 3.0]}
    assert cl._walk_cost(walk, 40.0, 4.0) == pytest.approx(2 * 10 / 40 + 0.5 * 0.3 + 0.2 * 2.0 / 4.0)
    assert cl._walk_cost(walk, 60.0, 4.0) == pytest.approx(2 * 10 / 60 + 0.5 * 0.3 + 0.2 * 2.0 / 4.0)
    assert cl._walk_cost(walk, None, 2.0) == pytest.approx(-0.002 * 50 + 0.5 * 0.3 + 0.2 * 2.0 / 2.0)
    bare = {"poly": walk["poly"], "turns": [], "misses": []}
    assert cl._walk_cost(bare, None, 4.0) == pytest.approx(-0.1)
    assert cl._walk_cost(bare, 50.0, 4.0) == 0.0
    assert cl._walk_cost({"poly": walk["poly"][:1], "turns": [], "misses": []}, None, 4.0) == 0.0


def test_prior_distance_over_the_next_span():
    prior = _line((0, -10), (0, 40))  # a straight prior along +y from (0, -10)
    start = np.array([0.0, 0.0])      # the walk so far ends 10 px along it
    # a branch that turns 90 deg after 10 px: on the prior for u <= 10, then sqrt(2) (u - 10) off;
    # sampled at 0, 4, ..., 20: (2 + 6 + 10) sqrt(2) / 6
    bend = np.concatenate([_line((0, 1), (0, 10)), _line((1, 10), (10, 10))])
    assert cl._prior_distance(prior, 10.0, start, bend, 20.0) == pytest.approx(3 * math.sqrt(2))
    assert cl._prior_distance(prior, 10.0, start, bend, 50.0) == pytest.approx(3 * math.sqrt(2))  # span <= the branch
    # the prior is read from s0 on: a prior starting 10 px earlier, read from 20
    assert cl._prior_distance(_line((0, -20), (0, 40)), 20.0, start, bend, 20.0) == pytest.approx(3 * math.sqrt(2))
    # perpendicular from the start: sqrt(2) u, mean over u = 0, 4, ..., 20 is 10 sqrt(2) ...
    side = _line((1, 0), (20, 0))
    assert cl._prior_distance(prior, 10.0, start, side, 20.0) == pytest.approx(10 * math.sqrt(2))
    # ... unless the prior ends: 8 px of it left covers u = 0, 4, 8 (3 samples) ...
    assert cl._prior_distance(_line((0, -10), (0, 8)), 10.0, start, side, 20.0) == pytest.approx(4 * math.sqrt(2))
    # ... and with 2 samples it is no evidence
    assert cl._prior_distance(_line((0, -10), (0, 5)), 10.0, start, side, 20.0) == math.inf
    assert cl._prior_distance(None, 10.0, start, side, 20.0) == math.inf
    # a branch (or span) shorter than 1 px: inf; exactly 1 px is compared
    assert cl._prior_distance(prior, 10.0, start, np.array([[0.5, 0.0]]), 20.0) == math.inf
    assert cl._prior_distance(prior, 10.0, start, np.array([[1.0, 0.0]]), 20.0) == pytest.approx(0.5 * math.sqrt(2))
    assert cl._prior_distance(prior, 10.0, start, side, 0.9) == math.inf


# -- trace_centerline ---------------------------------------------------------------------

def _y_mask(shape=(50, 41)):
    """A one-pixel Y: a stem down x = 20 from y = 5 to 20, then arms at +-45 deg for 15 px."""
    m = np.zeros(shape, bool)
    m[5:21, 20] = True
    for k in range(1, 16):
        m[20 + k, 20 - k] = m[20 + k, 20 + k] = True
    return m


def test_trace_failures_say_why():
    assert trace_centerline(np.zeros((9, 9), bool), (4, 4)) == (None, {"junctions": 0, "reason": "empty mask"})
    sq = np.zeros((8, 8), bool)
    sq[3:5, 3:5] = True  # Zhang-Suen erases a 2 x 2 square
    assert trace_centerline(sq, (3, 3)) == (None, {"junctions": 0, "reason": "empty skeleton"})
    x = np.zeros((11, 11), bool)  # an X of arm 1: every pixel lies in its junction zone
    x[5, 5] = x[4, 4] = x[4, 6] = x[6, 4] = x[6, 6] = True
    assert trace_centerline(x, (5, 5), radius_px=3.0) == (None, {"junctions": 0,
                                                                 "reason": "skeleton has no branches"})
    bar = np.zeros((60, 60), bool)
    bar[40:50, 10:50] = True  # its skeleton: row 44, x 15..44
    # the nearest skeleton end must lie within 4 r + 4 = 24 px of the base
    poly, info = trace_centerline(bar, (15.0, 19.5), radius_px=5.0)
    assert poly is None and info == {"junctions": 0, "reason": "no skeleton within 24 px of the base"}
    poly, info = trace_centerline(bar, (15.0, 20.0), radius_px=5.0)  # exactly 24 px
    assert tuple(poly[0]) == (15.0, 20.0) and tuple(poly[1]) == (15.0, 44.0) and tuple(poly[-1]) == (44.0, 44.0)
    assert trace_centerline(bar, (15.0, 19.0), radius_px=5.25)[0] is not None  # 25 px reach


def test_trace_a_thick_bar_from_its_base_in_image_coordinates():
    m = np.zeros((70, 40), bool)
    m[10:50, 17:24] = True  # 7 px wide, axis x = 20; thinning leaves y 13..45 of it
    poly, info = trace_centerline(m, (20.0, 8.0), radius_px=3.5)
    assert info == {"junctions": 0, "ambiguous_from_px": None, "walks": 1}
    assert tuple(poly[0]) == (20.0, 8.0)  # from the base ...
    assert np.array_equal(poly[1:], np.stack([np.full(33, 20.0), np.arange(13.0, 46.0)], axis=1))  # ... down the axis
    # the same from the other end, and with the base on the first skeleton pixel (no repeated point)
    poly, _ = trace_centerline(m, (20.0, 52.0), radius_px=3.5)
    assert tuple(poly[0]) == (20.0, 52.0) and tuple(poly[1]) == (20.0, 45.0) and tuple(poly[-1]) == (20.0, 13.0)
    poly, _ = trace_centerline(m, (20.0, 13.0), radius_px=3.5)
    assert len(poly) == 33 and tuple(poly[0]) == (20.0, 13.0)
    assert np.all(np.linalg.norm(np.diff(poly, axis=0), axis=1) > 0)


def test_trace_bodies_touching_the_image_border():
    # the body enters at the top-left corner and leaves at the bottom of a tall image
    m = np.zeros((80, 30), bool)
    m[0:80, 0:5] = True
    poly, info = trace_centerline(m, (2.0, 0.0), radius_px=2.5)
    ref = _reference_zhang_suen(m)
    assert info["junctions"] == 0 and len(poly) - 1 == ref.sum()
    assert {(int(x), int(y)) for x, y in poly[1:]} == {(x, y) for y, x in np.argwhere(ref)}
    wide = np.zeros((30, 80), bool)
    wide[0:5, 0:80] = True
    poly, _ = trace_centerline(wide, (0.0, 2.0), radius_px=1.0)
    ref = _reference_zhang_suen(wide)
    assert {(int(x), int(y)) for x, y in poly[1:]} == {(x, y) for y, x in np.argwhere(ref)}


def test_trace_through_a_t_prefers_straight_on_unless_the_length_says_otherwise():
    m = np.zeros((50, 60), bool)
    m[20, 5:55] = True   # straight: x 5..54 (49 px)
    m[20:45, 30] = True  # a side branch down from x = 30 (24 px)
    poly, info = trace_centerline(m, (5.0, 20.0), radius_px=2.0)
    assert info["junctions"] == 1 and info["walks"] == 2 and tuple(poly[-1]) == (54.0, 20.0)
    assert info["ambiguous_from_px"] is None
    # expected 49 px: straight on (the side walk, 25 + 24 px, is as long but turns 90 deg)
    assert tuple(trace_centerline(m, (5.0, 20.0), radius_px=2.0, expected_px=49.0)[0][-1]) == (54.0, 20.0)
    # a body known to be 25 + 24 = 49 px with a straight run of only 34: the turn explains the length
    m2 = m.copy()
    m2[20, 40:55] = False  # straight: x 5..39 (34 px)
    poly, info = trace_centerline(m2, (5.0, 20.0), radius_px=2.0, expected_px=49.0)
    assert tuple(poly[-1]) == (30.0, 44.0)
    # without the length, the longer one
    assert tuple(trace_centerline(m2, (5.0, 20.0), radius_px=2.0)[0][-1]) == (39.0, 20.0)
    # limited to 20 px, the walk stops at the junction
    poly, info = trace_centerline(m, (5.0, 20.0), radius_px=2.0, max_length_px=20.0)
    assert info["junctions"] == 0 and poly[-1][0] < 30.0


def test_trace_a_symmetric_fork_is_ambiguous_until_a_prior_decides():
    m = _y_mask()
    poly, info = trace_centerline(m, (20.0, 5.0), radius_px=3.0)
    # both walks go down the stem (x 20, y 5..17, where the junction zone begins) and jump to the arms'
    # first pixels outside the zone, (18, 22) and (22, 22): they part by 4 px per 5.385 px of the jump,
    # more than the 3 px radius after 5 px of it: 12 + 5 = 17 px from the base
    assert info["junctions"] == 1 and info["walks"] == 2 and info["ambiguous_from_px"] == 17.0
    right = np.array([[20.0, 5.0], [20.0, 20.0], [35.0, 35.0]])
    left = right * [-1, 1] + [40, 0]
    for prior, tip in ((right, (35.0, 35.0)), (left, (5.0, 35.0))):
        poly, info = trace_centerline(m, (20.0, 5.0), radius_px=3.0, prior=prior)
        assert tuple(poly[-1]) == tip and info["ambiguous_from_px"] is None
    # the prior is in image coordinates: the same fork 100 px further right
    big = np.zeros((50, 141), bool)
    big[:, 100:] = m
    poly, info = trace_centerline(big, (120.0, 5.0), radius_px=3.0, prior=left + [100, 0])
    assert tuple(poly[-1]) == (105.0, 35.0) and info["ambiguous_from_px"] is None
    # a split end whose arms run 2 px apart (less than the radius) but differ in length by more than
    # the radius: ambiguous from the end of the shorter walk. Zone radius round(0.8 x 3) = 2: the stem
    # is walked to (20, 17), then a jump to (19, 22) and one pixel more: 12 + sqrt(26) + 1 px
    m = np.zeros((40, 41), bool)
    m[5:21, 20] = True
    m[21:24, 19] = True   # short arm (x 19, y 21..23)
    m[21:32, 21] = True   # long arm (x 21, y 21..31)
    poly, info = trace_centerline(m, (20.0, 5.0), radius_px=3.0)
    assert info["walks"] == 2 and tuple(poly[-1]) == (21.0, 31.0)  # the longer explains more of the body
    assert info["ambiguous_from_px"] == pytest.approx(12 + math.sqrt(26) + 1)


def test_trace_starts_at_a_junction_when_the_base_is_there():
    m = np.zeros((41, 41), bool)
    m[20, 5:36] = True
    m[5:21, 20] = True  # a T: left, right and up from (20, 20)
    poly, info = trace_centerline(m, (20.0, 21.0), radius_px=2.0)  # the base just below the junction
    assert tuple(poly[0]) == (20.0, 21.0) and tuple(poly[1]) == (20.0, 20.0)  # via the zone's centre
    assert info["walks"] == 3 and info["junctions"] == 1
    # no way in, so no turn is charged: the three 15 px branches tie, and the first is ambiguous with the next
    assert info["ambiguous_from_px"] is not None
    # the first branch from a start zone costs no turn, later junctions do: left (20 px, no junction after)
    # and right (20 px straight through a second junction) tie; they part at the zone centre, 1 px from
    # the base, by 2 px per px of arc: more than the 2 px radius at 3 px
    z = np.zeros((30, 50), bool)
    z[20, 5:46] = True
    z[5:21, 25] = True   # up from the first junction (25, 20)
    z[21:24, 35] = True  # a stub down at the second junction (35, 20)
    poly, info = trace_centerline(z, (25.0, 21.0), radius_px=2.0)
    assert info["walks"] == 4 and tuple(poly[-1]) in {(5.0, 20.0), (45.0, 20.0)} and info["ambiguous_from_px"] == 3.0


def test_a_walk_ending_where_every_branch_turns_back_is_kept():
    # regression: at a zone where all (>= 2) unused branches turn back, the walk so far was dropped
    m = np.zeros((45, 50), bool)
    m[20, 5:41] = True          # straight: x 5..40 (35 px)
    m[20:31, 20] = True         # a side branch down from x = 20
    for k in range(1, 9):       # an arrow head at (40, 20): two arms turning back
        m[20 - k, 41 - k] = m[20 + k, 41 - k] = True
    poly, info = trace_centerline(m, (5.0, 20.0), radius_px=2.5, expected_px=35.0)
    # straight on, to the arrow head's zone (zone radius round(0.8 x 2.5) = 2: x 38..40)
    assert np.allclose(poly[:, 1], 20.0) and tuple(poly[-1]) == (37.0, 20.0)
    assert info["junctions"] == 1


def test_direction_toward_the_point_a_window_along_the_chain():
    L = np.array([(0, 0), (1, 0), (2, 0), (3, 0), (3, 1), (3, 2), (3, 3)], float)  # 3 px right, then 3 down
    unit = lambda v: np.asarray(v, float) / np.linalg.norm(v)  # noqa: E731
    assert np.allclose(cl._direction(L, 3.0), [1.0, 0.0])       # the first point >= 3 px along: (3, 0)
    assert np.allclose(cl._direction(L, 3.5), unit([3, 1]))     # then (3, 1)
    assert np.allclose(cl._direction(L, 100.0), unit([3, 3]))   # beyond the chain: its last point
    bend = np.array([(0, 0), (1, 0), (1, 1)], float)
    assert np.allclose(cl._direction(bend, 0.5), [1.0, 0.0])    # at least the next point
    assert np.allclose(cl._direction(bend[:2], 5.0), [1.0, 0.0])  # two points are a direction
    assert np.allclose(cl._direction(np.array([(2.0, 2.0), (2.0, 2.4)]), 3.0), [0.0, 1.0])  # a short step, unit length
    for pts in (np.array([[4.0, 5.0]]), np.array([[1.0, 1.0], [1.0, 1.0]])):  # no extent: no direction
        d = cl._direction(pts, 3.0)
        assert d.shape == (2,) and not d.any()


def test_trace_starts_at_the_nearer_end_and_handles_a_single_pixel():
    m = np.zeros((40, 20), bool)  # a one-pixel U: ends (10, 10) and (14, 10), bottom at y = 30
    m[10:31, 10] = True
    m[30, 10:15] = True
    m[10:31, 14] = True
    for base, first, last in (((11.8, 9.0), (10.0, 10.0), (14.0, 10.0)), ((12.2, 9.0), (14.0, 10.0), (10.0, 10.0))):
        poly, info = trace_centerline(m, base, radius_px=2.0)
        assert tuple(poly[1]) == first and tuple(poly[-1]) == last and len(poly) == m.sum() + 1
    one = np.zeros((9, 9), bool)
    one[4, 6] = True
    poly, info = trace_centerline(one, (4.0, 2.0), radius_px=1.0)
    assert np.array_equal(poly, [[4.0, 2.0], [6.0, 4.0]]) and info["junctions"] == 0
    # the default radius is 5 px: the base must be within 4 x 5 + 4 = 24 px of the skeleton
    bar = np.zeros((60, 60), bool)
    bar[40:50, 10:50] = True
    assert trace_centerline(bar, (15.0, 19.5))[1]["reason"] == "no skeleton within 24 px of the base"
    assert trace_centerline(bar, (15.0, 20.0))[0] is not None


def _split_end(y_left, y_right):
    """A stem down x = 20 to the junction (20, 20), then two arms that step out to x = 18 and x = 22
    (4 px apart) and run down to ``y_left`` / ``y_right``."""
    s = np.zeros((45, 41), bool)
    s[5:21, 20] = True
    s[21, 19] = s[22, 18] = s[21, 21] = s[22, 22] = True
    s[23:y_left + 1, 18] = True
    s[23:y_right + 1, 22] = True
    return s


def test_close_walks_are_ambiguous_only_when_they_part_or_differ_by_more_than_a_radius():
    # radius 4 (zone radius 3): the walks go down the stem to (20, 16), jump to (18, 23) / (22, 23) and
    # run 4 px apart: exactly the radius, so they never part by MORE than it
    poly, info = trace_centerline(_split_end(32, 32), (20.0, 5.0), radius_px=4.0)
    assert info["walks"] == 2 and info["ambiguous_from_px"] is None  # the same length: one body
    poly, info = trace_centerline(_split_end(30, 34), (20.0, 5.0), radius_px=4.0)
    assert tuple(poly[-1]) == (22.0, 34.0) and info["ambiguous_from_px"] is None  # 4 px longer: not more
    poly, info = trace_centerline(_split_end(30, 35), (20.0, 5.0), radius_px=4.0)
    # 5 px longer: ambiguous from the end of the shorter walk, 11 + sqrt(2^2 + 7^2) + 7 px
    assert tuple(poly[-1]) == (22.0, 35.0) and info["ambiguous_from_px"] == pytest.approx(18 + math.sqrt(53))
    # a close second is a difference of costs: two equally long walks 10 % off the expected length
    # (each costing 0.2) are as ambiguous as without a length
    m = _y_mask()
    L = 12 + math.hypot(2, 5) + 13 * math.sqrt(2)  # stem to (20, 17), jump to (18, 22), 13 diagonal steps
    for expected in (None, L, 1.1 * L):
        assert trace_centerline(m, (20.0, 5.0), radius_px=3.0, expected_px=expected)[1]["ambiguous_from_px"] == 17.0


def test_trace_from_the_stem_of_a_t_reaches_the_junction_and_both_arms():
    m = np.zeros((41, 41), bool)
    m[20, 5:36] = True
    m[20:36, 20] = True  # a T, traced from the bottom of its stem
    poly, info = trace_centerline(m, (20.0, 35.0), radius_px=2.0)
    assert info["junctions"] == 1 and info["walks"] == 2
    assert tuple(poly[-1]) in {(5.0, 20.0), (35.0, 20.0)} and info["ambiguous_from_px"] is not None
    assert np.all(poly[:, 1] <= 35.0) and np.all(np.diff(poly[:, 1]) <= 0)  # up the stem, then along the bar


def test_a_branch_is_judged_by_its_direction_over_two_radii():
    """At the junction (30, 20) a branch goes down d px beyond the zone, then back west. Its direction is
    taken max(3, 2 r) px along it: within d px it points down (a 90 deg turn, a possible continuation),
    further it points back toward the base (1 - cos > 1.2 once that point is more than 1.2 d px along):
    then it is not a continuation and only the straight walk is left."""
    def hook(d, radius):
        h = d + round(0.8 * radius) + 1  # the zone covers round(0.8 r) px of the branch
        m = np.zeros((40, 40), bool)
        m[20, 5:35] = True
        m[20:20 + h + 1, 30] = True
        m[20 + h, 12:30] = True
        return m

    for d, radius, walks in ((3, 1.0, 2), (3, 2.5, 1), (5, 2.5, 2)):  # window 3 px, 5 px, 5 px
        poly, info = trace_centerline(hook(d, radius), (5.0, 20.0), radius_px=radius)
        assert info["walks"] == walks, (d, radius)
        assert tuple(poly[-1]) == (34.0, 20.0)  # the turn costs more than the extra length gains


def test_a_one_pixel_bridge_on_each_image_border():
    # the bridge's zones are read from all its in-image neighbours, whichever border it lies on
    top = np.zeros((12, 30), bool)
    top[0, :] = True
    top[0:8, 10] = top[0:8, 16] = True  # junctions (0, 10) and (0, 16) on the border row, bridge (0, 13)
    for k in range(4):
        sk = np.rot90(top, k).copy()
        edges, zones, centres = cl._skeleton_graph(sk, 2.0)
        assert all(e.pixels.dtype == float for e in edges)
        bridge = [e for e in edges if len(e.pixels) == 1]
        assert len(bridge) == 1 and sorted(bridge[0].ends) == [1, 2] and sorted(centres) == [1, 2], k
        # the four other branches (two along the border, two inward) each run from a zone to a free end
        others = [sorted(e.ends) for e in edges if len(e.pixels) > 1]
        assert sorted(others) == [[-1, 1], [-1, 1], [-1, 2], [-1, 2]], k


def test_a_diagonal_one_pixel_bridge():
    # a diagonal with junctions at (10, 10) and (14, 14) (side branches NE and SW): zone radius 2 leaves
    # (12, 12) between the zones, touching them at its NW and SE corners
    sk = _sk((32, 32), [(k, k) for k in range(31)], [(10 - j, 10 + j) for j in range(1, 7)],
             [(14 + j, 14 - j) for j in range(1, 7)])
    edges, zones, centres = cl._skeleton_graph(sk, 2.0)
    bridge = [e for e in edges if len(e.pixels) == 1]
    assert len(bridge) == 1 and tuple(bridge[0].pixels[0]) == (12.0, 12.0)
    assert sorted(bridge[0].ends) == sorted([int(zones[11, 11]), int(zones[13, 13])]) == [1, 2]
