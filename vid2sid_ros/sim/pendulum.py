"""The ``pendulum`` rig: a bob on a string filmed by an uncalibrated phone camera.

Built entirely through the generic user-model route
(:mod:`vid2sid_ros.sim.user_model`): the MJCF ``models/pendulum.xml``, the parameter
spec ``models/pendulum_parameters.yaml`` and the trial description
``vid2sid_ros/rigs/builtin/pendulum.yaml`` (the shipped real clip of a swinging red apple,
``vid2sid_ros/data/pendulum_redapple``). No pendulum-specific twin code exists; this
module only adds what an engineer would read off the clip before calibrating —
:func:`estimate_start`: the pivot (circle fit), the camera roll, the swing period
and the length it implies, the initial angle and angular velocity — and the
textbook period relations :func:`pendulum_period` / :func:`length_from_period`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..core.excitation import Excitation
from ..core.parameters import ParameterSet
from ..core.trajectory import Trajectory
from .user_model import UserModelError

__all__ = ["estimate_start", "guess_start", "StartEstimate", "pendulum_period", "length_from_period",
           "free_decay_excitations", "STANDARD_GRAVITY"]

#: standard gravity, m/s² (CGPM 1901; the model's opt.gravity uses the same value rounded to 9.81)
STANDARD_GRAVITY = 9.81


def pendulum_period(length: float, amplitude: float = 0.0, g: float = STANDARD_GRAVITY) -> float:
    """Period of an undamped simple pendulum, s.

    ``T = 4 sqrt(L/g) K(sin²(θ0/2))`` with K the complete elliptic integral of the
    first kind (parameter m = k²; e.g. Landau & Lifshitz, *Mechanics*, §11, problem 1);
    ``2π sqrt(L/g)`` for ``amplitude = 0``.

    Args:
        length: m (> 0). amplitude: θ0, rad (|θ0| < π). g: m/s².

    Raises:
        ValueError: non-positive length or |amplitude| >= π.
    """
    from scipy.special import ellipk

    if not length > 0:
        raise ValueError(f"length must be > 0 m, got {length}")
    if not abs(amplitude) < math.pi:
        raise ValueError(f"amplitude must be below pi rad, got {amplitude}")
    return float(4.0 * math.sqrt(length / g) * ellipk(math.sin(abs(amplitude) / 2.0) ** 2))


def length_from_period(period: float, amplitude: float = 0.0, g: float = STANDARD_GRAVITY) -> float:
    """Inverse of :func:`pendulum_period`: the length (m) swinging with ``period`` (s) at ``amplitude`` (rad)."""
    from scipy.special import ellipk

    if not period > 0:
        raise ValueError(f"period must be > 0 s, got {period}")
    return float(g * (period / (4.0 * ellipk(math.sin(abs(amplitude) / 2.0) ** 2))) ** 2)


def free_decay_excitations(frames: int, fps: float, train_fraction: float = 0.6,
                           actuator_names: tuple[str, ...] = ("pivot_torque",)) -> dict[str, list[Excitation]]:
    """Zero-command excitations of a free-decay clip: ``train`` = the first part, ``holdout`` = the whole clip
    (the holdout trajectory marks the training frames invalid, see ``build_real_trial``)."""
    n_train = int(round(train_fraction * frames))
    z = np.zeros((frames, len(actuator_names)))
    return {"train": [Excitation("free_decay_train", fps, z[:n_train], actuator_names)],
            "holdout": [Excitation("free_decay_holdout", fps, z, actuator_names)]}


@dataclass
class StartEstimate:
    """What the clip says before any simulation (see :func:`estimate_start`).

    Attributes:
        values: start values ``{parameter: value}`` (spec units).
        bounds: suggested search bounds ``{parameter: (lower, upper)}`` around them.
        period_s: swing period measured from the angle's zero crossings, s.
        amplitude_rad: mean swing amplitude over the measured cycles, rad.
        length_small_angle_m: ``g (T / 2π)²``, m.
        length_m: with the finite-amplitude correction (:func:`length_from_period`), m.
        radius_px: radius of the bob's arc in the image, px.
        notes: how each value was obtained.
    """

    values: dict[str, float]
    bounds: dict[str, tuple[float, float]]
    period_s: float
    amplitude_rad: float
    length_small_angle_m: float
    length_m: float
    radius_px: float
    notes: list[str] = field(default_factory=list)

    def apply(self, parameters: ParameterSet) -> ParameterSet:
        """The spec with nominal = :attr:`values` and bounds narrowed to :attr:`bounds`
        (never wider than the spec's own bounds).

        Raises:
            UserModelError: an estimated range lies outside the spec's bounds, or an
                estimate is not finite (the clip does not support the estimate: e.g. the
                marker is missing for much of it); names the parameter and both ranges.
        """
        specs = []
        for s in parameters.specs:
            lo, hi = s.lower, s.upper
            est = self.values.get(s.name)
            if est is not None and not s.frozen and not math.isfinite(est):
                raise UserModelError(f"estimate_start: no finite start value for '{s.name}' could be read off the "
                                     "clip; check that the marker is tracked through the training part")
            if s.name in self.bounds and not s.frozen:
                lo = max(s.lower, self.bounds[s.name][0])
                hi = min(s.upper, self.bounds[s.name][1])
                if s.scale == "log":
                    lo = max(lo, s.lower)
                if not lo < hi:
                    raise UserModelError(
                        f"estimate_start: the clip puts '{s.name}' at {est:.4g} {s.unit}, outside the spec's bounds "
                        f"[{s.lower:g}, {s.upper:g}]: the marker track is too patchy for a start estimate, or the "
                        "bounds do not fit this rig")
            nom = self.values.get(s.name, s.nominal)
            nom = min(max(nom, lo), hi)
            specs.append(replace(s, lower=lo, upper=hi, nominal=nom))
        return replace(parameters, specs=tuple(specs))


def guess_start(trajectory: Trajectory, parameters: ParameterSet) -> dict[str, float]:
    """The ``pendulum_circle`` start plugin (:data:`vid2sid_ros.calibration.start.START_GUESSES`):
    :func:`estimate_start`'s values only — suggested nominal values, never bounds.

    Raises:
        UserModelError: as :func:`estimate_start` (the start stage logs it and goes on).
    """
    return dict(estimate_start(trajectory, parameters).values)


def _fit_circle(xy: np.ndarray) -> tuple[float, float, float]:
    """Geometric least-squares circle through points (N, 2) px: (cx, cy, R)."""
    from scipy.optimize import least_squares

    x, y = xy[:, 0], xy[:, 1]
    A = np.column_stack([x, y, np.ones_like(x)])
    b = -(x ** 2 + y ** 2)
    D, E, F = np.linalg.lstsq(A, b, rcond=None)[0]  # Kasa algebraic fit as the start
    c0 = np.array([-D / 2, -E / 2])
    r0 = math.sqrt(max(c0 @ c0 - F, 1e-9))
    res = least_squares(lambda p: np.hypot(x - p[0], y - p[1]) - p[2], [c0[0], c0[1], r0])
    return float(res.x[0]), float(res.x[1]), float(abs(res.x[2]))


def estimate_start(trajectory: Trajectory, parameters: ParameterSet, *, keypoint: str | None = None,
                   g: float = STANDARD_GRAVITY) -> StartEstimate:
    """Read the pendulum's geometry and timing off a tracked free-decay clip.

    1. Pivot and arc radius R (px): geometric least-squares circle through the bob's
       image positions (Kasa fit refined by ``scipy.optimize.least_squares``).
    2. Swing angle in the image φ = atan2(x − x_p, y − y_p) (from image-down, towards +x);
       its rest value φ_rest = mean of the midpoints of successive extremes;
       ``camera_roll = −φ_rest`` and the swing angle θ = φ − φ_rest
       (the projection in :mod:`vid2sid_ros.sim.image_projection`).
    3. Period T: twice the mean spacing of θ's zero crossings (least-squares slope of
       crossing time vs. crossing index); amplitude = mean |θ| at the extremes;
       ``length`` from T with the finite-amplitude correction (:func:`length_from_period`);
       ``px_per_m = R / length``.
    4. Initial angle and angular velocity: ``θ ≈ a + b cos ωt + c sin ωt`` fitted over the
       first period (ω = 2π/T): θ0 = a + b, θ̇0 = cω.
    Damping, drag and camera drift keep the spec's nominal values.

    Args:
        trajectory: the training part of the clip (frame k at ``time[k]`` s).
        parameters: the rig's spec (names used: pivot_x, pivot_y, px_per_m, camera_roll,
            length, initial_angle, initial_angular_velocity; others untouched).
        keypoint: which keypoint is the bob (default the first).
        g: gravity, m/s².

    Raises:
        UserModelError: fewer than 2 swing periods of valid samples, or no oscillation.
    """
    name = keypoint or trajectory.names[0]
    p = trajectory.keypoint(name)
    ok = np.all(np.isfinite(p), axis=1)
    t = trajectory.time
    if ok.sum() < 20:
        raise UserModelError(f"estimate_start: only {int(ok.sum())} valid samples of '{name}'; need at least 20")
    cx, cy, R = _fit_circle(p[ok])
    notes = [f"circle fit through {int(ok.sum())} bob positions: pivot ({cx:.1f}, {cy:.1f}) px, arc radius {R:.1f} px"]
    phi = np.full(len(t), np.nan)
    phi[ok] = np.arctan2(p[ok, 0] - cx, p[ok, 1] - cy)
    tv, pv = t[ok], phi[ok]
    # extremes: sign changes of the (valid-sample) slope; a zero step (repeated frame) keeps the previous sign
    sgn = np.sign(np.diff(pv))
    for i in range(1, len(sgn)):
        if sgn[i] == 0:
            sgn[i] = sgn[i - 1]
    ext = np.flatnonzero(sgn[1:] * sgn[:-1] < 0) + 1
    # keep alternating extremes separated by > a few samples (noise guard)
    keep: list[int] = []
    for i in ext:
        if keep and (i - keep[-1]) < 5:
            continue
        keep.append(int(i))
    if len(keep) < 3:
        raise UserModelError(f"estimate_start: the bob does not swing visibly in the clip "
                             f"({len(keep)} turning points found; need 3 or more)")
    vals = pv[keep]
    mids = 0.5 * (vals[1:] + vals[:-1])
    phi_rest = float(np.mean(mids))
    theta = pv - phi_rest
    s = np.sign(theta)
    cross = np.flatnonzero(s[1:] * s[:-1] < 0)
    if len(cross) < 4:
        raise UserModelError(f"estimate_start: only {len(cross)} passes through the rest position; need 4 "
                             "(at least two swing periods in the training part)")
    tc = tv[cross] - theta[cross] * (tv[cross + 1] - tv[cross]) / (theta[cross + 1] - theta[cross])
    half = float(np.polyfit(np.arange(len(tc)), tc, 1)[0])
    period = 2.0 * half
    amp = float(np.mean(np.abs(theta[keep])))
    L0 = g * (period / (2 * math.pi)) ** 2
    L = length_from_period(period, amp, g)
    notes.append(f"period {period:.4f} s from {len(tc)} rest crossings, amplitude {amp:.3f} rad: length "
                 f"{L0:.4f} m (small-angle) / {L:.4f} m (finite-amplitude)")
    w = 2 * math.pi / period
    first = tv <= tv[0] + period
    A = np.column_stack([np.ones(first.sum()), np.cos(w * (tv[first] - t[0])), np.sin(w * (tv[first] - t[0]))])
    a, b, c = np.linalg.lstsq(A, theta[first], rcond=None)[0]
    th0, om0 = float(a + b), float(c * w)
    # the initial state is at frame 0 (time t[0]); the sinusoid is referenced there
    values = {"pivot_x": cx, "pivot_y": cy, "px_per_m": R / L, "camera_roll": -phi_rest, "length": L,
              "initial_angle": th0, "initial_angular_velocity": om0}
    values = {k: v for k, v in values.items() if k in parameters}
    notes.append(f"camera roll {-phi_rest:.4f} rad (rest direction), initial angle {th0:.4f} rad, "
                 f"angular velocity {om0:.4f} rad/s")
    bounds = {"pivot_x": (cx - 0.1 * R, cx + 0.1 * R), "pivot_y": (cy - 0.15 * R, cy + 0.15 * R),
              "px_per_m": (R / L / 1.15, R / L * 1.15), "length": (L / 1.1, L * 1.1),
              "camera_roll": (-phi_rest - 0.05, -phi_rest + 0.05),
              "initial_angle": (th0 - 0.1, th0 + 0.1), "initial_angular_velocity": (om0 - 0.5, om0 + 0.5)}
    bounds = {k: v for k, v in bounds.items() if k in parameters}
    return StartEstimate(values, bounds, period, amp, L0, L, R, notes)
