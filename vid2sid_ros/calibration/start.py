"""Where a calibration starts: a generic global stage, plus optional named guesses.

No rig-specific code is on this path. A rig config's ``calibration.start`` block::

    calibration:
      start: {kind: multistart, points: 8, guess: pendulum_circle}

- ``kind: nominal`` (default): start from the spec's nominal values.
- ``kind: multistart``: evaluate the start point and ``points`` more, a scrambled Sobol
  sequence (:class:`scipy.stats.qmc.Sobol`, seeded by ``calibration.seed``) over the
  free parameters in normalised coordinates ``u in [0, 1]^n`` (linear or log per spec),
  on the training trials; the best becomes the start. **Cost:** ``(points + 1) x
  training trials`` rollouts, charged to ``calibration.rollout_budget`` (the proposer gets
  what is left).
- ``guess: NAME``: a start plugin from :data:`START_GUESSES` (package code, chosen by
  name; a config never names code). It reads the training trial and only *suggests*
  nominal values: bounds are never narrowed, a suggestion outside a parameter's bounds or
  not finite is logged and ignored, and a plugin that fails is logged and ignored — the
  calibration goes on from the nominal values.

Any other key of ``calibration.start`` is a start value ``{parameter: value}`` (the
loop's own ``CalibrationConfig.start``): a parameter of the rig, or a measurement nuisance
the calibration adds (``latency``, ``marker_offset.<keypoint>.<axis>``).
"""

from __future__ import annotations

import warnings
import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.names import did_you_mean
from ..core.parameters import ParameterSet
from ..core.trial import RealTrial

__all__ = ["StartConfig", "StartResult", "START_GUESSES", "START_KINDS", "parse_start", "apply_guess",
           "multistart", "generic_start", "StartError"]

#: guess plugin name -> "module:function" (package code): ``f(trajectory, parameters) -> {name: value}``
START_GUESSES: dict[str, str] = {
    "pendulum_circle": "vid2sid_ros.sim.pendulum:guess_start",
}
START_KINDS = ("nominal", "multistart")
_START_KEYS = ("kind", "points", "guess")
#: most multistart points (each a rollout per training trial; the Sobol table is points x free floats)
MAX_START_POINTS = 100_000


class StartError(ValueError):
    """A ``calibration.start`` block is invalid (one line naming file:key)."""


@dataclass(frozen=True)
class StartConfig:
    """A parsed ``calibration.start`` block.

    Attributes:
        kind: ``nominal`` or ``multistart``.
        points: multistart points besides the start point (>= 1).
        guess: start plugin name, or None.
    """

    kind: str = "nominal"
    points: int = 8
    guess: str | None = None


@dataclass
class StartResult:
    """What the start stage did.

    Attributes:
        parameters: the spec with nominal = the chosen start (bounds unchanged).
        rollouts: rollouts spent (charged to the budget).
        error: training error at the chosen start (measurement unit), or None (nominal kind).
        notes: one line per decision (guess used/ignored, multistart best point).
    """

    parameters: ParameterSet
    rollouts: int = 0
    error: float | None = None
    notes: list[str] = field(default_factory=list)


def parse_start(block: Any, where: str, parameters: ParameterSet | None = None,
                nuisances: Sequence[str] = ()) -> tuple[StartConfig, dict[str, float]]:
    """Split ``calibration.start`` into the start stage and start values.

    Args:
        block: the mapping (or None).
        where: ``file:calibration.start`` for messages.
        parameters: the rig's spec (start values are checked against it when given).
        nuisances: the measurement nuisance names the calibration may add
            (:func:`~vid2sid_ros.calibration.nuisance.nuisance_names`), accepted as start values
            too; the loop checks them against the nuisances it does add.

    Returns:
        ``(StartConfig, {parameter: value})``.

    Raises:
        StartError: bad kind / points / guess (with the valid names), a start value that is
            not a number or names no parameter.
    """
    if block is None:
        return StartConfig(), {}
    if not isinstance(block, Mapping):
        raise StartError(f"{where}: expected a mapping {{kind, points, guess}} or start values, got {block!r}")
    kind = block.get("kind", "multistart" if "points" in block else "nominal")
    if kind not in START_KINDS:
        raise StartError(f"{where}.kind: expected one of {', '.join(START_KINDS)}, got {kind!r}")
    points = block.get("points", 8)
    if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= MAX_START_POINTS:
        raise StartError(f"{where}.points: expected an integer in [1, {MAX_START_POINTS}] (rollouts per training "
                         f"trial each), got {points!r}")
    guess = block.get("guess")
    if guess is not None and guess not in START_GUESSES:
        raise StartError(f"{where}.guess: unknown start plugin {guess!r}{did_you_mean(guess, START_GUESSES)}; "
                         f"valid: {', '.join(START_GUESSES)}")
    values: dict[str, float] = {}
    for k, v in block.items():
        if k in _START_KEYS:
            continue
        if parameters is not None and k not in parameters and k not in nuisances:
            extra = [n for n in nuisances if n not in parameters]
            raise StartError(f"{where}.{k}: unknown parameter"
                             f"{did_you_mean(k, [*parameters.names, *extra, *_START_KEYS])}; "
                             f"valid: {', '.join(parameters.names)} (or kind, points, guess"
                             + (", or a measurement nuisance: latency, marker_offset.<keypoint>.<axis>)" if extra
                                else ")"))
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise StartError(f"{where}.{k}: expected a number (start value), got {v!r}")
        values[str(k)] = float(v)
    return StartConfig(str(kind), int(points), guess), values


def _plugin(name: str) -> Callable[..., Mapping[str, float]]:
    mod, fn = START_GUESSES[name].split(":")
    return getattr(importlib.import_module(mod), fn)


def apply_guess(parameters: ParameterSet, real: RealTrial, name: str,
                log: Callable[[str], None] = lambda s: None) -> tuple[ParameterSet, list[str]]:
    """Run start plugin ``name`` on the first training trajectory; take its suggestions as nominal values.

    Never narrows bounds. A suggestion for an unknown or frozen parameter, a non-finite one
    or one outside the parameter's bounds is ignored (logged); a plugin that raises is
    ignored (logged) and ``parameters`` returned unchanged.

    Returns:
        ``(parameters with the accepted suggestions as nominal, notes)``.
    """
    notes: list[str] = []
    try:
        suggested = dict(_plugin(name)(real.train[0], parameters))
    except Exception as err:  # noqa: BLE001 - a bad guess is logged and ignored, never a crash
        notes.append(f"start guess '{name}' failed and is ignored: {type(err).__name__}: {' '.join(str(err).split())}")
        for n in notes:
            log(n)
        return parameters, notes
    accepted = {}
    for k, v in suggested.items():
        if k not in parameters or parameters[k].frozen:
            continue
        s = parameters[k]
        if not (isinstance(v, (int, float)) and math.isfinite(float(v))):
            notes.append(f"start guess '{name}': {k} = {v!r} is not a finite number; ignored")
        elif not s.lower <= float(v) <= s.upper:
            notes.append(f"start guess '{name}': {k} = {float(v):.6g} {s.unit} is outside [{s.lower:g}, {s.upper:g}]; "
                         "ignored (bounds are never narrowed)")
        else:
            accepted[k] = float(v)
    if accepted:
        notes.append(f"start guess '{name}': " + ", ".join(f"{k} = {v:.6g}" for k, v in accepted.items()))
    for n in notes:
        log(n)
    return (parameters.with_nominal(accepted) if accepted else parameters), notes


def multistart(twin: Any, real: RealTrial, parameters: ParameterSet, *, points: int, seed: int = 0,
               executor: Any = None) -> tuple[dict[str, float], float, int, list[tuple[dict[str, float], float]]]:
    """Evaluate the nominal point and ``points`` Sobol points (normalised coordinates) on the training trials.

    The points are independent: they are evaluated as one batch on ``executor``
    (:func:`~vid2sid_ros.calibration.batch.evaluate_batch`; None: in this process, a MuJoCo twin's
    rollouts in one ``mujoco.rollout`` call), with exactly the serial loop's evaluations and rollout
    counts on every backend.

    Args:
        executor: a :class:`~vid2sid_ros.calibration.executor.Executor`, or None.

    Returns:
        ``(best values, best training error, rollouts spent, [(values, error) per point])``;
        failed evaluations (diverged twin) count as ``inf``.

    Raises:
        StartError: no free parameter.
    """
    from scipy.stats import qmc

    from .batch import evaluate_batch
    from .objective import TrialObjective

    n = len(parameters.free)
    if n == 0:
        raise StartError("calibration.start: multistart needs at least one free parameter")
    obj = TrialObjective(twin, real.train_excitations, real.train, parameters)
    base = parameters.nominal()
    with warnings.catch_warnings():  # a few points, not a power of 2: the balance property is not relied on
        warnings.filterwarnings("ignore", message="The balance properties of Sobol", category=UserWarning)
        u = qmc.Sobol(d=n, scramble=True, seed=np.random.default_rng([int(seed), 0x57A87])).random(int(points))
    candidates = [dict(base)] + [parameters.from_unit_vector(row, base) for row in u]
    table = []
    spent = 0
    for values, ev in zip(candidates, evaluate_batch(obj, candidates, executor)):
        spent += int(getattr(ev, "rollouts", obj.cost))
        err = float(ev.error_px) if not getattr(ev, "failed", False) else math.inf
        table.append((values, err))
    best = min(range(len(table)), key=lambda i: table[i][1])  # ties: the earliest (the nominal point first)
    return table[best][0], table[best][1], spent, table


def multistart_cost(cfg: StartConfig, n_train: int) -> int:
    """Rollouts the multistart of ``cfg`` will spend: ``(points + 1) x n_train`` training excitations
    (at least one), 0 when ``cfg`` is not a multistart."""
    if cfg.kind != "multistart":
        return 0
    return (int(cfg.points) + 1) * max(1, int(n_train))


def check_start_budget(cfg: StartConfig, n_train: int, budget: int | None, where: str,
                       budget_key: str = "calibration.rollout_budget") -> None:
    """Refuse a multistart that would spend the whole rollout budget (before any rollout).

    Args:
        n_train: training excitations (one rollout each per start point).
        budget: the calibration's rollout budget (None = unlimited).
        where: ``file:calibration.start`` for the message; ``budget_key``: what to raise instead.

    Raises:
        StartError: naming ``where.points``, the cost and the budget.
    """
    cost = multistart_cost(cfg, n_train)
    if budget is not None and cost and cost >= budget:
        raise StartError(f"{where}.points: the multistart costs {cost} rollouts, the whole budget is {budget} "
                         f"({cfg.points} points + the start point, x {max(1, int(n_train))} training "
                         f"excitation(s)); lower points or raise {budget_key}")


def generic_start(twin: Any, real: RealTrial, parameters: ParameterSet, cfg: StartConfig, *, seed: int = 0,
                  log: Callable[[str], None] = lambda s: None, budget: int | None = None,
                  where: str = "calibration.start", executor: Any = None) -> StartResult:
    """The start stage: an optional guess (nominal suggestions only), then an optional multistart.

    Args:
        budget: the calibration's rollout budget (None = unlimited): a multistart costing all
            of it is refused BEFORE any rollout (:func:`check_start_budget`).
        where: ``file:calibration.start`` for messages.
        executor: where the multistart's points are rolled out (:func:`multistart`); None: this process.

    Returns:
        :class:`StartResult` (rollouts to charge against the budget).

    Raises:
        StartError: the multistart would cost the whole budget (names ``where.points``).
    """
    check_start_budget(cfg, len(real.train_excitations), budget, where)
    notes: list[str] = []
    params = parameters
    if cfg.guess:
        params, gnotes = apply_guess(params, real, cfg.guess, log)
        notes += gnotes
    if cfg.kind != "multistart":
        return StartResult(params, 0, None, notes)
    best, err, spent, table = multistart(twin, real, params, points=cfg.points, seed=seed, executor=executor)
    start_err = table[0][1]
    from ..core.trajectory import format_error
    from .objective import measurement_unit

    unit = measurement_unit(real.train)
    msg = (f"multistart: {cfg.points} Sobol points + the start point, {spent} rollouts; best training error "
           f"{format_error(err, unit)} (start point {format_error(start_err, unit)})")
    notes.append(msg)
    log(msg)
    free = {k: best[k] for k in params.free_names}
    return StartResult(params.with_nominal(free), spent, err, notes)
