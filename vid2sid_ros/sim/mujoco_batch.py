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
"""

from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

import mujoco
import numpy as np

__all__ = ["batched_states", "full_state", "points_per_batch", "BatchScratch", "FULL_STATE", "MAX_BATCH_BYTES"]

#: the state ``mujoco.rollout`` takes and returns (time, qpos, qvel, act, history, mocap, plugin)
FULL_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS

_POOLS: dict[int, object] = {}
_POOL_LOCK = threading.Lock()


#: most memory one batch's returned states may take, bytes (a longer clip is batched fewer points at a time)
MAX_BATCH_BYTES = 256 * 2**20


def points_per_batch(model: mujoco.MjModel, nstep: int) -> int:
    """How many rollouts of ``nstep`` physics steps fit in one batch (:data:`MAX_BATCH_BYTES`; at least 1)."""
    per_point = max(1, int(nstep)) * mujoco.mj_stateSize(model, FULL_STATE) * 8
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
                   warmstart: np.ndarray, control: np.ndarray, *, max_abs_qpos: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Roll ``B`` models out open-loop from their initial states, ``S`` physics steps each.

    Args:
        models: B models of one structure (each with its own parameter values and ``opt.timestep``).
        datas: one scratch ``MjData`` per thread (of any of the models); ``len(datas)`` threads.
        initial_state: (B, nstate) full physics states (:func:`full_state`).
        warmstart: (B, nv) each rollout's ``qacc_warmstart`` at its initial state.
        control: (B, S, nu) ``ctrl`` during each physics step (S >= 1).
        max_abs_qpos: a state with any ``|qpos|`` above this is not clean (the twin's blow-up bound).

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
                                  state=states, nstep=S)
    m = models[0]
    nq = m.nq
    t = np.concatenate([initial_state[:, None, 0], states[:, :, 0]], axis=1)
    clean = np.all(np.diff(t, axis=1) > 0, axis=1)
    clean &= np.all(np.isfinite(states), axis=(1, 2))
    clean &= np.all(np.abs(states[:, :, 1:1 + nq]) <= max_abs_qpos, axis=(1, 2))
    return states, clean


class BatchScratch:
    """What both MuJoCo twins' ``rollout_batch`` share: scratch MjData kept between batches, and a point
    re-run by the twin's own loop (a rollout the batch could not reproduce cleanly).

    The twin provides ``model`` (its MjModel), ``set_parameters(values)`` and ``rollout(excitation)``.
    """

    model: mujoco.MjModel

    def _rollout_at(self, values: Mapping[str, float], excitation: Any) -> Any:
        """The twin's own rollout of ``excitation`` at ``values`` (a RolloutResult)."""
        self.set_parameters(values)  # type: ignore[attr-defined]
        return self.rollout(excitation)  # type: ignore[attr-defined]

    def _batch_datas(self, nthread: int) -> list[mujoco.MjData]:
        """``nthread`` scratch MjData for batched rollouts (kept; the first also reads the samples)."""
        datas = self.__dict__.setdefault("_batch_data", [])
        while len(datas) < max(1, nthread):
            datas.append(mujoco.MjData(self.model))
        return datas[:max(1, nthread)]
