"""Experiment design: the next excitation that tells poorly identified parameters apart.

When the identifiability check (:mod:`~vid2sid_ros.calibration.identifiability`) reports a
weak direction (two or more parameters trade off on the training trials), more iterations
on the same data cannot recover the true parameters. :func:`design_excitation` chooses the
next trial instead: from a family of candidate excitations within the rig's limits
(:class:`ExcitationLimits`: chirp bands, multisines, a step, two amplitudes), the one whose
rollout at the current estimate adds the most information about the flagged parameters.

Criterion (``"d_optimal"``). With ``J₀`` (M₀ x n) the finite-difference sensitivity of the
training trials' keypoints to the free parameters in normalised coordinates (0..1 across
the bounds, :meth:`~vid2sid_ros.core.parameters.ParameterSet.to_unit_vector`) and ``J_c``
(M_c x n) that of candidate ``c``, both divided by the keypoint noise σ, the information
matrix of the extended data is ``F_c = J₀ᵀJ₀ + J_cᵀJ_c``. The design maximises
``log det`` of the information on the flagged parameters ``a`` after the others ``b`` are
estimated too (the Schur complement ``F_aa − F_ab F_bb⁻¹ F_ba``; D_s-optimality; plain
D-optimality, ``log det F_c``, when every free parameter is flagged). D-optimality is
chosen over E-optimality (largest smallest eigenvalue) because it is invariant to a
rescaling of each parameter (its log det changes by a constant), so the choice does not
depend on how the bounds normalise the parameters, and it shrinks the volume of the
joint confidence ellipsoid of the estimate (Pukelsheim, *Optimal Design of Experiments*,
1993, §6; Ljung, *System Identification*, 2nd ed., 1999, ch. 13; Atkinson & Donev,
*Optimum Experimental Designs*, 1992, ch. 10 for D_s). The rationale also reports the
condition number of the stacked, noise-scaled sensitivity before and after.

Criterion ``"separation"`` (:func:`design_separating_excitation`). When the residual
diagnosis reports candidate causes it cannot tell apart (a link's mass and a joint's armature),
each candidate excitation is scored by the smallest pairwise distance between the causes'
predicted trajectories on it, after a linearised refit of the free parameters and of one
cause's size, in noise units (:func:`separation`); the candidate with the largest score is
chosen (a maximin discrimination design; cf. Atkinson & Fedorov, *Biometrika* 62, 1975, on
T-optimal designs for discriminating between models). Below 3 σ the rationale says that no
candidate separates them.

Cost: ``J₀`` takes ``(n + 1) · E`` rollouts (forward differences over the E training
trials), each candidate ``n + 2`` (a reference rollout that fixes the samples, the base
and one probe per parameter). All are *design rollouts*: charged to the calibration's
budget by the caller (:mod:`~vid2sid_ros.calibration.active`) and reported apart.

The linearised criterion is computed at the current estimate: a design is only as good as
that estimate (the usual caveat of local optimal design, Pukelsheim §1.24).

Limits and bad input: :func:`validate_profile` checks any requested profile (designed, a
VLM's ``excitation_change`` via :func:`profile_from_change`, or the user's) against
:class:`ExcitationLimits`: an amplitude over the actuator's limit is clipped, a frequency
band outside the allowed band is clipped, a profile too long, for an unknown actuator, of
an unknown kind or empty after clipping is refused (:class:`ExcitationRefused`); every
clip is recorded as a note, and nothing refused is ever rolled out or sent to a robot. With a
robot's rate limit (``ExcitationLimits.max_rate``, the excitation node's ``max_rate``), a sine,
chirp or multisine changing faster has its amplitude scaled down (noted; refused below a tenth
of it), a step is refused (it cannot be rate-limited and stay a step), and a trial whose first
command is further from the command the robot holds (``ExcitationLimits.held``) than one step
allows starts with a linear ramp (``ramp_from``/``ramp_duration``), shortened to fit the trial.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation, ExcitationError, build_excitation
from ..core.parameters import ParameterSet
from ..core.trajectory import DEFAULT_NOISE
from ..sim.base import Twin
from .identifiability import finite_difference_jacobian
from .nuisance import MeasurementModel
from .objective import TrialObjective, trajectory_vector
from .proposers.proposer import Evaluation

__all__ = ["ExcitationLimits", "ExcitationRefused", "DesignResult", "design_excitation", "validate_profile",
           "design_separating_excitation", "indistinguishable_set", "separation", "SEPARATES_SIGMA", "RECOMMEND_SIGMA",
           "profile_from_change", "candidate_profiles", "steepest_change", "information_criterion", "CRITERIA",
           "trial_name"]

#: design criteria by name (``calibration.active_learning.criterion``)
CRITERIA = ("d_optimal", "separation")
#: the highest frequency a design may ask for, as a fraction of the command rate (5 samples a period)
MAX_FREQUENCY_OF_RATE = 0.2
#: fewest command steps a designed trial may have: two periods of the fastest frequency a design may ask
#: for (:data:`MAX_FREQUENCY_OF_RATE`); a shorter ``max_duration_s`` is refused
MIN_DESIGN_STEPS = 10


class ExcitationRefused(ValueError):
    """A requested excitation is outside the rig's limits in a way clipping cannot repair (message says why)."""


@dataclass(frozen=True)
class ExcitationLimits:
    """What a designed or requested excitation may command on this rig.

    Attributes:
        amplitude: (A,) largest |command| per actuator, in the actuator's units (column order of the
            rig's excitations; a column named like no MuJoCo actuator is the model's actuator at its position).
        actuator_names: A names (order of ``amplitude``).
        frequency_hz: (low, high) of any commanded frequency, Hz.
        max_duration_s: longest trial, s.
        rate: command rate of a designed profile, Hz.
        source: where each limit came from (for the record).
        command_range: (A,) ``(lower, upper)`` per actuator from an asymmetric ``ctrlrange`` (a
            tendon that only pulls: [0, 1]); every sample is clipped into it (None: ± amplitude).
        max_rate: (A,) largest |change| of a command per second per actuator, command units/s (a
            robot's ``max_rate``; inf: none), or None: no rate limit. A profile changing faster is
            rate-limited (its amplitude scaled down) or refused (:func:`validate_profile`).
        held: (A,) the command the robot holds before the trial (None: not known). With ``max_rate``,
            a trial whose first command is further from it than one step allows starts with a ramp.
    """

    amplitude: tuple[float, ...]
    actuator_names: tuple[str, ...]
    frequency_hz: tuple[float, float]
    max_duration_s: float
    rate: float
    source: dict[str, str] = field(default_factory=dict)
    command_range: tuple[tuple[float, float], ...] | None = None
    max_rate: tuple[float, ...] | None = None
    held: tuple[float, ...] | None = None

    def range_of(self, i: int) -> tuple[float, float]:
        """(lowest, highest) command of actuator ``i``: its ``ctrlrange`` when known, else ± its amplitude."""
        if self.command_range is not None and i < len(self.command_range):
            lo, hi = self.command_range[i]
            return max(lo, -self.amplitude[i]), min(hi, self.amplitude[i])
        return -self.amplitude[i], self.amplitude[i]

    def narrowed(self, ranges: Sequence[tuple[float, float]], max_duration_s: float | None,
                 source: str, *, max_rate: Sequence[float] | None = None,
                 held: Sequence[float] | None = None) -> "ExcitationLimits":
        """These limits within a robot's own command limits (the excitation node's ``limit_lower`` /
        ``limit_upper`` / ``max_duration`` / ``max_rate``): each actuator's command range is the
        intersection, its amplitude the largest |command| left, the duration the shorter, the rate
        limit the smaller; ``source`` names where the robot's limits came from (recorded per
        narrowed limit).

        Args:
            ranges: (A,) ``(lower, upper)`` per actuator, command units (±inf: no limit).
            max_duration_s: s, None or <= 0: no limit.
            source: e.g. ``"excitation_node limit_upper"``.
            max_rate: (A,) command units/s per actuator (inf or <= 0: no limit), None: none.
            held: (A,) the command the robot holds now (None: keep what is known).

        Raises:
            ExcitationRefused: ``ranges`` does not have one entry per actuator, or an actuator's
                ranges do not overlap (nothing can be commanded within both).
        """
        if len(ranges) != len(self.actuator_names):
            raise ExcitationRefused(f"{source}: {len(ranges)} command ranges for {len(self.actuator_names)} "
                                    f"actuators {list(self.actuator_names)}")
        amp, rng, src = list(self.amplitude), [], dict(self.source)
        for i, (lo, hi) in enumerate(ranges):
            a, b = self.range_of(i)
            new = (max(a, float(lo)), min(b, float(hi)))
            if new[0] > new[1]:
                raise ExcitationRefused(f"{source}: actuator {self.actuator_names[i]!r} may command [{a:g}, {b:g}] "
                                        f"here and [{float(lo):g}, {float(hi):g}] on the robot: no command is "
                                        "within both")
            if new != (a, b):
                src[f"range[{self.actuator_names[i]}]"] = source
            amp[i] = min(amp[i], max(abs(new[0]), abs(new[1])))
            rng.append(new)
        dur = self.max_duration_s
        if max_duration_s is not None and max_duration_s > 0 and max_duration_s < dur:
            dur, src["max_duration_s"] = float(max_duration_s), source
        rate = self.max_rate
        if max_rate is not None:
            if len(max_rate) != len(self.actuator_names):
                raise ExcitationRefused(f"{source}: {len(max_rate)} rate limits for {len(self.actuator_names)} "
                                        f"actuators {list(self.actuator_names)}")
            old = rate or (math.inf,) * len(self.actuator_names)
            new_rate = tuple(min(o, float(r)) if float(r) > 0 else o for o, r in zip(old, max_rate))
            if any(math.isfinite(r) for r in new_rate):
                rate = new_rate
                if new_rate != tuple(old):
                    src["max_rate"] = source
        hold = self.held if held is None else tuple(float(v) for v in held)
        if hold is not None and len(hold) != len(self.actuator_names):
            raise ExcitationRefused(f"{source}: {len(hold)} held commands for {len(self.actuator_names)} actuators")
        return ExcitationLimits(tuple(amp), self.actuator_names, self.frequency_hz, dur, self.rate, src, tuple(rng),
                                rate, hold)

    @classmethod
    def from_rig(cls, twin: Twin, excitations: Sequence[Excitation],
                 config: Mapping[str, Any] | None = None) -> "ExcitationLimits":
        """The limits of a rig: its actuators' ``ctrlrange``, the config, and what it already commanded.

        Amplitude per actuator: the smallest of the MuJoCo actuator's ``ctrlrange`` (when
        ``ctrllimited``) and ``config["max_amplitude"]``; with neither, the largest |command|
        of ``excitations`` (a design never commands more than the robot already did). Frequency
        band: ``config["frequency_hz"]`` (default 0.05..15 Hz), its top capped at
        :data:`MAX_FREQUENCY_OF_RATE` x the rate. Duration: ``config["max_duration_s"]``, else the
        longest of ``excitations``. Rate: that of the first excitation (30 Hz without one).

        Args:
            twin: the rig's twin (``model`` with ``actuator_ctrlrange`` is read when present).
            excitations: the rig's training excitations (at least one), values (T, A).
            config: the ``calibration.active_learning`` block (``max_amplitude``: number or
                list per actuator; ``frequency_hz``: [low, high]; ``max_duration_s``).

        Raises:
            ExcitationRefused: no excitation to take names, rate or limits from, or a config
                value that is not a positive number.
        """
        cfg = dict(config or {})
        if not excitations:
            raise ExcitationRefused("active learning needs at least one training excitation (its actuators and rate)")
        names = tuple(excitations[0].actuator_names)
        rate = float(excitations[0].rate)
        src: dict[str, str] = {}
        amp = np.full(len(names), np.inf)
        ranges = [(-math.inf, math.inf)] * len(names)
        model = getattr(twin, "model", None)
        shown = list(names)  # the model's actuator names where the columns are generic (u0, u1...)
        try:
            import mujoco

            if isinstance(model, mujoco.MjModel):
                for i, name in enumerate(names):
                    aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name)
                    if aid < 0 and len(names) == model.nu:  # generic column names (u0, u1...): by position
                        aid = i
                        shown[i] = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, i) or name
                    if aid >= 0 and model.actuator_ctrllimited[aid]:
                        lo, hi = model.actuator_ctrlrange[aid]
                        amp[i] = min(amp[i], max(abs(lo), abs(hi)))
                        ranges[i] = (float(lo), float(hi))
                        src[f"amplitude[{name}]"] = "actuator ctrlrange"
        except ImportError:
            pass
        if cfg.get("max_amplitude") is not None:
            raw = cfg["max_amplitude"]
            vals = raw if isinstance(raw, (list, tuple)) else [raw] * len(names)
            if len(vals) != len(names) or not all(_positive(v) for v in vals):
                raise ExcitationRefused(f"calibration.active_learning.max_amplitude: expected a number > 0 or a list "
                                        f"of {len(names)} number{'s' if len(names) != 1 else ''} > 0 "
                                        f"(one per actuator: {', '.join(shown)}), "
                                        f"got {raw!r}")
            for i, v in enumerate(vals):
                if float(v) < amp[i]:
                    amp[i] = float(v)
                    src[f"amplitude[{names[i]}]"] = "calibration.active_learning.max_amplitude"
        for i, name in enumerate(names):
            if not math.isfinite(amp[i]):
                amp[i] = max(float(np.max(np.abs(e.values[:, i]))) if e.values.shape[1] > i else 0.0
                             for e in excitations)
                src[f"amplitude[{name}]"] = "largest command of the rig's training trials"
        band = cfg.get("frequency_hz", (0.05, 15.0))
        if (not isinstance(band, (list, tuple)) or len(band) != 2 or not all(_positive(v) for v in band)
                or float(band[0]) >= float(band[1])):
            raise ExcitationRefused(f"calibration.active_learning.frequency_hz: expected [low, high] Hz with "
                                    f"0 < low < high, got {band!r}")
        hi = min(float(band[1]), MAX_FREQUENCY_OF_RATE * rate)
        if float(band[0]) >= hi:
            raise ExcitationRefused(f"calibration.active_learning.frequency_hz: expected a low frequency below "
                                    f"{hi:g} Hz ({MAX_FREQUENCY_OF_RATE:g} x the {rate:g} Hz command rate), "
                                    f"got {band!r}")
        dur = cfg.get("max_duration_s")
        if dur is not None and not _positive(dur):
            raise ExcitationRefused(f"calibration.active_learning.max_duration_s: expected a number > 0 s, got {dur!r}")
        if dur is not None and float(dur) * rate < MIN_DESIGN_STEPS - 1e-9:
            raise ExcitationRefused(f"calibration.active_learning.max_duration_s: expected at least "
                                    f"{MIN_DESIGN_STEPS / rate:g} s ({MIN_DESIGN_STEPS} command steps at "
                                    f"{rate:g} Hz), got {dur!r}")
        max_dur = float(dur) if dur is not None else max(e.duration for e in excitations)
        return cls(tuple(float(a) for a in amp), names, (float(band[0]), hi), max_dur, rate, src, tuple(ranges))


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def validate_profile(cfg: Mapping[str, Any], limits: ExcitationLimits) -> tuple[dict[str, Any], Excitation, list[str]]:
    """Clip ``cfg`` into ``limits`` or refuse it; build the excitation.

    Clipped (each recorded in the notes): an ``amplitude`` over the actuator's limit, a chirp's
    ``f0``/``f1`` or a multisine's ``frequencies`` outside the band, a sine's ``frequency``;
    an ``offset`` counts towards the amplitude (|offset| + amplitude <= limit). After building,
    any sample still over the limit (a CSV profile) is clipped sample-wise.

    Args:
        cfg: an excitation config (:func:`~vid2sid_ros.core.excitation.build_excitation`).
        limits: the rig's limits.

    Returns:
        ``(clipped_cfg, excitation, notes)``; excitation values (T, A) within the limits.

    Raises:
        ExcitationRefused: not a mapping, an unknown actuator, a duration over the limit,
            a band empty after clipping, or a config the excitation builder refuses.
    """
    if not isinstance(cfg, Mapping):
        raise ExcitationRefused(f"excitation request must be a mapping, got {type(cfg).__name__}")
    out = dict(cfg)
    notes: list[str] = []
    act = out.get("actuator", limits.actuator_names[0])
    if act not in limits.actuator_names:
        raise ExcitationRefused(f"excitation request names actuator {act!r}; the rig has {list(limits.actuator_names)}")
    amax = limits.amplitude[limits.actuator_names.index(act)]
    dur = out.get("duration", 3.0)
    if _positive(dur) and float(dur) > limits.max_duration_s + 1e-9:
        raise ExcitationRefused(f"excitation request lasts {float(dur):g} s; the rig allows at most "
                                f"{limits.max_duration_s:g} s a trial")
    f_lo, f_hi = limits.frequency_hz
    kind = out.get("kind")

    def clip_f(key: str, v: Any) -> float:
        x = float(v)
        c = min(max(x, f_lo), f_hi)
        if c != x:
            notes.append(f"{key} {x:g} Hz clipped to {c:g} Hz (allowed {f_lo:g}..{f_hi:g} Hz)")
        return c

    try:
        if kind == "chirp":
            out["f0"], out["f1"] = clip_f("f0", out.get("f0", 0.2)), clip_f("f1", out.get("f1", 3.0))
            if out["f0"] >= out["f1"]:
                raise ExcitationRefused(f"chirp band {out['f0']:g}..{out['f1']:g} Hz is empty after clipping to the "
                                        f"allowed {f_lo:g}..{f_hi:g} Hz")
        elif kind == "sine":
            out["frequency"] = clip_f("frequency", out.get("frequency", 1.0))
        elif kind == "multisine":
            freqs = sorted({clip_f("frequency", f) for f in out.get("frequencies", [0.5, 1.3, 2.7])})
            out["frequencies"] = freqs
        offset = abs(float(out.get("offset", 0.0)))
        if kind in ("sine", "chirp", "step", "multisine"):
            a = abs(float(out.get("amplitude", 0.5)))
            if a + offset > amax + 1e-12:
                new = max(amax - offset, 0.0)
                notes.append(f"amplitude {a:g} (offset {offset:g}) clipped to {new:g}: actuator '{act}' allows "
                             f"|command| <= {amax:g}")
                out["amplitude"] = math.copysign(new, float(out.get("amplitude", 0.5)))
                if new == 0.0:
                    raise ExcitationRefused(f"excitation request's offset {offset:g} alone reaches actuator '{act}''s "
                                            f"limit {amax:g}: nothing left to excite")
    except (TypeError, ValueError) as err:
        if isinstance(err, ExcitationRefused):
            raise
        raise ExcitationRefused(f"excitation request {dict(cfg)!r}: {err}") from None
    try:
        exc = build_excitation(out, limits.actuator_names)
    except ExcitationError as err:
        raise ExcitationRefused(f"excitation request refused: {err}") from None
    if tuple(exc.actuator_names) != tuple(limits.actuator_names):
        raise ExcitationRefused(f"excitation request commands {list(exc.actuator_names)}; the rig's actuators are "
                                f"{list(limits.actuator_names)}")
    if exc.duration > limits.max_duration_s + 1e-9:
        raise ExcitationRefused(f"excitation request lasts {exc.duration:g} s; the rig allows at most "
                                f"{limits.max_duration_s:g} s a trial")
    rng = [limits.range_of(i) for i in range(len(limits.actuator_names))]
    lo, hi = np.array([r[0] for r in rng])[None, :], np.array([r[1] for r in rng])[None, :]
    over = (exc.values < lo - 1e-12) | (exc.values > hi + 1e-12)
    if np.any(over):
        notes.append(f"{int(np.sum(over))} command sample(s) clipped to the actuator limits "
                     + ", ".join(f"{n} [{a:g}, {b:g}]" for n, (a, b) in zip(limits.actuator_names, rng)))
        exc = Excitation(exc.name, exc.rate, np.clip(exc.values, lo, hi), exc.actuator_names,
                         {**dict(exc.meta), "clipped": True})
    if limits.max_rate is not None:
        out, exc = _rate_limited(out, exc, limits, notes)
    return out, exc, notes


#: a profile whose amplitude would have to shrink below this fraction to meet a rate limit is refused
MIN_RATE_LIMITED_FRACTION = 0.1


def steepest_change(values: np.ndarray, rate: float, start: np.ndarray | None = None) -> np.ndarray:
    """(A,) largest |change| per second of ``values`` (T, A) at ``rate`` Hz (command units/s), from ``start``
    (A,), the command held before the first row, when given."""
    v = values if start is None else np.vstack([start[None, :], values])
    return np.max(np.abs(np.diff(v, axis=0)), axis=0) * rate if len(v) > 1 else np.zeros(v.shape[1])


def _rate_limited(out: dict[str, Any], exc: Excitation, limits: ExcitationLimits,
                  notes: list[str]) -> tuple[dict[str, Any], Excitation]:
    """``out``/``exc`` within ``limits.max_rate``: a lead-in ramp from ``limits.held`` when the first command is
    further from it than one step allows (the profile shortened to keep the trial within the duration), and a
    periodic profile's amplitude scaled down so its steepest change meets the limit (each noted).

    Raises:
        ExcitationRefused: a step (or CSV) profile changes faster than the limit, the amplitude would
            shrink below :data:`MIN_RATE_LIMITED_FRACTION` of the asked one, or the ramp fills half the trial.
    """
    lim = np.asarray(limits.max_rate, float)
    names = limits.actuator_names
    held = None if limits.held is None else np.asarray(limits.held, float)
    asked = float(out.get("amplitude", 0.5))
    for _ in range(3):  # the ramp depends on the first command, the slopes on the duration: settle both
        out, exc = _ramp_from_held(out, exc, limits, notes)
        body = exc.values[int(round(float(out.get("ramp_duration", 0.0)) * exc.rate)):]
        fast = steepest_change(body, exc.rate)
        j = int(np.argmax(fast / lim))
        if fast[j] <= lim[j] * (1 + 1e-9):
            break
        kind, amp = out.get("kind"), float(out.get("amplitude", 0.5))
        why = f"{names[j]} changes at up to {fast[j]:.4g} per s, faster than max_rate {lim[j]:.4g} per s"
        new = amp * lim[j] / fast[j] * (1 - 1e-6)
        if kind not in ("sine", "chirp", "multisine") or abs(new) < MIN_RATE_LIMITED_FRACTION * abs(asked):
            raise ExcitationRefused(f"{_describe(out)}: {why}" + ("" if kind in ("sine", "chirp", "multisine") else
                                                                  f" (a {kind} cannot be rate-limited and stay one)"))
        out["amplitude"] = round(new, 9)
        notes.append(f"{_describe(out)}: amplitude {amp:g} rate-limited to {out['amplitude']:g} ({why})")
        out.pop("ramp_from", None), out.pop("ramp_duration", None)
        exc = build_excitation(out, names)
    fast = steepest_change(exc.values, exc.rate, held)
    if np.any(fast > lim * (1 + 1e-9)):
        j = int(np.argmax(fast / lim))
        raise ExcitationRefused(f"{_describe(out)}: {names[j]} changes at up to {fast[j]:.4g} per s, faster than "
                                f"max_rate {lim[j]:.4g} per s")
    return out, exc


def _ramp_from_held(out: dict[str, Any], exc: Excitation, limits: ExcitationLimits,
                    notes: list[str]) -> tuple[dict[str, Any], Excitation]:
    """``out``/``exc`` with a lead-in ramp from ``limits.held`` when one step at max_rate cannot reach the first
    command (:func:`_rate_limited`); unchanged without a held command or when none is needed."""
    if limits.held is None or "ramp_from" in out:
        return out, exc
    held, step = np.asarray(limits.held, float), np.asarray(limits.max_rate, float) / exc.rate
    with np.errstate(invalid="ignore", divide="ignore"):
        n = np.where(np.isfinite(step), np.ceil(np.abs(exc.values[0] - held) / step - 1e-9), 1)
    n = int(max(np.max(n), 1))
    if n <= 1:
        return out, exc
    ramp = (n - 1) / exc.rate
    dur = float(out.get("duration", exc.duration))
    if dur + ramp > limits.max_duration_s + 1e-9:
        short = math.floor((limits.max_duration_s - ramp) * exc.rate + 1e-9) / exc.rate
        if short < 0.5 * dur:
            raise ExcitationRefused(f"{_describe(out)}: the {ramp:.3g} s ramp from the held command "
                                    f"{held.tolist()} at max_rate leaves less than half of the trial "
                                    f"(max_duration {limits.max_duration_s:g} s)")
        notes.append(f"{_describe(out)}: shortened to {short:g} s for the ramp from the held command")
        out["duration"] = round(short, 9)
    out["ramp_from"], out["ramp_duration"] = [float(v) for v in held], round(ramp, 9)
    notes.append(f"{_describe(out)}: starts with a {ramp:.3g} s ramp ({n - 1} steps) from the held command "
                 f"{[round(float(v), 6) for v in held]} at max_rate")
    return out, build_excitation(out, limits.actuator_names)


def profile_from_change(change: Mapping[str, Any], base: Excitation, limits: ExcitationLimits) -> dict[str, Any]:
    """A VLM's ``excitation_change`` as a chirp profile (to pass through :func:`validate_profile`).

    ``{"amplitude_gain": g, "frequency_low_hz": f0, "frequency_high_hz": f1}`` becomes a linear
    chirp over ``f0..f1`` (default: the allowed band) with amplitude ``g`` x the largest command
    of ``base`` on its first actuator, lasting ``base``'s duration at the rig's rate.

    Raises:
        ExcitationRefused: ``change`` is not a mapping or holds a non-finite number.
    """
    if not isinstance(change, Mapping):
        raise ExcitationRefused(f"excitation_change must be a mapping, got {type(change).__name__}")
    vals = {}
    for key, default in (("amplitude_gain", 1.0), ("frequency_low_hz", limits.frequency_hz[0]),
                         ("frequency_high_hz", limits.frequency_hz[1])):
        v = change.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ExcitationRefused(f"excitation_change.{key} must be a finite number, got {v!r}")
        vals[key] = float(v)
    amp = vals["amplitude_gain"] * float(np.max(np.abs(base.values[:, 0])) or limits.amplitude[0])
    return {"kind": "chirp", "name": "requested_chirp", "amplitude": amp, "f0": vals["frequency_low_hz"],
            "f1": vals["frequency_high_hz"], "duration": round(min(base.duration, limits.max_duration_s), 6),
            "rate": limits.rate}


def candidate_profiles(limits: ExcitationLimits, *, duration: float | None = None) -> list[dict[str, Any]]:
    """The candidate family, inside ``limits`` (first actuator), at most 7 profiles.

    Centred on the middle of the actuator's command range (an asymmetric ``ctrlrange`` such as a
    tendon's [0, 1] gives an ``offset``; a step then goes from its lower to its upper end).

    Linear chirps over the lower, middle and upper thirds of the allowed band (log spaced)
    and over the whole band at full amplitude, the whole band at half amplitude, a step
    (on at 0.2 s, off at half the duration) and a 3-tone multisine over the band. Every
    entry is already within the limits (:func:`validate_profile` finds nothing to clip).
    """
    lo, hi = limits.frequency_hz
    dur = round(min(duration or limits.max_duration_s, limits.max_duration_s), 6)
    c_lo, c_hi = limits.range_of(0)
    amp, mid = 0.5 * (c_hi - c_lo), 0.5 * (c_hi + c_lo)  # about the middle of the command range
    act = limits.actuator_names[0]
    edges = np.geomspace(max(lo, 0.1), hi, 4)
    common = {"duration": dur, "rate": limits.rate, "actuator": act, **({"offset": round(mid, 9)} if mid else {})}
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        out.append({"kind": "chirp", "amplitude": amp, "f0": round(float(a), 3), "f1": round(float(b), 3), **common})
    out.append({"kind": "chirp", "amplitude": amp, "f0": round(float(edges[0]), 3), "f1": round(float(hi), 3),
                **common})
    out.append({"kind": "chirp", "amplitude": 0.5 * amp, "f0": round(float(edges[0]), 3),
                "f1": round(float(hi), 3), **common})
    out.append({"kind": "step", "t_step": 0.2, "t_release": round(dur / 2, 3), **common,
                **({"amplitude": amp} if not mid else {"amplitude": c_hi - c_lo, "offset": round(c_lo, 9)})})
    out.append({"kind": "multisine", "amplitude": amp, "frequencies": [round(float(f), 3) for f in edges[1:]],
                "seed": 0, **common})
    for i, c in enumerate(out):
        c["name"] = trial_name(f"designed {_describe(c)}")
    return out


def trial_name(text: str) -> str:
    """``text`` as a trial name a rig config accepts (letters, digits, ``_`` and ``-``).

    A decimal point becomes ``p`` (``0.6`` -> ``0p6``), a space, ``/`` or any other character
    ``_`` (runs of them one), an en dash ``-``: ``"designed step 0.6 at 0.2 s"`` ->
    ``"designed_step_0p6_at_0p2_s"``. An empty result is ``"designed"``.
    """
    out = re.sub(r"(?<=\d)\.(?=\d)", "p", str(text)).replace("–", "-").replace(".", "p")
    out = re.sub(r"[^A-Za-z0-9_\-]+", "_", out).strip("_")
    return out or "designed"


def _describe(cfg: Mapping[str, Any]) -> str:
    k = cfg.get("kind")
    a = f"{float(cfg.get('amplitude', 0.0)):.3g}"
    if k == "chirp":
        return f"chirp {float(cfg['f0']):.3g}–{float(cfg['f1']):.3g} Hz amplitude {a}"
    if k == "step":
        return f"step {a} at {float(cfg.get('t_step', 0.1)):g} s"
    if k == "multisine":
        return f"multisine {'/'.join(f'{f:.3g}' for f in cfg.get('frequencies', []))} Hz amplitude {a}"
    if k == "sine":
        return f"sine {float(cfg.get('frequency', 1.0)):.3g} Hz amplitude {a}"
    return str(cfg.get("name") or k)


def information_criterion(F: np.ndarray, flagged: Sequence[int]) -> float:
    """log det of the information on parameters ``flagged`` with the others estimated (D_s; module docstring).

    Args:
        F: (n, n) information matrix ``JᵀJ`` (normalised parameters, noise-scaled rows).
        flagged: indices of the parameters of interest (all of them: plain D-optimality).

    Returns:
        ``log det(F_aa − F_ab F_bb⁻¹ F_ba)`` (natural log); ``-inf`` when singular.
    """
    F = np.asarray(F, dtype=float)
    a = list(flagged)
    b = [i for i in range(F.shape[0]) if i not in a]
    S = F[np.ix_(a, a)]
    if b:
        S = S - F[np.ix_(a, b)] @ np.linalg.pinv(F[np.ix_(b, b)]) @ F[np.ix_(b, a)]
    sign, logdet = np.linalg.slogdet(0.5 * (S + S.T))
    return float(logdet) if sign > 0 else -math.inf


def _condition(J: np.ndarray) -> float:
    s = np.linalg.svd(J, compute_uv=False) if J.size else np.zeros(1)
    return float(s[0] / s[-1]) if s[-1] > 0 else math.inf


@dataclass
class DesignResult:
    """The designed excitation and why.

    Attributes:
        profile: the chosen excitation config (within the limits; paste into ``excitation:``).
        excitation: the built profile, values (T, A).
        criterion: ``"d_optimal"``; flagged: the parameters it was computed for.
        score_before, score_after: the criterion (log det, natural log) on the training trials
            alone and with the designed trial added.
        condition_before, condition_after: condition number of the noise-scaled sensitivity
            of the training trials alone / with the designed trial.
        candidates: one ``{"profile", "score", "condition", "failed"}`` per candidate.
        rollouts: design rollouts spent (charge them to the budget).
        rationale: plain words and numbers.
        notes: clips and refusals.
    """

    profile: dict[str, Any]
    excitation: Excitation
    criterion: str
    flagged: list[str]
    score_before: float
    score_after: float
    condition_before: float
    condition_after: float
    candidates: list[dict[str, Any]]
    rollouts: int
    rationale: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (excitation as its profile; non-finite numbers as None)."""
        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {"profile": dict(self.profile), "criterion": self.criterion, "flagged": list(self.flagged),
                "score_before": num(self.score_before), "score_after": num(self.score_after),
                "condition_before": num(self.condition_before), "condition_after": num(self.condition_after),
                "candidates": [{**c, "score": num(c["score"]), "condition": num(c["condition"])}
                               for c in self.candidates],
                "rollouts": self.rollouts, "rationale": self.rationale, "notes": list(self.notes)}


def _candidate_jacobian(twin: Twin, exc: Excitation, parameters: ParameterSet, point: Mapping[str, float],
                        step: float) -> tuple[np.ndarray | None, int]:
    """(J (M, n) px per normalised unit, rollouts) of one candidate; None when its rollout fails.

    ``parameters`` may hold measurement nuisances (latency, marker offsets of a real trial): only
    the physics values go into the twin (were all of them, and the twin refused the nuisances' names)."""
    twin.set_parameters(MeasurementModel(parameters).split(parameters.complete(point))[0])
    ref = twin.rollout(exc)
    if ref.diverged:
        return None, 1
    obj = TrialObjective(twin, [exc], [ref.trajectory], parameters)
    J, failed, spent = _forward_jacobian(obj, parameters, point, step)
    return (None if failed else J), 1 + spent


def _forward_jacobian(objective: TrialObjective, parameters: ParameterSet, point: Mapping[str, float],
                      step: float) -> tuple[np.ndarray, bool, int]:
    """(J (M, n) of ``objective``'s trajectory vector per normalised unit of ``parameters``' free ones,
    whether the base point failed, rollouts spent) by forward differences."""
    spent = 0

    def ev(values: Mapping[str, float]) -> Evaluation:
        nonlocal spent
        e, _ = objective.evaluate(values)
        spent += e.rollouts
        return e

    J, base, _ = finite_difference_jacobian(ev, parameters, point,
                                            lambda e: trajectory_vector(e.sim, objective.real),
                                            step=step, scheme="forward")
    return J, base.failed, spent


def design_excitation(objective: TrialObjective, point: Mapping[str, float], limits: ExcitationLimits, *,
                      flagged: Sequence[str] | None = None, candidates: Sequence[Mapping[str, Any]] | None = None,
                      step: float = 0.02, noise_px: float | None = None, criterion: str = "d_optimal",
                      max_rollouts: int | None = None) -> DesignResult:
    """Choose the candidate excitation that maximises the information criterion (module docstring).

    Args:
        objective: the training trials (twin, excitations, real trajectories, spec).
        point: the current estimate (full or free-only values, SI).
        limits: the rig's limits; every candidate passes :func:`validate_profile`.
        flagged: names of the parameters to separate (default: every free physics parameter).
        candidates: excitation configs (default :func:`candidate_profiles`); refused ones are noted
            and skipped.
        step: forward-difference step, normalised units.
        noise_px: keypoint noise σ in the measurement unit (default that unit's
            :data:`~vid2sid_ros.core.trajectory.DEFAULT_NOISE`); scales every row alike.
        criterion: one of :data:`CRITERIA`.
        max_rollouts: stop evaluating candidates once this many design rollouts are spent.

    Returns:
        DesignResult (``rollouts`` = every twin rollout made, failed ones included).

    Raises:
        ValueError: unknown criterion, unknown flagged names, or no candidate could be evaluated.
    """
    if criterion != "d_optimal":
        raise ValueError(f"design_excitation: criterion must be 'd_optimal', got {criterion!r} (the separation of "
                         "indistinguishable causes is design_separating_excitation)")
    params = objective.parameters
    names = [s.name for s in params.free if s.name not in objective.measurement.names]
    physics = params.with_frozen(free=names) if len(names) != len(params.free) else params
    asked = bool(flagged)  # by the identifiability check; else every free parameter (trigger: always)
    flagged = list(flagged) if flagged else list(names)
    unknown = [n for n in flagged if n not in names]
    if unknown:
        raise ValueError(f"design: {unknown} are not free physics parameters ({names})")
    idx = [names.index(n) for n in flagged]
    point = params.complete(point)
    sigma = float(noise_px if noise_px is not None else DEFAULT_NOISE.get(objective.unit, 1.0))
    least = (len(names) + 1) * len(objective.excitations) + len(names) + 2  # J0 and one candidate
    if max_rollouts is not None and least > max_rollouts:  # nothing spent: the allowance is never exceeded
        raise ValueError(f"design: the training trials' sensitivity and one candidate take {least} rollouts, more "
                         f"than the {max_rollouts} allowed")
    J0, _, spent0 = _forward_jacobian(objective, physics, point, step)
    spent = {"n": spent0}
    J0 = J0[np.all(np.isfinite(J0), axis=1)] / sigma
    F0 = J0.T @ J0
    before, cond0 = information_criterion(F0, idx), _condition(J0)
    notes: list[str] = []
    table: list[dict[str, Any]] = []
    best: tuple[float, dict, Excitation, float] | None = None
    for cfg in (candidates if candidates is not None else candidate_profiles(limits)):
        if max_rollouts is not None and spent["n"] + len(names) + 2 > max_rollouts:
            notes.append(f"design stopped after {len(table)} candidate(s): its rollout allowance "
                         f"({max_rollouts}) is spent")
            break
        try:
            prof, exc, clip_notes = validate_profile(cfg, limits)
        except ExcitationRefused as err:
            notes.append(f"candidate refused: {err}")
            continue
        notes.extend(f"{_describe(prof)}: {n}" for n in clip_notes)
        Jc, cost = _candidate_jacobian(objective.twin, exc, physics, point, step)
        spent["n"] += cost
        if Jc is None:
            table.append({"profile": prof, "score": -math.inf, "condition": math.inf, "failed": True})
            continue
        Jc = Jc[np.all(np.isfinite(Jc), axis=1)] / sigma
        score = information_criterion(F0 + Jc.T @ Jc, idx)
        cond = _condition(np.vstack([J0, Jc]))
        table.append({"profile": prof, "score": score, "condition": cond, "failed": False})
        if best is None or score > best[0]:
            best = (score, prof, exc, cond)
    objective.twin.set_parameters(objective.measurement.split(point)[0])
    if best is None or not math.isfinite(best[0]):
        raise ValueError("design: no candidate excitation could be evaluated at the current estimate"
                         + (f" ({'; '.join(notes)})" if notes else ""))
    score, prof, exc, cond = best
    rationale = _rationale(flagged, prof, before, score, cond0, cond, len(table), spent["n"], flagged_by_check=asked)
    return DesignResult(prof, exc, criterion, flagged, before, score, cond0, cond, table, spent["n"], rationale, notes)


def _rationale(flagged: Sequence[str], prof: Mapping[str, Any], before: float, after: float, cond0: float,
               cond1: float, n_candidates: int, rollouts: int, *, flagged_by_check: bool = True) -> str:
    """One paragraph: what trades off, what separates it, by how much. Without parameters flagged
    by the identifiability check (a design asked for regardless), no trade-off is claimed."""
    who = (", ".join(flagged[:-1]) + " and " + flagged[-1]) if len(flagged) > 1 else flagged[0]
    gain = "" if not math.isfinite(before) else f" (log det of the information {before:.1f} → {after:.1f})"
    if not flagged_by_check:
        return (f"designed for every free parameter, none being flagged by an identifiability check (condition "
                f"number {cond0:.2g} on the training trials): the trial adding the most information on {who} is a "
                f"{_describe(prof)}: "
                f"condition number {cond0:.2g} → {cond1:.2g}{gain}. Chosen by D-optimal design "
                f"among {n_candidates} candidate excitations within the rig's limits, at the current estimate; "
                f"{rollouts} design rollouts.")
    return (f"{who} trade off on the training trials (condition number {cond0:.2g}); a {_describe(prof)} "
            f"separates them: condition number {cond0:.2g} → {cond1:.2g}{gain}. Chosen by D-optimal design "
            f"among {n_candidates} candidate excitations within the rig's limits, at the current estimate; "
            f"{rollouts} design rollouts.")


# -- candidate causes the diagnosis cannot tell apart ------------------------------------------------------------
def indistinguishable_set(objective: TrialObjective, values: Mapping[str, float],
                          parameters: ParameterSet | None = None,
                          names: Sequence[str] | None = None) -> tuple[Any, list[Any]]:
    """The residual diagnosis's comparison at ``values``: ``(probe context, members)``.

    ``members`` are the refitted :class:`~vid2sid_ros.calibration.diagnosis.compare.Score` objects
    of an *indistinguishable* verdict (each with ``parts`` and ``refit.theta``/``refit.u``), empty
    for any other verdict. Same steps and thresholds as :func:`~vid2sid_ros.calibration.diagnosis.
    diagnose`; its rollouts are in ``context.rollouts``.

    ``names``: the causes a diagnosis at ``values`` already reported as indistinguishable (its
    finding's ``evidence.causes[].cause``). Only those are probed and refitted again (their sizes
    and refits are what the separation needs), not the whole candidate list: on the finger the
    full comparison cost more than a design's allowance, which then had none left for a single
    candidate excitation.
    """
    from .diagnosis.causes import candidate_causes
    from .diagnosis.compare import THRESHOLDS, decide, free_columns, line_scan, polish, refit, screen
    from .diagnosis.context import ProbeContext

    ctx = ProbeContext(objective, values, parameters if parameters is not None else objective.parameters, None)
    if ctx.failed:
        return ctx, []
    causes = candidate_causes(ctx)
    if names is not None:
        causes = [c for c in causes if c.name in set(names)]
    F = free_columns(ctx)
    null = refit(ctx, [], [], F)
    scores = screen(ctx, causes, F)
    for s in [s for s in scores if s.share_linear > 0 and s.column is not None][: int(THRESHOLDS["refit_top"])]:
        line_scan(ctx, s, F)
        s.refit = refit(ctx, s.parts, s.probe_columns, F, start=s.starts, start_r=s.start_r)
    if names is not None:  # tied already by the diagnosis: every one refitted is a member
        return ctx, [s for s in scores if s.refit is not None]
    dec = decide(ctx, scores, null)
    if dec["verdict"] == "indistinguishable":  # as diagnose(): the tie decided on refined refits
        dec = decide(ctx, scores, null, accuracy=polish(ctx, dec["set"], F))
    members = [m for m in dec["set"] if m.refit is not None] if dec["verdict"] == "indistinguishable" else []
    return ctx, members


def separation(ctx: Any, members: Sequence[Any], exc: Excitation, *, check_pairs: int = 0,
               check_evaluations: int = 8) -> tuple[float, list[tuple[str, str, float]]]:
    """How far apart the members' predictions on ``exc`` are, after refitting the free parameters.

    Each member's model (its cause at its fitted size, the free parameters at its refit) is rolled
    out on ``exc``; the difference ``d_ab`` between two predictions has its component in the span of
    the free parameters' and of one member's own size(s) sensitivity on ``exc`` removed (a
    linearised refit of model a to model b's prediction: ``d − A A⁺ d``, ``A = [J_free, ∂y_a/∂θ_a]``;
    the smaller of the two directions counts), and the rest is measured in noise units,
    ``‖d⊥‖ / σ`` (σ: the diagnosis's noise estimate). The criterion
    is the smallest over pairs: the designed trial must separate every pair.

    ``check_pairs``: the closest pairs (by the linearised distance) are then refitted for real, each
    way (:func:`_refit_left`: bounded nonlinear least squares of model a's free parameters and size
    to model b's prediction, ``check_evaluations`` evaluations), and their distance is the smaller of
    the two. A linearisation about two refits that each ended a little short of their optimum can
    report two causes that are one effect (a hinge's armature and its link's inertia about that
    hinge) as far apart; the real refit brings them back together.

    Returns:
        ``(min over pairs, [(cause a, cause b, distance)])``; ``(nan, [])`` when a rollout failed.
        Rollouts are counted in ``ctx.rollouts``.
    """
    twin = ctx.objective.twin
    twin.set_parameters(ctx.objective.measurement.split(ctx.values_at(ctx.u0))[0])
    ctx.rollouts += 1
    ref = twin.rollout(exc)
    if ref.diverged:
        return math.nan, []
    obj = TrialObjective(twin, [exc], [ref.trajectory], ctx.params)
    base = ctx.residual([], [], ctx.u0, objective=obj)
    if base is None:
        return math.nan, []
    cols = []
    for i, u in enumerate(ctx.u0):  # the free parameters' sensitivity on the candidate
        h = 0.02 if u + 0.02 <= 1.0 else -0.02
        uu = ctx.u0.copy()
        uu[i] += h
        r = ctx.residual([], [], uu, objective=obj)
        if r is not None:
            cols.append((r - base) / h)
    preds, own = [], []
    for m in members:  # each member's prediction and the sensitivity to its own size(s)
        theta = np.asarray(m.refit.theta, float)
        p = ctx.residual(m.parts, theta, m.refit.u, objective=obj)
        preds.append(p)
        mine = []
        for k, part in enumerate(m.parts):
            step = float(getattr(part, "step", 0.0) or 0.0) or 1e-3
            tk = theta.copy()
            tk[k] += step
            q = ctx.residual(m.parts, tk, m.refit.u, objective=obj)
            if q is not None and p is not None:
                mine.append((q - p) / step)
        own.append(mine)
    if any(p is None for p in preds):
        return math.nan, []
    ok = np.all(np.isfinite(np.column_stack([base] + cols + preds + [c for o in own for c in o])), axis=1)
    sigma = math.sqrt(ctx.sigma2) if ctx.sigma2 > 0 else 1.0

    def left(d: np.ndarray, columns: list[np.ndarray]) -> float:
        """‖d − A A⁺ d‖ / σ: what a refit of the columns cannot absorb."""
        if columns:
            A = np.column_stack(columns)[ok]
            d = d - A @ np.linalg.lstsq(A, d, rcond=None)[0]
        return float(np.linalg.norm(d) / sigma)

    pairs, which = [], []
    for i in range(len(members)):
        for j in range(i + 1, len(members)):
            d = (preds[i] - preds[j])[ok]
            # model i refitted (free parameters and its own size) to model j's prediction, and the reverse
            dist = min(left(d, cols + own[i]), left(d, cols + own[j]))
            pairs.append((members[i].cause.name, members[j].cause.name, dist))
            which.append((i, j))
    for k in sorted(range(len(pairs)), key=lambda k: pairs[k][2])[:check_pairs]:
        i, j = which[k]
        dist = min(pairs[k][2], _refit_left(ctx, members[i], preds[j], obj, ok, sigma, check_evaluations),
                   _refit_left(ctx, members[j], preds[i], obj, ok, sigma, check_evaluations))
        pairs[k] = (pairs[k][0], pairs[k][1], dist)
    return (min(p[2] for p in pairs) if pairs else math.nan), pairs


def _refit_left(ctx: Any, m: Any, target: np.ndarray, obj: TrialObjective, ok: np.ndarray, sigma: float,
                evaluations: int) -> float:
    """What member ``m`` cannot reproduce of ``target`` (another member's prediction, (M,) residual against the
    same reference) when its free parameters and its size are refitted to it: ``‖r_m(u, θ) − target‖ / σ`` at
    the bounded least-squares optimum (:func:`~vid2sid_ros.calibration.diagnosis.compare.bounded_refit`, started
    from ``m``'s refit, ``evaluations`` evaluations plus their finite differences), in noise units."""
    from .diagnosis.compare import bounded_refit

    F = len(ctx.u0)
    t = target[ok]
    worst = 10.0 * float(np.max(np.abs(t))) if t.size else 1.0

    def fun(x: np.ndarray) -> np.ndarray:
        r = ctx.residual(m.parts, x[F:], x[:F], objective=obj)
        return np.full(t.size, worst) if r is None else np.nan_to_num(r[ok] - t)

    x, _ = bounded_refit(ctx, m.parts, m.refit.theta, m.refit.u, fun, diff_step=1e-3, max_nfev=evaluations)
    return float(np.linalg.norm(fun(x)) / sigma)


#: the separation (noise units, :func:`separation`) below which the rationale says no candidate separates the
#: causes (one trial may still tip a tie decided on all the data together)
SEPARATES_SIGMA = 3.0

#: below this separation (noise units) a designed trial separates nothing the noise does not hide: it is not
#: recommended (:func:`~vid2sid_ros.calibration.active.recommend_trial`)
RECOMMEND_SIGMA = 1.0

#: pairs of the chosen separating trial whose separation is checked by a real refit (:func:`separation`), and the
#: evaluations each way of that refit
_CHECK_PAIRS, _CHECK_EVALUATIONS = 3, 8


def design_separating_excitation(objective: TrialObjective, values: Mapping[str, float], limits: ExcitationLimits,
                                 *, parameters: ParameterSet | None = None,
                                 candidates: Sequence[Mapping[str, Any]] | None = None,
                                 max_rollouts: int | None = None,
                                 tied: Sequence[str] | None = None) -> DesignResult | None:
    """The candidate whose trial best separates the causes the diagnosis reports as indistinguishable.

    Criterion ``"separation"``: maximise, over the candidates within ``limits``, the smallest
    pairwise distance between the members' predictions after refitting the free parameters, in
    noise units (:func:`separation`). The diagnosis is re-run here (:func:`indistinguishable_set`);
    its rollouts and each candidate's ``1 + F + 2C`` (F free parameters, C members) are design
    rollouts.

    ``max_rollouts``: no further candidate is evaluated once the next one would take the design
    rollouts (the diagnosis's included) over it.

    ``tied``: the cause names a diagnosis at ``values`` already reported as indistinguishable;
    then only those are probed and refitted again (:func:`indistinguishable_set`).

    Returns:
        DesignResult (``score_before`` 0, ``score_after`` the chosen separation, σ; the condition
        numbers NaN), or None when the diagnosis does not report an indistinguishable set.

    Raises:
        ValueError: no candidate could be evaluated.
    """
    ctx, members = indistinguishable_set(objective, values, parameters, names=tied)
    if len(members) < 2:
        return None
    notes: list[str] = []
    table, best = [], None
    per_candidate = 1 + len(ctx.u0) + sum(1 + len(m.parts) for m in members)
    for cfg in (candidates if candidates is not None else candidate_profiles(limits)):
        if max_rollouts is not None and ctx.rollouts + per_candidate > max_rollouts:
            notes.append(f"design stopped after {len(table)} candidate(s): its rollout allowance ({max_rollouts}) "
                         "is spent")
            break
        try:
            prof, exc, clip = validate_profile(cfg, limits)
        except ExcitationRefused as err:
            notes.append(f"candidate refused: {err}")
            continue
        notes.extend(clip)
        score, pairs = separation(ctx, members, exc)
        table.append({"profile": prof, "score": score if math.isfinite(score) else -math.inf,
                      "condition": math.nan, "failed": not math.isfinite(score),
                      "pairs": [list(p) for p in pairs]})
        if math.isfinite(score) and (best is None or score > best[0]):
            best = (score, prof, exc, pairs)
    objective.twin.set_parameters(objective.measurement.split(objective.parameters.complete(values))[0])
    if best is None:
        raise ValueError("design: no candidate excitation could be evaluated for the indistinguishable causes")
    score, prof, exc, pairs = best
    if max_rollouts is None or ctx.rollouts + per_candidate + 2 * _CHECK_PAIRS * _CHECK_EVALUATIONS * (
            1 + per_candidate) <= max_rollouts:  # the chosen trial's closest pairs refitted for real (:func:`separation`)
        checked, pairs_checked = separation(ctx, members, exc, check_pairs=_CHECK_PAIRS,
                                            check_evaluations=_CHECK_EVALUATIONS)
        if math.isfinite(checked):
            score, pairs = checked, pairs_checked
            notes.append(f"the {min(_CHECK_PAIRS, len(pairs))} closest pair(s) on the chosen trial refitted to each "
                         "other's prediction (not only linearised)")
    else:
        notes.append("the chosen trial's separation is linearised: the design's rollout allowance leaves no room to "
                     "refit its closest pairs to each other's prediction")
    names = [m.cause.name for m in members]
    weakest = min(pairs, key=lambda p: p[2])
    rationale = (f"{' and '.join(names)} explain the training residual equally well; a {_describe(prof)} separates "
                 f"their predictions by {score:.3g} σ after refitting the free parameters (the closest pair, "
                 f"{weakest[0]} vs {weakest[1]}). Chosen among {len(table)} candidate excitations within the rig's "
                 f"limits; {ctx.rollouts} design rollouts.")
    if score < SEPARATES_SIGMA:
        rationale += (" No candidate separates them by 3 σ: on this rig they may be the same effect (e.g. a link's "
                      "inertia about a single hinge and the joint's armature); the model cannot tell them apart.")
    return DesignResult(prof, exc, "separation", names, 0.0, score, math.nan, math.nan, table, ctx.rollouts,
                        rationale, notes)
