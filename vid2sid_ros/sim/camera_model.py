"""Camera / image-sensor model applied to rendered frames (the "real camera" of sim2sim).

:class:`SensorNoiseModel` turns clean rendered RGB frames into frames that look like
a cheap camera's: exposure and gamma, motion blur, optical (defocus) blur, photon shot
noise, read noise, 8-bit quantisation and dropped frames.

Two ways to apply it, one implementation:

* :meth:`SensorNoiseModel.apply` degrades a whole clip (T, H, W, 3); it is a pure
  function of ``(frames, seed)``: the same clip and seed always give the same output.
* :meth:`SensorNoiseModel.stream` returns a :class:`SensorNoiseStream` that degrades a
  live stream frame by frame (the stand-in camera of the ROS graph). It owns one
  random generator, seeded once when the stream is created, and the previous frame
  (for motion blur), so a frame costs no reseeding and no allocation. Determinism:
  the same seed and the same sequence of calls give the same output; ``apply(clip,
  seed=s)`` equals feeding the clip's frames one by one to ``stream(seed=s)``.

Order of operations on intensities ``x`` in DN (8-bit digital numbers, 0-255), per frame ``k``:

1. motion blur: ``x_k <- (1 - a) x_k + a x_{k-1}`` with ``a = motion_blur / 2``: the
   mean over an exposure of ``motion_blur`` frame periods ending at the frame time,
   with the scene interpolated linearly between the two bracketing rendered frames;
2. exposure and gamma (response curve): ``x <- 255 clip(exposure x / 255, 0, 1) ** (1 / gamma)``;
3. optical blur: Gaussian, standard deviation ``blur_px`` px;
4. noise: shot noise plus read noise, ``x <- x + sqrt(gaussian_sigma**2 + 255 x / poisson) z``
   with ``z ~ N(0, 1)`` per pixel and channel (photon transfer of EMVA 1288: the
   variance in DN^2 is the read variance plus the signal divided by the conversion
   gain, here ``poisson / 255`` e-/DN). Shot noise is Poisson in the photo-electron
   count ``n = poisson x / 255``; it is drawn in the normal approximation
   ``Poisson(n) ~ N(n, n)``, whose error is O(1/sqrt(n)) (central limit theorem;
   e.g. Devroye 1986, *Non-Uniform Random Variate Generation*, X.3): at the default
   4000 e- full well the darkest non-zero level already holds 16 e-, and the read
   noise dominates below that;
5. quantisation to uint8: round to nearest, saturate to [0, 255];
6. frame drops: each frame is dropped with probability ``drop_prob``; a clip repeats
   the last delivered frame (black if none), as a capture driver does, and
   ``dropped`` marks it so trackers can invalidate it.

The standard normal ``z`` is drawn by inversion (Devroye 1986, II.2): 16 random bits
index a table of the 65536 quantiles ``Phi^-1((i + 1/2) / 65536)`` (rescaled to unit
variance), so the samples are normal up to a quantisation of 4e-5 sigma near 0 and a
truncation at +-4.2 sigma (tail mass 3e-5); 8-bit output cannot resolve either. It is
three times cheaper than numpy's ziggurat here and uses numpy's PCG64 bits, so it stays
seeded and platform independent. Every step is float32 and done in place with OpenCV
where it has the operation (LUT, addWeighted, GaussianBlur, saturating add), so a
320 x 240 frame costs about 2 ms of CPU (``bench/bench_finger.py``).
"""

from __future__ import annotations

import math
import threading
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import cv2
import numpy as np

__all__ = ["SensorNoiseModel", "SensorNoiseStream", "SensorModelError"]


class SensorModelError(ValueError):
    """A sensor-model field is out of range, or the frames are not (T, H, W, 3) uint8."""


@dataclass(frozen=True)
class SensorNoiseModel:
    """Seeded camera/sensor degradation of rendered frames.

    Attributes:
        gaussian_sigma: read-noise standard deviation, DN (8-bit digital numbers); >= 0.
        poisson: full-well capacity, photo-electrons at DN 255 (shot noise); 0 = off.
        blur_px: Gaussian optical blur standard deviation, px; 0 = off.
        motion_blur: exposure time as a fraction of the frame period, in [0, 1].
        gamma: response-curve gamma (> 0); 1 = linear.
        exposure: intensity gain (> 0); 1 = as rendered.
        drop_prob: probability that a frame is dropped, in [0, 1).
        seed: random seed; :meth:`apply` is deterministic for a given seed, and a
            :meth:`stream` for a given seed and sequence of frames.

    Raises:
        SensorModelError: naming the field that is out of range.
    """

    gaussian_sigma: float = 0.0
    poisson: float = 0.0
    blur_px: float = 0.0
    motion_blur: float = 0.0
    gamma: float = 1.0
    exposure: float = 1.0
    drop_prob: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "gaussian_sigma": self.gaussian_sigma >= 0, "poisson": self.poisson >= 0, "blur_px": self.blur_px >= 0,
            "motion_blur": 0 <= self.motion_blur <= 1, "gamma": self.gamma > 0, "exposure": self.exposure > 0,
            "drop_prob": 0 <= self.drop_prob < 1,
        }
        for name, ok in checks.items():
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or not ok:
                raise SensorModelError(f"SensorNoiseModel.{name}: invalid value {v!r} "
                                       "(see the class docstring for the allowed range)")

    @classmethod
    def default(cls, seed: int = 0) -> "SensorNoiseModel":
        """A mild webcam: 2 DN read noise, 4000 e- full well, 0.6 px blur, 30 % exposure, 1 % drops."""
        return cls(gaussian_sigma=2.0, poisson=4000.0, blur_px=0.6, motion_blur=0.3, gamma=1.0,
                   exposure=1.0, drop_prob=0.01, seed=seed)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> "SensorNoiseModel":
        """Build from a dict of the fields above (``None`` or ``{}``: no degradation).

        Raises:
            SensorModelError: on an unknown key (lists the valid ones) or a bad value.
        """
        cfg = dict(cfg or {})
        fields = set(cls.__dataclass_fields__)
        unknown = sorted(set(cfg) - fields)
        if unknown:
            raise SensorModelError(f"sensor model: unknown key(s) {unknown}; valid: {', '.join(sorted(fields))}")
        return cls(**cfg)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def is_identity(self) -> bool:
        """True if :meth:`apply` returns the frames unchanged."""
        return (self.gaussian_sigma == 0 and self.poisson == 0 and self.blur_px == 0 and self.motion_blur == 0
                and self.gamma == 1 and self.exposure == 1 and self.drop_prob == 0)

    def stream(self, seed: int | None = None) -> "SensorNoiseStream":
        """A frame-by-frame degrader with its own generator, seeded once (module docstring).

        Args:
            seed: overrides :attr:`seed`.
        """
        return SensorNoiseStream(self, self.seed if seed is None else seed)

    def apply(self, frames: np.ndarray, *, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Degrade a clip; a pure function of ``(frames, seed)``.

        Equivalent to feeding the frames in order to a fresh ``self.stream(seed)``.

        Args:
            frames: clean RGB frames, shape (T, H, W, 3) uint8 (not modified).
            seed: overrides :attr:`seed` for this call.

        Returns:
            ``(frames, dropped)``: degraded frames (T, H, W, 3) uint8, and dropped
            (T,) bool (True where the frame is a repeat of an earlier one).

        Raises:
            SensorModelError: if ``frames`` is not a non-empty (T, H, W, 3) uint8 array.
        """
        frames = np.asarray(frames)
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or 0 in frames.shape:
            raise SensorModelError(
                f"frames must be a non-empty (T, H, W, 3) uint8 array, got {frames.shape} {frames.dtype}")
        st = self.stream(seed)
        out = np.empty_like(frames)
        dropped = np.zeros(frames.shape[0], dtype=bool)
        for k in range(frames.shape[0]):
            dropped[k] = st.apply(frames[k], out=out[k])[1]
        return out, dropped


#: standard normal quantiles at (i + 1/2) / 2**16, rescaled to unit variance (inversion sampling)
_NORMAL_TABLE: np.ndarray | None = None
_TABLE_LOCK = threading.Lock()


def _normal_table() -> np.ndarray:
    global _NORMAL_TABLE
    with _TABLE_LOCK:
        if _NORMAL_TABLE is None:
            from scipy.special import ndtri

            q = ndtri((np.arange(1 << 16) + 0.5) / (1 << 16))
            _NORMAL_TABLE = (q / np.sqrt(np.mean(q * q))).astype(np.float32)
        return _NORMAL_TABLE


class SensorNoiseStream:
    """Frame-by-frame application of a :class:`SensorNoiseModel` to a live stream.

    Holds the state a real sensor carries from frame to frame: its random generators,
    seeded once from ``seed`` (two independent PCG64 child streams of
    ``numpy.random.SeedSequence(seed)``, one for the pixel noise, one for the frame
    drops; a dropped frame draws no pixel noise), the previous clean frame (motion blur)
    and the last delivered frame (a dropped frame repeats it), plus float32 work buffers
    reused by every call. Deterministic: the same model, seed and sequence of
    :meth:`apply` / :meth:`reset` calls give the same output. Not thread-safe: one
    stream per camera thread.

    Args:
        model: the sensor model.
        seed: seed of the generator.
    """

    def __init__(self, model: SensorNoiseModel, seed: int) -> None:
        self.model = model
        self.seed = int(seed)
        noise_seq, drop_seq = np.random.SeedSequence(self.seed).spawn(2)
        self._bits = np.random.PCG64(noise_seq)
        self._drop_rng = np.random.Generator(np.random.PCG64(drop_seq))
        self._table = _normal_table() if (model.gaussian_sigma > 0 or model.poisson > 0) else None
        self._a = 0.5 * model.motion_blur
        self._read_var = float(model.gaussian_sigma) ** 2  # DN^2
        self._shot_gain = 255.0 / model.poisson if model.poisson > 0 else 0.0  # DN^2 per DN of signal
        self._lut: np.ndarray | None = None
        if model.exposure != 1 or model.gamma != 1:
            x = np.arange(256, dtype=np.float64) / 255.0
            self._lut = (255.0 * np.clip(model.exposure * x, 0.0, 1.0) ** (1.0 / model.gamma)).astype(np.float32)
        self._prev: np.ndarray | None = None
        self._last: np.ndarray | None = None
        self._shape: tuple[int, ...] | None = None
        self.frames_in = 0
        self.frames_dropped = 0

    def reset(self) -> None:
        """Forget the previous and last delivered frames (a new clip); the generator runs on."""
        self._prev = None
        self._last = None

    def _buffers(self, shape: tuple[int, ...]) -> None:
        if self._shape != shape:
            self._shape = shape
            self._x = np.empty(shape, np.float32)  # signal, DN
            self._std = np.empty(shape, np.float32)  # noise standard deviation, then noise, DN
            self._z = np.empty(shape, np.float32)  # standard normal samples
            self._prev = None
            self._last = None

    def apply(self, frame: np.ndarray, *, out: np.ndarray | None = None) -> tuple[np.ndarray, bool]:
        """Degrade the next frame of the stream.

        Args:
            frame: clean RGB frame, (H, W, 3) uint8 (not modified).
            out: optional destination (H, W, 3) uint8.

        Returns:
            ``(frame, dropped)``: the degraded frame (H, W, 3) uint8 (``out`` when given),
            and whether the camera dropped it (then the frame is a copy of the last
            delivered one, black if none).

        Raises:
            SensorModelError: if ``frame`` is not a non-empty (H, W, 3) uint8 array, or
                ``out`` does not match it.
        """
        frame = np.asarray(frame)
        if frame.ndim != 3 or frame.shape[-1] != 3 or frame.dtype != np.uint8 or 0 in frame.shape:
            raise SensorModelError(
                f"frame must be a non-empty (H, W, 3) uint8 array, got {frame.shape} {frame.dtype}")
        if out is None:
            out = np.empty_like(frame)
        elif out.shape != frame.shape or out.dtype != np.uint8:
            raise SensorModelError(f"out must be {frame.shape} uint8 like the frame, got {out.shape} {out.dtype}")
        m = self.model
        self._buffers(frame.shape)
        self.frames_in += 1
        prev, self._prev = self._prev, frame.copy() if self._a > 0 else None
        dropped = m.drop_prob > 0 and bool(self._drop_rng.random() < m.drop_prob)
        if dropped:  # the scene still moved (prev updated above); the sensor delivers nothing new
            self.frames_dropped += 1
            if self._last is None:
                out[...] = 0
            else:
                np.copyto(out, self._last)
            return out, True
        if m.is_identity:
            np.copyto(out, frame)
        else:
            self._degrade(frame, prev, out)
        if m.drop_prob > 0:
            self._last = out.copy()
        return out, False

    def _degrade(self, frame: np.ndarray, prev: np.ndarray | None, out: np.ndarray) -> None:
        m, x = self.model, self._x
        # 1-2: motion blur and response curve
        if self._a > 0 and prev is not None:
            cv2.addWeighted(frame, 1.0 - self._a, prev, self._a, 0.0, dst=x, dtype=cv2.CV_32F)
            if self._lut is not None:
                if m.exposure != 1:
                    np.multiply(x, np.float32(m.exposure / 255.0), out=x)
                    np.clip(x, 0.0, 1.0, out=x)
                else:
                    np.multiply(x, np.float32(1.0 / 255.0), out=x)
                if m.gamma != 1:
                    np.power(x, np.float32(1.0 / m.gamma), out=x)
                np.multiply(x, np.float32(255.0), out=x)
        elif self._lut is not None:
            cv2.LUT(frame, self._lut, dst=x)
        else:
            np.copyto(x, frame)
        # 3: optical blur
        if m.blur_px > 0:
            cv2.GaussianBlur(x, (0, 0), sigmaX=m.blur_px, dst=x, sigmaY=m.blur_px, borderType=cv2.BORDER_REFLECT)
        # 4-5: shot + read noise, then round and saturate to uint8
        if self._table is None:
            cv2.convertScaleAbs(x, dst=out)  # x >= 0 here, so |x| is x: round + saturate
            return
        std, z = self._std, self._z
        bits = self._bits.random_raw((x.size + 3) // 4).view(np.uint16)[: x.size]
        np.take(self._table, bits, out=z.reshape(-1), mode="clip")  # "clip": no index check, no buffering
        if self._shot_gain > 0:  # std = sqrt(read_var + shot_gain * x); x >= 0 (non-negative blur kernel)
            cv2.addWeighted(x, self._shot_gain, x, 0.0, self._read_var, dst=std)
            cv2.sqrt(std, dst=std)
            cv2.multiply(std, z, dst=std)
        else:
            np.multiply(z, np.float32(math.sqrt(self._read_var)), out=std)
        cv2.add(x, std, dst=out, dtype=cv2.CV_8U)
