"""Colour-marker (and optional ArUco) tracking: video frames -> keypoint trajectories.

:class:`MarkerTracker` finds each configured marker in each RGB frame and returns its
centre in pixels with a validity flag. A colour marker is the largest 8-connected
blob of pixels inside an HSV box (OpenCV ranges: H in [0, 180), S and V in [0, 255]);
its centre is the blob's first-order image moment (sub-pixel centroid). A hue range
whose lower bound exceeds its upper bound wraps through 0 (red: ``[170, ..]`` to
``[10, ..]``). Pixel convention: pixel centres at integer coordinates (OpenCV), the
same as :func:`vid2sid_ros.sim.mujoco_render.project_points`.

Speed: after the first detection, each marker is searched in a small window around
its last position (``roi_radius_px``), with a full-frame fallback when it is not
found there or its blob touches the window edge; at 320x240 this runs at several
thousand frames per second (see ``bench/bench_finger.py``).

A marker is reported invalid (NaN position, ``valid=False``) when no blob reaches
``min_area_px``, when its blob touches the image border (partly out of frame, so the
centroid would be biased), when the frame was dropped, or when the blob looks partly
hidden behind something (the centroid is then biased; half a disc puts it 0.42 radius
off). Positions are never invented or interpolated. Why each frame was lost is kept
(:meth:`MarkerTracker.frame_log`, ``meta["blobs"]`` of a tracked trajectory).

Partly hidden: occlusion can only REMOVE pixels, and it removes them from one side, so
the blob both shrinks and loses its central symmetry. A fully visible marker stays
centrally symmetric however it appears: a larger or smaller disc (nearer or farther), an
ellipse (perspective), a streak (motion blur; a streak thresholded at high coverage is a
symmetric lens). The test is therefore: area below ``(1 - footprint_tolerance)`` times the
marker's recent area AND asymmetry above the recent one by more than
:data:`ASYMMETRY_TOLERANCE`. The asymmetry is ``|E[|d|² d]| / E[|d|²]^{3/2}`` over the blob's
pixels, d = pixel − centroid (from the third central moments; 0 for any centrally symmetric
shape, ~0.09 for a half disc, ~0.06 for a disc with 30 % cut off by a chord, at most ~0.03
for a whole disc of radius 2.5 px sampled at any sub-pixel position). The reference is the
median over the last ``footprint_window`` accepted detections of that marker (once at least
3 are known); a detection that fails it is invalid and counted in
:attr:`MarkerTracker.occluded` (``meta["occluded"]`` of a tracked trajectory). After
``footprint_window`` flagged detections in a row the reference is rebuilt from the new
footprint (the marker's look really changed, e.g. a lit side turned away), and that is
counted in :attr:`MarkerTracker.footprint_resets`. The footprint of earlier versions (area
ratio in both directions, elongation) rejected fully visible markers that came closer or
moved fast (motion blur) for ``footprint_window - 1`` frames.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import cv2
import numpy as np

from ..core.trajectory import Trajectory

__all__ = ["MarkerSpec", "ArucoMarkerSpec", "MarkerTracker", "MarkerTrackerError", "ASYMMETRY_TOLERANCE",
           "LOST_NOT_FOUND", "LOST_BORDER", "LOST_HIDDEN"]

#: a partly hidden blob's asymmetry exceeds the marker's recent one by more than this (see module doc)
ASYMMETRY_TOLERANCE = 0.035
#: why a colour marker was lost in a frame (:meth:`MarkerTracker.frame_log` ``status``; "" = found)
LOST_NOT_FOUND, LOST_BORDER, LOST_HIDDEN = "not found", "at the image border", "partly hidden"


class MarkerTrackerError(ValueError):
    """Bad tracker configuration or a frame that is not an RGB image (message says which)."""


class _Blob(NamedTuple):
    """One detected blob: centroid (px), bounding box (x, y, w, h) px, area (px²), elongation (>= 1),
    asymmetry (>= 0, see the module doc)."""

    cx: float
    cy: float
    bbox: tuple[int, int, int, int]
    area: float
    elongation: float
    asymmetry: float = 0.0


def _elongation(m: Mapping[str, float]) -> float:
    """``sqrt(λ_max / λ_min)`` of the second central moments of ``cv2.moments`` output (1 = isotropic)."""
    a, b, c = m["mu20"], m["mu11"], m["mu02"]
    root = float(np.hypot(a - c, 2.0 * b))
    lmax, lmin = 0.5 * (a + c + root), 0.5 * (a + c - root)
    return float(np.sqrt(lmax / lmin)) if lmin > 1e-9 * max(lmax, 1e-12) else float("inf")


def _asymmetry(m: Mapping[str, float]) -> float:
    """``|E[|d|² d]| / E[|d|²]^{3/2}`` of ``cv2.moments`` output (0 for a centrally symmetric shape)."""
    area, spread = m["m00"], m["mu20"] + m["mu02"]
    if area <= 0 or spread <= 0:
        return 0.0
    skew = float(np.hypot(m["mu30"] + m["mu12"], m["mu21"] + m["mu03"])) / area
    return skew / (spread / area) ** 1.5


def _triple(value: Any, what: str, name: str) -> tuple[int, int, int]:
    try:
        t = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise MarkerTrackerError(f"marker '{name}': {what} must be 3 integers (H, S, V), got {value!r}") from None
    if len(t) != 3:
        raise MarkerTrackerError(f"marker '{name}': {what} must be 3 integers (H, S, V), got {value!r}")
    h, s, v = t
    if not (0 <= h <= 180 and 0 <= s <= 255 and 0 <= v <= 255):
        raise MarkerTrackerError(f"marker '{name}': {what} {t} outside OpenCV HSV ranges H 0-180, S/V 0-255")
    return t


@dataclass(frozen=True)
class MarkerSpec:
    """A coloured marker.

    Attributes:
        name: keypoint name.
        hsv_lower, hsv_upper: inclusive HSV bounds (OpenCV: H 0-180, S 0-255, V 0-255).
            ``hsv_lower[0] > hsv_upper[0]`` wraps the hue through 0 (for red).
        min_area_px: smallest blob area (px) accepted as the marker.
        max_area_px: largest blob area accepted (None: no limit); rejects large
            same-coloured objects.

    Raises:
        MarkerTrackerError: on malformed bounds (S/V lower above upper, out of range).
    """

    name: str
    hsv_lower: tuple[int, int, int]
    hsv_upper: tuple[int, int, int]
    min_area_px: int = 6
    max_area_px: int | None = None

    def __post_init__(self) -> None:
        lo = _triple(self.hsv_lower, "hsv_lower", self.name)
        hi = _triple(self.hsv_upper, "hsv_upper", self.name)
        if lo[1] > hi[1] or lo[2] > hi[2]:
            raise MarkerTrackerError(f"marker '{self.name}': S and V lower bounds must not exceed the upper "
                                     f"bounds, got {lo} .. {hi}")
        if int(self.min_area_px) < 1:
            raise MarkerTrackerError(f"marker '{self.name}': min_area_px must be >= 1, got {self.min_area_px}")
        if self.max_area_px is not None and int(self.max_area_px) < int(self.min_area_px):
            raise MarkerTrackerError(f"marker '{self.name}': max_area_px {self.max_area_px} < min_area_px")
        object.__setattr__(self, "hsv_lower", lo)
        object.__setattr__(self, "hsv_upper", hi)
        object.__setattr__(self, "min_area_px", int(self.min_area_px))

    @property
    def wraps_hue(self) -> bool:
        """True if the hue range wraps through 0 (e.g. red 170..10)."""
        return self.hsv_lower[0] > self.hsv_upper[0]

    def mask(self, hsv: np.ndarray) -> np.ndarray:
        """Binary mask (H, W) uint8 {0, 255} of pixels of ``hsv`` (H, W, 3) inside the range."""
        lo, hi = self.hsv_lower, self.hsv_upper
        if not self.wraps_hue:
            return cv2.inRange(hsv, lo, hi)
        a = cv2.inRange(hsv, (lo[0], lo[1], lo[2]), (180, hi[1], hi[2]))
        b = cv2.inRange(hsv, (0, lo[1], lo[2]), (hi[0], hi[1], hi[2]))
        return cv2.bitwise_or(a, b)


@dataclass(frozen=True)
class ArucoMarkerSpec:
    """An ArUco fiducial (cv2.aruco); its keypoint is the mean of its four corners.

    Attributes:
        name: keypoint name.
        marker_id: the ArUco id.
        dictionary: an OpenCV predefined dictionary name, e.g. ``"DICT_4X4_50"``.

    Raises:
        MarkerTrackerError: unknown dictionary name or negative id.
    """

    name: str
    marker_id: int
    dictionary: str = "DICT_4X4_50"

    def __post_init__(self) -> None:
        if not hasattr(cv2.aruco, self.dictionary):
            raise MarkerTrackerError(f"aruco marker '{self.name}': unknown dictionary {self.dictionary!r} "
                                     "(expected an OpenCV name such as DICT_4X4_50)")
        if int(self.marker_id) < 0:
            raise MarkerTrackerError(f"aruco marker '{self.name}': marker_id must be >= 0, got {self.marker_id}")
        object.__setattr__(self, "marker_id", int(self.marker_id))


class MarkerTracker:
    """Track coloured (and optionally ArUco) markers through RGB frames.

    Args:
        markers: colour markers, in keypoint order.
        aruco: ArUco markers, appended after the colour markers.
        roi_radius_px: half-size of the search window around a marker's last
            position (px); 0 disables windowed search (always full frame).
        footprint_tolerance: relative area loss against a colour marker's recent median
            beyond which a blob that also turned lopsided is called partly hidden
            (dimensionless, in (0, 1); default 0.3: area below 0.7 x; see the module
            doc); ``None`` disables the check.
        footprint_window: number of recent accepted detections the reference footprint
            is the median of (frames, >= 3).

    Attributes:
        occluded: per colour marker, detections made invalid by the footprint check
            since the last :meth:`reset` (frames).
        footprint_resets: per colour marker, times the reference footprint was rebuilt.
        The per-frame record since the last :meth:`reset` is :meth:`frame_log`.

    Raises:
        MarkerTrackerError: no markers, duplicate keypoint names, or a footprint setting
            out of range.
    """

    def __init__(self, markers: Sequence[MarkerSpec] = (), *, aruco: Sequence[ArucoMarkerSpec] = (),
                 roi_radius_px: int = 24, footprint_tolerance: float | None = 0.3,
                 footprint_window: int = 9) -> None:
        self.markers = tuple(markers)
        self.aruco = tuple(aruco)
        names = [m.name for m in self.markers] + [a.name for a in self.aruco]
        if not names:
            raise MarkerTrackerError("tracker needs at least one marker")
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise MarkerTrackerError(f"duplicate marker name(s) {dup}")
        if int(roi_radius_px) < 0:
            raise MarkerTrackerError(f"roi_radius_px must be >= 0, got {roi_radius_px}")
        if footprint_tolerance is not None:
            try:
                tol = float(footprint_tolerance)
            except (TypeError, ValueError):
                tol = float("nan")
            if not 0.0 < tol < 1.0:
                raise MarkerTrackerError(f"footprint_tolerance must be a number in (0, 1) or null, "
                                         f"got {footprint_tolerance!r}")
            footprint_tolerance = tol
        if isinstance(footprint_window, bool) or not isinstance(footprint_window, (int, np.integer)) \
                or footprint_window < 3:
            raise MarkerTrackerError(f"footprint_window must be an integer >= 3 (frames), got {footprint_window!r}")
        self.names: tuple[str, ...] = tuple(names)
        self.roi_radius_px = int(roi_radius_px)
        self.footprint_tolerance: float | None = footprint_tolerance
        self.footprint_window = int(footprint_window)
        self._aruco_detectors: dict[str, Any] = {}
        self.reset()

    # -- configuration ------------------------------------------------------------
    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "MarkerTracker":
        """Build from a config dict (a rig's ``tracker`` entry)::

            kind: markers                     # optional; must be "markers" if given
            min_area_px: 6                    # default for every marker
            roi_radius_px: 24
            footprint_tolerance: 0.3          # null: no partial-occlusion check
            footprint_window: 9
            markers:
              - {name: tip, hsv_lower: [170, 120, 80], hsv_upper: [10, 255, 255]}
            aruco:                            # optional
              - {name: base, id: 7, dictionary: DICT_4X4_50}

        Raises:
            MarkerTrackerError: naming the unknown/missing key or bad entry.
        """
        if not isinstance(cfg, Mapping):
            raise MarkerTrackerError(f"tracker config must be a mapping, got {type(cfg).__name__}")
        allowed = {"kind", "markers", "aruco", "min_area_px", "max_area_px", "roi_radius_px",
                   "footprint_tolerance", "footprint_window"}
        unknown = sorted(set(cfg) - allowed)
        if unknown:
            from ..core.names import did_you_mean

            raise MarkerTrackerError(f"tracker config: unknown key(s) {unknown}{did_you_mean(unknown[0], allowed)}; "
                                     f"expected: {', '.join(sorted(allowed))}")
        if cfg.get("kind", "markers") != "markers":
            raise MarkerTrackerError(f"tracker config: kind {cfg.get('kind')!r} is not a marker tracker")
        markers = []
        for i, m in enumerate(cfg.get("markers", []) or []):
            if not isinstance(m, Mapping):
                raise MarkerTrackerError(f"tracker config: markers[{i}] must be a mapping")
            bad = sorted(set(m) - {"name", "hsv_lower", "hsv_upper", "min_area_px", "max_area_px"})
            miss = [k for k in ("name", "hsv_lower", "hsv_upper") if k not in m]
            if bad or miss:
                raise MarkerTrackerError(f"tracker config: markers[{i}]: unknown key(s) {bad}, missing {miss}; "
                                         "expected name, hsv_lower, hsv_upper[, min_area_px, max_area_px]")
            markers.append(MarkerSpec(name=str(m["name"]), hsv_lower=m["hsv_lower"], hsv_upper=m["hsv_upper"],
                                      min_area_px=m.get("min_area_px", cfg.get("min_area_px", 6)),
                                      max_area_px=m.get("max_area_px", cfg.get("max_area_px"))))
        aruco = []
        for i, a in enumerate(cfg.get("aruco", []) or []):
            if not isinstance(a, Mapping) or "name" not in a or "id" not in a:
                raise MarkerTrackerError(f"tracker config: aruco[{i}] must be a mapping with 'name' and 'id'")
            aruco.append(ArucoMarkerSpec(name=str(a["name"]), marker_id=a["id"],
                                         dictionary=str(a.get("dictionary", "DICT_4X4_50"))))
        return cls(markers, aruco=aruco, roi_radius_px=cfg.get("roi_radius_px", 24),
                   footprint_tolerance=cfg.get("footprint_tolerance", 0.3),
                   footprint_window=cfg.get("footprint_window", 9))

    # -- detection ----------------------------------------------------------------
    def reset(self) -> None:
        """Forget the last positions and footprints (the next frame is searched in full); zero the counts."""
        n = len(self.markers)
        self._last: list[tuple[float, float] | None] = [None] * n
        self._prev: list[tuple[float, float] | None] = [None] * n
        self._footprints: list[deque] = [deque(maxlen=self.footprint_window) for _ in range(n)]
        self._flagged_run = [0] * n
        self.occluded: list[int] = [0] * n
        self.footprint_resets: list[int] = [0] * n
        self._log: list[list[tuple[str, float, float]]] = [[] for _ in range(n)]

    def frame_log(self) -> dict[str, dict[str, list]]:
        """What each colour marker's blob looked like in every frame since the last :meth:`reset`.

        Returns:
            ``{name: {"status": [...], "area": [...], "elongation": [...]}}``, one entry per
            :meth:`detect` call: ``status`` is ``""`` (found and valid) or why the marker was
            lost (:data:`LOST_NOT_FOUND`, :data:`LOST_BORDER`, :data:`LOST_HIDDEN`); ``area`` the
            blob's area (px², NaN when no blob), ``elongation`` ``sqrt(λ_max / λ_min)`` of its
            second moments (1 for a disc; NaN when no blob). ArUco markers are not logged.
        """
        return {m.name: {"status": [e[0] for e in log], "area": [e[1] for e in log],
                         "elongation": [e[2] for e in log]} for m, log in zip(self.markers, self._log)}

    def _footprint_ok(self, k: int, blob: _Blob) -> bool:
        """Compare ``blob`` with marker k's recent footprint; record it when accepted (see module doc)."""
        tol = self.footprint_tolerance
        hist = self._footprints[k]
        if tol is None:
            return True
        if len(hist) >= 3:
            ref_area = float(np.median([h[0] for h in hist]))
            ref_asym = float(np.median([h[1] for h in hist]))
            if blob.area < (1.0 - tol) * ref_area and blob.asymmetry > ref_asym + ASYMMETRY_TOLERANCE:
                self._flagged_run[k] += 1
                if self._flagged_run[k] < self.footprint_window:
                    self.occluded[k] += 1
                    return False
                hist.clear()  # persistently different: the marker itself changed; start a new reference
                self.footprint_resets[k] += 1
        self._flagged_run[k] = 0
        hist.append((blob.area, blob.asymmetry))
        return True

    @staticmethod
    def _check_frame(frame: Any) -> np.ndarray:
        if not isinstance(frame, np.ndarray):
            raise MarkerTrackerError(f"frame must be a numpy array (H, W, 3) uint8 RGB, got {type(frame).__name__}")
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.shape[0] == 0 or frame.shape[1] == 0:
            raise MarkerTrackerError(f"frame must have shape (H, W, 3) with H, W > 0, got {frame.shape}")
        if frame.dtype != np.uint8:
            raise MarkerTrackerError(f"frame must be uint8, got {frame.dtype}")
        return frame

    @staticmethod
    def _largest_component(mask: np.ndarray, spec: MarkerSpec, scale: int = 1) -> _Blob | None:
        """Largest acceptable 8-connected blob of ``mask`` (areas scaled by ``scale``²), or None."""
        n, labels, stats, cents = cv2.connectedComponentsWithStats(mask, connectivity=8)
        if n <= 1:
            return None
        areas = stats[1:, cv2.CC_STAT_AREA] * (scale * scale)
        ok = areas >= spec.min_area_px
        if spec.max_area_px is not None:
            ok &= areas <= spec.max_area_px
        if not ok.any():
            return None
        best = 1 + int(np.argmax(np.where(ok, areas, -1)))
        x, y, w, h = (int(v) for v in stats[best, :4])
        m = cv2.moments((labels[y:y + h, x:x + w] == best).astype(np.uint8), True)
        return _Blob(float(cents[best, 0]), float(cents[best, 1]), (x, y, w, h), float(areas[best - 1]),
                     _elongation(m), _asymmetry(m))

    def _blob(self, rgb: np.ndarray, spec: MarkerSpec) -> _Blob | None:
        """Largest in-range blob of a (small) image, or None.

        Fast path: when the in-range pixels fill their bounding box like one compact
        blob (a disc fills pi/4 of it), the centroid is the binary moment of that box;
        otherwise (several blobs, clutter) connected components pick the largest.
        """
        mask = spec.mask(cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV))
        x, y, w, h = cv2.boundingRect(mask)
        if w == 0 or h == 0:
            return None
        m = cv2.moments(mask[y:y + h, x:x + w], True)
        area = m["m00"]
        if area >= 0.6 * w * h and area >= spec.min_area_px and (spec.max_area_px is None or area <= spec.max_area_px):
            return _Blob(x + m["m10"] / area, y + m["m01"] / area, (x, y, w, h), float(area), _elongation(m),
                         _asymmetry(m))
        return self._largest_component(mask, spec)

    def _coarse_search(self, frame: np.ndarray, spec: MarkerSpec) -> tuple[float, float] | None:
        """Whole-frame search on a 2x-subsampled image; returns an approximate centre (px)."""
        small = frame[::2, ::2] if min(frame.shape[:2]) >= 64 else frame
        scale = 2 if small is not frame else 1
        mask = spec.mask(cv2.cvtColor(np.ascontiguousarray(small), cv2.COLOR_RGB2HSV))
        b = self._largest_component(mask, spec, scale)
        if b is None and scale == 2:  # a marker too small to survive subsampling
            mask = spec.mask(cv2.cvtColor(frame, cv2.COLOR_RGB2HSV))
            b, scale = self._largest_component(mask, spec), 1
        if b is None:
            return None
        return b.cx * scale, b.cy * scale

    def _search_window(self, frame: np.ndarray, spec: MarkerSpec, centre: tuple[float, float], r: int):
        """Blob inside the window of half-size ``r`` around ``centre``, in frame coordinates, or None
        if absent or cut by the window edge (then it may be larger than the window shows)."""
        H, W = frame.shape[:2]
        x0, y0 = max(int(centre[0]) - r, 0), max(int(centre[1]) - r, 0)
        x1, y1 = min(int(centre[0]) + r + 1, W), min(int(centre[1]) + r + 1, H)
        if x1 <= x0 or y1 <= y0:
            return None
        b = self._blob(frame[y0:y1, x0:x1], spec)
        if b is None:
            return None
        bx, by, bw, bh = b.bbox
        if (bx == 0 and x0 > 0) or (by == 0 and y0 > 0) or (bx + bw == x1 - x0 and x1 < W) \
                or (by + bh == y1 - y0 and y1 < H):
            return None
        return b._replace(cx=b.cx + x0, cy=b.cy + y0, bbox=(bx + x0, by + y0, bw, bh))

    def _detect_colour(self, frame: np.ndarray, k: int) -> tuple[float, float] | None:
        spec = self.markers[k]
        H, W = frame.shape[:2]
        last, prev = self._last[k], self._prev[k]
        found = None
        r = self.roi_radius_px
        if last is not None and r > 0:
            # constant-velocity prediction of the centre
            pred = last if prev is None else (2 * last[0] - prev[0], 2 * last[1] - prev[1])
            found = self._search_window(frame, spec, pred, r)
        if found is None:
            coarse = self._coarse_search(frame, spec)
            if coarse is None:
                self._last[k] = self._prev[k] = None
                self._log[k].append((LOST_NOT_FOUND, np.nan, np.nan))
                return None
            found = self._search_window(frame, spec, coarse, max(r, 8) * 2)
            if found is None:  # a large blob: measure it on the full frame
                found = self._largest_component(spec.mask(cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)), spec)
                if found is None:
                    self._last[k] = self._prev[k] = None
                    self._log[k].append((LOST_NOT_FOUND, np.nan, np.nan))
                    return None
            self._prev[k] = None
        else:
            self._prev[k] = last
        cx, cy = found.cx, found.cy
        bx, by, bw, bh = found.bbox
        self._last[k] = (cx, cy)
        status = ""
        if bx == 0 or by == 0 or bx + bw >= W or by + bh >= H:
            status = LOST_BORDER  # partly out of frame, centroid biased
        elif not self._footprint_ok(k, found):
            status = LOST_HIDDEN  # shrank and turned lopsided: centroid biased
        self._log[k].append((status, found.area, found.elongation))
        return None if status else (cx, cy)

    def _detect_aruco(self, frame: np.ndarray) -> dict[int, tuple[float, float]]:
        out: dict[int, tuple[float, float]] = {}
        if not self.aruco:
            return out
        gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        for dict_name in {a.dictionary for a in self.aruco}:
            det = self._aruco_detectors.get(dict_name)
            if det is None:
                dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, dict_name))
                params = cv2.aruco.DetectorParameters()
                params.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
                det = cv2.aruco.ArucoDetector(dictionary, params)
                self._aruco_detectors[dict_name] = det
            corners, ids, _ = det.detectMarkers(gray)
            if ids is None:
                continue
            for c, i in zip(corners, ids.ravel()):
                for j, a in enumerate(self.aruco):
                    if a.dictionary == dict_name and a.marker_id == int(i):
                        xy = np.asarray(c, dtype=float).reshape(4, 2).mean(axis=0)
                        out[j] = (float(xy[0]), float(xy[1]))
        return out

    def detect(self, frame_rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Find every marker in one frame.

        Args:
            frame_rgb: RGB image, shape (H, W, 3) uint8.

        Returns:
            ``(xy, valid)``: xy shape (K, 2) px (x = column, y = row; NaN where
            invalid), valid shape (K,) bool, in :attr:`names` order.

        Raises:
            MarkerTrackerError: if the frame is not a non-empty (H, W, 3) uint8 array.
        """
        frame = self._check_frame(frame_rgb)
        K = len(self.names)
        xy = np.full((K, 2), np.nan)
        for k in range(len(self.markers)):
            p = self._detect_colour(frame, k)
            if p is not None:
                xy[k] = p
        n = len(self.markers)
        for j, p in self._detect_aruco(frame).items():
            xy[n + j] = p
        valid = np.all(np.isfinite(xy), axis=1)
        return xy, valid

    def track(self, frames: Iterable[np.ndarray], *, time: Sequence[float] | None = None, fps: float | None = None,
              invalid_frames: Sequence[bool] | None = None, source: str = "", trial_id: str = "") -> Trajectory:
        """Track markers through a sequence of frames (state is reset first).

        Args:
            frames: (T, H, W, 3) uint8 RGB array or an iterable of such frames.
            time: frame times (T,) s. Default ``(k + 1) / fps`` (frame k closes
                command period k, the twin's convention) if ``fps`` is given, else
                the frame index k.
            fps: frame rate, Hz, used only for the default times.
            invalid_frames: (T,) bool, frames known to be bad (e.g. dropped by the
                camera, see ``SensorNoiseModel.apply``): all keypoints invalid there.
            source, trial_id: copied into the trajectory.

        Returns:
            :class:`~vid2sid_ros.core.trajectory.Trajectory` with K = len(names); ``meta``:
            ``lost`` and ``occluded`` frame counts per keypoint, ``blobs`` = :meth:`frame_log`
            (a dropped frame's status is the tracker's own; ``valid`` is False there).

        Raises:
            MarkerTrackerError: on a malformed frame, no frames, or a length mismatch.
        """
        self.reset()
        xs, vs = [], []
        for frame in frames:
            xy, valid = self.detect(frame)
            xs.append(xy)
            vs.append(valid)
        T = len(xs)
        if T == 0:
            raise MarkerTrackerError("no frames to track")
        kp = np.stack(xs)
        valid = np.stack(vs)
        if invalid_frames is not None:
            bad = np.asarray(invalid_frames, dtype=bool).ravel()
            if bad.shape[0] != T:
                raise MarkerTrackerError(f"invalid_frames has {bad.shape[0]} entries for {T} frames")
            valid[bad] = False
        if time is None:
            t = (np.arange(T) + 1) / float(fps) if fps else np.arange(T, dtype=float)
        else:
            t = np.asarray(time, dtype=float).ravel()
            if t.shape[0] != T:
                raise MarkerTrackerError(f"time has {t.shape[0]} entries for {T} frames")
        meta = {"tracker": "markers", "lost": {n: int((~valid[:, k]).sum()) for k, n in enumerate(self.names)},
                "occluded": {m.name: int(c) for m, c in zip(self.markers, self.occluded)}, "blobs": self.frame_log()}
        return Trajectory(time=t, keypoints=kp, valid=valid, names=self.names, source=source,
                          trial_id=trial_id, meta=meta)
