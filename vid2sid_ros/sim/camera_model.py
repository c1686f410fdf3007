"""Camera / image-sensor model applied to rendered frames (the "real camera" of sim2sim).

:class:`SensorNoiseModel` turns clean rendered RGB frames into frames that look like
a cheap camera's: exposure and gamma, motion blur, optical (defocus) blur, photon shot
noise, read noise, 8-bit quantisation and dropped frames. It is seeded, so the same
model applied to the same frames gives the same output.

Order of operations on intensities ``x`` in [0, 1] (per frame ``k``):

1. motion blur: ``x_k <- (1 - a) x_k + a x_{k-1}`` with ``a = motion_blur / 2``: the
   mean over an exposure of ``motion_blur`` frame periods ending at the frame time,
   with the scene interpolated linearly between the two bracketing rendered frames;
2. exposure and gamma (response curve): ``x <- clip(exposure * x, 0, 1) ** (1 / gamma)``;
3. optical blur: Gaussian, standard deviation ``blur_px`` px;
4. noise: shot noise (Poisson with ``poisson`` photo-electrons at full scale, in the
   Gaussian approximation ``N(0, x / poisson)``, accurate for the counts of any
   real sensor) plus read noise ``N(0, gaussian_sigma / 255)``;
5. quantisation to uint8 with clipping;
6. frame drops: each frame is dropped with probability ``drop_prob``; the stream
   repeats the last delivered frame (black if none), as a capture driver does, and
   ``dropped`` marks it so trackers can invalidate it.

Noise model after EMVA 1288 (photon transfer: variance = read variance + signal/gain).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import cv2
import numpy as np

__all__ = ["SensorNoiseModel", "SensorModelError"]


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
        seed: random seed; :meth:`apply` is deterministic for a given seed.

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

    def apply(self, frames: np.ndarray, *, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Degrade a clip.

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
        rng = np.random.default_rng(self.seed if seed is None else seed)
        T = frames.shape[0]
        out = np.empty_like(frames)
        a = 0.5 * self.motion_blur
        inv255 = np.float32(1.0 / 255.0)
        response = self.gamma != 1 or self.exposure != 1
        read_var = (self.gaussian_sigma / 255.0) ** 2
        shot = 1.0 / self.poisson if self.poisson > 0 else 0.0
        prev = None
        for k in range(T):
            cur = frames[k]
            x = cur.astype(np.float32) * inv255
            if a > 0 and prev is not None:
                x = (1 - a) * x + a * (prev.astype(np.float32) * inv255)
            prev = cur
            if response:
                x = np.clip(np.float32(self.exposure) * x, 0.0, 1.0) ** np.float32(1.0 / self.gamma)
            if self.blur_px > 0:
                x = cv2.GaussianBlur(x, (0, 0), sigmaX=self.blur_px, sigmaY=self.blur_px,
                                     borderType=cv2.BORDER_REFLECT)
            if read_var > 0 or shot > 0:
                std = np.sqrt(read_var + shot * np.clip(x, 0.0, 1.0), dtype=np.float32)
                x = x + std * rng.standard_normal(x.shape, dtype=np.float32)
            out[k] = np.clip(x * 255.0 + 0.5, 0, 255).astype(np.uint8)
        dropped = rng.random(T) < self.drop_prob if self.drop_prob > 0 else np.zeros(T, dtype=bool)
        last = None
        for k in range(T):
            if dropped[k]:
                out[k] = 0 if last is None else out[last]
            else:
                last = k
        return out, dropped
