"""Identifiability: can this excitation tell these parameters apart?

The sensitivity matrix ``J`` (M x n) holds the derivative of every tracked keypoint
coordinate (px) with respect to each free parameter in normalised coordinates
(``ParameterSet.to_unit_vector``: 0..1 across the bounds, linear or log), by finite
differences over twin rollouts. Its singular value decomposition ``J / sqrt(M) = U S Vᵀ``
says how many px (RMS over samples) a unit move along each right-singular direction
``V[:, i]`` changes the keypoints. A direction with a tiny singular value is a parameter
combination the excitation barely observes; a large condition number
``S[0] / S[-1]`` means two or more parameters trade off (e.g. stiffness against actuator
gain when only the static deflection is seen, or Young's modulus, density and gain when
only their ratios shape the motion). Such a spec cannot be calibrated to the *true*
parameters from this data, whatever the optimiser; the check says which combination
and warns (:class:`IdentifiabilityWarning`) so the user can add an excitation (a step
for static gains, a higher chirp band for inertia and damping) or freeze a parameter.

Three tests report a direction ``V[:, i]``: the condition number ``S[0] / S[i]`` exceeds
``condition_threshold`` (default 1e3); a move of 10 % of the range along it changes the
keypoints by less than ``min_effect_px`` RMS (default 0.05 px); or ``S[i]`` is not at least
``FD_ERROR_FACTOR`` (3) times the finite-difference error along it, estimated Richardson-style as the
change of the central difference when the step is doubled (``D(2h) − D(h)``). That
estimate ignores curvature, which a central difference cancels (so strongly nonlinear
but well-observed rigs such as the pendulum are not flagged), and picks up both the
third-derivative error and jumps of the response. The last test catches exact
degeneracies that a simulator's discontinuities hide: e.g. the PyElastica tentacle with
Young's modulus, density and gain free is exactly invariant to scaling all three, but
its integration step count changes with E/ρ, so the finite differences at the default
step 0.01 show a spurious 0.88 px/unit singular value (condition number only 43) next
to an estimated error of 0.61 px/unit along that direction.

The same matrix gives the Gauss–Newton covariance of the least-squares estimate,
``cov = s² (JᵀJ)⁻¹`` with ``s² = Σr² / (M − n)`` (e.g. Ljung, *System Identification*,
2nd ed., §9.3; the MuJoCo ``sysid`` module reports the same), turned into a
per-parameter interval in the parameter's unit. Residuals of a video are
not independent (tracking errors and small model errors persist over several frames), so
the covariance is multiplied by the residuals' integrated autocorrelation time
``τ = 1 + 2 Σ_k ρ_k`` (per trial, keypoint and coordinate over the frame lag k, summed
until the first non-positive ρ_k, at most 10 frames; Sokal's effective-sample-size
correction, ``M_eff = M / τ``): :func:`correlation_time`; and, per parameter, never below the block
sandwich (cluster-robust) covariance over blocks of ``2τ`` frames (:func:`residual_blocks`),
which also covers errors that grow with the speed or that the keypoints of a frame share.

The 95 % interval is ``c ± 1.96 σ`` in normalised coordinates (mapped to the parameter's unit
through its linear or log scale, clipped to the bounds), centred on ``c = u − (JᵀJ)⁻¹Jᵀr``: the
least-squares optimum one Gauss–Newton step from the analysed point ``u`` (a calibration that
stopped at its budget has not reached it). ``uncertainty`` is the std of the smallest interval
symmetric about the analysed value that holds it, ``max(|hi − v|, |v − lo|) / 1.96``.

The twin's keypoints are projected model points, the robot's come out of a camera and a
tracker. The tracker's error is partly systematic (a function of pose and motion: pixel grid,
exposure, optics), the fit absorbs it into the parameters, and no residual-based covariance
sees it. With ``twin_camera`` (:mod:`~vid2sid_ros.calibration.tracker_bias`) the check films
the twin at the point like the robot and adds the tracker's bias ``b`` to the twin's
keypoints, so ``r`` above is the measurement-consistent residual: the centre moves by
``−(JᵀJ)⁻¹Jᵀb`` (the linearised bias of the estimate) and ``s²``, ``τ`` and the sandwich are
those of the consistent model. Measured by ``bench/bench_coverage.py`` over 20 sim2sim seeds of
the finger with camera noise and the marker tracker (docs/benchmarks.md): 81 % coverage without it, inside
90–99 % with it. Treat the intervals as a lower bound when the residual diagnosis reports a
misspecification.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.parameters import ParameterSet
from ..core.trajectory import DEFAULT_NOISE, Trajectory, display_unit
from .objective import TrialObjective, residual_vector, trajectory_vector
from .proposers.proposer import Evaluation

__all__ = ["correlation_time", "residual_correlation_time", "residual_blocks",
    "IdentifiabilityWarning",
    "IdentifiabilityReport",
    "finite_difference_jacobian",
    "analyse_jacobian",
    "stated_interval",
    "state_intervals",
    "check_identifiability",
    "unit_derivatives",
]

#: default condition number above which the spec is reported as poorly identifiable.
DEFAULT_CONDITION_THRESHOLD = 1.0e3
#: default smallest RMS keypoint change (px) a 10 %-of-range move must cause to count as observed.
DEFAULT_MIN_EFFECT_PX = 0.05
#: a singular value must exceed the finite-difference error along its direction by this factor
FD_ERROR_FACTOR = 3.0
#: two-sided 95 % quantile of the standard normal distribution
Z95 = 1.959963984540054


class IdentifiabilityWarning(UserWarning):
    """Some parameter combination is (nearly) unobservable with the given excitations."""


@dataclass
class IdentifiabilityReport:
    """Result of an identifiability check at one parameter point.

    Attributes:
        names: free parameter names (column order of the Jacobian).
        point: the full parameter values analysed (SI units).
        sensitivity_px: ``{name: RMS keypoint change in px for a move of 10 % of its normalised range}``.
        singular_values: of ``J / sqrt(M)``, px RMS per unit normalised move, descending.
        condition_number: ``singular_values[0] / singular_values[-1]`` (inf if the last is 0).
        weak_directions: poorly observed combinations, each
            ``{"singular_value": px, "combination": {name: loading}}`` (unit-norm loadings).
        warning: the human-readable warning, or None if everything is observable.
        uncertainty: ``{name: std in the parameter's unit}`` such that ``value ± 1.96·std`` is the
            smallest interval symmetric about the analysed value that holds ``interval`` (module
            docstring); empty when no residuals were available.
        rollouts: twin rollouts the check cost.
        correlation: (n, n) correlation matrix of the Gauss–Newton estimate in ``names``
            order, ``cov_ij / sqrt(cov_ii cov_jj)`` with ``cov ∝ (JᵀJ)⁻¹`` (the residual
            scale cancels); |ρ| near 1 = the data cannot tell the two parameters apart.
            Empty when the Jacobian is singular or not available.
        step: finite-difference step in normalised coordinates; ``scheme``: central|forward.
        interval: ``{name: [lower, upper]}`` the 95 % interval in the parameter's unit (module
            docstring), clipped to the bounds; empty when no residuals were available.
        centre: ``{name: value}`` the interval's centre: the least-squares optimum one
            Gauss–Newton step from the analysed point (with the tracker bias, when measured).
        interval_kind: ``{name: kind}`` (:func:`stated_interval`): ``two-sided``,
            ``one-sided (lower bound)``, ``one-sided (upper bound)``, ``not identified`` or
            ``zero width (no residual noise)``.
        interval_note: ``{name: why}`` when the interval is not simply ``centre ± 1.96σ``
            (extended to hold the identified value, truncated at a bound).
        measurement_bias: how the twin's tracker bias was measured (``applied``, ``source``,
            ``rms_px``, ``rollouts``) or why not (``applied: False``, ``reason``); empty when the
            caller did not ask (:func:`check_identifiability` ``twin_camera``).
    """

    names: list[str]
    point: dict[str, float]
    sensitivity_px: dict[str, float]
    singular_values: list[float]
    condition_number: float
    weak_directions: list[dict[str, Any]] = field(default_factory=list)
    warning: str | None = None
    uncertainty: dict[str, float] = field(default_factory=dict)
    rollouts: int = 0
    step: float = 0.0
    scheme: str = "central"
    correlation: list[list[float]] = field(default_factory=list)
    interval: dict[str, list[float]] = field(default_factory=dict)
    centre: dict[str, float] = field(default_factory=dict)
    measurement_bias: dict[str, Any] = field(default_factory=dict)
    interval_kind: dict[str, str] = field(default_factory=dict)
    interval_note: dict[str, str] = field(default_factory=dict)
    #: ``{name: (centre, half-width)}`` of the Gauss-Newton interval in normalised coordinates (not serialised)
    interval_raw: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False)
    #: the measured tracker bias per training excitation (``tracked − projected`` px trajectories,
    #: :func:`~vid2sid_ros.calibration.tracker_bias.twin_tracker_bias`), or None (not serialised; the
    #: residual diagnosis adds it to the twin's keypoints like the interval does)
    bias_trajectories: list[Any] | None = field(default=None, repr=False)
    #: forward-difference sensitivities (M, n) from the check's own probes at ``point + step`` (``point − step``
    #: at the upper bound; the measurement's unit per unit normalised move, ``names`` order, NaN where a probe
    #: failed), or None (not serialised): the residual diagnosis's free columns, measured the same way, so it
    #: takes them from here instead of rolling them out again
    forward_jacobian: np.ndarray | None = field(default=None, repr=False)

    @property
    def identifiable(self) -> bool:
        """True when no weak direction was found."""
        return self.warning is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (inf condition number becomes None)."""
        cn = self.condition_number
        return {"names": list(self.names), "point": dict(self.point), "sensitivity_px": dict(self.sensitivity_px),
                "singular_values": [float(s) for s in self.singular_values],
                "condition_number": cn if math.isfinite(cn) else None,
                "weak_directions": self.weak_directions, "warning": self.warning,
                "uncertainty": dict(self.uncertainty), "rollouts": self.rollouts, "step": self.step,
                "scheme": self.scheme, "correlation": [list(map(float, row)) for row in self.correlation],
                "interval": {k: [float(a), float(b)] for k, (a, b) in self.interval.items()},
                "centre": dict(self.centre), "measurement_bias": dict(self.measurement_bias),
                "interval_kind": dict(self.interval_kind), "interval_note": dict(self.interval_note)}


def default_min_effect(unit: str) -> float:
    """The smallest RMS change a 10 %-of-range move must cause to count as observed, in the
    measurement's ``unit``: :data:`DEFAULT_MIN_EFFECT_PX` scaled by that unit's default noise
    (:data:`~vid2sid_ros.core.trajectory.DEFAULT_NOISE`; 1.0 for a unit it does not list)."""
    return DEFAULT_MIN_EFFECT_PX * DEFAULT_NOISE.get(unit, 1.0) / DEFAULT_NOISE["px"]


def unit_derivatives(parameters: ParameterSet, values: Mapping[str, float]) -> np.ndarray:
    """d(value)/d(u) for each free parameter at ``values``, shape (n,), in the parameter's unit.

    Linear scale: ``upper − lower``; log scale: ``value · ln(upper / lower)``.
    """
    out = []
    for s in parameters.free:
        if s.scale == "log":
            out.append(float(values[s.name]) * math.log(s.upper / s.lower))
        else:
            out.append(s.upper - s.lower)
    return np.asarray(out)


def finite_difference_jacobian(
    evaluate: Callable[[Mapping[str, float]], Evaluation],
    parameters: ParameterSet,
    point: Mapping[str, float],
    vectorise: Callable[[Evaluation], np.ndarray],
    *,
    step: float = 0.01,
    scheme: str = "central",
    base: Evaluation | None = None,
    return_error: bool = False,
    evaluate_many: Callable[[Sequence[Mapping[str, float]]], Sequence[Evaluation]] | None = None,
) -> tuple:
    """Finite-difference sensitivity of a vector of keypoint samples to normalised parameters.

    Args:
        evaluate: ``values -> Evaluation`` (any rollout cost; failures allowed).
        parameters: the spec (free parameters are differentiated).
        point: full parameter values at which to differentiate (SI).
        vectorise: ``Evaluation -> (M,)`` vector (e.g. keypoints at the real-valid samples).
        step: step in normalised units; a forward step that would leave [0, 1] is taken backwards.
        scheme: ``"central"`` (2n evaluations, O(step²) error; 4n with ``return_error``,
            which also evaluates at ±2·step) or ``"forward"`` (n + 1).
        base: evaluation at ``point`` if already available (forward scheme reuses it).
        return_error: also return the finite-difference error estimate ``E``.
        evaluate_many: ``[values] -> [Evaluation]`` in the same order, for the probes (all
            planned before any is evaluated, so an executor can run them concurrently);
            default: ``evaluate`` on each in turn. Every probe is evaluated, also the ±2·step
            pair of a column whose ±step pair failed.

    Returns:
        ``(J, base_evaluation, evaluations)``, plus ``E`` with ``return_error``: J shape
        (M, n) in px per unit normalised move, NaN columns where an evaluation failed;
        E (M, n) the central difference over ±2·step minus the one over ±step (central
        scheme; zero where an evaluation failed or the bounds leave no wider step, and
        for the forward scheme): an estimate of the finite-difference error from the
        third derivative (3x it, Richardson) and from simulator discontinuities (e.g. an
        integration step count that changes with the parameters); curvature cancels.

    Raises:
        ValueError: on an unknown scheme or a non-positive step.
    """
    if scheme not in ("central", "forward"):
        raise ValueError(f"finite_difference_jacobian: scheme must be 'central' or 'forward', got {scheme!r}")
    if not step > 0:
        raise ValueError(f"finite_difference_jacobian: step must be > 0, got {step}")
    point = parameters.complete(point)
    u0 = parameters.to_unit_vector(point)
    evals: list[Evaluation] = []
    if base is None:
        base = evaluate(point)
        evals.append(base)
    y0 = vectorise(base) if not base.failed else None
    plan = _fd_plan(u0, step, scheme, return_error)

    def at(j: int, uj: float) -> dict[str, float]:
        u = u0.copy()
        u[j] = uj
        return parameters.from_unit_vector(u, point)

    points = [at(j, uj) for j, uj in plan]
    probes = list(evaluate_many(points)) if evaluate_many is not None else [evaluate(p) for p in points]
    evals += probes
    got = {k: (None if e.failed else vectorise(e)) for k, e in zip(plan, probes)}
    cols: list[np.ndarray | None] = []
    errs: list[np.ndarray | None] = []
    for j in range(len(u0)):
        if scheme == "forward":
            h = step if u0[j] + step <= 1.0 else -step
            y = got[(j, u0[j] + h)]
            cols.append(None if (y is None or y0 is None) else (y - y0) / h)
            errs.append(None)
        else:
            c, err = _central_column(got, float(u0[j]), j, step, return_error)
            cols.append(c)
            errs.append(err)
    J, E = _fd_matrices(cols, errs, y0)
    return (J, base, evals, E) if return_error else (J, base, evals)


def _fd_plan(u0: np.ndarray, step: float, scheme: str, return_error: bool) -> list[tuple[int, float]]:
    """Every probe ``(column j, its normalised value)``, planned before any is evaluated (one batch for an
    executor), in the order a column-by-column loop would: (lo, hi[, lo2, hi2]) per column, or one forward
    probe (backwards where a forward step would leave [0, 1])."""
    plan: list[tuple[int, float]] = []
    for j in range(len(u0)):
        if scheme == "central":
            plan += [(j, max(u0[j] - step, 0.0)), (j, min(u0[j] + step, 1.0))]
            if return_error:
                plan += [(j, max(u0[j] - 2 * step, 0.0)), (j, min(u0[j] + 2 * step, 1.0))]
        else:
            plan.append((j, u0[j] + (step if u0[j] + step <= 1.0 else -step)))
    return plan


def _central_column(got: Mapping[tuple[int, float], np.ndarray | None], u0j: float, j: int, step: float,
                    return_error: bool) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Column ``j``'s central difference (M,) over ±``step`` (None where a probe failed or the bounds leave
    no step) and, with ``return_error``, its error estimate (M,): the same difference over ±2·step minus it
    (None where a wider probe failed or the bounds leave no wider step)."""
    lo, hi = max(u0j - step, 0.0), min(u0j + step, 1.0)
    pair = got[(j, lo)], got[(j, hi)]
    if pair[0] is None or pair[1] is None or hi == lo:
        return None, None
    d1 = (pair[1] - pair[0]) / (hi - lo)
    if not return_error:
        return d1, None
    # the same central difference over twice the step: D(2h) - D(h) = f‴·h²/2 for a smooth
    # response (Richardson; 3x the error of D(h)), while a jump of size a in the response
    # (e.g. a changed integration step count) shows up as ~a/(4h), half its effect on D(h).
    # Curvature (f''), which the central difference cancels, does not enter.
    lo2, hi2 = max(u0j - 2 * step, 0.0), min(u0j + 2 * step, 1.0)
    pair2 = got[(j, lo2)], got[(j, hi2)]
    if pair2[0] is None or pair2[1] is None or hi2 - lo2 <= hi - lo:
        return d1, None
    return d1, (pair2[1] - pair2[0]) / (hi2 - lo2) - d1


def _fd_matrices(cols: Sequence[np.ndarray | None], errs: Sequence[np.ndarray | None],
                 y0: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``(J, E)`` (M, n) from the columns: NaN columns of J where a column is None; E zero there and where
    an error estimate is missing or not finite."""
    n = len(cols)
    m = next((c.shape[0] for c in cols if c is not None), 0 if y0 is None else y0.shape[0])
    J = np.full((m, n), np.nan)
    E = np.zeros((m, n))
    for j, (c, err) in enumerate(zip(cols, errs)):
        if c is not None:
            J[:, j] = c
        if err is not None:
            E[:, j] = np.where(np.isfinite(err), err, 0.0)
    return J, E


def correlation_time(sim: Sequence[Trajectory], real: Sequence[Trajectory], *, max_lag: int = 10) -> float:
    """Integrated autocorrelation time of the residuals sim − real, in frames (>= 1).

    ``τ = 1 + 2 Σ_{k=1}^{K} ρ_k`` with ``ρ_k`` the lag-k autocorrelation pooled over trials,
    keypoints and coordinates (samples valid in both at t and t + k), summed up to the first
    ``ρ_k <= 0`` or ``max_lag`` (Sokal's window). White residuals give 1; the Gauss–Newton
    covariance is multiplied by ``τ`` (effective sample size ``M / τ``).
    """
    from ..core.trajectory import align

    series = []
    for s_, r_ in zip(sim, real):
        ra, sa = align(r_, s_)
        m = ra.valid & sa.valid
        res = sa.keypoints - ra.keypoints
        series += [np.where(m[:, k], res[:, k, d], np.nan) for k in range(res.shape[1]) for d in range(res.shape[2])]
    return _pooled_tau(series, max_lag)


def residual_correlation_time(residuals: np.ndarray, real: Sequence[Trajectory], *, max_lag: int = 10) -> float:
    """:func:`correlation_time` of a residual vector laid out like
    :func:`~vid2sid_ros.calibration.objective.residual_vector` (the real-valid samples of each
    trial, row-major over frame, keypoint, coordinate), e.g. the linearised residuals at the
    Gauss–Newton optimum; NaN entries are gaps. Returns 1 when the length does not match.
    """
    residuals = np.asarray(residuals, float)
    series, at = [], 0
    for r_ in real:
        valid = np.asarray(r_.valid)
        d = r_.keypoints.shape[2]
        n = int(valid.sum()) * d
        if at + n > residuals.shape[0]:
            return 1.0
        full = np.full(r_.keypoints.shape, np.nan)
        full[valid] = residuals[at:at + n].reshape(-1, d)
        at += n
        series += [full[:, k, j] for k in range(full.shape[1]) for j in range(d)]
    return _pooled_tau(series, max_lag) if at == residuals.shape[0] else 1.0


def _pooled_tau(series: Sequence[np.ndarray], max_lag: int) -> float:
    """Sokal's windowed integrated autocorrelation time of series with NaN gaps, pooled (>= 1)."""
    series = [x - np.nanmean(x) for x in series if np.isfinite(x).sum() > max_lag + 2]
    if not series:
        return 1.0
    var = sum(float(np.nansum(x * x)) for x in series)
    n0 = sum(int(np.isfinite(x).sum()) for x in series)
    if var <= 0 or n0 == 0:
        return 1.0
    tau = 1.0
    for lag in range(1, max_lag + 1):
        num = cnt = 0.0
        for x in series:
            p = x[lag:] * x[:-lag]
            ok = np.isfinite(p)
            num += float(np.sum(p[ok]))
            cnt += int(ok.sum())
        if cnt == 0:
            break
        rho = (num / cnt) / (var / n0)
        if rho <= 0:
            break
        tau += 2.0 * rho
    return float(tau)


def residual_blocks(real: Sequence[Trajectory], block_frames: int) -> np.ndarray:
    """Block id of every entry of :func:`~vid2sid_ros.calibration.objective.residual_vector` (same order).

    Entries of one trial and ``block_frames`` consecutive frames share a block (all keypoints and
    coordinates of those frames), so errors shared within a frame or over neighbouring frames
    are treated as one draw.
    """
    ids = []
    base = 0
    for r in real:
        t_idx = np.nonzero(r.valid)[0]  # frame index of each valid (t, k), row-major like the residual vector
        ids.append(np.repeat(base + t_idx // max(int(block_frames), 1), r.keypoints.shape[2]))
        base += r.num_frames + 1
    return np.concatenate(ids) if ids else np.zeros(0, int)


def analyse_jacobian(
    J: np.ndarray,
    parameters: ParameterSet,
    point: Mapping[str, float],
    *,
    residuals: np.ndarray | None = None,
    fd_error: np.ndarray | None = None,
    condition_threshold: float = DEFAULT_CONDITION_THRESHOLD,
    min_effect_px: float | None = None,
    rollouts: int = 0,
    step: float = 0.0,
    scheme: str = "central",
    warn: bool = True,
    unit: str = "px",
    correlation_time_frames: float = 1.0,
    clusters: np.ndarray | None = None,
    measurement_bias: Mapping[str, Any] | None = None,
    correlation_time_of: Callable[[np.ndarray], float] | None = None,
) -> IdentifiabilityReport:
    """Singular-value analysis of a sensitivity matrix (see module docstring).

    Args:
        J: (M, n) px per unit normalised move, columns in ``parameters.free`` order;
            rows with NaN are dropped; a NaN column (failed rollout) counts as unobserved.
        residuals: (M,) sim − real px at ``point``, for the covariance (optional).
        fd_error: (M, n) finite-difference error estimate (from
            :func:`finite_difference_jacobian`); a direction whose singular value is
            not at least ``FD_ERROR_FACTOR`` times the error along it cannot be told
            from zero and is reported.
        condition_threshold: condition number above which combinations are reported.
        min_effect_px: a direction whose 10 %-of-range move changes the keypoints by less
            than this (RMS, in ``unit``) is reported even if the conditioning is fine; default
            :data:`DEFAULT_MIN_EFFECT_PX` px scaled by the unit's noise level
            (:data:`~vid2sid_ros.core.trajectory.DEFAULT_NOISE`: 0.05 px, 0.05 mm, 0.00025 rad).
        unit: the unit of ``J`` rows (px, m, rad; ``"sigma"`` for noise-weighted mixed trials).
        correlation_time_frames: the residuals' integrated autocorrelation time
            (:func:`correlation_time`); the Gauss–Newton covariance is multiplied by it.
        correlation_time_of: ``residuals (M,) -> τ`` (:func:`residual_correlation_time`); when
            given, τ is that of the residuals at the interval's centre (overrides
            ``correlation_time_frames``: a smooth remaining step would otherwise pass for
            correlated noise).
        clusters: (M,) block id of each row (:func:`residual_blocks`); when given, the
            covariance is the larger (per parameter) of that and the block sandwich
            ``A⁻¹ (Σ_b g_b g_bᵀ) A⁻¹ · M/(M−n)``, ``A = JᵀJ``, ``g_b = J_bᵀ r_b`` (a cluster-robust,
            heteroscedasticity- and autocorrelation-consistent covariance: errors that grow with
            the speed, or that all keypoints of a frame share, are accounted for).
        warn: emit an :class:`IdentifiabilityWarning` when something is reported.
        measurement_bias: copied into ``report.measurement_bias`` (how ``residuals`` account for
            the tracker's bias; :func:`check_identifiability`).

    Returns:
        IdentifiabilityReport; its ``interval`` is centred on the Gauss–Newton optimum
        ``u − (JᵀJ)⁻¹Jᵀr`` (normalised units) with half-width 1.96 σ, σ² the diagonal of the
        covariance above; ``uncertainty`` is the symmetric std that holds it.
    """
    names = parameters.free_names
    J = np.asarray(J, dtype=float)
    n = len(names)
    if min_effect_px is None:
        min_effect_px = default_min_effect(unit)
    bad_cols = [names[j] for j in range(n) if not np.isfinite(J[:, j]).any()]
    Jc = np.where(np.isfinite(J), J, 0.0)
    rows = np.isfinite(J).all(axis=1) if not bad_cols else np.ones(J.shape[0], bool)
    Jc = Jc[rows]
    m = max(Jc.shape[0], 1)
    Js = Jc / math.sqrt(m)
    if Js.size:
        _, S, Vt = np.linalg.svd(Js, full_matrices=False)
    else:
        S, Vt = np.zeros(n), np.eye(n)
    Es = None
    if fd_error is not None and Js.size:
        Es = np.where(np.isfinite(fd_error), fd_error, 0.0)[rows] / math.sqrt(m)
    col_rms = np.sqrt(np.sum(Js ** 2, axis=0)) if Js.size else np.zeros(n)
    sensitivity = {nm: float(0.1 * c) for nm, c in zip(names, col_rms)}
    cond = float(S[0] / S[-1]) if S.size and S[-1] > 0 else math.inf
    weak = _weak_directions(S, Vt, Es, names, condition_threshold, min_effect_px)
    message = _weak_message(weak, sensitivity, cond, bad_cols, unit) if (weak or bad_cols) else None
    uncertainty: dict[str, float] = {}
    interval: dict[str, list[float]] = {}
    centre_values: dict[str, float] = {}
    raw: dict[str, tuple[float, float]] = {}
    if residuals is not None and Js.size:
        centre_values, raw = _gauss_newton_intervals(
            Jc, rows, J.shape[0], np.asarray(residuals, float), parameters, point,
            correlation_time_frames=correlation_time_frames, correlation_time_of=correlation_time_of,
            clusters=clusters)
    correlation = _correlation_matrix(Jc) if Js.size and n > 1 else []
    report = IdentifiabilityReport(names, dict(parameters.complete(point)), sensitivity, [float(s) for s in S], cond,
                                   weak, message, uncertainty, rollouts, step, scheme, correlation, interval,
                                   centre_values, dict(measurement_bias or {}))
    report.interval_raw = raw
    state_intervals(report, parameters, report.point)
    if warn and message:
        warnings.warn(message, IdentifiabilityWarning, stacklevel=2)
    return report


def _weak_directions(S: np.ndarray, Vt: np.ndarray, Es: np.ndarray | None, names: Sequence[str],
                     condition_threshold: float, min_effect_px: float) -> list[dict[str, Any]]:
    """The directions (rows of ``Vt``, singular values ``S`` of the row-scaled Jacobian) that are badly
    conditioned, move the keypoints too little, or cannot be told from the finite-difference error ``Es``
    (M, n) along them; each with its combination, the causes that flagged it and its nearest partners."""
    weak = []
    for i in range(len(S)):
        rel_bad = S[0] > 0 and (S[i] == 0 or S[0] / S[i] > condition_threshold)
        abs_bad = 0.1 * S[i] < min_effect_px
        fd_err = float(np.linalg.norm(Es @ Vt[i])) if Es is not None else 0.0
        noise_bad = S[i] <= FD_ERROR_FACTOR * fd_err
        if rel_bad or abs_bad or noise_bad:
            v = Vt[i]
            v = v * (1 if v[np.argmax(np.abs(v))] > 0 else -1)
            combo = {nm: float(round(x, 4)) for nm, x in zip(names, v) if abs(x) >= 0.1}
            # which test flagged it: the wording follows the cause (a move the others reproduce,
            # a tiny effect, or finite differences that cannot measure it)
            causes = [c for c, bad in (("condition", rel_bad), ("effect", abs_bad), ("fd_error", noise_bad)) if bad]
            partners = [names[k] for k in np.argsort(-np.abs(v)) if names[k] not in combo][:3]
            weak.append({"singular_value": float(S[i]), "relative": float(S[i] / S[0]) if S[0] > 0 else 0.0,
                         "fd_error": fd_err, "combination": combo, "causes": causes,
                         "partners": {nm: float(round(v[names.index(nm)], 4)) for nm in partners}})
    return weak


def _gauss_newton_intervals(Jc: np.ndarray, rows: np.ndarray, M: int, residuals: np.ndarray,
                            parameters: ParameterSet, point: Mapping[str, float], *,
                            correlation_time_frames: float, correlation_time_of: Callable[[np.ndarray], float] | None,
                            clusters: np.ndarray | None) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """``(centre values {name: SI}, {name: (centre, half-width 95 %)} in normalised units)`` of the free
    parameters (:func:`analyse_jacobian`'s Returns): ``Jc`` the finite rows ``rows`` (of ``M``) of the
    Jacobian, ``residuals`` (M,) or any length (then not aligned with the rows: no Gauss–Newton step);
    empty where the normal matrix cannot be inverted."""
    n = Jc.shape[1]
    centre_values: dict[str, float] = {}
    raw: dict[str, tuple[float, float]] = {}
    aligned = residuals.shape[0] == M
    r = residuals[rows] if aligned else residuals
    r = r[np.isfinite(r)]
    JtJ = Jc.T @ Jc
    try:
        Ainv = np.linalg.pinv(JtJ, rcond=1e-12)
        u0 = parameters.to_unit_vector(parameters.complete(point))
        centre_u = u0.copy()
        rr = residuals[rows] if aligned else None
        ok = np.isfinite(rr) if rr is not None else None
        if rr is not None and ok.sum() > n:
            # the point is where the optimiser stopped, not necessarily the least-squares optimum: the
            # interval is centred on the optimum one Gauss-Newton step away (normalised units), and the
            # noise is estimated from the residuals there (linearised), not from those at the point
            step_u = -(Ainv @ (Jc[ok].T @ rr[ok]))
            centre_u = u0 + step_u
            rr = np.where(ok, rr + Jc @ step_u, np.nan)
            r = rr[ok]
        dof = max(r.shape[0] - n, 1)
        tau = float(correlation_time_frames)
        if correlation_time_of is not None:
            at_centre = residuals.copy()
            if rr is not None:
                at_centre[:] = np.nan
                at_centre[rows] = rr
            tau = float(correlation_time_of(at_centre))
        s2 = float(np.sum(r ** 2) / dof) * max(tau, 1.0)
        cov_u = s2 * Ainv
        if clusters is not None and np.asarray(clusters).shape[0] == M and rr is not None:
            cov_u = _with_cluster_sandwich(cov_u, Ainv, Jc, rr, ok, np.asarray(clusters)[rows])
        var_u = np.clip(np.diag(cov_u), 0.0, None)
        half = Z95 * np.sqrt(var_u)
        for j, spec in enumerate(parameters.free):
            if not math.isfinite(centre_u[j]):
                continue
            raw[spec.name] = (float(centre_u[j]), float(half[j]))
            centre_values[spec.name] = spec.from_unit(centre_u[j])
    except np.linalg.LinAlgError:
        return {}, {}
    return centre_values, raw


def _with_cluster_sandwich(cov_u: np.ndarray, Ainv: np.ndarray, Jc: np.ndarray, rr: np.ndarray, ok: np.ndarray,
                           cl: np.ndarray) -> np.ndarray:
    """``cov_u`` (n, n) with each variance the larger of its own and the block sandwich's
    ``A⁻¹ (Σ_b g_b g_bᵀ) A⁻¹ · M/(M−n)``, ``g_b = J_bᵀ r_b`` over the rows ``ok`` of each block id in ``cl``."""
    n = Jc.shape[1]
    G = np.zeros((n, n))
    for b in np.unique(cl[ok]):
        sel = ok & (cl == b)
        g = Jc[sel].T @ rr[sel]
        G += np.outer(g, g)
    M_ = int(ok.sum())
    sandwich = Ainv @ G @ Ainv * (M_ / max(M_ - n, 1))
    return np.where(np.eye(n, dtype=bool), np.maximum(np.diag(cov_u), np.diag(sandwich))[:, None] * np.eye(n), cov_u)


def _correlation_matrix(Jc: np.ndarray) -> list[list[float]]:
    """The parameters' correlation matrix (n, n) from ``(JcᵀJc)⁺``; empty where a variance is zero or the
    inverse fails."""
    try:
        c = np.linalg.pinv(Jc.T @ Jc, rcond=1e-12)
        d = np.sqrt(np.clip(np.diag(c), 0.0, None))
        if np.all(d > 0):
            return np.clip(c / np.outer(d, d), -1.0, 1.0).tolist()
    except np.linalg.LinAlgError:
        pass
    return []


def stated_interval(spec: Any, value: float, centre_u: float, half_u: float, *,
                    biased: bool = False) -> tuple[float, float, str, str]:
    """The 95 % interval a report states for one parameter: it holds the value, and is never zero-width on a bound.

    From the Gauss–Newton interval ``c ± h`` in normalised coordinates (``h = 1.96 σ``):

    - the identified value ``v`` outside it (a budget-stopped run, or the optimum moved by the
      tracker-bias correction): the interval is extended to ``v`` and the note names the centre;
    - reaching past a bound: cut at the bound (``one-sided``); lying wholly beyond it (the data put
      the optimum outside the search range), the Gaussian of the estimate truncated to the range
      gives the one-sided interval ``[bound, q]`` with 95 % of its mass (for a centre more than 30 σ
      away, the truncated tail is exponential with scale ``σ² / d``: ``q = −ln(0.05) σ² / d``);
    - covering the whole range (or ``σ`` not finite): ``not identified``, the search bounds.

    Args:
        spec: the parameter's :class:`~vid2sid_ros.core.parameters.ParameterSpec`.
        value: the identified value, its unit.
        centre_u, half_u: ``c`` and ``h`` (normalised units).
        biased: the centre includes the tracker-bias correction (named in the note).

    Returns:
        ``(lower, upper, kind, note)`` in the parameter's unit; kind ``two-sided`` |
        ``one-sided (lower bound)`` | ``one-sided (upper bound)`` | ``not identified`` |
        ``zero width (no residual noise)``; note "" when the interval is simply ``c ± h``.
    """
    from scipy.special import ndtr, ndtri  # the normal's sf and isf (scipy.stats.norm's own; 4x lighter to import)

    v_u = float(np.clip(spec.to_unit(float(value)), 0.0, 1.0))
    if not (math.isfinite(centre_u) and math.isfinite(half_u)) or half_u >= 0.5:
        return (min(spec.lower, value), max(spec.upper, value), "not identified",
                "the 95 % interval spans the whole search range: the data do not determine it")
    notes = []
    a, b = centre_u - half_u, centre_u + half_u
    if not a <= v_u <= b:
        what = "the least-squares optimum" + (" with the tracker's bias modelled" if biased else "")
        notes.append(f"{what} is {spec.from_unit(float(np.clip(centre_u, 0.0, 1.0))):.4g}"
                     f"{' (beyond the bound)' if not 0.0 <= centre_u <= 1.0 else ''}; the interval is extended to "
                     "the identified value")
        a, b = min(a, v_u), max(b, v_u)
    kind = "two-sided"
    sigma = half_u / Z95
    if a <= 0.0 and b >= 1.0:
        return (min(spec.lower, value), max(spec.upper, value), "not identified",
                "the 95 % interval spans the whole search range: the data do not determine it")
    for side, at_bound, beyond in (("lower", a <= 0.0, b <= 0.0), ("upper", b >= 1.0, a >= 1.0)):
        if not at_bound:
            continue
        kind = f"one-sided ({side} bound)"
        if beyond and sigma > 0:  # wholly beyond the bound: the truncated Gaussian's 95 % from the bound
            d = -centre_u if side == "lower" else centre_u - 1.0  # distance beyond the bound, > 0
            z0, z1 = d / sigma, (d + 1.0) / sigma
            if z0 > 30.0:
                q = -math.log(0.05) * sigma / z0
            else:
                p0, p1 = ndtr(-z0), ndtr(-z1)  # norm.sf
                q = float(-ndtri(p0 - 0.95 * (p0 - p1))) * sigma - d  # norm.isf
            q = float(np.clip(q, 0.0, 1.0))
            a, b = (0.0, max(q, v_u)) if side == "lower" else (min(1.0 - q, v_u), 1.0)
            notes.append(f"the data put the optimum beyond the {side} bound: the interval is the estimate's "
                         "Gaussian truncated to the search range")
        elif beyond:
            a, b = (0.0, v_u) if side == "lower" else (v_u, 1.0)
    lo, hi = spec.from_unit(float(np.clip(a, 0.0, 1.0))), spec.from_unit(float(np.clip(b, 0.0, 1.0)))
    lo, hi = min(lo, value), max(hi, value)  # always holds the value (also one outside its own bounds)
    if not hi > lo:
        kind = "zero width (no residual noise)"
    return lo, hi, kind, "; ".join(notes)


def state_intervals(report: IdentifiabilityReport, parameters: ParameterSet, values: Mapping[str, float]) -> None:
    """Fill ``report.interval``, ``interval_kind``, ``interval_note`` and ``uncertainty`` for ``values``.

    From ``report.interval_raw`` through :func:`stated_interval`; ``uncertainty`` is the std of the
    smallest interval symmetric about the value that holds the stated interval,
    ``max(|hi − v|, |v − lo|) / 1.96``.
    """
    biased = bool((report.measurement_bias or {}).get("applied"))
    report.interval, report.interval_kind, report.interval_note, report.uncertainty = {}, {}, {}, {}
    for name, (c, h) in (report.interval_raw or {}).items():
        spec = parameters[name]
        v = float(values[name])
        lo, hi, kind, note = stated_interval(spec, v, c, h, biased=biased)
        report.interval[name] = [lo, hi]
        report.interval_kind[name] = kind
        if note:
            report.interval_note[name] = note
        report.uncertainty[name] = max(abs(hi - v), abs(v - lo)) / Z95


def _weak_message(weak: Sequence[Mapping[str, Any]], sensitivity: Mapping[str, float], cond: float,
                  bad_cols: Sequence[str], unit: str = "px") -> str:
    factor, label = display_unit(unit)
    parts = []
    if bad_cols:
        parts.append(f"rollouts failed while perturbing {', '.join(bad_cols)}, so their effect is unknown")
    fd_only = bool(weak) and not bad_cols
    for w in weak:
        combo = w["combination"]
        names = sorted(combo, key=lambda k: -abs(combo[k]))
        effect = 0.1 * w["singular_value"]
        causes = w.get("causes") or ["condition"]
        fd_only = fd_only and causes == ["fd_error"]
        fd_txt = (f"the finite-difference estimate changes by {factor * 0.1 * w.get('fd_error', 0.0):.3g} {label} RMS "
                  "per 10 % of range when the step is doubled (a non-smooth or strongly non-linear response here)")
        if len(names) <= 1:
            nm = names[0] if names else "?"
            own = factor * sensitivity.get(nm, effect)
            if "effect" in causes:
                parts.append(f"{nm} barely affects the keypoints ({own:.3g} {label} RMS for a move of 10 % of its range)")
            elif "condition" in causes:
                others = w.get("partners") or {}
                mostly = f" (mostly {', '.join(others)})" if others else ""
                parts.append(f"{nm} moves the keypoints {own:.3g} {label} RMS for a move of 10 % of its range, but the "
                             f"other parameters{mostly} nearly reproduce that move: along the combination the "
                             f"keypoints change by only {factor * effect:.3g} {label} RMS per 10 % of range")
            else:
                parts.append(f"{nm}'s effect cannot be measured reliably at this point: it moves the keypoints "
                             f"{own:.3g} {label} RMS for a move of 10 % of its range, but {fd_txt}")
        else:
            lin = " ".join(f"{combo[k]:+.2f}·{k}" for k in names)
            who = " and ".join([", ".join(names[:-1]), names[-1]])
            tail = "only their ratio is observable" if len(names) == 2 else "only their ratios are observable"
            parts.append(f"{who} trade off: moving along ({lin}) in normalised units changes the keypoints by only "
                         f"{factor * effect:.3g} {label} RMS per 10 % of range ({tail})"
                         + (f"; or the response is not smooth along it: {fd_txt}" if causes == ["fd_error"] else ""))
    cond_txt = f"condition number {cond:.3g}" if math.isfinite(cond) else "singular sensitivity matrix"
    advice = _FD_ADVICE if fd_only else _EXCITATION_ADVICE
    return "poorly identifiable parameters (" + cond_txt + "): " + "; ".join(parts) + advice


#: the remedy when only the finite-difference error flagged the directions (the effect is there, not measurable)
_FD_ADVICE = (". The linear check cannot decide here: read the check at the result (final identifiability), or "
              "measure with a larger step (calibration: {identifiability_step: 0.03}).")

#: the remedy the warning suggests when the excitation is what fails to show the parameters
_EXCITATION_ADVICE = (". Add a step (static gain) or a higher chirp band / larger amplitude (dynamics), or freeze "
                      "one of the parameters involved.")


def _at_rest_advice(base: Evaluation, objective: TrialObjective, parameters: ParameterSet,
                    point: Mapping[str, float], min_effect: float) -> str | None:
    """The remedy when the twin does not move at ``point`` at all (None when it moves or is driven).

    A free decay (no command changes) released from a free initial state at its equilibrium
    (e.g. a pendulum's initial angle 0, the spec's nominal) stays at rest: every parameter's
    effect is zero *at this point*, whatever the recording shows. The excitation advice would
    be wrong (there is none to change); the start point is what to change.
    """
    from .nuisance import is_commanded

    if base.failed or not base.sim or is_commanded(objective.excitations):
        return None
    motion = 0.0
    for tr in base.sim:
        kp = np.asarray(tr.keypoints, float)
        if kp.size and np.isfinite(kp).any():
            motion = max(motion, float(np.nanmax(np.nanmax(kp, axis=0) - np.nanmin(kp, axis=0))))
    if motion >= min_effect:
        return None
    init = [s.name for s in parameters.free if s.target.startswith("init.")]
    state = (", ".join(f"{n} = {point[n]:.4g}" for n in init) if init else "its initial state")
    return (f". At this point the twin does not move at all (keypoints within {motion:.2g} {objective.unit} over "
            f"the whole trial): the trials command nothing (free decay) and {state} starts it at rest, so no "
            "parameter can show an effect here. That is a property of the start point, not of the recording: "
            "start from an initial state near the recorded one (calibration.start: {"
            + (f"{init[0]}: ..." if init else "<initial state>: ...") + "}, or a start guess); the check at the "
            "result says whether the data identify the parameters.")


def check_identifiability(
    objective: TrialObjective,
    point: Mapping[str, float] | None = None,
    *,
    parameters: ParameterSet | None = None,
    step: float = 0.01,
    scheme: str = "central",
    condition_threshold: float = DEFAULT_CONDITION_THRESHOLD,
    min_effect_px: float | None = None,
    warn: bool = True,
    twin_camera: Any | None = None,
    refine: int = 0,
    executor: Any | None = None,
    executor_state: Any | None = None,
) -> IdentifiabilityReport:
    """Sensitivity of the keypoint trajectories to each free parameter at ``point``.

    Runs ``4n + 1`` (central, steps ±step and ±2·step for the error estimate) or
    ``n + 1`` (forward) evaluations of ``objective``, plus up to ``refine`` (each
    ``objective.cost`` rollouts); they are diagnostics, not charged to any calibration
    budget, and counted in ``report.rollouts``.

    Args:
        objective: twin + excitations + real trajectories (real gives the sample mask
            and the residuals for the uncertainty).
        point: parameter values (default: nominal).
        parameters: spec (default ``objective.parameters``).
        twin_camera: a :class:`~vid2sid_ros.calibration.tracker_bias.TwinCamera`: film the twin at
            ``point`` like the real rig (one rendered rollout per training excitation, counted in
            ``report.rollouts``) and add the tracker's bias to the twin's keypoints before the
            residuals, the correlation time and the interval are computed (module docstring).
            A twin that cannot be filmed is reported in ``report.measurement_bias`` (``applied:
            False`` and the reason) and the interval is computed without the bias.
        refine: at most this many Gauss–Newton iterations with the same Jacobian (chord method)
            towards the interval's centre, each one evaluation (``objective.cost`` rollouts,
            counted), skipped once the step is within a tenth of the interval's half-width;
            the interval's σ comes from the residuals at the last iterate.
        executor: a :class:`~vid2sid_ros.calibration.executor.Executor` for the finite-difference
            probes (:func:`~vid2sid_ros.calibration.batch.evaluate_batch`; default serial): the
            same Jacobian on every backend. executor_state: the objective's
            :class:`~vid2sid_ros.calibration.batch.ObjectiveState` to reuse (its workers kept alive).

    Returns:
        IdentifiabilityReport; warns :class:`IdentifiabilityWarning` when poorly conditioned.
    """
    parameters = parameters if parameters is not None else objective.parameters
    point = parameters.complete(point or {})
    count = {"rollouts": 0}

    def ev(values: Mapping[str, float]) -> Evaluation:
        e, _ = objective.evaluate(values)
        count["rollouts"] += e.rollouts
        return e

    def ev_many(points: Sequence[Mapping[str, float]]) -> list[Evaluation]:
        from .batch import evaluate_batch

        out = evaluate_batch(objective, points, executor, state=executor_state)
        count["rollouts"] += sum(e.rollouts for e in out)
        return out

    def vec(e: Evaluation) -> np.ndarray:
        return trajectory_vector(e.sim, objective.real)

    J, base, probes, E = finite_difference_jacobian(ev, parameters, point, vec, step=step, scheme=scheme,
                                                    return_error=True,
                                                    evaluate_many=ev_many if executor is not None else None)
    sim, bias, bias_info = None if base.failed else list(base.sim), None, {}
    if twin_camera is not None and sim is not None:
        sim, bias, bias_info = _with_tracker_bias(objective, parameters, point, twin_camera, base, count)
    res = None if sim is None else residual_vector(sim, objective.real)
    tau = 1.0 if sim is None else correlation_time(sim, objective.real)
    blocks = residual_blocks(objective.real, max(2, int(math.ceil(2 * tau))))
    clusters = blocks if res is not None and blocks.shape[0] == res.shape[0] else None

    def analyse(at: Mapping[str, float], residuals: np.ndarray | None, warn_: bool) -> IdentifiabilityReport:
        return analyse_jacobian(J, parameters, at, residuals=residuals, fd_error=E,
                                condition_threshold=condition_threshold, min_effect_px=min_effect_px,
                                rollouts=count["rollouts"], step=step, scheme=scheme, warn=warn_,
                                unit=unit, correlation_time_frames=tau, clusters=clusters,
                                measurement_bias=bias_info,
                                correlation_time_of=lambda v: residual_correlation_time(v, objective.real))

    unit = getattr(objective, "unit", "px")
    report = analyse(point, res, False)
    if report.warning and report.warning.endswith(_EXCITATION_ADVICE):
        rest = _at_rest_advice(base, objective, parameters, point,
                               min_effect_px if min_effect_px is not None else default_min_effect(unit))
        if rest:
            report.warning = report.warning.removesuffix(_EXCITATION_ADVICE) + rest
    if warn and report.warning:
        warnings.warn(report.warning, IdentifiabilityWarning, stacklevel=2)
    centred = _chord_refine(report, analyse, ev, parameters, objective, bias, refine)
    if centred is not report:
        report.centre, report.interval_raw = centred.centre, centred.interval_raw
        state_intervals(report, parameters, parameters.complete(point))
    report.rollouts = count["rollouts"]
    report.bias_trajectories = bias
    report.forward_jacobian = _forward_columns(probes, parameters.to_unit_vector(point), step, scheme, vec)
    return report


def _with_tracker_bias(objective: TrialObjective, parameters: ParameterSet, point: Mapping[str, float],
                       twin_camera: Any, base: Evaluation, count: dict[str, int]
                       ) -> tuple[list[Trajectory], list[Trajectory] | None, dict[str, Any]]:
    """``(sim, bias, bias_info)``: the base evaluation's trajectories with the tracker's bias of the twin filmed
    at ``point`` added (its rollouts counted in ``count``), the bias trajectories, and what
    ``report.measurement_bias`` says; a twin that cannot be filmed gives the trajectories unchanged, no
    bias, and the reason."""
    from .nuisance import MeasurementModel
    from .tracker_bias import TrackerBiasError, add_bias, twin_tracker_bias

    try:
        bias, spent = twin_tracker_bias(objective.twin, objective.excitations,
                                        MeasurementModel(parameters).split(point)[0], twin_camera)
        count["rollouts"] += spent
        sim = add_bias(list(base.sim), bias)
        b = np.concatenate([np.asarray(t.keypoints)[np.asarray(t.valid)].ravel() for t in bias]) if bias else []
        return sim, bias, {"applied": True, "source": twin_camera.source, "rollouts": spent,
                           "rms_px": float(np.sqrt(np.mean(np.square(b)))) if len(b) else 0.0}
    except Exception as err:  # noqa: BLE001 - a twin that cannot be filmed never loses the check
        return list(base.sim), None, {"applied": False, "reason": f"{type(err).__name__}: {err}" if not isinstance(
            err, TrackerBiasError) else str(err)}


def _chord_refine(report: IdentifiabilityReport, analyse: Callable[..., IdentifiabilityReport],
                  ev: Callable[[Mapping[str, float]], Evaluation], parameters: ParameterSet,
                  objective: TrialObjective, bias: list[Trajectory] | None, refine: int) -> IdentifiabilityReport:
    """At most ``refine`` Gauss-Newton iterations with the same Jacobian (the chord method) from the point to
    the least-squares optimum the interval is centred on: a step of several standard deviations (an estimate
    the tracker's bias moved, a budget-stopped run) is not exact in one linear step. Residuals at each iterate
    are rolled out (``ev``); ``analyse(at, residuals, warn)`` re-analyses there. Returns the last report."""
    centred = report
    for _ in range(refine):
        if not centred.centre or not centred.interval:
            break
        at = parameters.complete({**centred.point, **centred.centre})
        half = {k: 0.5 * (hi - lo) for k, (lo, hi) in centred.interval.items()}
        if all(abs(at[k] - centred.point[k]) <= 0.1 * half[k] for k in half):
            break  # the remaining step is within a tenth of the interval
        e = ev(at)
        if e.failed:
            break
        if bias is not None:
            from .tracker_bias import add_bias

            sim_at = add_bias(list(e.sim), bias)
        else:
            sim_at = list(e.sim)
        centred = analyse(at, residual_vector(sim_at, objective.real), False)
    return centred


def _forward_columns(evals: Sequence[Evaluation], u0: np.ndarray, step: float, scheme: str,
                     vec: Callable[[Evaluation], np.ndarray]) -> np.ndarray | None:
    """Forward differences (M, n) from :func:`finite_difference_jacobian`'s evaluations (the base first, then
    per column the ``±step`` and ``±2·step`` probes of the central scheme with ``return_error``): column j is
    ``(y(u0 + step·e_j) − y(u0)) / step``, or over ``−step`` when ``u0_j + step`` leaves [0, 1]; NaN where that
    probe failed. None for the forward scheme or a failed base."""
    n = len(u0)
    if scheme != "central" or len(evals) != 1 + 4 * n or evals[0].failed:
        return None
    y0 = vec(evals[0])
    F = np.full((y0.shape[0], n), np.nan)
    for j in range(n):
        h = step if u0[j] + step <= 1.0 else -step
        e = evals[1 + 4 * j + (1 if h > 0 else 0)]  # (lo, hi, lo2, hi2) per column
        if not e.failed and u0[j] + h >= 0.0:
            F[:, j] = (vec(e) - y0) / h
    return F
