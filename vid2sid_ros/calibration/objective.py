"""The calibration objective: run the twin on a set of excitations, compare with the real trial.

One place for "evaluate a parameter vector": the loop (metered), the identifiability
check and the benchmark's holdout scoring all go through :class:`TrialObjective`.
The metric is the paper's trajectory MAE: mean Euclidean distance over keypoints
and frames valid in both trajectories, frames paired by command step
(:func:`vid2sid_ros.core.trajectory.mae`), averaged over trials — in the measurement's
own unit (px for video, m for motion capture, rad/m for joint states).

The twin's rollout is read the way each real trial was measured
(:func:`vid2sid_ros.sim.measurement.measure`): image keypoints for a video, 3-D world
points for motion capture, joint coordinates for joint states.

Trials of different kinds fitted together (a video and the joint states of the same
robot) cannot be averaged in one unit: each keypoint's MAE is then divided by its
measurement noise (:func:`vid2sid_ros.core.trajectory.noise_levels`, defaults
:data:`~vid2sid_ros.core.trajectory.DEFAULT_NOISE`: 1 px, 1 mm, 0.005 rad; configurable
per unit or per trial) and the error is in noise units (``unit == "sigma"``), i.e. a
weighted least-absolute-error with weights 1/sigma. Trials of one unit keep the plain
MAE in that unit.

:func:`residual_vector` gives the signed per-sample residuals (sim − real) that
least-squares refinement and sensitivity analysis work on (divided by the noise level
when units are mixed).

Measurement nuisances (:mod:`~vid2sid_ros.calibration.nuisance`: latency, marker offsets)
are applied to the twin's measured trajectory. The objective remembers the rollouts of the
most recently used physics points (:attr:`TrialObjective.cache_points`: at least
:data:`ROLLOUT_CACHE_POINTS`, and enough for a base point, one forward-difference probe per
free physics parameter and one more), so an evaluation that changes only measurement
nuisances costs no rollout (``Evaluation.rollouts == 0``): the latency's sensitivity comes
from the trajectory's own time derivative.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation
from ..core.parameters import ParameterSet
from ..core.trajectory import Trajectory, align, noise_levels, per_keypoint_mae
from ..core.trajectory import errors as trial_errors
from ..sim.base import Twin
from ..sim.measurement import measure
from .cancel import check_cancelled
from .nuisance import MeasurementModel
from .proposers.proposer import Evaluation

__all__ = ["TrialObjective", "residual_vector", "trajectory_vector", "measurement_unit", "NOISE_UNIT",
           "ROLLOUT_CACHE_POINTS", "SIMULATION_RESOLUTION", "resolution_floor"]

#: the unit of an error over trials of mixed units (each divided by its noise level)
NOISE_UNIT = "sigma"

#: a cache slot whose rollout was paid for before an interruption (see TrialObjective.replay_paid)
_PAID = object()

#: fewest physics points whose rollouts the objective keeps (least recently used go first)
ROLLOUT_CACHE_POINTS = 4

#: a rollout's residual is a smooth function of the parameters down to about this fraction of the start
#: misfit, no further (integrator and float64 round-off over thousands of steps; :func:`resolution_floor`)
SIMULATION_RESOLUTION = 1e-9


def resolution_floor(m: int, scale: float) -> float:
    """The squared-residual change below the simulation's resolution: ``m (SIMULATION_RESOLUTION · scale)²``.

    ``scale`` is the misfit's scale in the measurement's unit: the training MAE at the start of the
    calibration (or the larger of it and the error at the point judged). A rollout is deterministic, but its
    residual is a smooth function of the parameters only down to ~1e-10 of that scale (measured on the toy
    rig: Gauss–Newton steps predicted at 1e-10 of it are rejected), so a decrease below ``(1e-9 scale)²``
    per residual is no decrease a simulator can be relied on to show, with or without noise: noise-free data
    end there. The reasoner's convergence test and the residual diagnosis's optimality check read the same
    floor, so the two never disagree about a point at it.

    Args:
        m: number of residuals.
        scale: the misfit's scale (measurement unit, >= 0); not finite or negative gives 0.

    Returns:
        the floor (unit²), >= 0.
    """
    if not (math.isfinite(scale) and scale > 0):
        return 0.0
    return float(m) * (SIMULATION_RESOLUTION * float(scale)) ** 2


def measurement_unit(trajectories: Sequence[Trajectory]) -> str:
    """The unit errors over ``trajectories`` are reported in.

    ``"px"``, ``"m"``, ``"rad"`` (or ``"rad|m"`` for mixed joints of one kind) when all
    trajectories share one set of units; :data:`NOISE_UNIT` when kinds/units are mixed.
    ``"px"`` for an empty list.
    """
    labels = {t.unit_label for t in trajectories}
    if not labels:
        return "px"
    return labels.pop() if len(labels) == 1 else NOISE_UNIT


class TrialObjective:
    """Evaluate parameters with a twin against real trajectories.

    Args:
        twin: the simulated rig.
        excitations: E excitations, replayed in order.
        real: E real trajectories, aligned with ``excitations``.
        parameters: spec used to complete and clip values (default ``twin.parameters``).
        noise: measurement noise per unit ``{"px": 1.0, "m": 0.001, "rad": 0.005}`` (1 sigma),
            used only when trials of different units are fitted together (module docstring).

    Attributes:
        unit: the unit of ``Evaluation.error_px`` / ``per_keypoint_px`` values
            (:func:`measurement_unit`; the field names are historic).

    Each :meth:`evaluate` costs ``len(excitations)`` rollouts (:attr:`cost`), or none when
    only measurement nuisances changed since a recent evaluation (module docstring).

    Raises:
        ValueError: numbers of excitations and trajectories differ.
        vid2sid_ros.core.trajectory.TrajectoryError: a noise level that is not > 0.
    """

    def __init__(self, twin: Twin, excitations: Sequence[Excitation], real: Sequence[Trajectory],
                 parameters: ParameterSet | None = None, *, noise: Mapping[str, float] | None = None) -> None:
        if len(excitations) != len(real):
            raise ValueError(f"{len(excitations)} excitations but {len(real)} real trajectories")
        self.twin = twin
        self.excitations = list(excitations)
        self.real = list(real)
        self.parameters = parameters if parameters is not None else twin.parameters
        self.unit = measurement_unit(self.real)
        self.noise = dict(noise or {})
        self._weights = ([1.0 / noise_levels(r, self.noise) for r in self.real] if self.unit == NOISE_UNIT
                         else None)
        self.measurement = MeasurementModel(self.parameters)
        self._cache: dict[tuple, list] = {}
        n_physics = sum(1 for s in self.parameters.free if s.name not in self.measurement.names)
        #: physics points kept: a base, a forward-difference probe per free physics parameter, and one
        #: more (with 4 kept, a 4-parameter finger's Jacobian evicted its base before its latency probe)
        self.cache_points = max(ROLLOUT_CACHE_POINTS, n_physics + 2)

    def _rollout(self, i: int, exc: Excitation, key: tuple, render: bool):
        """(result, cached?) for excitation ``i`` at the physics point ``key`` (renders are never cached).

        Raises:
            vid2sid_ros.calibration.cancel.Cancelled: this thread's calibration was cancelled.
        """
        check_cancelled()
        if render:
            return self.twin.rollout(exc, render=True), False
        hit = self._cache.pop(key, None)
        if hit is not None:
            self._cache[key] = hit  # most recently used last: eviction takes the oldest use first
            if hit[i] is _PAID:  # paid for before an interruption: re-run, not charged again
                hit[i] = self.twin.rollout(exc, render=False)
                return hit[i], True
            if hit[i] is not None:
                return hit[i], True
        res = self.twin.rollout(exc, render=False)
        if key not in self._cache:
            while len(self._cache) >= self.cache_points:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = [None] * len(self.excitations)
        self._cache[key][i] = res
        return res, False

    def replay_paid(self, values: Mapping[str, float]) -> None:
        """Restore the cache's memory of one evaluation made before an interruption.

        Touches ``values``' physics point exactly as :meth:`evaluate` did (same least-recently-used
        order and evictions) without rolling out: its rollouts are marked paid, so a later
        evaluation of that physics point costs what it cost in the uninterrupted run (nothing),
        and the resumed run charges every evaluation as the uninterrupted one did.
        """
        twin_values, _ = self.measurement.split(self.parameters.complete(values))
        key = tuple(sorted((k, float(v)) for k, v in twin_values.items()))
        hit = self._cache.pop(key, None)
        if hit is None:
            while len(self._cache) >= self.cache_points:
                self._cache.pop(next(iter(self._cache)))
            hit = [None] * len(self.excitations)
        self._cache[key] = [_PAID if r is None else r for r in hit]

    def physics_key(self, values: Mapping[str, float]) -> tuple:
        """The rollout cache's key of ``values``: the twin's (physics) values, sorted by name."""
        twin_values, _ = self.measurement.split(self.parameters.complete(values))
        return tuple(sorted((k, float(v)) for k, v in twin_values.items()))

    def cached(self, key: tuple) -> list | None:
        """The cached rollouts (one per excitation, None where not rolled out) at ``key``, or None."""
        return self._cache.get(key)

    def clear_cache(self) -> None:
        """Forget every cached rollout (the next evaluation of any point rolls out)."""
        self._cache.clear()

    def adopt(self, key: tuple, rollouts: list) -> None:
        """Store rollouts made elsewhere (a worker's copy of this objective) at ``key``, as if this
        objective had rolled them out now: most recently used, the oldest use evicted first."""
        self._cache.pop(key, None)
        while len(self._cache) >= self.cache_points:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = list(rollouts)

    def forget(self, key: tuple) -> None:
        """Drop the cached rollouts at ``key`` (the next evaluation there rolls out again)."""
        self._cache.pop(key, None)

    @property
    def cost(self) -> int:
        """Rollouts per evaluation (one per excitation)."""
        return len(self.excitations)

    def evaluate(self, values: Mapping[str, float], *, render_first: bool = False
                 ) -> tuple[Evaluation, np.ndarray | None]:
        """Roll the twin out on every excitation at ``values``.

        A MuJoCo twin (one with ``rollout_many``) rolls every excitation of a point it has not rolled out
        yet in one ``mujoco.rollout`` call on the calling thread (:meth:`rollout_all`), the same rollouts
        to the bit as its own loop; an evaluation that then fails (a divergence, no valid overlap) is
        made again one excitation at a time, so that it stops, and is charged, where the loop's does.

        Args:
            values: full or partial parameter dict (SI); missing names take nominal values.
            render_first: also return the rendered frames of the first excitation.

        Returns:
            ``(evaluation, frames)``: frames (T, H, W, 3) uint8 of the first trial, or None.
            A diverged rollout, an exception from the twin or a trajectory with no valid
            overlap gives ``failed=True`` and ``error_px=inf`` — never an exception.
        """
        if render_first:
            return self.evaluate_in_loop(values, render_first=True)
        key = self.physics_key(values)
        batched = None if key in self._cache or not self.batches() else self.rollout_all([values])
        if batched is None:
            return self.evaluate_in_loop(values)
        self.adopt(key, batched[0])
        ev, frames = self.evaluate_in_loop(values)
        if ev.failed:
            self.forget(key)
            return self.evaluate_in_loop(values)
        return dataclasses.replace(ev, rollouts=self.cost), frames

    def batches(self) -> bool:
        """Whether the twin rolls excitations out in batches through ``mujoco.rollout`` (a MuJoCo twin with
        ``rollout_many``, no ``calibration.rollout_max_wall_s``: a wall-time limit is the twin's loop's)."""
        limits = getattr(self.twin, "rollout_limits", None)
        return callable(getattr(self.twin, "rollout_many", None)) and getattr(limits, "max_wall_s", None) is None

    def rollout_all(self, points: Sequence[Mapping[str, float]], nthread: int = 1) -> list[list] | None:
        """Every excitation's rollout at every one of ``points`` in one ``rollout_many`` call (``nthread``
        MuJoCo threads; 1: the calling thread), not cached: one list (one rollout per excitation) per
        point (a wall-time limit rolls each pair out in the twin's loop), or None when the twin has no
        ``rollout_many`` or refuses a point (raises: then
        :meth:`evaluate` records the refusal one excitation at a time, as without batching). A rollout
        ``mujoco.rollout`` could not reproduce cleanly (a MuJoCo warning, a blow-up) is the twin's own
        loop's (``rollout_many``), its divergence reported as there."""
        if not points or not callable(getattr(self.twin, "rollout_many", None)):
            return None
        check_cancelled()
        twin_values = [self.measurement.split(self.parameters.complete(p))[0] for p in points]
        excs = self.excitations
        try:
            flat = self.twin.rollout_many([(exc, v) for v in twin_values for exc in excs], nthread=nthread)
        except Exception:  # noqa: BLE001 - evaluate() turns the same error into a failed evaluation
            return None
        return [list(flat[i:i + len(excs)]) for i in range(0, len(flat), len(excs))]

    def evaluate_in_loop(self, values: Mapping[str, float], *, render_first: bool = False
                  ) -> tuple[Evaluation, np.ndarray | None]:
        """:meth:`evaluate` one excitation at a time, each rollout the cache does not hold made by the twin's
        own ``rollout`` (its Python stepping loop): stops at the first failed excitation (later ones are not
        rolled out nor charged). Same arguments, return value and failures as :meth:`evaluate`."""
        full = self.parameters.complete(values)
        twin_values, meas = self.measurement.split(full)
        key = tuple(sorted((k, float(v)) for k, v in twin_values.items()))
        sims: list[Trajectory] = []
        frames = None
        per_kp: dict[str, list[float]] = {}
        errors: list[float] = []
        paid = 0
        try:
            self.twin.set_parameters(twin_values)
        except Exception as err:  # noqa: BLE001 - a twin that refuses values is a failed evaluation
            return Evaluation(full, math.inf, failed=True, message=f"set_parameters: {type(err).__name__}: {err}",
                              rollouts=0), None
        for i, (exc, real) in enumerate(zip(self.excitations, self.real)):
            try:
                res, cached = self._rollout(i, exc, key, bool(render_first and i == 0))
            except Exception as err:  # noqa: BLE001 - recorded, never a crash
                return Evaluation(full, math.inf, sim=sims, failed=True,
                                  message=f"rollout '{exc.name}' raised {type(err).__name__}: {err}",
                                  rollouts=paid + 1), frames
            paid += 0 if cached else 1
            if i == 0 and render_first:
                frames = res.frames
            try:
                sim = measure(self.twin, res, real)
            except Exception as err:  # noqa: BLE001 - a twin that cannot measure like the sensor
                return Evaluation(full, math.inf, sim=sims, failed=True,
                                  message=f"rollout '{exc.name}': {type(err).__name__}: {err}", rollouts=paid), frames
            sim = self.measurement.apply(sim, meas)
            sims.append(sim)
            if res.diverged:
                return Evaluation(full, math.inf, sim=sims, failed=True,
                                  message=f"rollout '{exc.name}' diverged: {res.message}", rollouts=paid), frames
            if self._weights is None:
                e, kp_err = trial_errors(real, sim)
            else:  # mixed units: each keypoint in noise units (module docstring)
                kp_err = {n: v * w for (n, v), w in zip(per_keypoint_mae(real, sim).items(), self._weights[i])}
                finite = [v for v in kp_err.values() if math.isfinite(v)]
                e = float(np.mean(finite)) if finite else math.nan
            if not math.isfinite(e):
                return Evaluation(full, math.inf, sim=sims, failed=True,
                                  message=f"rollout '{exc.name}': no valid keypoint overlaps the real trial",
                                  rollouts=paid), frames
            errors.append(e)
            for k, v in kp_err.items():
                per_kp.setdefault(k, []).append(v)
        return Evaluation(full, float(np.mean(errors)), _over_trials(per_kp), sims, rollouts=paid), frames


def _over_trials(per_kp: Mapping[str, list[float]]) -> dict[str, float]:
    """``{keypoint: np.nanmean(its errors over the trials)}``, NaN where none is finite; every keypoint at once
    when each has a finite error in every trial (one contiguous row each: the same sums, to the bit)."""
    rows = list(per_kp.values())
    if rows and len({len(v) for v in rows}) == 1:
        V = np.array(rows, dtype=float)
        if V.shape[1] and np.isfinite(V).all():
            return dict(zip(per_kp, (np.add.reduce(V, axis=1) / V.shape[1]).tolist()))
    return {k: float(np.nanmean(v)) if np.isfinite(v).any() else math.nan for k, v in per_kp.items()}


def trajectory_vector(sim: Sequence[Trajectory], real: Sequence[Trajectory]) -> np.ndarray:
    """Sim keypoints at the samples where the real trial is valid, flattened (M,), each in its unit.

    Frames are paired by command step; the sample set depends only on ``real`` and on
    which steps both hold, so vectors from different parameter values line up. NaN
    where the sim keypoint is invalid. Divided by each keypoint's noise level when units
    are mixed (as :func:`residual_vector`).
    """
    weighted = measurement_unit(list(real)) == NOISE_UNIT
    out = []
    for s, r in zip(sim, real):
        ra, sa = align(r, s)
        mask = ra.valid
        v = sa.keypoints / noise_levels(ra)[None, :, None] if weighted else sa.keypoints
        out.append(v[mask].ravel())
    return np.concatenate(out) if out else np.zeros(0)


def residual_vector(sim: Sequence[Trajectory], real: Sequence[Trajectory], *,
                    noise: Mapping[str, float] | None = None) -> np.ndarray:
    """Signed residuals sim − real at the real-valid samples, flattened (M,) (all D coordinates).

    In the measurement's unit when all trials share one (px: x and y); divided by each
    keypoint's noise level (:func:`~vid2sid_ros.core.trajectory.noise_levels`, ``noise``
    per unit) when units are mixed, so the vector is in noise units. NaN where the sim
    keypoint is invalid (a diverged rollout).
    """
    weighted = measurement_unit(list(real)) == NOISE_UNIT
    out = []
    for s, r in zip(sim, real):
        ra, sa = align(r, s)
        mask = ra.valid
        d = sa.keypoints - ra.keypoints
        if weighted:
            d = d / noise_levels(ra, noise)[None, :, None]
        out.append(d[mask].ravel())
    return np.concatenate(out) if out else np.zeros(0)
