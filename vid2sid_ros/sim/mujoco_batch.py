"""Many open-loop MuJoCo rollouts in one call: ``mujoco.rollout`` on C++ threads.

A finite-difference Jacobian's columns (or a population of candidates) are rollouts of one
model structure at several parameter vectors. :func:`batched_states` runs them through
``mujoco.rollout.Rollout.rollout`` with one ``MjModel`` per parameter vector and ``nthread``
``MjData``: MuJoCo steps them on its own thread pool without Python's interpreter lock, and
without the per-step Python work of a twin's own rollout loop.

``mujoco.rollout`` steps exactly as ``mj_step`` in a loop does (the same ``mj_step`` calls from
the same initial state, control and ``qacc_warmstart``), so a twin that hands it the state its
own rollout starts from, and reads its samples from the returned states, reproduces its own
rollout to the bit. What ``mujoco.rollout`` does differently is on a MuJoCo warning: it stops
the rollout there and repeats the last state to the end, where a twin's loop carries on (or
reports a divergence). :func:`batched_states` therefore marks a rollout *clean* only when its
time advanced at every step (a warning freezes time; a bad-state warning resets it to 0) and
every state is finite with ``|qpos|`` at most ``max_abs_qpos``; the twins roll any other
point out one at a time with their own loop, so that a blow-up is reported exactly as before.
A model with MuJoCo's automatic reset switched off (``<flag autoreset="disable"/>``) still
advances time in the step that warns, so a warning in a rollout's last step would leave every
state looking clean: each rollout is therefore stepped once more than it needs (a *sentinel*
step, judged but never read), and a warning in its last needed step shows as the repeated state
of the sentinel.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import mujoco
import numpy as np

__all__ = ["batched_states", "full_state", "points_per_batch", "same_physics", "sensor_model_copy", "BatchJob",
           "BatchScratch", "FULL_STATE", "MAX_BATCH_BYTES", "MAX_KEPT_COPY_BYTES"]

#: the state ``mujoco.rollout`` takes and returns (time, qpos, qvel, act, history, mocap, plugin)
FULL_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS

_POOLS: dict[int, object] = {}
_POOL_LOCK = threading.Lock()


#: most memory one batch's returned states may take, bytes (a longer clip is batched fewer points at a time)
MAX_BATCH_BYTES = 256 * 2**20


def points_per_batch(model: mujoco.MjModel, nstep: int) -> int:
    """How many rollouts of ``nstep`` physics steps fit in one batch (:data:`MAX_BATCH_BYTES`: their states
    and sensor values; at least 1)."""
    per_point = max(1, int(nstep)) * (mujoco.mj_stateSize(model, FULL_STATE) + model.nsensordata) * 8
    return max(1, MAX_BATCH_BYTES // per_point)


def full_state(model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    """``data``'s full physics state (nstate,) as ``mujoco.rollout`` takes it (``mj_getState``)."""
    out = np.empty(mujoco.mj_stateSize(model, FULL_STATE))
    mujoco.mj_getState(model, data, out, FULL_STATE)
    return out


def _pool(nthread: int):
    """This process's ``mujoco.rollout.Rollout`` with ``nthread`` threads (kept for reuse)."""
    from mujoco import rollout

    if nthread not in _POOLS:
        _POOLS[nthread] = rollout.Rollout(nthread=nthread if nthread > 1 else 0)
    return _POOLS[nthread]


def batched_states(models: Sequence[mujoco.MjModel], datas: Sequence[mujoco.MjData], initial_state: np.ndarray,
                   warmstart: np.ndarray, control: np.ndarray, *, max_abs_qpos: float,
                   nsteps: Sequence[int] | None = None, sensordata: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Roll ``B`` models out open-loop from their initial states, ``S`` physics steps each.

    Args:
        models: B models of one structure (each with its own parameter values and ``opt.timestep``).
        datas: one scratch ``MjData`` per thread (of any of the models); ``len(datas)`` threads.
        initial_state: (B, nstate) full physics states (:func:`full_state`).
        warmstart: (B, nv) each rollout's ``qacc_warmstart`` at its initial state.
        control: (B, S, nu) ``ctrl`` during each physics step (S >= 1).
        max_abs_qpos: a state with any ``|qpos|`` above this is not clean (the twin's blow-up bound).
        nsteps: (B,) the steps each rollout needs (<= S; default S): a shorter one is stepped on to
            ``S`` with the padding of its ``control`` and only its first ``nsteps[b]`` states are judged
            (a step depends on the earlier ones only, so the padding changes none of them).
        sensordata: (B, S, nsensordata) filled with the sensor values of each step (computed by
            ``mj_step`` from the state before it, the step's control applied), or None.

    Returns:
        ``(states, clean)``: states (B, S, nstate) after each physics step; clean (B,) bool
        (module docstring: the rollout's samples are those of the twin's own loop).

    Raises:
        ValueError: models of different structures or arrays of the wrong shapes (``mujoco.rollout``).
    """
    B, S = control.shape[0], control.shape[1]
    nstate = initial_state.shape[1]
    states = np.empty((B, S, nstate))
    with _POOL_LOCK:  # one pool: one batch at a time
        _pool(len(datas)).rollout(list(models), list(datas), np.ascontiguousarray(initial_state),
                                  np.ascontiguousarray(control), initial_warmstart=np.ascontiguousarray(warmstart),
                                  state=states, sensordata=sensordata, nstep=S)
    upto = np.full(B, S) if nsteps is None else np.asarray(nsteps, dtype=int)
    return states, _clean(initial_state, states, models[0].nq, max_abs_qpos, upto)


def _clean(initial_state: np.ndarray, states: np.ndarray, nq: int, max_abs_qpos: float, upto: np.ndarray
           ) -> np.ndarray:
    """(B,) bool: each rollout's states (B, S, nstate) from its initial state (B, nstate) are clean over its
    first ``upto`` (B,) steps: time advanced at every step, every state finite, ``|qpos|`` (its ``nq``
    entries after time) at most ``max_abs_qpos`` (:func:`batched_states`)."""
    S = states.shape[1]
    judged = np.arange(S)[None, :] < upto[:, None]  # (B, S): the steps each rollout needs
    t = np.concatenate([initial_state[:, None, 0], states[:, :, 0]], axis=1)
    ok = np.diff(t, axis=1) > 0
    # a finite sum of every state, and qpos within the bound at its largest and smallest, say that no state
    # fails (a NaN or an inf makes the sum, and a NaN the extremes, fail the test); the per-step test only then
    with np.errstate(over="ignore", invalid="ignore"):  # (an inf, or +inf and -inf, in the sum: no warning)
        total = np.add.reduce(states, axis=None)
    if not np.isfinite(total):
        ok &= np.all(np.isfinite(states), axis=2)
    qpos = states[:, :, 1:1 + nq]
    if qpos.size and not (qpos.max() <= max_abs_qpos and qpos.min() >= -max_abs_qpos):
        ok &= np.all(np.abs(qpos) <= max_abs_qpos, axis=2)
    return np.all(ok | ~judged, axis=1)


def same_physics(a: mujoco.MjModel, b: mujoco.MjModel) -> bool:
    """Whether two models hold the same values in every array and option, their sensors, names and
    cameras aside (none of which changes a rollout's states or a position sensor's values)."""
    for name in dir(b):
        if name.startswith(("_", "sensor", "name", "cam_")):
            continue
        x = getattr(b, name, None)
        if isinstance(x, np.ndarray):
            y = getattr(a, name, None)
            if not isinstance(y, np.ndarray) or x.shape != y.shape or not np.array_equal(x, y, equal_nan=True):
                return False
    for name in dir(b.opt):
        if not name.startswith("_"):
            x, y = getattr(b.opt, name), getattr(a.opt, name)
            if isinstance(x, np.ndarray) and not np.array_equal(x, y, equal_nan=True) or (
                    isinstance(x, (int, float)) and x != y):
                return False
    return True


#: most memory the read-back sensor model copies kept for reuse on one twin may take, bytes (a batch of more
#: points than fit gets fresh copies for the rest)
MAX_KEPT_COPY_BYTES = 64 * 2**20


def sensor_model_copy(twin: Any, compile_: Callable[[], tuple[mujoco.MjModel, mujoco.MjData] | None],
                      write: Callable[[mujoco.MjModel, mujoco.MjData], None], slot: int | None = None
                      ) -> mujoco.MjModel | None:
    """A copy of ``twin``'s read-back sensor model at the twin's current parameters, or None.

    The template ``(model, scratch data)`` is made once by ``compile_`` (None: the twin's model cannot carry
    the sensors) and kept on the twin (``_batch_sensor_model``); each call copies it, lets ``write`` put the
    twin's current parameter values into the copy (``write(copy, scratch)``) and sets its ``opt.timestep``
    to the twin's. The first copy is compared with ``twin.model`` (:func:`same_physics`); a difference keeps
    the Python read-back for good (the template is dropped). None as well while ``set_parameters`` is
    wrapped on the instance (a residual-diagnosis cause writes model fields of its own after the
    parameters: the rollout then steps a copy of the twin's own model).

    With ``slot`` (the index of the point among those of one batch), the copy of that slot kept on the
    twin from an earlier batch is written again instead of a fresh copy being made (up to
    :data:`MAX_KEPT_COPY_BYTES` of copies are kept): ``write`` writes every parameter's fields and
    ``mj_setConst`` derives the constants from the fields alone, so the copy holds what a fresh one would.
    It is the caller's until its next call with the same slot.

    Args:
        twin: a MuJoCo twin with ``model`` (its ``MjModel``) and ``set_parameters``.
        compile_: makes the template, or None.
        write: writes the current parameter values into a copy (and refreshes what they derive).
        slot: the point's index in its batch (>= 0), or None (a fresh copy).
    """
    if "set_parameters" in vars(twin):
        return None
    kept = twin.__dict__.get("_batch_sensor_model", False)
    if kept is False:
        kept = twin.__dict__["_batch_sensor_model"] = compile_()
    if kept is None:
        return None
    template, scratch = kept
    pool = twin.__dict__.setdefault("_batch_sensor_copies", [])
    if slot is not None and slot < len(pool):
        m = pool[slot]
    else:
        m = copy.copy(template)
        if slot is not None and slot == len(pool) and (slot + 1) * template.nbuffer <= MAX_KEPT_COPY_BYTES:
            pool.append(m)
    write(m, scratch)
    m.opt.timestep = twin.model.opt.timestep
    if not twin.__dict__.get("_batch_sensor_checked"):
        if not same_physics(m, twin.model):
            twin.__dict__["_batch_sensor_model"] = None
            pool.clear()
            return None
        twin.__dict__["_batch_sensor_checked"] = True
    return m


@dataclass
class BatchJob:
    """One rollout a twin has prepared for a batch (:meth:`BatchScratch.rollout_many`).

    Attributes:
        model: its own copy of the twin's model (parameter values, ``opt.timestep`` set).
        init: (nstate,) the full physics state it starts from (:func:`full_state`).
        warm: (nv,) ``qacc_warmstart`` at ``init``.
        control: (S, nu) ``ctrl`` during each of its S physics steps.
        finish: ``finish(states, sensordata, data)`` -> the twin's RolloutResult from its clean states
            (S + extra, nstate) and sensor values (S + extra, nsensordata; None for a model without
            sensors), ``data`` a scratch MjData of the model's structure.
        extra: steps taken after the S (their control the last row of ``control``; judged clean as the
            others) for the sensor values of the state after the S-th step.
    """

    model: mujoco.MjModel
    init: np.ndarray
    warm: np.ndarray
    control: np.ndarray
    finish: Callable[[np.ndarray, np.ndarray | None, mujoco.MjData], Any]
    extra: int = 0


def _run_jobs(jobs: Sequence[BatchJob], datas: Sequence[mujoco.MjData], max_abs_qpos: float) -> list[Any]:
    """Every job stepped in one ``mujoco.rollout`` call (shorter ones padded, each with one sentinel step after
    its own: module docstring), then finished; None for a job whose rollout was not clean."""
    steps = [j.control.shape[0] + j.extra for j in jobs]
    S = max(steps) + 1  # the longest job's sentinel step
    nu = jobs[0].control.shape[1]
    control = np.zeros((len(jobs), S, nu))
    for b, j in enumerate(jobs):
        n = j.control.shape[0]
        control[b, :n] = j.control
        control[b, n:n + j.extra] = j.control[-1]
    nsd = jobs[0].model.nsensordata
    sensordata = np.empty((len(jobs), S, nsd)) if nsd else None
    states, clean = batched_states([j.model for j in jobs], datas, np.stack([j.init for j in jobs]),
                                   np.stack([j.warm for j in jobs]), control, max_abs_qpos=max_abs_qpos,
                                   nsteps=[n + 1 for n in steps], sensordata=sensordata)
    return [j.finish(states[b, :steps[b]], None if sensordata is None else sensordata[b, :steps[b]], datas[0])
            if clean[b] else None for b, j in enumerate(jobs)]


class BatchScratch:
    """What both MuJoCo twins' ``rollout_batch`` share: scratch MjData kept between batches, and a point
    re-run by the twin's own loop (a rollout the batch could not reproduce cleanly).

    The twin provides ``model`` (its MjModel), ``rollout_limits``, ``set_parameters(values)``,
    ``get_parameters()``, ``rollout(excitation)``, ``_max_abs_qpos`` (its blow-up bound on ``|qpos|``)
    and ``_batch_job(excitation, values, memo)``: the :class:`BatchJob` of one pair, or None for a pair
    its own ``rollout`` must run (``memo``: a dict kept for one :meth:`rollout_many` call, in which the
    twin keeps what the pairs at one point share).
    """

    model: mujoco.MjModel

    def _rollout_at(self, values: Mapping[str, float], excitation: Any) -> Any:
        """The twin's own rollout of ``excitation`` at ``values`` (a RolloutResult)."""
        self.set_parameters(values)  # type: ignore[attr-defined]
        return self.rollout(excitation)  # type: ignore[attr-defined]

    def rollout_batch(self, excitation: Any, values: Sequence[Mapping[str, float]], *, nthread: int = 1) -> list[Any]:
        """``[rollout(excitation) at each of values]`` (not rendered): :meth:`rollout_many` of one excitation.

        Args:
            excitation: an Excitation. values: B parameter dicts (spec units). nthread: MuJoCo threads.

        Returns:
            B results, as ``rollout`` returns them with ``render=False``.

        Raises:
            TwinError, ParameterSpecError: as ``set_parameters`` / ``rollout``.
        """
        return self.rollout_many([(excitation, v) for v in values], nthread=nthread)

    def rollout_many(self, pairs: Sequence[tuple[Any, Mapping[str, float]]], *, nthread: int = 1) -> list[Any]:
        """``[rollout(excitation) at values for (excitation, values) in pairs]`` (not rendered), stepped
        by ``mujoco.rollout`` on ``nthread`` C++ threads (module docstring): the same results to the bit.

        Each pair's parameters are written (``set_parameters``, in order: the twin is left at the last
        pair's values) and its initial state made by the twin (``_batch_job``); every pair's physics
        steps run in one batch (excitations of different lengths included: the shorter are padded), a
        few pairs at a time for a long trial (:data:`MAX_BATCH_BYTES`); a single pair too (``nthread``
        1: on the calling thread, which costs less than the twin's own Python loop). A pair the twin does not batch
        (refused by its rollout limits, diverged in its pre-roll) or whose batched rollout was not clean
        (a MuJoCo warning, a blow-up) is rolled out again by the twin's own ``rollout`` (its divergence
        reported as there), as is every pair when a wall-time limit is set.

        Args:
            pairs: B ``(excitation, parameter dict)`` pairs. nthread: MuJoCo threads.

        Returns:
            B results, in order, as ``rollout`` returns them with ``render=False``.

        Raises:
            TwinError, ParameterSpecError: as ``set_parameters`` / ``rollout``.
        """
        pairs = list(pairs)
        if not pairs or self.rollout_limits.max_wall_s is not None:  # type: ignore[attr-defined]
            return [self._rollout_at(v, exc) for exc, v in pairs]
        memo: dict = {}  # what pairs at one point share (the twin's model copy, its rest state), this call only
        jobs = [self._batch_job(exc, v, memo) for exc, v in pairs]  # type: ignore[attr-defined]
        last = self.get_parameters()  # type: ignore[attr-defined]
        todo = [b for b, j in enumerate(jobs) if j is not None]
        S = max([jobs[b].control.shape[0] + jobs[b].extra for b in todo] or [1]) + 1  # + the sentinel step
        cap = points_per_batch(jobs[todo[0]].model if todo else self.model, S)
        out: list[Any] = [None] * len(pairs)
        if todo:
            datas = self._batch_datas(nthread, jobs[todo[0]].model)
            for i in range(0, len(todo), cap):  # a long trial: a few pairs at a time (bounded memory)
                chunk = todo[i:i + cap]
                for b, r in zip(chunk, _run_jobs([jobs[b] for b in chunk], datas, self._max_abs_qpos)):
                    out[b] = r
        for b, (exc, v) in enumerate(pairs):
            if out[b] is None:
                out[b] = self._rollout_at(v, exc)
        if self.get_parameters() != last:  # type: ignore[attr-defined]  # a pair re-run: back to the last
            self.set_parameters(pairs[-1][1])  # type: ignore[attr-defined]
        return out

    def _batch_datas(self, nthread: int, model: mujoco.MjModel | None = None) -> list[mujoco.MjData]:
        """``nthread`` scratch MjData of ``model`` (default the twin's; a batch model with sensors added has
        its own) for batched rollouts, kept; the first also reads the samples."""
        model = self.model if model is None else model
        kept = self.__dict__.setdefault("_batch_data", {})
        datas = kept.setdefault((model.nq, model.nv, model.na, model.nsensordata), [])
        while len(datas) < max(1, nthread):
            datas.append(mujoco.MjData(model))
        return datas[:max(1, nthread)]
