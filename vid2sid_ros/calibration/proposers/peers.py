"""The strongest peers: general nonlinear least-squares solvers on the same residual vector.

A system-identification engineer with a simulator and a trajectory would not reach for
a black-box optimiser first; she would hand the signed residual vector to a bounded
least-squares solver. These two proposers do exactly that, under the same rules as
every other method:

- the same residual vector as the reasoner (:func:`~vid2sid_ros.calibration.objective.residual_vector`:
  sim − real at every real-valid sample, px, x and y);
- the free parameters (physics and nuisance) in the same normalised coordinates
  ``u ∈ [0, 1]^n`` (``ParameterSet.to_unit_vector``, linear or log as each spec says),
  box bounds ``[0, 1]``;
- every rollout goes through ``context.evaluate`` (the loop's meter): a forward-difference
  Jacobian costs one evaluation per free parameter plus the base point, i.e. ``(n + 1)``
  evaluations × the number of training trials in rollouts (parameters that only change the
  measurement, such as the latency, cost no rollout: the objective re-uses the twin's
  trajectory, see :mod:`~vid2sid_ros.calibration.nuisance`).

========== ======================================================================================
name       solver
========== ======================================================================================
least-squares  ``scipy.optimize.least_squares(method="trf", jac="2-point", bounds=(0, 1),
           x_scale=1, diff_step=fd_step)`` (Branch et al. 1999, trust-region reflective)
mujoco-sysid   ``mujoco.sysid.optimize(..., optimizer="mujoco")``: MuJoCo 4.0's system-identification
           toolbox with its native ``mujoco.minimize.least_squares`` backend (Levenberg–Marquardt
           with box bounds, forward-difference Jacobian, step ``fd_step``); its parameters are
           ``mujoco.sysid.Parameter`` objects in the same normalised coordinates
========== ======================================================================================

The budget: the solver runs in the first iteration with every remaining rollout (a
least-squares solver is one optimisation, not an iterative dialogue); when the budget runs
out mid-solve, the best point evaluated so far is proposed. Later iterations hold that
point and spend nothing. A diverged rollout becomes a residual of :data:`FAILED_RESIDUAL_PX`
at every sample, so the solver backs off.

The finite-difference step: both solvers default to a relative step of ~1.5e-8, meant
for analytic functions; a simulator with dry friction and contacts is piecewise smooth,
so both use ``fd_step`` (default 1e-3 in normalised units — the same order as the
reasoner's and the identifiability check's) — what a careful engineer would set.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..objective import residual_vector
from .proposer import BudgetExhausted, Evaluation, Proposal, ProposalContext
from .rationale import moved_sentences

__all__ = ["LeastSquaresPeer", "MujocoSysidPeer", "FAILED_RESIDUAL_PX", "PeerUnavailableError"]

#: residual assigned to every sample of a failed (diverged) evaluation, px
FAILED_RESIDUAL_PX = 100.0



def _error_text(ctx) -> str:
    """The current training error with its measurement unit (px, mm, rad or sigma)."""
    from ...core.trajectory import format_error
    from ..objective import measurement_unit

    return format_error(ctx.current_eval.error_px, measurement_unit(list(ctx.real)))

class PeerUnavailableError(ImportError):
    """The peer's optional dependency is missing; the message says what to install."""


class _Stop(Exception):
    """The budget ran out inside the solver."""


class _ResidualRunner:
    """``u -> residual vector`` through ``context.evaluate``, remembering the best evaluation."""

    def __init__(self, ctx: ProposalContext) -> None:
        self.ctx = ctx
        self.params = ctx.parameters
        self.free = ctx.parameters.free
        self.names = [s.name for s in self.free]
        r0 = residual_vector(ctx.current_eval.sim, ctx.real) if not ctx.current_eval.failed else np.zeros(0)
        self.m = int(r0.size)
        self.evaluations: list[Evaluation] = []
        self.best: Evaluation | None = None

    def unit(self, values) -> np.ndarray:
        return np.array([s.to_unit(float(values[s.name])) for s in self.free])

    def values(self, u: np.ndarray) -> dict[str, float]:
        u = np.clip(np.asarray(u, float).ravel(), 0.0, 1.0)
        return {s.name: s.clip(s.from_unit(float(ui))) for s, ui in zip(self.free, u)}

    def __call__(self, u: np.ndarray) -> np.ndarray:
        try:
            ev = self.ctx.evaluate(self.values(u))
        except BudgetExhausted:
            raise _Stop from None
        self.evaluations.append(ev)
        if ev.failed or len(ev.sim) != len(self.ctx.real):
            return np.full(self.m, FAILED_RESIDUAL_PX)
        if self.best is None or ev.error_px < self.best.error_px:
            self.best = ev
        r = residual_vector(ev.sim, self.ctx.real)
        if r.size != self.m:  # cannot happen for a non-failed evaluation; never hand the solver a ragged vector
            return np.full(self.m, FAILED_RESIDUAL_PX)
        return np.where(np.isfinite(r), r, FAILED_RESIDUAL_PX)


class _LeastSquaresPeer:
    """Shared ``propose``: solve once with the whole budget, then hold (module docstring)."""

    name = ""
    wants_video = False
    description = ""

    def __init__(self, *, fd_step: float = 1e-3, max_iterations: int = 200) -> None:
        if not 0.0 < fd_step < 0.5:
            raise ValueError(f"{self.name}: fd_step must be in (0, 0.5) (normalised units), got {fd_step}")
        if max_iterations < 1:
            raise ValueError(f"{self.name}: max_iterations must be >= 1, got {max_iterations}")
        self.fd_step = float(fd_step)
        self.max_iterations = int(max_iterations)

    def _solve(self, f: _ResidualRunner, u0: np.ndarray) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def propose(self, ctx: ProposalContext) -> Proposal:
        """Run the solver (first iteration) or hold its answer (later iterations).

        Raises:
            RuntimeError: without ``context.evaluate``, or when the current point failed.
        """
        if ctx.evaluate is None:
            raise RuntimeError(f"{self.name} needs context.evaluate (it evaluates residuals)")
        if ctx.current_eval.failed:
            raise RuntimeError(f"{self.name}: the current parameters cannot be simulated ({ctx.current_eval.message})")
        names = ctx.parameters.free_names
        done = [r for r in ctx.history if r.extra.get("peer_solved") == self.name]
        if done:
            return Proposal(values={n: ctx.current[n] for n in names}, confidence=float(done[-1].confidence),
                            rationale=f"{self.description}: solved in iteration {done[-1].iteration}; holding the "
                                      f"solution (training MAE {_error_text(ctx)}) and spending no "
                                      "more rollouts.", extra={"peer_solved": self.name})
        f = _ResidualRunner(ctx)
        u0 = f.unit(ctx.current)
        try:
            status = self._solve(f, u0)
        except _Stop:
            status = "the rollout budget ran out inside the solver; proposing the best point it evaluated"
        best = f.best
        if best is None or best.error_px >= ctx.current_eval.error_px:
            best = None
        after = best.values if best is not None else ctx.current
        sentences = moved_sentences(ctx.parameters, ctx.current, after,
                                    observation=(f"the training MAE fell {ctx.current_eval.error_px:.3f} → "
                                                 f"{best.error_px:.3f} px" if best is not None else ""))
        rollouts = sum(e.rollouts for e in f.evaluations)
        trace = (f"{self.description}: {len(f.evaluations)} residual evaluation(s), {rollouts} rollout(s); {status}. "
                 "(General least squares on the trajectory residuals: no physical diagnosis.)")
        conf = 0.5 if best is not None else 0.2
        return Proposal(values={n: after[n] for n in names}, rationale=" ".join(sentences + [trace]),
                        confidence=conf, best_evaluation=best, extra={"peer_solved": self.name})


class LeastSquaresPeer(_LeastSquaresPeer):
    """``scipy.optimize.least_squares`` (trf, 2-point, bounds) on the residual vector.

    Args:
        fd_step: forward-difference step, normalised units (scipy ``diff_step`` relative to
            ``max(1, |u|)``; here ``u`` is in [0, 1] so it is absolute).
        max_iterations: cap on solver iterations (the rollout budget usually binds first).
    """

    name = "least-squares"
    description = "scipy least_squares (trust-region reflective, 2-point Jacobian, normalised coordinates)"

    def _solve(self, f: _ResidualRunner, u0: np.ndarray) -> str:
        from scipy.optimize import least_squares

        res = least_squares(f, u0, jac="2-point", bounds=(np.zeros_like(u0), np.ones_like(u0)), method="trf",
                            diff_step=self.fd_step, x_scale=1.0, max_nfev=self.max_iterations * (u0.size + 1))
        return f"solver status {res.status}: {res.message}"


def _mujoco_sysid() -> Any:
    import importlib

    try:
        sysid = importlib.import_module("mujoco.sysid")
    except ImportError as err:  # pragma: no cover - mujoco is a hard dependency
        raise PeerUnavailableError(f"mujoco-sysid needs mujoco >= 4.0 with mujoco.sysid: {err}") from None
    if not hasattr(sysid, "optimize"):
        missing = []
        for mod in ("absl", "tabulate", "colorama"):
            try:
                __import__(mod)
            except ImportError:
                missing.append({"absl": "absl-py"}.get(mod, mod))
        raise PeerUnavailableError("mujoco-sysid: mujoco.sysid is installed without its optional dependencies "
                                   f"({', '.join(missing) or 'unknown'}); pip install 'mujoco[sysid]' "
                                   "(or the pins in requirements-ros.txt)")
    return sysid


class MujocoSysidPeer(_LeastSquaresPeer):
    """``mujoco.sysid.optimize`` with the ``mujoco.minimize.least_squares`` backend.

    Args:
        fd_step: forward-difference step of ``mujoco.minimize`` (``eps``), normalised units.
        max_iterations: ``max_iters`` of the backend.

    Raises:
        PeerUnavailableError: ``mujoco.sysid``'s optional dependencies are missing (the
            message names them and the install command).
    """

    name = "mujoco-sysid"
    description = "mujoco.sysid (mujoco.minimize.least_squares backend, normalised coordinates)"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._sysid = _mujoco_sysid()

    def _solve(self, f: _ResidualRunner, u0: np.ndarray) -> str:
        sysid = self._sysid
        pd = sysid.ParameterDict()
        for s, u in zip(f.free, u0):
            pd.add(sysid.Parameter(s.name, nominal=float(u), min_value=0.0, max_value=1.0))

        def residual_fn(x: np.ndarray, params: Any) -> tuple[list[np.ndarray], None, None]:
            # mujoco.minimize evaluates residuals column-wise: x is (n,) or (n, k)
            x = np.asarray(x, float)
            cols = x.reshape(x.shape[0], -1)
            out = np.stack([f(cols[:, j]) for j in range(cols.shape[1])], axis=1)
            return [out if x.ndim == 2 else out[:, 0]], None, None

        import io
        import logging

        absl_logger = logging.getLogger("absl")
        level = absl_logger.level
        absl_logger.setLevel(logging.ERROR)  # its parameter table goes to the log, not our output
        log = io.StringIO()  # the backend's per-iteration table (it prints even with verbose=False)
        try:
            sysid.optimize(pd, residual_fn, optimizer="mujoco", verbose=False, max_iters=self.max_iterations,
                           eps=self.fd_step, output=log)
        finally:
            absl_logger.setLevel(level)
        last = [ln.strip() for ln in log.getvalue().splitlines() if ln.strip()]
        return "solver finished" + (f" ({last[-1]})" if last else "")


#: name -> class, for the registry
PEERS: dict[str, Callable[..., _LeastSquaresPeer]] = {"least-squares": LeastSquaresPeer,
                                                       "mujoco-sysid": MujocoSysidPeer}
