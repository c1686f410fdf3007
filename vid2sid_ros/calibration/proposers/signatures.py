"""Measurable dynamic signatures of a keypoint trajectory.

What an engineer reads off two videos before touching a parameter: how fast it
oscillates, how quickly the ringing dies, how far it swings, how late it follows the
command, where it settles and how much command it takes before it moves at all. Each
signature is measured per trial and keypoint on the scalar displacement
``y(t) = (p(t) − p_rest) · a`` along the principal axis ``a`` of the *real* keypoint's
motion (the same axis is used for the sim, so the two are comparable).

=====================  =====  =============================================================
signature              unit   measurement
=====================  =====  =============================================================
dominant_frequency     Hz     peak of the Hann-windowed spectrum of the velocity dy/dt
                              (the velocity of a step response is the impulse response,
                              so this is the damped natural frequency), parabolic
                              interpolation between bins
decay_rate             1/s    σ of the free response after the last command change:
                              least-squares slope of ln|peak| per half-cycle (logarithmic
                              decrement), or of ln|y − y_final| when it does not ring
damping_ratio          1      σ / sqrt(σ² + ω_d²), ω_d from the half-cycle spacing
                              (log-decrement method; e.g. Inman, *Engineering Vibration*, §1.6)
ring_frequency         Hz     ω_d / 2π of that free response (mean zero-crossing spacing)
peak_amplitude         px*    max |y|
rms_amplitude          px*    standard deviation of y
steady_state_offset    px*    mean of y over the last 15 % of the trial, when the command is
                              constant there (otherwise it is not a steady state)
phase_lag              s      lag in [0, 1 s] maximising |cross-correlation| of command and y
onset_delay            s      time from the first command change until |y| first exceeds
                              5 % of the real peak amplitude (friction, inertia)
dead_band              cmd    |command| at that onset (the command needed to break away)
=====================  =====  =============================================================

px* = in the trajectory's own unit: px for image keypoints, m for 3-D points, rad or m for
joints (``Signature.unit``).

Non-measurable signatures (no ringing, nothing moves, too few valid samples) are NaN
and are simply left out of comparisons. :func:`compare_signatures` turns sim/real pairs
into dimensionless discrepancies: log ratios for positive quantities, differences
scaled by the real motion's amplitude, period or command range for the others.
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ...core.excitation import Excitation
from ...core.trajectory import DEFAULT_NOISE, Trajectory, align

__all__ = ["Signature", "SIGNATURES", "measure_signatures", "measure_all", "compare_signatures",
           "SignatureDiscrepancy", "principal_axes"]

#: name -> (unit, comparison kind: "log" | "amplitude" | "period" | "command" | "absolute", plain description)
SIGNATURES: dict[str, tuple[str, str, str]] = {
    "dominant_frequency": ("Hz", "log", "dominant frequency"),
    "decay_rate": ("1/s", "log", "decay rate of the free response"),
    "damping_ratio": ("1", "absolute", "damping ratio"),
    "ring_frequency": ("Hz", "log", "ringing frequency of the free response"),
    "peak_amplitude": ("px", "log", "peak displacement"),
    "rms_amplitude": ("px", "log", "RMS displacement"),
    "steady_state_offset": ("px", "amplitude", "steady-state offset"),
    "phase_lag": ("s", "period", "lag behind the command"),
    "onset_delay": ("s", "period", "delay before it starts moving"),
    "dead_band": ("cmd", "command", "command needed before it moves (dead-band)"),
}

#: name -> comparison kind (:data:`SIGNATURES`)
_KINDS: dict[str, str] = {name: kind for name, (_, kind, _) in SIGNATURES.items()}


@dataclass(frozen=True)
class Signature:
    """One measured signature.

    Attributes:
        trial: trial id (excitation name). keypoint: keypoint name. name: key of :data:`SIGNATURES`.
        value: measured value in ``unit`` (NaN if not measurable).
        motion_unit: the unit of the measured trajectory (px, m, rad); amplitudes are in it.
    """

    trial: str
    keypoint: str
    name: str
    value: float
    motion_unit: str = "px"

    @property
    def unit(self) -> str:
        """The value's unit: the table's, with ``px`` replaced by the trajectory's unit."""
        u = SIGNATURES[self.name][0]
        return self.motion_unit if u == "px" else u

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.trial, self.keypoint, self.name)

    def describe(self) -> str:
        """E.g. ``"dominant frequency of tip in chirp_0.3-3Hz"``."""
        return f"{SIGNATURES[self.name][2]} of {self.keypoint} in {self.trial}"


def principal_axes(traj: Trajectory) -> np.ndarray:
    """Unit principal direction of each keypoint's motion, shape (K, D) (D = 2 for images).

    The sign is chosen so that the largest excursion from rest is positive.
    Falls back to the first axis for a keypoint that never moves.
    """
    D = traj.keypoints.shape[2]
    out = np.zeros((traj.num_keypoints, D))
    for k in range(traj.num_keypoints):
        p = traj.keypoints[:, k][traj.valid[:, k]]
        if p.shape[0] < 3:
            out[k] = np.eye(D)[0]
            continue
        d = p - p.mean(axis=0)
        _, _, vt = np.linalg.svd(d, full_matrices=False)
        a = vt[0]
        y = (p - p[0]) @ a
        if y[np.argmax(np.abs(y))] < 0:
            a = -a
        out[k] = a
    return out


def _fill(y: np.ndarray) -> np.ndarray | None:
    ok = np.isfinite(y)
    if ok.sum() < max(8, 0.5 * y.size):
        return None
    if ok.all():
        return y
    idx = np.arange(y.size)
    return np.interp(idx, idx[ok], y[ok])


def _command(excitation: Excitation | None, n: int) -> np.ndarray | None:
    if excitation is None:
        return None
    v = np.asarray(excitation.values, float)
    col = int(np.argmax(np.std(v, axis=0)))
    u = v[:, col]
    if u.shape[0] < n:
        u = np.concatenate([u, np.full(n - u.shape[0], u[-1])])
    return u[:n]


def _parabolic_peak(mag: np.ndarray, i: int) -> float:
    if 0 < i < mag.size - 1:
        a, b, c = mag[i - 1], mag[i], mag[i + 1]
        den = a - 2 * b + c
        if den != 0:
            return i + 0.5 * (a - c) / den
    return float(i)


@functools.lru_cache(maxsize=64)
def _spectrum_tables(n: int, rate: float) -> tuple[int, np.ndarray, np.ndarray]:
    """``(nfft, Hann window (n,), bins below 1.5 cycles per record (nfft // 2 + 1,) bool)`` of an
    n-sample record at ``rate`` Hz: what :func:`_dominant_frequencies` needs of n and the rate alone
    (read-only arrays, kept for the next record of that length)."""
    nfft = int(2 ** math.ceil(math.log2(8 * n)))
    window = np.hanning(n)
    low = np.fft.rfftfreq(nfft, 1.0 / rate) < 1.5 * rate / n
    window.setflags(write=False)
    low.setflags(write=False)
    return nfft, window, low


def _gradient(y: np.ndarray) -> np.ndarray:
    """``np.gradient`` of each record along the last axis of ``y`` (..., n), n >= 2, at unit spacing, to the
    bit: central differences inside, one-sided at both ends (without ``np.gradient``'s argument handling)."""
    g = np.empty_like(y)
    g[..., 1:-1] = (y[..., 2:] - y[..., :-2]) / 2.0
    g[..., 0] = y[..., 1] - y[..., 0]
    g[..., -1] = y[..., -1] - y[..., -2]
    return g


def _mean(y: np.ndarray) -> np.float64:
    """``np.mean(y)`` of a 1-D float record, to the bit (numpy's ``_mean``: the sum over n)."""
    return np.add.reduce(y) / y.size


def _std(y: np.ndarray) -> np.float64:
    """``np.std(y)`` of a 1-D float record, to the bit: the same sums in the same order (numpy's ``_var``:
    the mean as the sum over n, the squared deviations summed over n, the square root), without
    ``np.std``'s argument handling."""
    n = y.size
    x = y - np.add.reduce(y) / n
    np.multiply(x, x, out=x)
    return np.sqrt(np.add.reduce(x) / n)


def _dominant_frequencies(Y: np.ndarray, rate: float) -> list[float]:
    """The dominant frequency, Hz, of each record of ``Y`` (R, n), n >= 2 (module docstring; NaN where the
    velocity is all but zero or the spectrum has no peak above the lowest bins). Each row's value is the one
    of the row alone to the bit: row-wise the same sums (contiguous rows) and transforms."""
    n = Y.shape[1]
    V = _gradient(Y)
    V *= rate
    still = np.all(np.abs(V) <= 1e-8, axis=1)  # np.allclose(v, 0)
    nfft, window, low = _spectrum_tables(n, float(rate))
    spec = np.abs(np.fft.rfft((V - (np.add.reduce(V, axis=1) / n)[:, None]) * window, nfft))
    spec[:, low] = 0.0
    out = []
    for row, i, s in zip(spec, np.argmax(spec, axis=1).tolist(), still.tolist()):
        out.append(math.nan if s or row[i] <= 0 else float(_parabolic_peak(row, i) * rate / nfft))
    return out


@dataclass(frozen=True)
class _CommandFacts:
    """What the signatures of every keypoint of one trajectory read off its command ``u`` (T,) alone,
    computed once per trajectory.

    Attributes:
        u: the command at each frame (T,). first_cmd: index of the first frame whose command differs
        from the first (T when it never changes). free_start: index of the first frame after the last
        command change (0 without one). steady_tail: whether the command is constant over the last 15 %
        of the frames. unit_u: the command centred and divided by its standard deviation (T,), None
        when it is constant.
    """

    u: np.ndarray
    first_cmd: int
    free_start: int
    steady_tail: bool
    unit_u: np.ndarray | None

    @functools.cached_property
    def lag_spectrum(self) -> tuple[int, np.ndarray]:
        """``(nfft, conj(rfft(unit_u, nfft)))``: the transform the lag's cross-correlation multiplies every
        keypoint's by (:func:`_phase_lags`; nfft the power of two >= 2T - 1: no wrap-around). Requires
        ``unit_u``."""
        nfft = 1 << (2 * self.unit_u.size - 1).bit_length()
        return nfft, np.conj(np.fft.rfft(self.unit_u, nfft))

    @classmethod
    def of(cls, u: np.ndarray) -> "_CommandFacts":
        scale = max(float(np.max(np.abs(u))), 1e-12)
        moving = np.nonzero(np.abs(u - u[0]) > 1e-9 * scale)[0]
        changes = np.nonzero(np.abs(np.diff(u)) > 1e-9 * scale)[0]
        tail = max(2, int(round(0.15 * u.size)))
        sd = np.std(u)
        return cls(u=u, first_cmd=int(moving[0]) if moving.size else u.size,
                   free_start=int(changes[-1]) + 1 if changes.size else 0,
                   steady_tail=bool(np.ptp(u[-tail:]) <= 1e-9 * scale),
                   unit_u=None if sd == 0 else (u - u.mean()) / sd)


def _free_response(y: np.ndarray, cmd: _CommandFacts | None, rate: float, floor_px: float
                   ) -> tuple[float, float, float]:
    """(decay_rate 1/s, damping_ratio, ring_frequency Hz) of the response after the last command change."""
    nan3 = (math.nan, math.nan, math.nan)
    if cmd is None:
        return nan3
    seg = y[cmd.free_start:]
    if seg.size < 10:
        return nan3
    tail = max(3, seg.size // 5)
    e = seg - _mean(seg[-tail:])
    ae = np.abs(e)
    amp0 = float(np.max(ae))
    if amp0 < 3 * floor_px:
        return nan3
    # half-cycles between sign changes; peak |e| of each (its time j / rate, as np.arange(n)[j] / rate)
    sign = np.sign(e)
    zc = np.nonzero(sign[1:] * sign[:-1] < 0)[0] + 1
    bounds = [0, *zc.tolist(), seg.size]
    peaks_t, peaks_a = [], []
    above = max(floor_px, 0.03 * amp0)
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b - a < 2:
            continue
        j = a + int(np.argmax(ae[a:b]))
        if ae[j] > above:
            peaks_t.append(j / rate)
            peaks_a.append(ae[j])
    if len(peaks_t) >= 3 and len(zc) >= 2:
        sigma = -float(np.polyfit(peaks_t, np.log(peaks_a), 1)[0])
        half = float(np.mean(np.diff(zc))) / rate
        wd = math.pi / half if half > 0 else math.nan
        zeta = sigma / math.sqrt(sigma ** 2 + wd ** 2) if math.isfinite(wd) and sigma > 0 else math.nan
        return (sigma if sigma > 0 else math.nan), zeta, (wd / (2 * math.pi) if math.isfinite(wd) else math.nan)
    mask = ae > max(floor_px, 0.05 * amp0)
    mask[:int(np.argmax(ae))] = False
    if mask.sum() >= 4:
        sigma = -float(np.polyfit(np.nonzero(mask)[0] / rate, np.log(ae[mask]), 1)[0])
        return (sigma if sigma > 0 else math.nan), math.nan, math.nan
    return nan3


def _phase_lags(Y: np.ndarray, means: np.ndarray, stds: np.ndarray, cmd: _CommandFacts | None, rate: float
                ) -> list[float]:
    """Lag in [0, 1 s] behind the command, s, of each record of ``Y`` (R, n) (module docstring), given each
    row's mean and standard deviation (R,); NaN without a varying command or for a constant row. Each row's
    value is the one of the row alone to the bit (row-wise transforms)."""
    out = [math.nan] * Y.shape[0]
    if cmd is None or cmd.unit_u is None:
        return out
    n = cmd.unit_u.size
    max_lag = min(int(rate * 1.0), n // 3)
    rows = [r for r, sd in enumerate(stds.tolist()) if sd != 0]
    if max_lag < 2 or not rows:
        return out
    B = (Y[rows] - means[rows, None]) / stds[rows, None]
    # the normalised cross-correlation sum_i a[i] b[i+k] / (n - k) of every lag k at once, through the FFT
    # (zero-padded to at least 2n: no wrap-around); one product per lag in a Python loop cost ~2 ms per keypoint
    nfft, a_spec = cmd.lag_spectrum
    xc = np.fft.irfft(a_spec * np.fft.rfft(B, nfft), nfft)[:, : max_lag + 1]
    C = np.abs(xc) / (n - np.arange(max_lag + 1))
    for r, c, i in zip(rows, C, np.argmax(C, axis=1).tolist()):
        out[r] = float(_parabolic_peak(c, i) / rate)
    return out


def _phase_lag(y: np.ndarray, cmd: _CommandFacts | None, rate: float, y_std: float) -> float:
    """Lag in [0, 1 s] of ``y`` (T,) (standard deviation ``y_std``) behind the command, s (module docstring;
    :func:`_phase_lags` of one record)."""
    return _phase_lags(y[None], np.array([_mean(y)]), np.array([y_std], float), cmd, rate)[0]


def _onset(y: np.ndarray, cmd: _CommandFacts, thr: float, rate: float) -> tuple[float, float]:
    """``(onset_delay s, dead_band cmd)``: when ``|y|`` first exceeds ``thr`` after the first command change
    (linearly interpolated between samples) and the command then; NaN when it never does."""
    first_cmd, u = cmd.first_cmd, cmd.u
    if first_cmd >= y.size:
        return math.nan, math.nan
    above = np.nonzero(np.abs(y[first_cmd:]) > thr)[0]
    if not above.size:
        return math.nan, math.nan
    j = first_cmd + int(above[0])
    frac = 0.0  # sub-sample crossing (linear interpolation) keeps the onset continuous
    if j > first_cmd:
        a0, a1 = abs(y[j - 1]), abs(y[j])
        frac = (thr - a0) / (a1 - a0) if a1 > a0 else 0.0
    t_on = (j - 1 + frac) if j > first_cmd else float(j)
    jj = min(int(math.floor(t_on)), u.size - 1)
    w = t_on - math.floor(t_on)
    u_on = u[jj] * (1 - w) + u[min(jj + 1, u.size - 1)] * w
    return float((t_on - first_cmd) / rate), float(abs(u_on))


def _displacement(p: np.ndarray, ok: np.ndarray, axis: np.ndarray, cmd: _CommandFacts | None) -> np.ndarray | None:
    """``y = (p − p_rest) · a`` of one keypoint's samples ``p`` (T, D) (``ok`` (T,): valid) along ``axis``
    (D,), gaps interpolated; None when too few samples are valid. ``p_rest``: the median of the valid
    samples before the first command change (at least 3), else the first valid sample."""
    rest_idx = np.nonzero(ok)[0]
    if not rest_idx.size:
        return None
    rest = p[rest_idx[0]]
    if cmd is not None:
        before = rest_idx[rest_idx < max(cmd.first_cmd, 1)]
        if before.size >= 3:
            rest = np.median(p[before], axis=0)
    return _fill((p - rest) @ axis)


def _displacements(traj: Trajectory, axes: np.ndarray, cmd: _CommandFacts | None) -> tuple[list[int], np.ndarray]:
    """``(keypoints, Y)``: the keypoints with a displacement (:func:`_displacement` of each keypoint of ``traj``
    along its axis in ``axes`` (K, D)) and their displacements, one per row of ``Y`` (R, T) (C-contiguous).

    When every sample is valid (and T >= 8), every keypoint's rest point and projection are taken at once:
    the same medians, and the same matrix-vector products, as keypoint by keypoint."""
    kp, ok = traj.keypoints, traj.valid
    T, K = ok.shape
    if K and T >= 8 and ok.all():
        nb = min(max(cmd.first_cmd, 1), T) if cmd is not None else 0
        rest = np.median(kp[:nb], axis=0) if nb >= 3 else kp[0]
        d = np.ascontiguousarray((kp - rest).transpose(1, 0, 2))  # (K, T, D): each keypoint's (p - rest)
        Y = np.matmul(d, np.ascontiguousarray(axes, float)[:, :, None])[:, :, 0]
        if np.isfinite(Y).all():
            return list(range(K)), Y
    ys = [_displacement(kp[:, k], ok[:, k], axes[k], cmd) for k in range(K)]
    rows = [k for k, y in enumerate(ys) if y is not None]
    return rows, (np.stack([ys[k] for k in rows]) if rows else np.zeros((0, T)))


def _signature_rows(Y: np.ndarray, cmd: _CommandFacts | None, rate: float, noise_floor_px: float,
                    onset_threshold_px: Sequence[float | None]) -> list[dict[str, float]]:
    """Every signature (:data:`SIGNATURES` order) of each keypoint's displacement, one per row of ``Y`` (R, T)
    (C-contiguous, T >= 8) along its axis, ``onset_threshold_px`` (R,) its onset threshold or None (5 % of
    its peak). Each row's values are the row's alone to the bit: whatever is taken for all rows at once
    (spectra, sums, lags) is computed row by row in the same order."""
    n = Y.shape[1]
    dominant = _dominant_frequencies(Y, rate)
    peaks = np.max(np.abs(Y), axis=1).tolist()
    means = np.add.reduce(Y, axis=1) / n  # _mean and _std of each row
    X = Y - means[:, None]
    np.multiply(X, X, out=X)
    stds = np.sqrt(np.add.reduce(X, axis=1) / n)
    steady = [math.nan] * Y.shape[0]
    if cmd is None or cmd.steady_tail:  # only under a constant command
        tail = Y[:, -max(2, int(round(0.15 * n))):]
        steady = (np.add.reduce(tail, axis=1) / tail.shape[1]).tolist()
    lags = _phase_lags(Y, means, stds, cmd, rate)
    out = []
    for r, (y, peak, rms) in enumerate(zip(Y, peaks, stds.tolist())):
        vals = dict.fromkeys(SIGNATURES, math.nan)
        vals["dominant_frequency"], vals["peak_amplitude"], vals["rms_amplitude"] = dominant[r], peak, rms
        vals["steady_state_offset"], vals["phase_lag"] = steady[r], lags[r]
        vals["decay_rate"], vals["damping_ratio"], vals["ring_frequency"] = _free_response(y, cmd, rate,
                                                                                           noise_floor_px)
        if cmd is not None:
            thr = onset_threshold_px[r] if onset_threshold_px[r] is not None else 0.05 * peak
            vals["onset_delay"], vals["dead_band"] = _onset(y, cmd, max(float(thr), noise_floor_px), rate)
        out.append(vals)
    return out


def measure_signatures(traj: Trajectory, excitation: Excitation | None = None, *,
                       axes: np.ndarray | None = None, onset_threshold_px: Sequence[float] | None = None,
                       noise_floor_px: float | None = None) -> list[Signature]:
    """All signatures of one trajectory.

    Args:
        traj: keypoints (T, K, D) in the trajectory's unit; frame k is command step ``traj.steps[k]``.
        excitation: the command that drove it (needed for lag, onset, dead-band, decay).
        axes: (K, D) projection axes (default: this trajectory's :func:`principal_axes`).
        onset_threshold_px: per keypoint |y| threshold for the onset, trajectory unit (default
            5 % of this trajectory's peak); pass the real trial's so sim and real use the same one.
        noise_floor_px: amplitudes below this (trajectory unit) are treated as noise; default
            half the unit's :data:`~vid2sid_ros.core.trajectory.DEFAULT_NOISE` (0.5 px,
            0.5 mm, 0.0025 rad).

    Returns:
        ``len(SIGNATURES) * K`` signatures (NaN where not measurable).
    """
    u_full = _command(excitation, int(traj.steps.max()) + 1 if traj.num_frames else 0)
    return _measure(traj, _command_facts(u_full, traj.steps), None if excitation is None else excitation.rate,
                    axes=axes, onset_threshold_px=onset_threshold_px, noise_floor_px=noise_floor_px)


def _command_facts(u_full: np.ndarray | None, steps: np.ndarray) -> _CommandFacts | None:
    """The command facts of frames at command ``steps`` (T,) of the command ``u_full``; None without a
    command or without a frame (no keypoint is measured then)."""
    if u_full is None or not u_full.size or not steps.size:
        return None
    return _CommandFacts.of(u_full[np.clip(steps, 0, u_full.size - 1)])


def _measure(traj: Trajectory, cmd: _CommandFacts | None, rate: float | None, *, axes: np.ndarray | None,
             onset_threshold_px: Sequence[float] | None, noise_floor_px: float | None) -> list[Signature]:
    """:func:`measure_signatures` with the command's facts at ``traj``'s frames (None: no excitation) and
    the excitation's rate, Hz (None: from the frame times) given."""
    units = traj.units
    if noise_floor_px is None:
        noise_floor_px = 0.5 * max(DEFAULT_NOISE.get(u, 1.0) for u in units) if traj.num_keypoints else 0.5
    if rate is None:
        rate = 1.0 / float(np.median(np.diff(traj.time))) if traj.num_frames > 1 else 1.0
    axes = principal_axes(traj) if axes is None else np.asarray(axes, float)
    rows, Y = _displacements(traj, axes, cmd)
    table = [dict.fromkeys(SIGNATURES, math.nan) for _ in traj.names]
    if rows:
        thr = [None if onset_threshold_px is None else onset_threshold_px[k] for k in rows]
        for k, vals in zip(rows, _signature_rows(Y, cmd, rate, noise_floor_px, thr)):
            table[k] = vals
    out: list[Signature] = []
    for k, (name, vals) in enumerate(zip(traj.names, table)):
        out.extend(Signature(traj.trial_id, name, s, float(v), units[k]) for s, v in vals.items())
    return out


def measure_all(sim: Sequence[Trajectory], real: Sequence[Trajectory],
                excitations: Sequence[Excitation | None]) -> tuple[list[Signature], list[Signature]]:
    """Signatures of paired sim/real trials, sim measured on the real trials' axes and thresholds.

    The real side (its axes, onset thresholds and signatures) depends only on the real frames paired
    with the sim's and on the excitation: it is measured once and kept (:func:`_real_side`) for the
    next call with the same frames, as every evaluation of one calibration makes.

    Returns:
        ``(sim_signatures, real_signatures)``, same order and keys.
    """
    s_out, r_out = [], []
    for s, r, e in zip(sim, real, excitations):
        r_al, s_al = align(r, s)
        axes, thr, rs, cmd = _real_side(r_al, e)
        # the pair's frames are at the same command steps (aligned by step): the real side's command facts
        ss = _measure(s_al, cmd, None if e is None else e.rate, axes=axes, onset_threshold_px=thr,
                      noise_floor_px=None)
        s_out.extend(ss)
        r_out.extend(rs)
    return s_out, r_out


#: the real sides :func:`_real_side` keeps (a calibration has one per training trial; a few more hold the
#: identifiability and diagnosis objectives' trials)
_REAL_SIDES_KEPT = 32
_REAL_SIDES: dict[tuple, tuple[np.ndarray, list[float], list[Signature], _CommandFacts | None]] = {}
_REAL_SIDES_LOCK = threading.Lock()


def _real_side(r_al: Trajectory, e: Excitation | None
               ) -> tuple[np.ndarray, list[float], list[Signature], _CommandFacts | None]:
    """``(axes (K, D), onset thresholds (K,), signatures, command facts)`` of an aligned real trajectory:
    its principal axes, 5 % of each keypoint's peak amplitude, its signatures on those axes and thresholds,
    and the facts of the command at its frames (:class:`_CommandFacts`, None without an excitation).

    A pure function of the trajectory's and the excitation's contents, kept by content (every array
    and label :func:`measure_signatures` reads) for the next call."""
    key = (r_al.trial_id, tuple(r_al.names), tuple(r_al.units), r_al.keypoints.shape, r_al.time.tobytes(),
           r_al.steps.tobytes(), r_al.keypoints.tobytes(), r_al.valid.tobytes(),
           None if e is None else (float(e.rate), np.asarray(e.values).shape, np.asarray(e.values, float).tobytes()))
    with _REAL_SIDES_LOCK:
        kept = _REAL_SIDES.get(key)
    if kept is not None:
        return kept[0].copy(), list(kept[1]), list(kept[2]), kept[3]
    axes = principal_axes(r_al)
    cmd = _command_facts(_command(e, int(r_al.steps.max()) + 1 if r_al.num_frames else 0), r_al.steps)
    rate = None if e is None else e.rate
    rs = _measure(r_al, cmd, rate, axes=axes, onset_threshold_px=None, noise_floor_px=None)
    peaks = [x.value for x in rs if x.name == "peak_amplitude"]
    thr = [0.05 * p if math.isfinite(p) else 0.0 for p in peaks]
    rs = _measure(r_al, cmd, rate, axes=axes, onset_threshold_px=thr, noise_floor_px=None)
    with _REAL_SIDES_LOCK:
        if len(_REAL_SIDES) >= _REAL_SIDES_KEPT:
            _REAL_SIDES.pop(next(iter(_REAL_SIDES)))  # the oldest
        _REAL_SIDES[key] = (axes.copy(), list(thr), list(rs), cmd)
    return axes, thr, rs, cmd


@dataclass(frozen=True)
class SignatureDiscrepancy:
    """A sim/real signature pair and its dimensionless discrepancy ``d`` (sim relative to real)."""

    sim: Signature
    real: Signature
    d: float

    @property
    def key(self) -> tuple[str, str, str]:
        return self.sim.key


def compare_signatures(sim: Sequence[Signature], real: Sequence[Signature]) -> dict[tuple[str, str, str], SignatureDiscrepancy]:
    """Dimensionless discrepancies for every signature measurable on both sides.

    ``log`` kinds: ``ln(sim / real)``; ``amplitude``: difference / real peak amplitude of
    the same keypoint and trial; ``period``: difference × real dominant frequency (cycles);
    ``command``: difference / max dead-band scale (1 command unit); ``absolute``: difference.
    """
    # the real peak amplitudes and dominant frequencies the amplitude and period kinds are scaled by
    ref: dict[tuple[str, str, str], float] = {(x.trial, x.keypoint, x.name): x.value for x in real
                                              if x.name in ("peak_amplitude", "dominant_frequency")}
    out = {}
    isfinite, log, nan = math.isfinite, math.log, math.nan
    for s, r in zip(sim, real):
        sv, rv = s.value, r.value
        if not (isfinite(sv) and isfinite(rv)):
            continue
        kind = _KINDS[s.name]
        if kind == "log":
            if sv <= 0 or rv <= 0:
                continue
            d = log(sv / rv)
        elif kind == "amplitude":
            amp = ref.get((s.trial, s.keypoint, "peak_amplitude"), nan)
            if not (isfinite(amp) and amp > 0):
                continue
            d = (sv - rv) / amp
        elif kind == "period":
            f = ref.get((s.trial, s.keypoint, "dominant_frequency"), nan)
            if not (isfinite(f) and f > 0):
                continue
            d = (sv - rv) * f
        else:
            d = sv - rv
        out[(s.trial, s.keypoint, s.name)] = SignatureDiscrepancy(s, r, float(d))
    return out


def discrepancy_vector(table: Mapping[tuple[str, str, str], SignatureDiscrepancy],
                       keys: Sequence[tuple[str, str, str]]) -> np.ndarray:
    """Discrepancies in ``keys`` order, NaN where a key is missing, shape (len(keys),)."""
    return np.array([table[k].d if k in table else math.nan for k in keys])
