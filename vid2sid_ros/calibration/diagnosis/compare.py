"""Score candidate causes against each other: screen, refit the best few, decide named vs indistinguishable.

1. **Screen** (one probe per cause): the cause's residual column ``q = (r(step) − r0) / step`` and
   the free parameters' columns ``F`` (forward differences, normalised step
   :data:`~.result.THRESHOLDS` ``probe_step``) give the linearised share of the residual the cause
   explains beyond the free parameters: ``(‖r⊥‖² − ‖r⊥ + θ q⊥‖²) / ‖r⊥‖²``, ``⊥`` = orthogonal to ``F``,
   at the least-squares size ``θ = −(q⊥·r⊥) / (q⊥·q⊥)`` clipped to the cause's search range (a size the
   cause cannot take explains nothing: a dead-zone or a friction cannot add torque); a several-part cause
   the same with bounded linear least squares over its parts (:func:`scipy.optimize.lsq_linear`).
2. **Refit** the ``refit_top`` best (and the free parameters alone, the null model): a chord
   Gauss–Newton on ``[F, q]`` from the optimum (the Jacobian corrected by Broyden's secant
   update after each evaluation), ``refit_evaluations`` evaluations at most, the cause kept inside
   its search range. The refitted residual sum of squares ``S_c`` is the cause's score.
3. **Decide** with the noise variance ``σ²`` (successive differences, :func:`~.context.noise_variance`):
   a cause explains the residual when the likelihood ratio ``(S_0 − S_c) / σ²`` exceeds the
   χ²₁ quantile at ``1 − α / n`` (Wilks' theorem for a nested model with one more parameter and σ²
   known, Bonferroni over the n candidates) *and* it removes at least ``min_share`` of ``S_0``, its
   size is determined (not on its search range's edge). Two such causes are indistinguishable when
   ``S_c − S_best`` is below the χ²₁(1 − α) quantile × σ² (the same likelihood-ratio bound, used
   conservatively for non-nested models of equal size, cf. Vuong, *Econometrica* 57, 1989) or below
   ``refit_accuracy`` of the best cause's reduction (what a few chord steps can resolve).
4. **Polish** a tie: the tied causes' refits are continued (:func:`polish`) and the decision is
   taken again with the refits' measured accuracy in place of ``refit_accuracy``: a share of the
   best reduction grows with the data, so no trial, however informative, could otherwise separate
   two causes that each explain most of the residual.
5. **Refit from afar** (:func:`refit_far`, started by :func:`far_start`): bounded nonlinear least
   squares over the whole ranges, for a residual the local refits leave unexplained
   (:func:`~.core.diagnose` decides when).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .causes import Cause, Composite, parts_of
from .chi2 import chi2_ppf
from .context import ProbeContext
from .result import THRESHOLDS

__all__ = ["Score", "Refit", "free_columns", "screen", "refit", "refit_far", "bounded_refit", "far_start", "polish", "decide",
           "held_out_check"]


@dataclass
class Refit:
    """A refit's end point: free parameters ``u`` (F,) normalised, cause sizes ``theta`` (C,), residual
    ``r`` (M,), its sum of squares ``ssr`` over the fitted rows (unit²), ``evaluations`` made."""

    u: np.ndarray
    theta: np.ndarray
    r: np.ndarray
    ssr: float
    evaluations: int = 0
    #: a refit from afar (:func:`refit_far`: the free parameters re-optimised over their whole range)
    far: bool = False


@dataclass
class Score:
    """One candidate's score. ``share_linear``: linearised share of the residual beyond the free parameters;
    ``refit``: its refit (None when screened only); ``gain``: ``S_0 − S_c`` (unit²); ``lr``: gain / σ².
    ``column``: the probe column (M,) of a 1-D cause; ``columns``/``starts``: one per part (a
    :class:`~.causes.Composite` has several), the sizes its refit starts from, ``start_r`` the residual there."""

    cause: Cause
    column: np.ndarray | None
    share_linear: float = 0.0
    theta_linear: float = 0.0
    refit: Refit | None = None
    gain: float = 0.0
    lr: float = 0.0
    significant: bool = False
    determined: bool = True
    notes: list[str] = field(default_factory=list)
    start: float = 0.0
    start_r: np.ndarray | None = None
    columns: list | None = None
    #: the probe column at size 0 (``column`` may be re-measured elsewhere by :func:`line_scan`)
    column0: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.column0 is None:
            self.column0 = self.column

    @property
    def parts(self) -> tuple:
        return parts_of(self.cause)

    @property
    def probe_columns(self) -> list:
        return self.columns if self.columns is not None else [self.column]

    @property
    def starts(self) -> list:
        return [self.start] if self.columns is None else [0.0] * len(self.columns)

    @property
    def dims(self) -> int:
        return len(self.parts)


def free_columns(ctx: ProbeContext) -> np.ndarray:
    """Forward-difference columns of the free parameters (M, F), residual per normalised unit; NaN when
    a probe could not be simulated (that column is then ignored)."""
    h = THRESHOLDS["probe_step"]
    cols = np.full((ctx.r0.size, len(ctx.free)), np.nan)
    for i, u in enumerate(ctx.u0):
        step = h if u + h <= 1.0 else -h
        uu = ctx.u0.copy()
        uu[i] += step
        r = ctx.residual([], [], uu)
        if r is not None:
            cols[:, i] = (r - ctx.r0) / step
    return cols


def _basis(F: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Orthonormal basis (rows, r) of the usable free columns on ``rows``."""
    good = [j for j in range(F.shape[1]) if np.all(np.isfinite(F[rows, j])) and np.any(F[rows, j] != 0)]
    if not good:
        return np.zeros((int(rows.sum()), 0))
    q, rr = np.linalg.qr(F[rows][:, good])
    keep = np.abs(np.diag(rr)) > 1e-12 * max(1.0, float(np.max(np.abs(np.diag(rr)))))
    return q[:, keep]


def screen(ctx: ProbeContext, causes: Sequence[Cause], F: np.ndarray) -> list[Score]:
    """One probe per cause; scores sorted by the linearised share, best first."""
    rows = ctx.ok & np.all(np.isfinite(F) | np.all(np.isnan(F), axis=0), axis=1)
    B = _basis(F, rows)
    r = ctx.r0[rows]
    r_perp = r - B @ (B.T @ r)
    rr = float(r_perp @ r_perp)
    out = []
    for c in causes:
        if isinstance(c, Composite):
            out.append(_composite_screen(ctx, c, rows, B, r_perp, rr))
            continue
        if c.changes_measurement:  # costs no rollout: search the whole range, not only near 0
            out.append(_grid_screen(ctx, c, rows, B, rr))
            continue
        r1 = ctx.residual([c], [c.step])
        if r1 is None:
            out.append(Score(c, None, notes=["the probe could not be simulated"]))
            continue
        q = (r1 - ctx.r0) / c.step
        qr = np.where(np.isfinite(q[rows]), q[rows], 0.0)
        q_perp = qr - B @ (B.T @ qr)
        qq = float(q_perp @ q_perp)
        if qq <= 0 or rr <= 0:
            out.append(Score(c, q, notes=["changes nothing the free parameters cannot"]))
            continue
        theta_linear = -float(q_perp @ r_perp) / qq
        theta = float(np.clip(theta_linear, *c.bounds))  # a size the cause can take
        gain = rr - float(np.sum((r_perp + theta * q_perp) ** 2))
        out.append(Score(c, q, share_linear=max(gain, 0.0) / rr, theta_linear=theta_linear))
    out.sort(key=lambda s: -s.share_linear)
    return out


def _composite_screen(ctx: ProbeContext, c: Composite, rows: np.ndarray, B: np.ndarray, r_perp: np.ndarray,
                      rr: float) -> Score:
    """A several-part cause: one probe per part; the share of ``r⊥`` in the span of the parts' columns ⊥ ``F``."""
    cols = []
    for p in c.parts:
        r1 = ctx.residual([p], [p.step])
        if r1 is None:
            return Score(c, None, notes=["a probe could not be simulated"])
        cols.append((r1 - ctx.r0) / p.step)
    Q = np.stack([np.where(np.isfinite(q[rows]), q[rows], 0.0) for q in cols], axis=1)
    Q = Q - B @ (B.T @ Q)
    if rr <= 0 or not np.any(Q):
        return Score(c, None, columns=cols, notes=["changes nothing the free parameters cannot"])
    lo, hi = (np.array([p.bounds[i] for p in c.parts], float) for i in (0, 1))
    from scipy.optimize import lsq_linear

    coef = lsq_linear(Q, -r_perp, bounds=(lo, hi), lsmr_tol="auto").x  # sizes the parts can take
    gain = rr - float(np.sum((r_perp + Q @ coef) ** 2))
    return Score(c, cols[0], share_linear=max(gain, 0.0) / rr, columns=cols)


def _grid_screen(ctx: ProbeContext, c: Cause, rows: np.ndarray, B: np.ndarray, rr: float) -> Score:
    """A measurement-side cause over its whole search range (25 points, no rollout): the best point's share
    beyond a linear refit of the free parameters, and the probe column there."""
    lo, hi = c.bounds
    grid = np.unique(np.concatenate([np.linspace(lo, hi, 25), [0.0]]))
    best_t, best_s, best_r = 0.0, rr, ctx.r0
    for t in grid:
        r = ctx.residual([c], [t])
        if r is None:
            continue
        x = np.where(np.isfinite(r[rows]), r[rows], 0.0)
        x = x - B @ (B.T @ x)
        s = float(x @ x)
        if s < best_s:
            best_t, best_s, best_r = float(t), s, r
    step = c.step if best_t + c.step <= hi else -c.step
    r1 = ctx.residual([c], [best_t + step])
    if r1 is None or rr <= 0:
        return Score(c, None, notes=["the probe could not be evaluated"])
    q = (r1 - best_r) / step
    x = np.where(np.isfinite(best_r[rows]), best_r[rows], 0.0)
    x = x - B @ (B.T @ x)
    qr = np.where(np.isfinite(q[rows]), q[rows], 0.0)
    qr = qr - B @ (B.T @ qr)
    qq = float(qr @ qr)
    lin = (float(qr @ x) ** 2 / qq) if qq > 0 else 0.0  # the linear step from the best grid point
    sc = Score(c, q, share_linear=max(0.0, 1.0 - (best_s - lin) / rr), theta_linear=best_t)
    sc.start, sc.start_r = best_t, best_r
    return sc


def line_scan(ctx: ProbeContext, sc: Score, F: np.ndarray) -> None:
    """Before a 1-D model-side cause is refitted: its size at ±3, ±10, ±30 probe steps and at the linearised
    estimate (inside the search range), each scored after a linear refit of the free parameters; the refit
    then starts from the best, with the probe column measured there. A probe at 0 misleads for causes with
    a threshold (Coulomb friction, a dead-zone): their effect is not linear in the size."""
    if sc.column is None or isinstance(sc.cause, Composite) or sc.cause.changes_measurement:
        return
    c = sc.cause
    rows = ctx.ok & np.all(np.isfinite(F) | np.all(np.isnan(F), axis=0), axis=1)
    B = _basis(F, rows)

    def score(r):
        x = np.where(np.isfinite(r[rows]), r[rows], 0.0)
        x = x - B @ (B.T @ x)
        return float(x @ x)

    best_t, best_s, best_r = 0.0, score(ctx.r0), ctx.r0
    cands = [sc.theta_linear] + [k * c.step * m for k in (3, 10, 30) for m in (1, -1)]
    for t in sorted({float(np.clip(t, *c.bounds)) for t in cands} - {0.0}):
        r = ctx.residual([c], [t])
        if r is not None and score(r) < best_s:
            best_t, best_s, best_r = t, score(r), r
    if best_t == 0.0:
        return
    step = c.step if best_t + c.step <= c.bounds[1] else -c.step
    r1 = ctx.residual([c], [best_t + step])
    if r1 is not None:
        sc.column, sc.start, sc.start_r = (r1 - best_r) / step, best_t, best_r


def refit(ctx: ProbeContext, causes: Sequence[Cause], columns: Sequence[np.ndarray], F: np.ndarray,
          rows: np.ndarray | None = None, start: Sequence[float] | None = None,
          start_r: np.ndarray | None = None, start_u: np.ndarray | None = None) -> Refit:
    """Chord Gauss–Newton on the free parameters and ``causes`` from the optimum (module docstring).

    Args:
        causes: C causes fitted together with the free parameters (may be empty: the null model).
        columns: their probe columns (M,) each.
        F: free columns (M, F). rows: samples fitted (default all finite).
        start: the causes' sizes to start from (default 0), with ``start_r`` the residual there.
        start_u: the free parameters to start from, normalised (F,) (default the optimum ``ctx.u0``).
    """
    fit_rows = ctx.ok if rows is None else ctx.ok & rows
    usable = [j for j in range(F.shape[1]) if np.all(np.isfinite(F[fit_rows, j]))]
    J = np.concatenate([F[:, usable]] + [np.asarray(q)[:, None] for q in columns], axis=1)
    keep = fit_rows & np.all(np.isfinite(J), axis=1)
    lo = np.array([0.0] * len(usable) + [c.bounds[0] for c in causes])
    hi = np.array([1.0] * len(usable) + [c.bounds[1] for c in causes])
    th0 = np.zeros(len(causes)) if start is None else np.asarray(start, float)
    r_start = ctx.r0 if start_r is None else start_r
    u_start = ctx.u0 if start_u is None else np.asarray(start_u, float)
    x = np.concatenate([u_start[usable], th0])
    best = Refit(u_start.copy(), th0.copy(), r_start, ctx.ssr(r_start, keep))
    if J.shape[1] == 0 or not keep.any():
        return best
    Jk = J[keep]
    scale = np.linalg.norm(Jk, axis=0)
    scale = np.where(scale > 0, scale, 1.0)

    def step(r: np.ndarray) -> np.ndarray:  # equilibrated columns: the cut-off is relative, whatever the unit
        return -np.linalg.lstsq(Jk / scale, np.nan_to_num(r[keep]), rcond=1e-6)[0] / scale

    dx = step(r_start)
    evals, r_cur = 0, r_start
    while evals < int(THRESHOLDS["refit_evaluations"]):
        x_new = np.clip(x + dx, lo, hi)
        u = u_start.copy()
        u[usable] = x_new[:len(usable)]
        theta = x_new[len(usable):]
        r = ctx.residual(causes, theta, u)
        evals += 1
        s = math.inf if r is None else ctx.ssr(r, keep)
        taken = x_new - x
        if r is not None and float(taken @ taken) > 0:  # Broyden's rank-one secant update (Broyden 1965)
            dr = np.nan_to_num(r[keep] - r_cur[keep]) - Jk @ taken
            Jk = Jk + np.outer(dr, taken) / float(taken @ taken)
        if s < best.ssr:
            best = Refit(u, theta, r, s)
            x, r_cur = x_new, r
            dx = step(r)
        else:
            dx = 0.5 * (x_new - x)
    best.evaluations = evals
    return best


def far_start(cause: Cause, theta: float) -> float:
    """Where a refit from afar starts a 1-D cause: ``theta`` (its local refit's size) when that is at least
    ``far_start_share`` of its search range on that side, else that share of the range on the side ``theta``
    points to (the upper side for 0, or the lower when the upper bound is 0). A threshold cause (a dead-zone,
    friction) is flat at 0 and a size the free parameters absorbed is small near the identified point: the
    refit must start where the cause acts."""
    lo, hi = cause.bounds
    side = hi if (theta > 0 or (theta == 0 and hi > 0)) else lo
    if side == 0.0:
        side = lo if hi == 0.0 else hi
    share = THRESHOLDS["far_start_share"]
    return float(theta) if abs(theta) >= share * abs(side) else share * side


def refit_far(ctx: ProbeContext, causes: Sequence[Cause], start: Sequence[float], start_u: np.ndarray) -> Refit:
    """A refit of the free parameters and ``causes`` over their whole ranges: bounded nonlinear least squares.

    :func:`refit` takes a few chord steps from the identified point; when the free parameters moved far to
    absorb an error (a Coulomb friction on its bound standing in for a drive's dead-zone, a latency nuisance on
    its bound standing in for its lag) the true cause explains little *there*, and only a refit that lets the
    free parameters travel back shows that it explains the residual whole. This is that refit: the
    trust-region reflective algorithm of :func:`scipy.optimize.least_squares` (Branch, Coleman & Li, *SIAM J.
    Sci. Comput.* 21, 1999) on ``[u, theta]`` inside the unit box and the causes' search ranges, with
    forward-difference Jacobians (step ``probe_step``, relative) and at most ``far_evaluations`` residual
    evaluations besides the Jacobians' (each costs one rollout per free parameter and cause).

    Args:
        causes: C causes fitted with the free parameters (may be empty: the null model refitted from afar).
        start: their sizes to start from (C,), each cause's unit (:func:`far_start`).
        start_u: the free parameters to start from, normalised (F,).

    Returns:
        the end point as a :class:`Refit` with ``far=True``; its ``ssr`` over the finite samples.
    """
    F = len(ctx.free)
    # a sample the twin could not produce counts as far off: 10 × the largest residual at the start
    worst = 10.0 * float(np.nanmax(np.abs(ctx.r0[ctx.ok]))) if ctx.ok.any() else 1.0
    keep = ctx.ok

    def fun(x: np.ndarray) -> np.ndarray:
        r = ctx.residual(causes, x[F:], x[:F])
        return np.full(int(keep.sum()), worst) if r is None else np.nan_to_num(r[keep])

    x, evals = bounded_refit(ctx, causes, start, start_u, fun, diff_step=THRESHOLDS["probe_step"],
                             max_nfev=int(THRESHOLDS["far_evaluations"]))
    r = ctx.residual(causes, x[F:], x[:F])
    if r is None:
        return Refit(x[:F], x[F:], np.full_like(ctx.r0, np.nan), math.inf, evals, far=True)
    return Refit(x[:F], x[F:], r, ctx.ssr(r), evals, far=True)


def bounded_refit(ctx: ProbeContext, causes: Sequence[Cause], start: Sequence[float], start_u: np.ndarray,
                  fun: Callable[[np.ndarray], np.ndarray], *, diff_step: float, max_nfev: int
                  ) -> tuple[np.ndarray, int]:
    """Minimise ``‖fun(x)‖²`` over ``x = [u, theta]`` (F free parameters in the unit box, then the causes' sizes
    inside their search ranges) from ``[start_u, start]``: the trust-region reflective algorithm of
    :func:`scipy.optimize.least_squares` with forward-difference Jacobians (relative step ``diff_step``), at most
    ``max_nfev`` evaluations of ``fun`` besides the Jacobians'. A degenerate range (a cause bounded at one point)
    is held fixed; with nothing free the start is returned. Used by :func:`refit_far` and by the separation of
    a designed trial (:func:`~vid2sid_ros.calibration.design.separation`).

    Returns:
        ``(x (F + C,), evaluations)``: the end point and the evaluations spent, Jacobian columns included.
    """
    from scipy.optimize import least_squares

    F = len(ctx.free)
    lo = np.concatenate([np.zeros(F), [c.bounds[0] for c in causes]])
    hi = np.concatenate([np.ones(F), [c.bounds[1] for c in causes]])
    x0 = np.clip(np.concatenate([np.asarray(start_u, float), np.atleast_1d(np.asarray(start, float))]), lo, hi)
    free_dims = hi > lo
    if not free_dims.any():
        return x0, 1
    fixed = x0.copy()

    def sub(z: np.ndarray) -> np.ndarray:
        x = fixed.copy()
        x[free_dims] = z
        return fun(x)

    res = least_squares(sub, x0[free_dims], bounds=(lo[free_dims], hi[free_dims]), method="trf", x_scale="jac",
                        diff_step=diff_step, max_nfev=max_nfev)
    x = fixed.copy()
    x[free_dims] = res.x
    return x, int(res.nfev) + int(res.njev or 0) * int(free_dims.sum()) + 1


def _at_edge(cause: Cause, theta: float) -> bool:
    if isinstance(cause, Composite):
        return False
    lo, hi = cause.bounds
    tol = 1e-3 * (hi - lo)
    return (theta <= lo + tol and lo != 0.0) or (theta >= hi - tol and hi != 0.0)


def polish(ctx: ProbeContext, members: Sequence[Score], F: np.ndarray, rounds: int = 2) -> float:
    """Refine the refits of causes that tie, so that the tie is decided by the data, not by the refits' accuracy.

    Each member's refit is continued ``rounds`` times from where it ended (free parameters and the
    cause's size both, ``refit_evaluations`` chord steps each). Returns the refits' accuracy: the
    largest decrease of a member's sum of squares in its last round (unit²); a chord Gauss–Newton
    that converges at least linearly with rate ≤ 1/2 is then within that of its minimum. A member
    with no refit (screened only) is left as it is.
    """
    accuracy = 0.0
    for m in members:
        if m.refit is None:
            continue
        last = 0.0
        for _ in range(rounds):
            r = refit(ctx, m.parts, m.probe_columns, F, start=m.refit.theta, start_r=m.refit.r, start_u=m.refit.u)
            last = max(m.refit.ssr - r.ssr, 0.0)
            if r.ssr < m.refit.ssr:
                r.evaluations += m.refit.evaluations
                m.refit = r
        accuracy = max(accuracy, last)
    return accuracy


def decide(ctx: ProbeContext, scores: list[Score], null: Refit, accuracy: float | None = None) -> dict[str, Any]:
    """Score the refitted causes against the null model and each other (module docstring).

    ``accuracy``: the refits' accuracy (unit², :func:`polish`); when given it replaces the
    ``refit_accuracy`` share of the best cause's reduction in the tie bound.

    Returns:
        ``{"verdict": "named" | "indistinguishable" | "none", "set": [Score] (best first),
        "critical": χ² threshold per cause, "tie": the sum-of-squares difference that cannot be
        resolved (unit²), "s0": S_0}``.
    """
    alpha, n = THRESHOLDS["alpha"], max(len(scores), 1)
    crit = chi2_ppf(1.0 - alpha / n, 1)
    s0, sigma2 = null.ssr, ctx.sigma2
    for sc in scores:
        if sc.refit is None:  # screened only now, whatever an earlier decision (on refits since put back) said
            sc.gain, sc.lr, sc.significant = 0.0, 0.0, False
            continue
        sc.gain = s0 - sc.refit.ssr
        sc.lr = sc.gain / sigma2 if sigma2 > 0 else (math.inf if sc.gain > 0 else 0.0)
        sc.determined = not any(_at_edge(p, float(t)) for p, t in zip(sc.parts, sc.refit.theta))
        crit_c = chi2_ppf(1.0 - alpha / n, sc.dims)
        sc.significant = (sc.lr > crit_c and s0 > 0 and sc.gain >= THRESHOLDS["min_share"] * s0 and sc.determined)
    sig = sorted([s for s in scores if s.significant], key=lambda s: s.refit.ssr)
    out = {"critical": crit, "s0": s0, "tie": 0.0, "set": [], "verdict": "none"}
    if not sig:
        return out
    best = sig[0]
    tie = max(chi2_ppf(1.0 - alpha, 1) * sigma2,
              THRESHOLDS["refit_accuracy"] * best.gain if accuracy is None else accuracy)
    members = [s for s in scores if s.refit is not None and s.determined and s.refit.ssr - best.refit.ssr <= tie]
    members.sort(key=lambda s: s.refit.ssr)
    # a linearised gain as large as the best's refitted one cannot be excluded either: screened only, or a
    # refit that fell short of its own linear prediction (a threshold effect: friction, a dead-zone)
    for s in scores:
        if s not in members and s.column is not None and s.share_linear * s0 >= best.gain - tie and (
                s.refit is None or s.determined):
            s.notes.append("kept on its linearised share: its refit fell short of it" if s.refit is not None
                           else "screened only (not refitted)")
            members.append(s)
    out.update(tie=tie, set=members, verdict="named" if len({m.cause.kind for m in members}) == 1 else
               "indistinguishable")
    return out


def held_out_check(ctx: ProbeContext, causes: Sequence[Cause], columns: Sequence[np.ndarray], F: np.ndarray,
                   fitted: Refit, null: Refit) -> dict[str, Any]:
    """Refit with ``causes`` free on training data and score on held-out data.

    With holdout trials (``ctx.holdout``): the training refits ``fitted`` (with the causes) and
    ``null`` (without) are scored on them. Otherwise the last ``held_out_time`` of every trial is
    held out: both refits are redone on the earlier samples and scored on the later ones.

    Returns:
        ``{"data": "holdout trials" | "held-out time (last 30 % of each trial)", "before", "after"
        (RMS, unit), "unit", "improved": bool}``; ``before``/``after`` None when not computable.
    """
    if ctx.holdout is not None:
        r0 = ctx.residual([], [], null.u, objective=ctx.holdout)
        r1 = ctx.residual(causes, fitted.theta, fitted.u, objective=ctx.holdout)
        data = "holdout trials"
        before = _rms(r0)
        after = _rms(r1)
    else:
        h = THRESHOLDS["held_out_time"]
        train = ctx.index.frac < 1.0 - h
        # from the full-data sizes: a timing cause is far from linear at 0; a refit from afar also from its free
        # parameters (the null's and the cause's), which moved far from the identified point
        u_null, u_fit = (null.u, fitted.u) if fitted.far else (None, None)
        n0 = refit(ctx, [], [], F, rows=train, start_u=u_null,
                   start_r=ctx.residual([], [], u_null) if fitted.far else None)
        start = [float(t) for t in fitted.theta]
        n1 = refit(ctx, causes, columns, F, rows=train, start=start, start_r=ctx.residual(causes, start, u_fit),
                   start_u=u_fit)
        data = f"held-out time (last {100 * h:.0f} % of each trial)"
        before, after = ctx.rms(n0.r, ~train), ctx.rms(n1.r, ~train)
    ok = before is not None and after is not None and math.isfinite(before) and math.isfinite(after)
    improved = bool(ok and after <= (1.0 - THRESHOLDS["held_out_gain"]) * before)
    return {"data": data, "before": before if ok else None, "after": after if ok else None, "unit": ctx.unit,
            "improved": improved}


def _rms(r: np.ndarray | None) -> float | None:
    if r is None:
        return None
    x = r[np.isfinite(r)]
    return float(math.sqrt(np.mean(x * x))) if x.size else None
