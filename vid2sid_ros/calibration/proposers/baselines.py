"""The five black-box baselines of the Vid2Sid paper, from maintained libraries.

All minimise the training pixel MAE over the free parameters in normalised
coordinates ``u ∈ [0, 1]^n`` (``ParameterSet.to_unit_vector``), start from the
calibration's start point, and pay for every evaluation through
``context.evaluate`` (the loop's rollout meter), so they compete at the same budget.

======== ==================================================================================
random   uniform draws in the normalised box, ``numpy.random.default_rng([seed, iteration])``
nelder-mead ``scipy.optimize.minimize(method="Nelder-Mead", bounds=[(0, 1)]*n)``, initial
         simplex ``u0 + 0.1 e_i`` (toward the interior), restarted from the best vertex with a
         halved simplex when it converges
golden-cd coordinate descent, one ``scipy.optimize.minimize_scalar(method="bounded")``
         (golden section + parabolic steps, Brent) per coordinate; sweep ``k`` searches
         ``u_j ± 0.5^(k+1)`` clipped to [0, 1]
bo       Gaussian-process Bayesian optimisation, ``skopt.Optimizer(base_estimator="GP",
         acq_func="EI")``, ``n + 1`` random initial points, seeded (``backend="tpe"``:
         ``optuna.samplers.TPESampler(multivariate=True)`` instead, for installs without
         scikit-optimize)
cmaes    ``cmaes.CMA`` (bounded, σ0 = 0.25, default population ``4 + ⌊3 ln n⌋``), seeded,
         restarted with a new seed when it stops
======== ==================================================================================

Budget per iteration: the remaining evaluations divided evenly over the remaining
iterations (at least one), so the whole budget is spent by the last iteration.

Population methods evaluate a batch at once on the calibration's executor
(``context.evaluate_many``): a CMA-ES generation (its points asked before any is told, as
``cmaes.CMA`` requires) and an iteration's random draws. The batch evaluates exactly the points,
in the order, that one-at-a-time evaluation would, so every backend and the serial loop give the
same history. Nelder-Mead, golden-section and Bayesian optimisation choose each point from the
previous one's error and stay sequential.

Resume: each proposer rebuilds its optimiser from scratch at every iteration and
replays the evaluations recorded in ``context.history`` (``extra["evaluations"]`` of each
record) from a cache — deterministic optimisers ask the same points again and get the
same answers without a rollout — then continues with new, charged evaluations. The
next proposal is thus a function of (history, seed) only, so an interrupted run
resumes to the same result.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

from .proposer import BudgetExhausted, Evaluation, Proposal, ProposalContext

__all__ = ["RandomSearch", "NelderMead", "GoldenCoordinateDescent", "BayesianOptimization",
           "BayesianOptimizationTPE", "CMAES", "history_evaluations"]

#: error assigned to failed (diverged) evaluations inside optimisers, px.
FAILED_PENALTY_PX = 1.0e4


class _QuotaReached(Exception):
    """This iteration's share of the budget is spent."""


def history_evaluations(ctx: ProposalContext) -> list[tuple[dict[str, float], float]]:
    """Every evaluation recorded in ``ctx.history``, oldest first: ``(free values, error px)``.

    Failed evaluations have ``error = inf``.
    """
    out = []
    for r in ctx.history:
        for e in r.extra.get("evaluations", []):
            err = e.get("error_px")
            out.append(({k: float(v) for k, v in e["values"].items()}, math.inf if err is None else float(err)))
    return out


def evaluations_this_iteration(ctx: ProposalContext, *, unlimited_default: int) -> int:
    """Even share of the remaining evaluations over the remaining iterations (>= 1)."""
    cost = max(len(ctx.real), 1)
    from ..loop import UNLIMITED_ROLLOUTS

    if ctx.rollouts_remaining >= UNLIMITED_ROLLOUTS:
        return unlimited_default
    evals = ctx.rollouts_remaining // cost
    return max(1, math.ceil(evals / max(ctx.iterations_remaining, 1))) if evals > 0 else 0


class _Runner:
    """Objective ``u -> error`` with a replay cache and this iteration's quota."""

    def __init__(self, ctx: ProposalContext, quota: int) -> None:
        self.ctx = ctx
        self.free = ctx.parameters.free
        self.names = [s.name for s in self.free]
        self.cache: dict[tuple[float, ...], float] = {}
        for values, err in history_evaluations(ctx):
            if all(n in values for n in self.names):
                self.cache[tuple(values[n] for n in self.names)] = err
        self.quota = quota
        self.new: list[Evaluation] = []
        self.calls = 0

    def values(self, u: np.ndarray) -> dict[str, float]:
        u = np.clip(np.asarray(u, dtype=float).ravel(), 0.0, 1.0)
        return {s.name: s.clip(s.from_unit(ui)) for s, ui in zip(self.free, u)}

    def unit(self, values: dict[str, float]) -> np.ndarray:
        return np.array([s.to_unit(values[s.name]) for s in self.free])

    def __call__(self, u: np.ndarray) -> float:
        self.calls += 1
        vals = self.values(u)
        key = tuple(vals[n] for n in self.names)
        if key in self.cache:
            e = self.cache[key]
            return e if math.isfinite(e) else FAILED_PENALTY_PX
        if len(self.new) >= self.quota:
            raise _QuotaReached
        try:
            ev = self.ctx.evaluate(vals)
        except BudgetExhausted:
            raise _QuotaReached from None
        self.new.append(ev)
        err = ev.error_px if (not ev.failed and math.isfinite(ev.error_px)) else math.inf
        self.cache[key] = err
        return err if math.isfinite(err) else FAILED_PENALTY_PX

    def many(self, us: list[np.ndarray]) -> list[float]:
        """``[self(u) for u in us]`` with the new points of the batch rolled out together on the calibration's
        executor (``context.evaluate_many``): the same points evaluated in the same order, the same cache
        answers and the same quota, so the optimiser is told exactly what one-at-a-time evaluation tells it.

        Args:
            us: points in the normalised box, each (n,).

        Returns:
            their errors (px; :data:`FAILED_PENALTY_PX` for a failed rollout), in order.

        Raises:
            _QuotaReached: after the points that fit this iteration's quota were evaluated (and cached), when a
                later point of the batch is new, as the one-at-a-time loop would raise at that point.
        """
        if self.ctx.evaluate_many is None:
            return [self(u) for u in us]
        keys = []
        for u in us:
            vals = self.values(u)
            keys.append((tuple(vals[n] for n in self.names), vals))
        todo: dict[tuple[float, ...], dict[str, float]] = {}
        for key, vals in keys:
            if key not in self.cache and key not in todo:
                todo[key] = vals
        room = max(0, self.quota - len(self.new))
        batch = list(todo.items())[:room]
        if batch:
            try:
                evs = self.ctx.evaluate_many([v for _, v in batch])
            except BudgetExhausted:
                raise _QuotaReached from None
            for (key, _), ev in zip(batch, evs):
                self.new.append(ev)
                self.cache[key] = ev.error_px if (not ev.failed and math.isfinite(ev.error_px)) else math.inf
        out = []
        for key, _ in keys:
            self.calls += 1
            if key not in self.cache:
                raise _QuotaReached
            e = self.cache[key]
            out.append(e if math.isfinite(e) else FAILED_PENALTY_PX)
        return out

    @property
    def best_known(self) -> tuple[tuple[float, ...], float] | None:
        finite = [(k, e) for k, e in self.cache.items() if math.isfinite(e)]
        return min(finite, key=lambda kv: kv[1]) if finite else None


class _BlackBox:
    """Shared propose(): run the search until the quota, propose this iteration's best."""

    name = ""
    wants_video = False
    description = ""

    def __init__(self, *, seed: int | None = None, evaluations_per_iteration: int | None = None) -> None:
        self.seed = seed
        self.evaluations_per_iteration = evaluations_per_iteration

    def _search(self, ctx: ProposalContext, f: _Runner, seed: int) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def propose(self, ctx: ProposalContext) -> Proposal:
        if ctx.evaluate is None:
            raise RuntimeError(f"{self.name} needs context.evaluate (a black-box search evaluates candidates)")
        seed = int(self.seed if self.seed is not None else ctx.rng_seed)
        quota = self.evaluations_per_iteration or evaluations_this_iteration(
            ctx, unlimited_default=len(ctx.parameters.free) + 1)
        f = _Runner(ctx, quota)
        status = ""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # optimiser convergence chatter
            try:
                status = self._search(ctx, f, seed)
            except _QuotaReached:
                status = ""
        prior = f.best_known
        valid = [e for e in f.new if not e.failed]
        best_so_far = f"{prior[1]:.3f} px" if prior else "none"
        if valid:
            b = min(valid, key=lambda e: e.error_px)
            text = (f"{self.description}: {len(f.new)} new evaluation(s) this iteration, best {b.error_px:.3f} px; "
                    f"best so far {best_so_far}. {status}".strip())
            return Proposal(values={n: b.values[n] for n in f.names}, rationale=text + " (black-box search: no "
                            "physical diagnosis)", confidence=0.5, best_evaluation=b)
        if prior is not None:
            vals = dict(zip(f.names, prior[0]))
            return Proposal(values=vals, rationale=f"{self.description}: no new evaluation ({status or 'search done'}); "
                            f"proposing the best point seen ({best_so_far})", confidence=0.3)
        raise RuntimeError(f"{self.name}: no successful evaluation yet")


class RandomSearch(_BlackBox):
    """Uniform random search in the normalised box (seeded per iteration)."""

    name = "random"
    description = "random search (uniform in the normalised box)"

    def _search(self, ctx: ProposalContext, f: _Runner, seed: int) -> str:
        rng = np.random.default_rng([seed, int(ctx.iteration)])
        n = len(f.names)
        f.many([rng.uniform(0.0, 1.0, size=n) for _ in range(f.quota)])  # one batch on the executor
        return ""


def _start_unit(ctx: ProposalContext, f: _Runner) -> np.ndarray:
    first = ctx.history[0].values if ctx.history else ctx.current
    return f.unit({n: first[n] for n in f.names})


class NelderMead(_BlackBox):
    """Bounded Nelder–Mead (scipy) with restarts, replayed from the history."""

    name = "nelder-mead"
    description = "Nelder-Mead simplex (scipy, normalised coordinates)"

    def __init__(self, *, initial_step: float = 0.1, xatol: float = 1e-3, fatol: float = 1e-3, **kw: Any) -> None:
        super().__init__(**kw)
        self.initial_step, self.xatol, self.fatol = initial_step, xatol, fatol

    def _search(self, ctx: ProposalContext, f: _Runner, seed: int) -> str:
        from scipy.optimize import minimize

        x = _start_unit(ctx, f)
        n = x.size
        step = self.initial_step
        for restart in range(30):
            simplex = [x.copy()]
            for i in range(n):
                v = x.copy()
                v[i] = v[i] + step if v[i] + step <= 1.0 else v[i] - step
                simplex.append(v)
            res = minimize(f, x, method="Nelder-Mead", bounds=[(0.0, 1.0)] * n,
                           options={"initial_simplex": np.array(simplex), "xatol": self.xatol, "fatol": self.fatol,
                                    "maxfev": 100000})
            x = np.clip(res.x, 0.0, 1.0)
            step *= 0.5
            if step < self.xatol:
                return f"the simplex shrank below xatol = {self.xatol:g} (normalised) after {restart + 1} restart(s)"
        return "restart limit reached"


class GoldenCoordinateDescent(_BlackBox):
    """Golden-section (Brent bounded) line search along one coordinate at a time."""

    name = "golden-cd"
    description = "golden-section coordinate descent (scipy minimize_scalar, bounded)"

    def __init__(self, *, evaluations_per_coordinate: int = 4, **kw: Any) -> None:
        super().__init__(**kw)
        self.evaluations_per_coordinate = evaluations_per_coordinate

    def _search(self, ctx: ProposalContext, f: _Runner, seed: int) -> str:
        from scipy.optimize import minimize_scalar

        u = _start_unit(ctx, f)
        best = f(u)
        for sweep in range(40):
            width = 0.5 ** (sweep + 1)
            for j in range(u.size):
                lo, hi = max(0.0, u[j] - width), min(1.0, u[j] + width)

                def line(t: float, j: int = j) -> float:
                    v = u.copy()
                    v[j] = t
                    return f(v)

                res = minimize_scalar(line, bounds=(lo, hi), method="bounded",
                                      options={"maxiter": self.evaluations_per_coordinate, "xatol": 1e-3})
                if float(res.fun) < best:
                    best = float(res.fun)
                    u[j] = float(res.x)
        return "sweep limit reached"


class BayesianOptimization(_BlackBox):
    """Bayesian optimisation, rebuilt from the history every iteration.

    Args:
        backend: ``"gp"`` — Gaussian process with expected improvement
            (``skopt.Optimizer``, scikit-optimize), the classic BO; or ``"tpe"`` — the
            tree-structured Parzen estimator (``optuna.samplers.TPESampler``,
            multivariate), for installs without scikit-optimize.
        acq_func: skopt acquisition function (gp backend).
        initial_points: random initial design size (default n + 1).

    Raises:
        ValueError: unknown backend. ImportError: the backend's library is missing
            (the message names the package to install).
    """

    name = "bo"

    def __init__(self, *, backend: str = "gp", acq_func: str = "EI", initial_points: int | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        if backend not in ("gp", "tpe"):
            raise ValueError(f"bo: backend must be 'gp' (scikit-optimize) or 'tpe' (optuna), got {backend!r}")
        self.backend, self.acq_func, self.initial_points = backend, acq_func, initial_points
        try:
            if backend == "gp":
                import skopt  # noqa: F401
                import threadpoolctl  # noqa: F401
            else:
                import optuna  # noqa: F401
        except ImportError as err:
            fix = ("pip install scikit-optimize, or use make_proposer('bo', backend='tpe')" if backend == "gp"
                   else "pip install optuna")
            raise ImportError(f"bo (backend {backend!r}): {err}; {fix}") from None
        self.description = ("Bayesian optimisation (scikit-optimize GP, expected improvement)" if backend == "gp"
                            else "Bayesian optimisation (optuna TPE, multivariate)")

    def _search(self, ctx: ProposalContext, f: _Runner, seed: int) -> str:
        if self.backend == "tpe":
            return self._search_tpe(ctx, f, seed)
        from threadpoolctl import threadpool_limits

        # one BLAS thread: multi-threaded reductions in the GP fit are not bit-reproducible,
        # and the acquisition argmax amplifies the last bits into different proposals
        with threadpool_limits(limits=1):
            return self._search_gp(ctx, f, seed)

    def _search_tpe(self, ctx: ProposalContext, f: _Runner, seed: int) -> str:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        n = len(f.names)
        dists = {f"u{i}": optuna.distributions.FloatDistribution(0.0, 1.0) for i in range(n)}
        sampler = optuna.samplers.TPESampler(seed=int(seed) * 7919 + int(ctx.iteration), multivariate=True,
                                             n_startup_trials=self.initial_points or n + 1)
        study = optuna.create_study(sampler=sampler, direction="minimize")
        for key, err in f.cache.items():
            u = [min(max(float(v), 0.0), 1.0) for v in f.unit(dict(zip(f.names, key)))]
            study.add_trial(optuna.trial.create_trial(params={f"u{i}": u[i] for i in range(n)}, distributions=dists,
                                                      value=err if math.isfinite(err) else FAILED_PENALTY_PX))
        for _ in range(f.quota):
            trial = study.ask(dists)
            y = f(np.array([trial.params[f"u{i}"] for i in range(n)]))
            study.tell(trial, y)
        return ""

    def _search_gp(self, ctx: ProposalContext, f: _Runner, seed: int) -> str:
        from skopt import Optimizer

        n = len(f.names)
        opt = Optimizer([(0.0, 1.0)] * n, base_estimator="GP", acq_func=self.acq_func,
                        n_initial_points=self.initial_points or n + 1,
                        random_state=int(seed) * 7919 + int(ctx.iteration))
        xs, ys = [], []
        for key, err in f.cache.items():
            xs.append([min(max(float(v), 0.0), 1.0) for v in f.unit(dict(zip(f.names, key)))])
            ys.append(err if math.isfinite(err) else FAILED_PENALTY_PX)
        if xs:
            opt.tell(xs, ys)
        for _ in range(f.quota):
            x = opt.ask()
            y = f(np.asarray(x))
            opt.tell(x, y)
        return ""


class BayesianOptimizationTPE(BayesianOptimization):
    """``bo`` with the optuna TPE backend (registry name ``bo-tpe``)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(backend="tpe", **kw)


class CMAES(_BlackBox):
    """CMA-ES (the ``cmaes`` library) with box bounds, replayed from the history."""

    name = "cmaes"
    description = "CMA-ES (cmaes library, bounded, normalised coordinates)"

    def __init__(self, *, sigma0: float = 0.25, population_size: int | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.sigma0, self.population_size = sigma0, population_size

    def _search(self, ctx: ProposalContext, f: _Runner, seed: int) -> str:
        from cmaes import CMA

        mean = np.clip(_start_unit(ctx, f), 1e-6, 1 - 1e-6)
        n = mean.size
        bounds = np.array([[0.0, 1.0]] * n)
        for restart in range(100):
            es = CMA(mean=mean, sigma=self.sigma0, bounds=bounds, seed=seed + 104729 * restart,
                     population_size=self.population_size)
            gen = 0
            while not es.should_stop():
                xs = [es.ask() for _ in range(es.population_size)]  # a generation: one batch on the executor
                es.tell(list(zip(xs, f.many(xs))))
                gen += 1
            best = f.best_known
            if best is not None:
                mean = np.clip(f.unit(dict(zip(f.names, best[0]))), 1e-6, 1 - 1e-6)
        return "restart limit reached"


#: name -> class, for the registry
BASELINES: dict[str, Callable[..., _BlackBox]] = {
    "random": RandomSearch, "nelder-mead": NelderMead, "golden-cd": GoldenCoordinateDescent,
    "bo": BayesianOptimization, "bo-tpe": BayesianOptimizationTPE, "cmaes": CMAES,
}
