"""Many evaluations of one objective at once, on a rollout executor.

:func:`evaluate_batch` runs :meth:`TrialObjective.evaluate` at a list of parameter points on an
:class:`~vid2sid_ros.calibration.executor.Executor`: serially on the objective itself, or on
worker copies of it (one twin copy per process or Ray actor, made once). A MuJoCo twin (one with
``rollout_many``: the finger, rig-config twins) steps every point's rollout of every excitation in
one ``mujoco.rollout`` call (:mod:`vid2sid_ros.sim.mujoco_batch`), which reproduces the twin's own
rollout to the bit: serially (no executor, ``serial``) on the calling thread, on ``threads`` on the
executor's ``workers`` C++ threads (a single point too, when it has several excitations: its trials
run side by side); any other twin gets one copy per Python thread. Every evaluation is a deterministic function of its
point, so the results, rollout counts included, equal the serial ones on every backend.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Mapping, Sequence

from .executor import Executor, TaskFailure
from .proposers.proposer import Evaluation

__all__ = ["ObjectiveState", "evaluate_batch"]


class ObjectiveState:
    """An objective as an executor's state: each worker's copy has its own twin and an empty
    rollout cache (:meth:`for_worker`); the excitations and real trajectories are shared.

    Args:
        objective: a :class:`~vid2sid_ros.calibration.objective.TrialObjective`.
    """

    def __init__(self, objective: Any) -> None:
        self.objective = objective

    def for_worker(self) -> Any:
        """A copy of the objective with a deep copy of its twin (a renderer, which holds a GL
        context, is not copied: the copy makes its own if it ever renders).

        Raises:
            Whatever :func:`copy.deepcopy` raises for a twin that cannot be copied.
        """
        src = self.objective
        twin = src.twin
        mine = copy.copy(src)
        mine.twin = copy.deepcopy(twin, _twin_memo(twin))
        mine._cache = {}
        return mine


def _twin_memo(twin: Any) -> dict[int, Any]:
    """:func:`copy.deepcopy` memo for a twin: a renderer (``*render*`` attribute) becomes None, an
    ``MjSpec`` (which does not pickle) its own ``copy()``; looked for on the twin and one level down."""
    memo: dict[int, Any] = {}
    for k, v in vars(twin).items():
        if v is None or isinstance(v, (bool, int, float, str)):
            continue
        if "render" in k:
            memo[id(v)] = None
            continue
        for w in [v, *(vars(v).values() if hasattr(v, "__dict__") and not isinstance(v, type) else ())]:
            if type(w).__name__ == "MjSpec":
                memo[id(w)] = w.copy()
    return memo


def _evaluate(objective: Any, values: Mapping[str, float]) -> tuple[Evaluation, list | None]:
    """Executor task: one evaluation and the rollouts it cached (never raises: TrialObjective.evaluate
    records failures). The worker's copy rolls out afresh: a point its cache still held but the calling
    objective's did not would otherwise cost no rollout here and a full set serially."""
    objective.clear_cache()
    ev = objective.evaluate(values)[0]
    return ev, objective.cached(objective.physics_key(values))


def evaluate_batch(objective: Any, points: Sequence[Mapping[str, float]], executor: Executor | None = None,
                   *, state: ObjectiveState | None = None) -> list[Evaluation]:
    """``[objective.evaluate(p)[0] for p in points]`` on ``executor`` (serial when None).

    Exactly the serial loop's results, rollout counts included: a point whose physics is in the
    objective's rollout cache (a measurement-nuisance probe, a point evaluated before) or repeats an
    earlier point of the batch is evaluated here, in order, after the workers' rollouts of the points
    before it were adopted into the cache; only the others go to the workers.

    Args:
        objective: a TrialObjective. points: parameter dicts (SI).
        executor: where to run them. state: an :class:`ObjectiveState` of ``objective`` to
            reuse across calls (keeps the workers and their twin copies alive); made if None.

    Returns:
        One Evaluation per point, in order; a point whose worker died twice is a failed
        Evaluation (``error_px=inf``, the message says so, ``rollouts=objective.cost``).
    """
    points = list(points)
    serial = executor is None or executor.backend == "serial"
    batches = objective.batches() if serial else (executor.backend == "threads"
                                                  and callable(getattr(objective.twin, "rollout_many", None)))
    if len(points) < (2 if serial or not batches else 1):
        return [objective.evaluate(p)[0] for p in points]  # a MuJoCo twin's point: its trials in one call
    keys = [objective.physics_key(p) for p in points]
    seen = set()
    remote = []
    for i, k in enumerate(keys):
        if k not in seen and objective.cached(k) is None:
            remote.append(i)
        seen.add(k)
    if batches and len(remote) * len(objective.excitations) > 1:
        batched = objective.rollout_all([points[i] for i in remote], 1 if serial else executor.workers)
        if batched is not None:
            return _adopt_batched(objective, points, keys, dict(zip(remote, batched)))
    if serial:
        return [objective.evaluate(p)[0] for p in points]
    if len(points) < 2:
        return [objective.evaluate(p)[0] for p in points]
    done = executor.map(_evaluate, [points[i] for i in remote],
                        state=state if state is not None else ObjectiveState(objective))
    far = dict(zip(remote, done))
    out: list[Evaluation] = []
    for i, p in enumerate(points):
        if i not in far:
            out.append(objective.evaluate(p)[0])
            continue
        r = far[i]
        if isinstance(r, TaskFailure):
            out.append(Evaluation(objective.parameters.complete(r.item), math.inf, failed=True, message=r.message,
                                  rollouts=objective.cost))
            continue
        ev, rollouts = r
        if rollouts is not None:
            objective.adopt(keys[i], rollouts)
        out.append(ev)
    return out


def _adopt_batched(objective: Any, points: list, keys: list[tuple], far: dict[int, list]) -> list[Evaluation]:
    """The serial loop's evaluations, the points in ``far`` evaluated on their batched rollouts.

    In point order (so the rollout cache ends as the serial loop leaves it): a batched point's rollouts
    enter the cache as if rolled out now and it is evaluated on them, charged :attr:`cost` rollouts as a
    fresh evaluation is. An evaluation that fails (a divergence, a rollout without valid overlap) is
    evaluated afresh instead, so that it stops, and is charged, where the serial loop's does."""
    out: list[Evaluation] = []
    for i, p in enumerate(points):
        if i not in far:
            out.append(objective.evaluate(p)[0])
            continue
        objective.adopt(keys[i], far[i])
        ev = objective.evaluate(p)[0]
        if ev.failed:
            objective.forget(keys[i])
            ev = objective.evaluate_in_loop(p)[0]
        else:
            ev = dataclasses.replace(ev, rollouts=objective.cost)
        out.append(ev)
    return out
