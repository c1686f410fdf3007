"""Soft-body perception: segmentation, skeleton and an ordered centreline as keypoints.

The camera sees a soft robot's *shape*, not a few markers. :class:`CenterlineTracker`
turns each RGB frame into ``K`` keypoints ``c0..c{K-1}`` spaced evenly in arc length
along the body's centreline, from a known base pixel (the clamp, from the rig
configuration) to the tip:

1. **segmentation** (:func:`make_segmenter`): a classical colour model (HSV box,
   default), a background model (median frame difference), both combined, or an
   optional SAM-family model when its weights exist locally (:class:`SamSegmenter`;
   never downloaded). The mask is cleaned (opening/closing) and only the connected
   component touching the base is kept, so clutter elsewhere cannot capture the track;
2. **skeleton** (:func:`skeletonize`): ``cv2.ximgproc.thinning`` when OpenCV's contrib
   module is installed, else ``skimage.morphology.skeletonize`` when scikit-image is,
   else a vectorised Zhang-Suen thinning (Zhang & Suen 1984, Commun. ACM 27(3), 236-239);
   :data:`SKELETON_BACKEND` says which;
3. **ordering** (:func:`trace_centerline`): the skeleton becomes a graph whose nodes
   are free ends and junction zones (pixels with crossing number >= 3, Rutovitz 1966,
   merged within about one body radius). Every walk from the base through the zones
   (each branch once) is enumerated and the one chosen whose length best matches the
   expected body length, that turns least at the junctions (a strand crosses another
   straight) and that stays closest to the previous frame's centreline; a close second
   that departs from it marks the rest of the curve as ambiguous. So a body that curls
   over itself is followed through the crossing, and when a coil cannot be resolved the
   keypoints beyond the doubt are invalid rather than on the wrong strand;
4. **tip**: thinning stops about one radius short of a rounded end (more on diagonals);
   the path is continued along the body, re-centred across it at every pixel, to the
   mask boundary and pulled back by the end cap's radius (distance transform). An end
   at the image border or at a known occluder (``occluders``, e.g. the base mount) is
   not the tip: the keypoints beyond it are invalid;
5. **sub-pixel centring**: skeleton pixels sit on the pixel grid (up to half a pixel
   off the true axis); each point of the smoothed curve is moved to the midpoint of the
   two boundary crossings of the (bilinear) mask along its normal;
6. **keypoints**: the curve is resampled at arc lengths ``(k + 1) / K`` of the body
   length (the base itself is not a keypoint; ``c{K-1}`` is the tip). When an expected
   length ``length_px`` is known and the traced curve is clearly shorter, keypoints are
   placed along the expected length and those beyond the traced part are **invalid**
   rather than squeezed.

Measured on rendered 320 x 240 rollouts of the tentacle twin (``test/test_centerline.py``,
``bench/bench_tentacle.py``): about 0.25 px mean error against the simulator's projected
centreline without noise, about 0.35 px with the default sensor noise model.

Every failure (no body at the base, empty frame, dropped frame) yields invalid
keypoints (NaN), never an exception mid-clip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol, Sequence

import cv2
import numpy as np

from ..core.trajectory import Trajectory

__all__ = [
    "CenterlineTracker", "CenterlineError", "CenterlineResult", "Segmenter", "ColorSegmenter",
    "BackgroundSegmenter", "CombinedSegmenter", "SamSegmenter", "make_segmenter", "skeletonize",
    "trace_centerline", "resample_polyline", "SKELETON_BACKEND",
]


class CenterlineError(ValueError):
    """Bad tracker configuration or a malformed frame (message names the field)."""


# -- skeletonisation ------------------------------------------------------------------------

def _skeleton_backend() -> str:
    if hasattr(cv2, "ximgproc") and hasattr(cv2.ximgproc, "thinning"):
        return "cv2.ximgproc"
    try:
        import skimage.morphology  # noqa: F401

        return "skimage"
    except ImportError:
        return "zhang-suen"


#: which skeletonisation is used: "cv2.ximgproc", "skimage" or "zhang-suen" (own, numpy).
SKELETON_BACKEND = _skeleton_backend()

# neighbour order P2..P9 (N, NE, E, SE, S, SW, W, NW) as (dy, dx)
_RING = ((-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1))


def _zhang_suen_luts() -> tuple[np.ndarray, np.ndarray]:
    lut1 = np.zeros(256, dtype=bool)
    lut2 = np.zeros(256, dtype=bool)
    for code in range(256):
        p = [(code >> i) & 1 for i in range(8)]  # p[0] = P2 ... p[7] = P9
        b = sum(p)
        a = sum(1 for i in range(8) if p[i] == 0 and p[(i + 1) % 8] == 1)
        if not (2 <= b <= 6 and a == 1):
            continue
        P2, P4, P6, P8 = p[0], p[2], p[4], p[6]
        lut1[code] = (P2 * P4 * P6 == 0) and (P4 * P6 * P8 == 0)
        lut2[code] = (P2 * P4 * P8 == 0) and (P2 * P6 * P8 == 0)
    return lut1, lut2


_ZS_LUT1, _ZS_LUT2 = _zhang_suen_luts()


_CODE_KERNEL = np.zeros((3, 3), np.float32)
for _i, (_dy, _dx) in enumerate(_RING):
    _CODE_KERNEL[1 + _dy, 1 + _dx] = float(1 << _i)


def _neighbour_code(img: np.ndarray) -> np.ndarray:
    """8-bit code of the 8 neighbours (bit i = P(i+2)), shape of ``img`` (0/1 uint8); zero outside."""
    code = cv2.filter2D(img.astype(np.float32), -1, _CODE_KERNEL, borderType=cv2.BORDER_CONSTANT)
    return code.astype(np.uint8)


def _zhang_suen(mask: np.ndarray) -> np.ndarray:
    img = (mask > 0).astype(np.uint8)
    while True:
        changed = False
        for lut in (_ZS_LUT1, _ZS_LUT2):
            delete = (img == 1) & lut[_neighbour_code(img)]
            if delete.any():
                img[delete] = 0
                changed = True
        if not changed:
            return img.astype(bool)


def skeletonize(mask: np.ndarray) -> np.ndarray:
    """One-pixel-wide skeleton of a binary mask.

    Args:
        mask: (H, W) bool or uint8 (non-zero = foreground).

    Returns:
        (H, W) bool skeleton (8-connected), computed with :data:`SKELETON_BACKEND`
        inside the mask's bounding box.
    """
    m = np.asarray(mask) > 0
    out = np.zeros(m.shape, dtype=bool)
    ys, xs = np.nonzero(m)
    if ys.size == 0:
        return out
    y0, y1 = max(0, ys.min() - 1), min(m.shape[0], ys.max() + 2)
    x0, x1 = max(0, xs.min() - 1), min(m.shape[1], xs.max() + 2)
    sub = m[y0:y1, x0:x1]
    if SKELETON_BACKEND == "cv2.ximgproc":
        sk = cv2.ximgproc.thinning(sub.astype(np.uint8) * 255, thinningType=cv2.ximgproc.THINNING_ZHANGSUEN) > 0
    elif SKELETON_BACKEND == "skimage":
        from skimage.morphology import skeletonize as _sk

        sk = _sk(sub)
    else:
        sk = _zhang_suen(sub)
    out[y0:y1, x0:x1] = sk
    return out


# -- segmentation ---------------------------------------------------------------------------

class Segmenter(Protocol):
    """``segment(frame_rgb (H, W, 3) uint8) -> (H, W) bool`` foreground mask."""

    def segment(self, frame_rgb: np.ndarray) -> np.ndarray: ...


def _hsv_triplet(v: Any, field_name: str) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=float).ravel()
    except (TypeError, ValueError):  # text, a mapping, ragged lists: refused below, naming the field
        a = np.empty(0)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise CenterlineError(f"segmentation: '{field_name}' must be three numbers [H, S, V], got {v!r}")
    if not (0 <= a[0] <= 180 and np.all((0 <= a[1:]) & (a[1:] <= 255))):
        raise CenterlineError(f"segmentation: '{field_name}' out of range (H in [0, 180], S and V in [0, 255]): {v!r}")
    return a


@dataclass
class ColorSegmenter:
    """Pixels inside an HSV box (OpenCV convention: H in [0, 180), S, V in [0, 255]).

    ``hsv_lower[0] > hsv_upper[0]`` wraps the hue through 0 (reds).
    """

    hsv_lower: Sequence[float]
    hsv_upper: Sequence[float]

    def __post_init__(self) -> None:
        self._lo = _hsv_triplet(self.hsv_lower, "hsv_lower")
        self._hi = _hsv_triplet(self.hsv_upper, "hsv_upper")

    def segment(self, frame_rgb: np.ndarray) -> np.ndarray:
        hsv = cv2.cvtColor(frame_rgb, cv2.COLOR_RGB2HSV)
        lo, hi = self._lo, self._hi
        sv = cv2.inRange(hsv, (0, lo[1], lo[2]), (180, hi[1], hi[2])) > 0
        h = hsv[..., 0]
        hue = ((h >= lo[0]) & (h <= hi[0])) if lo[0] <= hi[0] else ((h >= lo[0]) | (h <= hi[0]))
        return sv & hue


@dataclass
class BackgroundSegmenter:
    """Pixels differing from a static background by more than ``threshold`` (max over RGB, DN).

    The background is given, or estimated by :meth:`fit` as the per-pixel median of a clip
    (valid when the body moves over the clip or is absent from some frames).
    """

    threshold: float = 30.0
    background: np.ndarray | None = None

    def fit(self, frames: np.ndarray) -> "BackgroundSegmenter":
        """Estimate the background as the per-pixel median of ``frames`` (T, H, W, 3); returns self."""
        frames = np.asarray(frames)
        if frames.ndim != 4 or frames.shape[0] == 0:
            raise CenterlineError(f"background fit: expected frames (T, H, W, 3), got {frames.shape}")
        step = max(1, frames.shape[0] // 60)
        self.background = np.median(frames[::step], axis=0).astype(np.uint8)
        return self

    def segment(self, frame_rgb: np.ndarray) -> np.ndarray:
        if self.background is None:
            raise CenterlineError("background segmenter: no background; call fit(frames) or give 'background'")
        if self.background.shape != frame_rgb.shape:
            raise CenterlineError(f"background segmenter: background {self.background.shape} "
                                  f"vs frame {frame_rgb.shape}")
        diff = cv2.absdiff(frame_rgb, self.background).max(axis=2)
        return diff > self.threshold


@dataclass
class CombinedSegmenter:
    """Intersection of a colour and a background model (colour-alike clutter is static, the body is not)."""

    color: ColorSegmenter
    background: BackgroundSegmenter

    def fit(self, frames: np.ndarray) -> "CombinedSegmenter":
        self.background.fit(frames)
        return self

    def segment(self, frame_rgb: np.ndarray) -> np.ndarray:
        c = self.color.segment(frame_rgb)
        if self.background.background is None:
            return c
        return c & self.background.segment(frame_rgb)


class SamSegmenter:
    """Segment Anything (SAM-family) backend, prompted with the base pixel; optional.

    Uses the ``segment_anything`` package (``SamPredictor``) with a local checkpoint. No
    weights are ever downloaded: the constructor fails with a clear message when the
    checkpoint file is missing.

    Args:
        checkpoint: path to the model weights (``.pth``).
        model_type: registry key of ``segment_anything.sam_model_registry`` (``vit_b``,
            ``vit_l``, ``vit_h``).
        prompt_px: (x, y) pixel on the body (e.g. just below the base), the positive prompt.
        device: torch device string.

    Raises:
        FileNotFoundError: "SAM weights not found at PATH".
        ImportError: the weights exist but ``segment_anything`` / torch is not installed.
    """

    def __init__(self, checkpoint: str | Path, *, model_type: str = "vit_b",
                 prompt_px: Sequence[float] | None = None, device: str = "cpu") -> None:
        path = Path(checkpoint).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"SAM weights not found at {path} (no download is attempted; place the "
                                    f"checkpoint there or use segmentation method 'color')")
        try:
            from segment_anything import SamPredictor, sam_model_registry
        except ImportError as err:
            raise ImportError(f"SAM weights found at {path} but the 'segment_anything' package (and torch) is not "
                              f"installed: {err}") from None
        if model_type not in sam_model_registry:
            raise CenterlineError(f"SAM model_type {model_type!r} unknown; valid: {', '.join(sam_model_registry)}")
        model = sam_model_registry[model_type](checkpoint=str(path))
        model.to(device=device)
        self._predictor = SamPredictor(model)
        self.prompt_px = None if prompt_px is None else np.asarray(prompt_px, dtype=float).reshape(1, 2)

    def segment(self, frame_rgb: np.ndarray) -> np.ndarray:
        if self.prompt_px is None:
            raise CenterlineError("SAM segmenter: no prompt pixel (set prompt_px or the tracker's base_px)")
        self._predictor.set_image(frame_rgb)
        masks, scores, _ = self._predictor.predict(point_coords=self.prompt_px, point_labels=np.array([1]),
                                                   multimask_output=True)
        return np.asarray(masks[int(np.argmax(scores))], dtype=bool)


def make_segmenter(cfg: Mapping[str, Any] | None, *, base_px: Sequence[float] | None = None) -> Segmenter:
    """Build a segmenter from ``{"method": "color"|"background"|"color+background"|"sam", ...}``.

    Fields: ``hsv_lower``, ``hsv_upper`` (color); ``threshold`` (background, DN);
    ``checkpoint``, ``model_type``, ``device`` (sam). Default: the tentacle's orange
    colour model.

    Raises:
        CenterlineError: unknown method or field; FileNotFoundError for missing SAM weights.
    """
    cfg = dict(cfg or {})
    method = cfg.pop("method", "color")
    allowed = {"color": {"hsv_lower", "hsv_upper"}, "background": {"threshold"},
               "color+background": {"hsv_lower", "hsv_upper", "threshold"},
               "sam": {"checkpoint", "model_type", "device", "prompt_px"}}
    if method not in allowed:
        raise CenterlineError(f"segmentation: unknown method {method!r}; valid: {', '.join(allowed)}")
    unknown = sorted(set(cfg) - allowed[method])
    if unknown:
        raise CenterlineError(f"segmentation ({method}): unknown field(s) {unknown}; valid: {sorted(allowed[method])}")
    lo, hi = cfg.get("hsv_lower", [0, 110, 60]), cfg.get("hsv_upper", [28, 255, 255])
    if method == "color":
        return ColorSegmenter(lo, hi)
    if method == "background":
        return BackgroundSegmenter(float(cfg.get("threshold", 30.0)))
    if method == "color+background":
        return CombinedSegmenter(ColorSegmenter(lo, hi), BackgroundSegmenter(float(cfg.get("threshold", 30.0))))
    if "checkpoint" not in cfg:
        raise CenterlineError("segmentation (sam): field 'checkpoint' (path to local weights) is required")
    prompt = cfg.get("prompt_px")
    if prompt is None and base_px is not None:
        prompt = base_px
    return SamSegmenter(cfg["checkpoint"], model_type=cfg.get("model_type", "vit_b"), prompt_px=prompt,
                        device=cfg.get("device", "cpu"))


# -- skeleton graph and tracing ------------------------------------------------------------

@dataclass
class _Edge:
    pixels: np.ndarray  # (n, 2) float (x, y), ordered
    ends: tuple[int, int]  # zone id at start / end, -1 = free end
    uses: int = 0


_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little")  # (256, 8)
#: Rutovitz crossing number (0->1 transitions around the 8-ring) and neighbour count per code
_CN_LUT = (np.abs(np.diff(np.concatenate([_BITS, _BITS[:, :1]], axis=1).astype(int), axis=1)).sum(axis=1) // 2)
_NB_LUT = _BITS.sum(axis=1)


def _crossing_number(sk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(crossing number, neighbour count) per pixel (Rutovitz), over the 8-ring."""
    code = _neighbour_code(sk.astype(np.uint8))
    return _CN_LUT[code], _NB_LUT[code]


def _order_chain(pix: set[tuple[int, int]], start: tuple[int, int]) -> list[tuple[int, int]]:
    """Walk an 8-connected chain of (y, x) pixels from ``start``, preferring 4-neighbours."""
    order = [start]
    seen = {start}
    cur = start
    while True:
        y, x = cur
        nxt = None
        for dy, dx in ((-1, 0), (0, 1), (1, 0), (0, -1), (-1, 1), (1, 1), (1, -1), (-1, -1)):
            q = (y + dy, x + dx)
            if q in pix and q not in seen:
                nxt = q
                break
        if nxt is None:
            return order
        order.append(nxt)
        seen.add(nxt)
        cur = nxt


def _skeleton_graph(sk: np.ndarray, zone_radius: float) -> tuple[list[_Edge], np.ndarray, dict[int, np.ndarray]]:
    """Split a skeleton into edges between junction zones / free ends.

    Returns:
        ``(edges, zone_labels (H, W) int (0 = none), zone_centres {id: (x, y)})``.
    """
    cn, nb = _crossing_number(sk)
    junction = sk & (cn >= 3)
    zones = np.zeros(sk.shape, dtype=np.int32)
    centres: dict[int, np.ndarray] = {}
    if junction.any():
        r = max(1, int(round(zone_radius)))
        disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
        grown = cv2.dilate(junction.astype(np.uint8), disc)
        n_z, lab = cv2.connectedComponents(grown, connectivity=8)
        zones = np.where(sk, lab, 0).astype(np.int32)
        for z in range(1, n_z):
            ys, xs = np.nonzero(junction & (lab == z))
            if ys.size:
                centres[z] = np.array([xs.mean(), ys.mean()])
    rest = (sk & (zones == 0)).astype(np.uint8)
    n_e, elab = cv2.connectedComponents(rest, connectivity=8)
    edges: list[_Edge] = []
    H, W = sk.shape
    for e in range(1, n_e):
        ys, xs = np.nonzero(elab == e)
        pix = set(zip(ys.tolist(), xs.tolist()))
        # chain ends: pixels with <= 1 neighbour inside the edge, or touching a zone
        touch: dict[tuple[int, int], int] = {}
        ends = []
        for (y, x) in pix:
            n_in = 0
            for dy, dx in _RING:
                q = (y + dy, x + dx)
                if q in pix:
                    n_in += 1
                elif 0 <= q[0] < H and 0 <= q[1] < W and zones[q] > 0:
                    touch[(y, x)] = int(zones[q])
            if n_in <= 1:
                ends.append((y, x))
        cands = ends or list(touch)
        if not cands:  # closed ring with no junction: start anywhere
            cands = [min(pix)]
        start = min(cands, key=lambda p: (p not in touch and p not in ends, p))
        chain = _order_chain(pix, start)
        a, b = chain[0], chain[-1]
        za, zb = touch.get(a, -1), touch.get(b, -1)
        if len(chain) == 1:  # one pixel may bridge two zones (``touch`` keeps one zone per pixel)
            (y, x) = a
            zs = sorted({int(zones[y + dy, x + dx]) for dy, dx in _RING
                         if 0 <= y + dy < H and 0 <= x + dx < W and zones[y + dy, x + dx] > 0})
            za = zs[0] if zs else -1
            zb = zs[-1] if len(zs) > 1 else (za if za != -1 else -1)
        edges.append(_Edge(np.array([(x, y) for (y, x) in chain], dtype=float), (za, zb)))
    return edges, zones, centres


def _direction(pts: np.ndarray, window: float) -> np.ndarray:
    """Unit direction from pts[0] toward the point ~``window`` px along the chain."""
    if pts.shape[0] < 2:
        return np.zeros(2)
    seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    j = int(np.searchsorted(s, window))
    j = min(max(j, 1), pts.shape[0] - 1)
    d = pts[j] - pts[0]
    n = np.linalg.norm(d)
    return d / n if n > 0 else np.zeros(2)


def trace_centerline(mask: np.ndarray, base_px: Sequence[float], *, radius_px: float = 5.0,
                     expected_px: float | None = None, max_length_px: float | None = None,
                     prior: np.ndarray | None = None) -> tuple[np.ndarray | None, dict[str, Any]]:
    """Ordered centreline of the body in ``mask``, from the base pixel to the tip.

    Every way through the junction zones (each branch used once) is enumerated and scored
    by (a) how well its length matches ``expected_px`` (a body crossing itself must still
    be traced over its whole length), (b) how little it turns at each junction (a strand
    continues straight through a crossing) and (c) how close it stays to ``prior`` (the
    previous frame's centreline at the same arc length). A close second-best walk that
    departs from the best marks the rest of the curve as ambiguous.

    Args:
        mask: (H, W) bool, the body (one component touching the base).
        base_px: (x, y) of the clamped base, px; the polyline starts there.
        radius_px: typical body radius, px (junction-zone size, direction windows).
        expected_px: expected length of the body in the image, px, or None.
        max_length_px: stop a walk beyond this length (e.g. 1.5 x the expected length).
        prior: (M, 2) px, a trusted base-to-tip centreline of the previous frame, or None.

    Returns:
        ``(polyline (N, 2) px or None, info)``; info has ``junctions`` (zones met),
        ``ambiguous_from_px`` (arc length after which a junction choice was a close call,
        or None) and ``reason`` when the polyline is None.
    """
    info: dict[str, Any] = {"junctions": 0}
    ys, xs = np.nonzero(mask)
    if ys.size == 0:
        info["reason"] = "empty mask"
        return None, info
    pad = int(math.ceil(radius_px)) + 2
    y0, x0 = max(0, ys.min() - pad), max(0, xs.min() - pad)
    y1, x1 = min(mask.shape[0], ys.max() + pad + 1), min(mask.shape[1], xs.max() + pad + 1)
    sk = skeletonize(mask[y0:y1, x0:x1])
    if not sk.any():
        info["reason"] = "empty skeleton"
        return None, info
    offset = np.array([x0, y0], dtype=float)
    base = np.asarray(base_px, dtype=float) - offset
    edges, zones, centres = _skeleton_graph(sk, zone_radius=0.8 * radius_px)
    if not edges:
        info["reason"] = "skeleton has no branches"
        return None, info
    # start: the edge end (or zone) nearest to the base
    best = None
    for i, e in enumerate(edges):
        for end_idx, pt in ((0, e.pixels[0]), (1, e.pixels[-1])):
            d = float(np.linalg.norm(pt - base))
            if best is None or d < best[0]:
                best = (d, i, end_idx)
    z_best = None
    for z, c in centres.items():
        d = float(np.linalg.norm(c - base))
        if d < best[0]:
            best, z_best = (d, -1, 0), z
    if best[0] > 4.0 * radius_px + 4.0:
        info["reason"] = f"no skeleton within {4.0 * radius_px + 4.0:.0f} px of the base"
        return None, info
    window = max(3.0, 2.0 * radius_px)
    prior_local = None if prior is None else np.asarray(prior, dtype=float) - offset
    start_path = [base[None, :]]
    used0: frozenset[int] = frozenset()
    incoming = None
    if z_best is not None:
        zone = z_best
        start_path.append(centres[zone][None, :])
    else:
        e = edges[best[1]]
        pts = e.pixels if best[2] == 0 else e.pixels[::-1]
        used0 = frozenset([best[1]])
        start_path.append(pts)
        zone = e.ends[1] if best[2] == 0 else e.ends[0]
        incoming = -_direction(pts[::-1], window)
    walks = _enumerate_walks(edges, zone, incoming, start_path, used0, window, radius_px, prior_local,
                             max_length_px)
    info["ambiguous_from_px"] = None
    scored = sorted(((_walk_cost(w, expected_px, radius_px), k) for k, w in enumerate(walks)), key=lambda c: c[0])
    chosen = walks[scored[0][1]]
    info["junctions"] = chosen["junctions"]
    info["walks"] = len(walks)
    poly = chosen["poly"]
    if len(scored) > 1 and scored[1][0] - scored[0][0] < 0.15:
        # a close second: ambiguous from where the two walks part by more than a radius
        other = walks[scored[1][1]]["poly"]
        L = min(_polyline_length(poly), _polyline_length(other))
        u = np.arange(0.0, L, 1.0)
        if u.size:
            gap = np.linalg.norm(resample_polyline(poly, u) - resample_polyline(other, u), axis=1)
            far = np.nonzero(gap > radius_px)[0]
            if far.size:
                info["ambiguous_from_px"] = float(u[far[0]])
            elif abs(_polyline_length(poly) - _polyline_length(other)) > radius_px:
                info["ambiguous_from_px"] = float(L)
    poly = poly + offset
    keep = np.concatenate([[True], np.linalg.norm(np.diff(poly, axis=0), axis=1) > 1e-9])
    return poly[keep], info


_MAX_WALKS = 64


def _enumerate_walks(edges: list[_Edge], zone: int, incoming: np.ndarray | None, path: list[np.ndarray],
                     used: frozenset[int], window: float, radius_px: float, prior: np.ndarray | None,
                     max_length_px: float | None) -> list[dict[str, Any]]:
    """All ways (up to :data:`_MAX_WALKS`) to continue ``path`` through the skeleton graph.

    At each junction zone any unused incident branch may be taken (each branch once); a walk
    ends at a free end, at a zone with no unused branch, or beyond ``max_length_px``. Each
    walk records its polyline, the turn at each choice (1 - cos) and the distance to ``prior``.
    """
    out: list[dict[str, Any]] = []

    def rec(zone, incoming, path, used, turns, misses, junctions):
        if len(out) >= _MAX_WALKS:
            return
        poly = np.concatenate(path)
        length = _polyline_length(poly)
        cands = []
        if zone != -1 and not (max_length_px is not None and length > max_length_px):
            for i, e in enumerate(edges):
                if i in used:
                    continue
                if e.ends[0] == zone:
                    cands.append((i, e.pixels, e.ends[1]))
                if e.ends[1] == zone and (e.ends[0] != zone or e.pixels.shape[0] > 1):
                    cands.append((i, e.pixels[::-1], e.ends[0]))
        went_on = False
        for i, pts, nxt in cands:
            d = _direction(pts, window)
            turn = 0.0 if incoming is None else 1.0 - float(d @ incoming)
            if turn > 1.2:  # turns back on itself: not a continuation of the same strand
                continue
            went_on = True
            miss = _prior_distance(prior, length, poly[-1], pts, 3.0 * radius_px)
            rec(nxt, -_direction(pts[::-1], window), path + [pts], used | {i}, turns + [turn],
                misses + ([miss] if math.isfinite(miss) else []), junctions + 1)
        if not went_on:  # a free end, no unused branch, or every branch turns back: the walk ends here
            out.append({"poly": poly, "turns": turns, "misses": misses, "junctions": junctions})

    rec(zone, incoming, list(path), used, [], [], 0)  # every call ends in a recorded walk: out is never empty
    return out


def _walk_cost(walk: Mapping[str, Any], expected_px: float | None, radius_px: float) -> float:
    """Lower is better: length mismatch (fraction of the expected length), turning and prior misfit."""
    cost = 0.0
    L = _polyline_length(walk["poly"])
    if expected_px:
        cost += 2.0 * abs(L - expected_px) / expected_px
    else:
        cost -= 0.002 * L  # no length prior: prefer the walk that explains more of the body
    if walk["turns"]:
        cost += 0.5 * float(np.mean(walk["turns"]))
    if walk["misses"]:
        cost += 0.2 * float(np.mean(walk["misses"])) / radius_px
    return cost


def _prior_distance(prior: np.ndarray | None, s0: float, start: np.ndarray, pts: np.ndarray, span: float) -> float:
    """Mean distance (px) between a candidate branch and ``prior`` over the next ``span`` px of arc.

    The candidate is taken from ``start`` (the walk's current end) through ``pts``; the prior
    is sampled at the same arc lengths from ``s0``. inf when the prior is missing or too short.
    """
    if prior is None:
        return math.inf
    cand = np.concatenate([start[None, :], pts])
    Lc = _polyline_length(cand)
    span = min(span, Lc)
    if span < 1.0:
        return math.inf
    u = np.linspace(0.0, span, 6)
    a = resample_polyline(cand, u)
    b = resample_polyline(prior, s0 + u)
    ok = np.all(np.isfinite(b), axis=1)
    if ok.sum() < 3:
        return math.inf
    return float(np.mean(np.linalg.norm(a[ok] - b[ok], axis=1)))


def _polyline_length(p: np.ndarray) -> float:
    return float(np.linalg.norm(np.diff(p, axis=0), axis=1).sum()) if p.shape[0] > 1 else 0.0


def resample_polyline(poly: np.ndarray, s_query: np.ndarray) -> np.ndarray:
    """Points at arc lengths ``s_query`` (px) along ``poly`` (N, 2); NaN beyond its length."""
    seg = np.linalg.norm(np.diff(poly, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    out = np.full((len(s_query), 2), np.nan)
    ok = (s_query >= 0) & (s_query <= s[-1] + 1e-9)
    if s[-1] <= 0:
        return out
    out[ok, 0] = np.interp(s_query[ok], s, poly[:, 0])
    out[ok, 1] = np.interp(s_query[ok], s, poly[:, 1])
    return out


def _smooth(poly: np.ndarray, sigma_px: float) -> np.ndarray:
    """Resample at 1 px and Gaussian-smooth along arc length; the first point (base) stays fixed.

    ``poly`` (N, 2) px, ``sigma_px`` the Gaussian's sigma along the curve, px. The kernel is
    truncated at 3 sigma, or at the curve's own length when that is shorter (the odd extension
    at each end needs as many points as the kernel's half-width). Returns ``poly`` itself when
    it is shorter than 2 px or ``sigma_px <= 0``, else (ceil(L) + 1, 2) px.
    """
    L = _polyline_length(poly)
    if L < 2.0 or sigma_px <= 0:
        return poly
    n = max(2, int(math.ceil(L)) + 1)
    p = resample_polyline(poly, np.linspace(0.0, L, n))
    # was: r = ceil(3 sigma) always; a curve of fewer than r + 1 points then came out of the
    # "valid" convolution with the wrong number of points (a 4 px line as a single point)
    r = min(int(math.ceil(3 * sigma_px)), n - 1)
    k = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma_px) ** 2)
    k /= k.sum()
    # odd (point-reflected) extension keeps the ends in place and straight-line trends exact
    lo = 2 * p[:1] - p[1:r + 1][::-1]
    hi = 2 * p[-1:] - p[-r - 1:-1][::-1]
    ext = np.concatenate([lo, p, hi])
    out = np.stack([np.convolve(ext[:, j], k, mode="valid") for j in range(2)], axis=1)
    out[0] = p[0]
    return out


def _refine_centerline(poly: np.ndarray, mask: np.ndarray, radius_px: float, spacing_px: float = 2.0,
                       max_shift_px: float = 1.0) -> np.ndarray:
    """Sub-pixel centring: move each point to the midpoint of the body's cross-section.

    A skeleton lies on pixel centres, so a body whose axis falls between two pixel
    columns is traced half a pixel off. Along the normal of the (smoothed) curve, the
    two boundary crossings of the bilinearly interpolated mask (level 0.5, i.e. the
    pixel edges of a binary mask) are found to sub-pixel precision and the point is
    moved to their midpoint. Points whose shift would exceed ``max_shift_px`` (a crossing
    strand or a clutter blob widens one side) keep their position. The first point (the
    known base) never moves.

    Args:
        poly: (N, 2) px base-to-tip curve. mask: (H, W) bool body mask.
        radius_px: largest body radius, px (search reach). spacing_px: output spacing.

    Returns:
        (M, 2) px refined curve.
    """
    L = _polyline_length(poly)
    n = max(3, int(math.ceil(L / spacing_px)) + 1)
    P = resample_polyline(poly, np.linspace(0.0, L, n))
    T = np.gradient(P, axis=0)
    T /= np.maximum(np.linalg.norm(T, axis=1, keepdims=True), 1e-9)
    N = np.stack([-T[:, 1], T[:, 0]], axis=1)
    step = 0.25
    offs = np.arange(0.0, 2.0 * radius_px + 3.0 + step, step)
    m = mask.astype(np.float32)
    hit = []
    for sign in (1.0, -1.0):
        q = P[:, None, :] + sign * offs[None, :, None] * N[:, None, :]
        v = cv2.remap(m, q[..., 0].astype(np.float32), q[..., 1].astype(np.float32), cv2.INTER_LINEAR,
                      borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
        below = v < 0.5
        k = np.argmax(below, axis=1)
        found = below[np.arange(n), k] & (k > 0)
        k1 = np.maximum(k, 1)
        v0, v1 = v[np.arange(n), k1 - 1], v[np.arange(n), k1]
        frac = np.clip((v0 - 0.5) / np.maximum(v0 - v1, 1e-6), 0.0, 1.0)
        hit.append((np.where(found, offs[k1 - 1] + frac * step, np.nan)))
    shift = 0.5 * (hit[0] - hit[1])
    ok = np.isfinite(shift) & (np.abs(shift) <= max_shift_px)
    ok[0] = False
    P[ok] += N[ok] * shift[ok, None]
    return P


def _cross_section_offset(m: np.ndarray, q: np.ndarray, n: np.ndarray, reach: float) -> tuple[float, float] | None:
    """Signed distances to the mask boundary from ``q`` along ``+n`` and ``-n`` (0.25 px steps)."""
    H, W = m.shape
    out = []
    for sign in (1.0, -1.0):
        hit = None
        for t in np.arange(0.25, reach + 1e-9, 0.25):
            r = q + sign * t * n
            if not (0 <= r[0] <= W - 1 and 0 <= r[1] <= H - 1) or _bilinear(m, r) < 0.5:
                hit = t
                break
        if hit is None:
            return None
        out.append(hit)
    return out[0], out[1]


def _extend_tip(poly: np.ndarray, mask: np.ndarray, dist: np.ndarray, radius_px: float) -> tuple[np.ndarray, str]:
    """Follow the body beyond the skeleton's end and stop at the centre of the end cap.

    Thinning shortens a rounded end (by about its radius, more on diagonals), so the
    centreline is continued from the skeleton's end in 1 px steps along its tangent, each
    step re-centred between the two mask boundaries across the body, until the march leaves
    the mask; the tip is then pulled back by the end cap's radius (the largest distance-
    transform value over the last stretch). The march is abandoned (skeleton end kept) if it
    runs into a wider part of the body (a tip lying on the body) or leaves the image.

    Returns:
        ``(polyline, status)``, status ``"cap:R"`` (tip found; R = cap radius, px), ``"image_border"`` (the body
        leaves the image: tip not visible), ``"on_body"`` (tip lies on the body) or ``"short"``.
    """
    if poly.shape[0] < 3:
        return poly, "short"
    L = _polyline_length(poly)
    back = min(L * 0.5, max(3.0, 2.0 * radius_px))
    tail = resample_polyline(poly, np.array([L - back, L]))
    d = tail[1] - tail[0]
    if not np.all(np.isfinite(d)) or np.linalg.norm(d) == 0:
        return poly, "short"
    d /= np.linalg.norm(d)
    H, W = mask.shape
    m = mask.astype(np.float32)
    end = poly[-1]
    r_ref = max(1.0, _bilinear(dist, end))
    pts = [end]
    radii = [r_ref]
    p = end
    exit_pt = None
    for _ in range(int(6 * radius_px + 20)):
        # leave the mask within this step?
        step_exit = None
        for t in np.arange(0.25, 1.0 + 1e-9, 0.25):
            q = p + t * d
            if not (0 <= q[0] <= W - 1 and 0 <= q[1] <= H - 1):
                return poly, "image_border"  # tip outside the image: keep the skeleton end
            if _bilinear(m, q) < 0.5:
                step_exit = q
                break
        if step_exit is not None:
            exit_pt = step_exit
            break
        q = p + d
        n = np.array([-d[1], d[0]])
        cs = _cross_section_offset(m, q, n, 2.0 * r_ref + 3.0)
        if cs is not None and cs[0] + cs[1] <= 2.6 * r_ref + 2.0:
            q = q + n * 0.5 * (cs[0] - cs[1])
        r_here = _bilinear(dist, q)
        if r_here > 1.3 * r_ref + 1.0:
            return poly, "on_body"  # ran into a wider part of the body: a tip lying on the body
        step = q - p
        if np.linalg.norm(step) > 0:
            d = 0.6 * d + 0.4 * step / np.linalg.norm(step)
            d /= np.linalg.norm(d)
        p = q
        pts.append(p)
        radii.append(r_here)
    if exit_pt is None:
        return poly, "on_body"
    walk = np.concatenate([poly, np.asarray(pts[1:]).reshape(-1, 2), exit_pt[None, :]])
    r_cap = max(radii[-int(2 * r_ref + 2):]) if radii else r_ref
    s_tip = max(0.0, _polyline_length(walk) - r_cap)
    seg = np.linalg.norm(np.diff(walk, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    keep = s < s_tip
    return np.concatenate([walk[keep], resample_polyline(walk, np.array([s_tip]))]), f"cap:{r_cap:.3f}"


def _bilinear(img: np.ndarray, q: np.ndarray) -> float:
    x, y = float(q[0]), float(q[1])
    x0, y0 = int(math.floor(x)), int(math.floor(y))
    x1, y1 = min(x0 + 1, img.shape[1] - 1), min(y0 + 1, img.shape[0] - 1)
    fx, fy = x - x0, y - y0
    return float((img[y0, x0] * (1 - fx) + img[y0, x1] * fx) * (1 - fy)
                 + (img[y1, x0] * (1 - fx) + img[y1, x1] * fx) * fy)


# -- tracker ---------------------------------------------------------------------------------

@dataclass
class CenterlineResult:
    """Centreline of one frame.

    Attributes:
        polyline: (N, 2) px from the base to the tip, or None when nothing was found.
        length_px: arc length of ``polyline``, px (0 when None).
        keypoints: (K, 2) px, NaN where invalid; valid: (K,) bool.
        junctions: junction zones passed (self-overlap / crossings).
        ambiguous_from_px: arc length (px) after which the curve is not trusted (a close
            call at a junction, or the visible end is hidden by an occluder / the image
            border, not the tip); keypoints beyond it are invalid. None: traced to the tip.
        mask: the cleaned body mask, (H, W) bool.
        reason: why the frame failed, or "".
    """

    polyline: np.ndarray | None
    length_px: float
    keypoints: np.ndarray
    valid: np.ndarray
    junctions: int = 0
    ambiguous_from_px: float | None = None
    mask: np.ndarray | None = None
    reason: str = ""

    @property
    def complete(self) -> bool:
        """A centreline traced to the tip without ambiguity (usable as next frame's prior)."""
        return self.polyline is not None and self.ambiguous_from_px is None and bool(self.valid.all())


class CenterlineTracker:
    """Soft-body tracker: K arc-length keypoints along the centreline (see module docstring).

    Args:
        base_px: (x, y) pixel of the clamped base (from the rig configuration).
        num_keypoints: K; keypoints ``c0..c{K-1}`` at arc lengths ``(k + 1) / K`` of the body.
        keypoint_names: override of the names (length K).
        segmentation: :func:`make_segmenter` config, or a :class:`Segmenter`.
        length_px: expected body length in the image, px; when the traced curve is shorter
            than ``(1 - length_tolerance) * length_px`` the keypoints follow the expected
            length and those beyond the traced part are invalid. None: always use the
            traced length (``track`` then estimates it from the clip).
        length_tolerance: see ``length_px``.
        base_radius_px: body radius near the base, px (junction zones, cleanup, start search).
        smoothing_px: Gaussian smoothing of the centreline along its length, px.
        min_area_px: smallest body component accepted, px^2.
        occluders: polygons ``[[[x, y], ...], ...]`` (px) of known scene parts that can hide
            the body (e.g. the base mount); a traced end touching one, or the image border,
            is not the tip, so the keypoints beyond the visible part are invalid.

    Raises:
        CenterlineError: on bad configuration values.
    """

    def __init__(self, base_px: Sequence[float], *, num_keypoints: int = 10,
                 keypoint_names: Sequence[str] | None = None,
                 segmentation: Mapping[str, Any] | Segmenter | None = None,
                 length_px: float | None = None, length_tolerance: float = 0.04,
                 base_radius_px: float = 6.0, smoothing_px: float = 2.0, min_area_px: float = 30.0,
                 occluders: Sequence[Sequence[Sequence[float]]] = ()) -> None:
        b = np.asarray(base_px, dtype=float).ravel()
        if b.shape != (2,) or not np.all(np.isfinite(b)):
            raise CenterlineError(f"centerline tracker: 'base_px' must be [x, y] px, got {base_px!r}")
        self.base_px = b
        if not (isinstance(num_keypoints, int) and num_keypoints >= 1):
            raise CenterlineError(f"centerline tracker: 'num_keypoints' must be an integer >= 1, got {num_keypoints!r}")
        self.keypoint_names: tuple[str, ...] = (tuple(keypoint_names) if keypoint_names is not None
                                                else tuple(f"c{k}" for k in range(num_keypoints)))
        if len(self.keypoint_names) != num_keypoints:
            raise CenterlineError(f"centerline tracker: {len(self.keypoint_names)} keypoint_names for "
                                  f"num_keypoints={num_keypoints}")
        self.num_keypoints = num_keypoints
        self.fractions = (np.arange(num_keypoints) + 1.0) / num_keypoints
        if length_px is not None and not (length_px > 0 and math.isfinite(length_px)):
            raise CenterlineError(f"centerline tracker: 'length_px' must be > 0, got {length_px!r}")
        self.length_px = None if length_px is None else float(length_px)
        if not 0 <= length_tolerance < 1:
            raise CenterlineError(f"centerline tracker: 'length_tolerance' must be in [0, 1), got {length_tolerance}")
        self.length_tolerance = float(length_tolerance)
        if not base_radius_px > 0:
            raise CenterlineError(f"centerline tracker: 'base_radius_px' must be > 0, got {base_radius_px}")
        self.base_radius_px = float(base_radius_px)
        self.smoothing_px = float(smoothing_px)
        self.min_area_px = float(min_area_px)
        self.occluders = []
        for i, poly in enumerate(occluders or ()):
            a = np.asarray(poly, dtype=np.float32).reshape(-1, 2) if len(poly) else np.zeros((0, 2), np.float32)
            if a.shape[0] < 3 or not np.all(np.isfinite(a)):
                raise CenterlineError(f"centerline tracker: occluders[{i}] must be a polygon of >= 3 [x, y] points")
            self.occluders.append(a)
        self.segmenter: Segmenter = (segmentation if hasattr(segmentation, "segment")
                                     else make_segmenter(segmentation, base_px=b))  # type: ignore[arg-type]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "CenterlineTracker":
        """Build from a rig's tracker config (``kind: centerline`` plus the constructor's arguments).

        Raises:
            CenterlineError: on a missing ``base_px`` or an unknown key (lists the valid keys).
        """
        cfg = dict(cfg)
        kind = cfg.pop("kind", "centerline")
        if kind != "centerline":
            raise CenterlineError(f"centerline tracker: config kind is {kind!r}, expected 'centerline'")
        valid = ("base_px", "num_keypoints", "keypoint_names", "segmentation", "length_px", "length_tolerance",
                 "base_radius_px", "smoothing_px", "min_area_px", "occluders")
        unknown = [k for k in cfg if k not in valid]
        if unknown:
            raise CenterlineError(f"centerline tracker: unknown config key(s) {unknown}; valid: {', '.join(valid)}")
        if "base_px" not in cfg:
            raise CenterlineError("centerline tracker: config needs 'base_px' ([x, y] pixel of the clamped base)")
        base = cfg.pop("base_px")
        return cls(base, **cfg)

    # -- per frame ------------------------------------------------------------------------
    @staticmethod
    def _check_frame(frame: np.ndarray) -> np.ndarray:
        f = np.asarray(frame)
        if f.ndim != 3 or f.shape[2] != 3 or f.dtype != np.uint8 or 0 in f.shape:
            raise CenterlineError(f"frame must be a non-empty (H, W, 3) uint8 RGB array, got {f.shape} {f.dtype}")
        return f

    def body_mask(self, frame_rgb: np.ndarray) -> tuple[np.ndarray, str]:
        """Cleaned mask of the body component touching the base, (H, W) bool, and a failure reason."""
        raw = self.segmenter.segment(frame_rgb).astype(np.uint8)
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))
        m = cv2.morphologyEx(raw, cv2.MORPH_OPEN, k)
        m = cv2.morphologyEx(m, cv2.MORPH_CLOSE, k)
        n, lab, stats, _ = cv2.connectedComponentsWithStats(m, connectivity=8)
        if n <= 1:
            return np.zeros(raw.shape, bool), "no foreground"
        H, W = raw.shape
        bx, by = self.base_px
        r = int(math.ceil(2.0 * self.base_radius_px + 3))
        y0, y1 = max(0, int(by) - r), min(H, int(by) + r + 1)
        x0, x1 = max(0, int(bx) - r), min(W, int(bx) + r + 1)
        near = lab[y0:y1, x0:x1]
        gy, gx = np.mgrid[y0:y1, x0:x1]
        d = np.hypot(gx - bx, gy - by)
        ok = (near > 0) & (d <= r)
        if not ok.any():
            return np.zeros(raw.shape, bool), "no body at the base pixel"
        labels, counts = np.unique(near[ok], return_counts=True)
        best = int(labels[np.argmax(counts)])
        if stats[best, cv2.CC_STAT_AREA] < self.min_area_px:
            return np.zeros(raw.shape, bool), "body component smaller than min_area_px"
        return lab == best, ""

    def centerline(self, frame_rgb: np.ndarray, *, length_px: float | None = None,
                   prior: np.ndarray | None = None) -> CenterlineResult:
        """Full per-frame result (mask, polyline, keypoints); never raises on content.

        Args:
            frame_rgb: (H, W, 3) uint8 RGB.
            length_px: expected length override (default :attr:`length_px`).
            prior: previous frame's trusted centreline (N, 2) px, to resolve crossings.

        Raises:
            CenterlineError: only for a malformed frame array.
        """
        frame = self._check_frame(frame_rgb)
        K = self.num_keypoints
        nan = np.full((K, 2), np.nan)
        mask, reason = self.body_mask(frame)
        if reason:
            return CenterlineResult(None, 0.0, nan, np.zeros(K, bool), mask=mask, reason=reason)
        expected = self.length_px if length_px is None else length_px
        poly, info = trace_centerline(mask, self.base_px, radius_px=self.base_radius_px, expected_px=expected,
                                      max_length_px=None if expected is None else 1.5 * expected, prior=prior)
        if poly is None:
            return CenterlineResult(None, 0.0, nan, np.zeros(K, bool), mask=mask,
                                    reason=info.get("reason", "no centreline"))
        poly = _smooth(poly, self.smoothing_px)
        ambiguous = info["ambiguous_from_px"]
        if ambiguous is None:
            dist = cv2.distanceTransform(mask.astype(np.uint8), cv2.DIST_L2, 5)
            poly, status = _extend_tip(poly, mask, dist, 0.6 * self.base_radius_px)
            r_cap = float(status.split(":")[1]) if status.startswith("cap:") else 0.0
            if status == "image_border" or self._touches_occluder(poly[-1], mask.shape, r_cap):
                # the visible end is not the tip: keep what is seen, on the expected scale
                ambiguous = _polyline_length(poly)
        poly = _refine_centerline(poly, mask, self.base_radius_px)
        L = _polyline_length(poly)
        kp, valid = self.keypoints_from_polyline(poly, expected, ambiguous)
        return CenterlineResult(poly, L, kp, valid, info["junctions"], ambiguous, mask, "")

    def _touches_occluder(self, end: np.ndarray, shape: tuple[int, int], cap_radius: float) -> bool:
        """Is the traced end (a cap centre) within its cap radius + 2 px of the image border or an occluder?"""
        margin = cap_radius + 2.0
        H, W = shape
        x, y = float(end[0]), float(end[1])
        if x < margin - 0.5 or y < margin - 0.5 or x > W - 0.5 - margin or y > H - 0.5 - margin:
            return True
        return any(cv2.pointPolygonTest(p, (x, y), True) > -margin for p in self.occluders)

    def keypoints_from_polyline(self, poly: np.ndarray, expected_px: float | None,
                                ambiguous_from_px: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Resample a base-to-tip polyline to the K keypoints; ``((K, 2) px, (K,) valid)``.

        Keypoints follow the traced length unless it is shorter than
        ``(1 - length_tolerance) * expected_px`` (then the expected length, and those beyond
        the traced part are invalid); keypoints beyond ``ambiguous_from_px`` are invalid.
        """
        L = _polyline_length(poly)
        truncated = ambiguous_from_px is not None or (
            expected_px is not None and L < (1.0 - self.length_tolerance) * expected_px)
        total = expected_px if (truncated and expected_px is not None) else L
        s = self.fractions * total
        kp = resample_polyline(poly, s)
        if ambiguous_from_px is not None:
            kp[s >= ambiguous_from_px - 1e-6] = np.nan
        valid = np.all(np.isfinite(kp), axis=1)
        kp[~valid] = np.nan
        return kp, valid

    def detect(self, frame_rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Keypoints of one frame: ``(xy (K, 2) px, NaN where invalid; valid (K,) bool)``.

        Raises:
            CenterlineError: if the frame is not a non-empty (H, W, 3) uint8 array.
        """
        r = self.centerline(frame_rgb)
        return r.keypoints, r.valid

    def track(self, frames: Iterable[np.ndarray], *, time: Sequence[float] | None = None, fps: float | None = None,
              invalid_frames: Sequence[bool] | None = None, source: str = "", trial_id: str = "") -> Trajectory:
        """Track the centreline through a clip.

        When no ``length_px`` is configured, the expected length is the median traced
        length over frames without junctions (the body is inextensible in practice), and
        frames that trace clearly shorter get invalid tip keypoints instead of squeezed ones.
        A background or combined segmenter without a background is fitted to the clip first.

        Args:
            frames: (T, H, W, 3) uint8 RGB array or an iterable of frames.
            time: frame times (T,) s; default ``(k + 1) / fps`` if ``fps`` is given, else k.
            invalid_frames: (T,) bool, frames known to be bad (dropped): all keypoints invalid.
            source, trial_id: copied into the trajectory.

        Returns:
            Trajectory with K keypoints; ``meta`` holds ``tracker``, ``lost`` per keypoint,
            ``junction_frames`` and ``length_px``.

        Raises:
            CenterlineError: on a malformed frame, no frames, or a length mismatch.
        """
        frames = [self._check_frame(f) for f in frames]
        T = len(frames)
        if T == 0:
            raise CenterlineError("no frames to track")
        seg = self.segmenter
        bg = getattr(seg, "background", None)
        if hasattr(seg, "fit") and (bg is None or (isinstance(bg, BackgroundSegmenter) and bg.background is None)):
            seg.fit(np.stack(frames))
        expected = self.length_px
        if expected is None:  # first pass: the body's length from frames without crossings
            lengths = [r.length_px for r in (self.centerline(f) for f in frames[::max(1, T // 30)])
                       if r.polyline is not None and r.junctions == 0]
            expected = float(np.median(lengths)) if lengths else None
        results: list[CenterlineResult] = []
        prior = None
        for f in frames:
            r = self.centerline(f, length_px=expected, prior=prior)
            results.append(r)
            prior = r.polyline if r.complete else None  # only the previous frame, and only if trusted
        kp = np.stack([r.keypoints for r in results])
        valid = np.stack([r.valid for r in results])
        if invalid_frames is not None:
            bad = np.asarray(invalid_frames, dtype=bool).ravel()
            if bad.shape[0] != T:
                raise CenterlineError(f"invalid_frames has {bad.shape[0]} entries for {T} frames")
            valid[bad] = False
        if time is None:
            t_arr = (np.arange(T) + 1) / float(fps) if fps else np.arange(T, dtype=float)
        else:
            t_arr = np.asarray(time, dtype=float).ravel()
            if t_arr.shape[0] != T:
                raise CenterlineError(f"time has {t_arr.shape[0]} entries for {T} frames")
        lost = {n: int((~valid[:, k]).sum()) for k, n in enumerate(self.keypoint_names)}
        meta = {"tracker": "centerline", "lost": lost,
                "junction_frames": int(sum(r.junctions > 0 for r in results)), "length_px": expected,
                "failures": {str(i): r.reason for i, r in enumerate(results) if r.reason}}
        return Trajectory(time=t_arr, keypoints=kp, valid=valid, names=self.keypoint_names, source=source,
                          trial_id=trial_id, meta=meta)
