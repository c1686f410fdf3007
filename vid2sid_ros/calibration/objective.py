"""The calibration objective: run the twin on a set of excitations, compare with the real trial.

One place for "evaluate a parameter vector": the loop (metered), the identifiability
check and the benchmark's holdout scoring all go through :class:`TrialObjective`.
The metric is the paper's trajectory MAE: mean Euclidean pixel distance over keypoints
and frames valid in both trajectories, frames paired by command step
(:func:`vid2sid_ros.core.trajectory.mae_px`), averaged over trials.

:func:`residual_vector` gives the signed per-sample residuals (sim − real, px) that
least-squares refinement and sensitivity analysis work on.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation
from ..core.parameters import ParameterSet
from ..core.trajectory import Trajectory, align, mae_px, per_keypoint_mae_px
from ..sim.base import Twin
from .proposer import Evaluation

__all__ = ["TrialObjective", "residual_vector", "trajectory_vector"]


class TrialObjective:
    """Evaluate parameters with a twin against real trajectories.

    Args:
        twin: the simulated rig.
        excitations: E excitations, replayed in order.
        real: E real trajectories, aligned with ``excitations``.
        parameters: spec used to complete and clip values (default ``twin.parameters``).

    Each :meth:`evaluate` costs ``len(excitations)`` rollouts (:attr:`cost`).
    """

    def __init__(self, twin: Twin, excitations: Sequence[Excitation], real: Sequence[Trajectory],
                 parameters: ParameterSet | None = None) -> None:
        if len(excitations) != len(real):
            raise ValueError(f"{len(excitations)} excitations but {len(real)} real trajectories")
        self.twin = twin
        self.excitations = list(excitations)
        self.real = list(real)
        self.parameters = parameters if parameters is not None else twin.parameters

    @property
    def cost(self) -> int:
        """Rollouts per evaluation (one per excitation)."""
        return len(self.excitations)

    def evaluate(self, values: Mapping[str, float], *, render_first: bool = False
                 ) -> tuple[Evaluation, np.ndarray | None]:
        """Roll the twin out on every excitation at ``values``.

        Args:
            values: full or partial parameter dict (SI); missing names take nominal values.
            render_first: also return the rendered frames of the first excitation.

        Returns:
            ``(evaluation, frames)``: frames (T, H, W, 3) uint8 of the first trial, or None.
            A diverged rollout, an exception from the twin or a trajectory with no valid
            overlap gives ``failed=True`` and ``error_px=inf`` — never an exception.
        """
        full = self.parameters.complete(values)
        sims: list[Trajectory] = []
        frames = None
        per_kp: dict[str, list[float]] = {}
        errors: list[float] = []
        try:
            self.twin.set_parameters(full)
        except Exception as err:  # noqa: BLE001 - a twin that refuses values is a failed evaluation
            return Evaluation(full, math.inf, failed=True, message=f"set_parameters: {type(err).__name__}: {err}",
                              rollouts=0), None
        for i, (exc, real) in enumerate(zip(self.excitations, self.real)):
            try:
                res = self.twin.rollout(exc, render=bool(render_first and i == 0))
            except Exception as err:  # noqa: BLE001 - recorded, never a crash
                return Evaluation(full, math.inf, sim=sims, failed=True,
                                  message=f"rollout '{exc.name}' raised {type(err).__name__}: {err}",
                                  rollouts=i + 1), frames
            if i == 0 and render_first:
                frames = res.frames
            sims.append(res.trajectory)
            if res.diverged:
                return Evaluation(full, math.inf, sim=sims, failed=True,
                                  message=f"rollout '{exc.name}' diverged: {res.message}", rollouts=i + 1), frames
            e = mae_px(real, res.trajectory)
            if not math.isfinite(e):
                return Evaluation(full, math.inf, sim=sims, failed=True,
                                  message=f"rollout '{exc.name}': no valid keypoint overlaps the real trial",
                                  rollouts=i + 1), frames
            errors.append(e)
            for k, v in per_keypoint_mae_px(real, res.trajectory).items():
                per_kp.setdefault(k, []).append(v)
        kp = {k: float(np.nanmean(v)) if np.isfinite(v).any() else math.nan for k, v in per_kp.items()}
        return Evaluation(full, float(np.mean(errors)), kp, sims, rollouts=len(self.excitations)), frames


def trajectory_vector(sim: Sequence[Trajectory], real: Sequence[Trajectory]) -> np.ndarray:
    """Sim keypoints at the samples where the real trial is valid, flattened (M,) px.

    Frames are paired by command step; the sample set depends only on ``real`` and on
    which steps both hold, so vectors from different parameter values line up. NaN
    where the sim keypoint is invalid.
    """
    out = []
    for s, r in zip(sim, real):
        ra, sa = align(r, s)
        mask = ra.valid
        out.append(sa.keypoints[mask].ravel())
    return np.concatenate(out) if out else np.zeros(0)


def residual_vector(sim: Sequence[Trajectory], real: Sequence[Trajectory]) -> np.ndarray:
    """Signed residuals sim − real at the real-valid samples, flattened (M,) px (x and y).

    NaN where the sim keypoint is invalid (a diverged rollout).
    """
    out = []
    for s, r in zip(sim, real):
        ra, sa = align(r, s)
        mask = ra.valid
        out.append((sa.keypoints[mask] - ra.keypoints[mask]).ravel())
    return np.concatenate(out) if out else np.zeros(0)
