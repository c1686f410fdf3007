"""The probe context: the calibration's optimum, its residual, the noise level, and one way to evaluate causes.

Every candidate cause (:mod:`.causes`) is evaluated through :meth:`ProbeContext.residual`:
the free parameters at a point ``u`` (normalised coordinates, (F,)), zero or more causes at
their sizes ``theta``, and the signed residual ``sim − real`` of the training trials (or of
another objective, the holdout) flattened like
:func:`~vid2sid_ros.calibration.objective.residual_vector`, (M,), in the measurement's unit.
The rollouts it spends are counted in :attr:`ProbeContext.rollouts` (diagnostic, never charged).

When the run measured the tracker's bias (the twin filmed like the robot:
:mod:`~vid2sid_ros.calibration.tracker_bias`), every training residual is that of the twin
*measured like the robot*: the bias ``b = tracked − projected`` is added to the twin's keypoints
after any cause has acted, exactly as the final interval does
(:func:`~vid2sid_ros.calibration.identifiability.check_identifiability`). Without it a rendered
and tracked real side leaves a systematic residual — the tracker's centroid of a marker seen in
perspective, partly hidden or blurred is not the projection of its centre — that a camera-pose
or marker-offset candidate explains, and the diagnosis names a model error on an unmodified rig
(a false alarm). The bias is a function of the pose and motion (the same in any video of the
same motion), so at the identified point it is the measurement model's systematic part, not a
model error (the GUM, JCGM 100:2008 §3.2.4: correct a recognised systematic effect). It is
measured on the training excitations only: the holdout objective's residual is left as it is.

When the bias was *not* applied (a real video without ``calibration.tracker_bias: true``), the bias measured
on renders of the twin (clean, or through the real videos' codec) can still be handed over as a candidate
(``bias_candidate``): then it is a cause of its own (:class:`~.causes.TrackerBias`, ``θ · b`` added to the
twin's training keypoints), compared with the camera and marker candidates it would otherwise be mistaken for.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Mapping, Sequence

import numpy as np

from ...core.parameters import ParameterSet
from ...core.trajectory import align
from ..objective import TrialObjective, residual_vector
from ..tracker_bias import add_bias
from .causes import Cause

__all__ = ["ProbeContext", "SampleIndex", "noise_variance"]

_BASE_ADJUST = Cause.adjust_values


class SampleIndex:
    """Where each element of a residual vector sits: trial, frame, time fraction; successive-frame pairs.

    Built from the aligned (real, sim) pairs in :func:`residual_vector`'s order (per trial, the
    real-valid samples (T, K) row-major, then the D coordinates).

    Attributes:
        trial: (M,) int trial index. frac: (M,) time since the trial's first frame over its
        duration, in [0, 1]. pairs: (P, 2) int indices of the same keypoint coordinate in
        consecutive frames (for the noise estimate).
    """

    def __init__(self, sims: Sequence[Any], reals: Sequence[Any]) -> None:
        trial, frac, pairs, offset = [], [], [], 0
        for i, (s, r) in enumerate(zip(sims, reals)):
            ra, _ = align(r, s)
            mask = ra.valid
            T, K = mask.shape
            D = ra.keypoints.shape[2]
            pos = np.full((T, K, D), -1, int)
            n = int(mask.sum()) * D
            pos[mask] = (offset + np.arange(n)).reshape(-1, D)
            t = ra.time
            span = float(t[-1] - t[0]) if T > 1 and t[-1] > t[0] else 1.0
            f = np.broadcast_to(((t - t[0]) / span)[:, None, None], (T, K, D))[mask].ravel()
            a, b = pos[:-1].ravel(), pos[1:].ravel()
            ok = (a >= 0) & (b >= 0)
            pairs.append(np.stack([a[ok], b[ok]], axis=1))
            trial.append(np.full(n, i))
            frac.append(f)
            offset += n
        self.size = offset
        self.trial = np.concatenate(trial) if trial else np.zeros(0, int)
        self.frac = np.concatenate(frac) if frac else np.zeros(0)
        self.pairs = np.concatenate(pairs) if pairs else np.zeros((0, 2), int)


def noise_variance(r: np.ndarray, index: SampleIndex) -> float:
    """Measurement-noise variance from successive differences: ``σ² = Σ (r_{t+1} − r_t)² / (2P)``.

    The mean square successive difference (von Neumann, *Ann. Math. Stat.* 12, 1941; used as
    a noise estimator in nonparametric regression by Rice, *Ann. Stat.* 12, 1984): white noise
    contributes ``2σ²`` to each squared difference, a systematic error that is smooth over one
    frame almost nothing. Returns 0 without pairs.

    Args:
        r: residual (M,), unit of the measurement (squared: unit²).
        index: the vector's :class:`SampleIndex`.
    """
    if index.pairs.size == 0:
        return 0.0
    d = r[index.pairs[:, 1]] - r[index.pairs[:, 0]]
    d = d[np.isfinite(d)]
    return float(np.sum(d * d) / (2 * d.size)) if d.size else 0.0


class ProbeContext:
    """The optimum a diagnosis starts from and the evaluation of causes around it.

    Args:
        objective: the calibration's training objective.
        values: the identified values (full or partial, SI).
        parameters: the spec (which parameters are free).
        holdout: the holdout trials' objective (same twin), or None.
        bias: the tracker's bias per training excitation (``tracked − projected`` px trajectories,
            :func:`~vid2sid_ros.calibration.tracker_bias.twin_tracker_bias`, same order as
            ``objective.excitations``), added to the twin's training keypoints (module docstring);
            None: the twin's projected keypoints are compared as they are.
        bias_candidate: the tracker's bias measured on renders of the twin, per training excitation
            (same form and order as ``bias``), when it is *not* applied: the :class:`~.causes.TrackerBias`
            candidate's column. Ignored when ``bias`` is given (the bias is then part of every residual).

    Raises:
        ValueError: ``bias`` or ``bias_candidate`` does not hold one trajectory per training excitation.

    Attributes:
        full: complete values at the optimum. free: the free specs (F). u0: (F,) their normalised
        values. base: the evaluation at the optimum. r0: (M,) residual there. index: its
        :class:`SampleIndex`. sigma2: noise variance (unit²). rate: frame rate, Hz. unit: the
        measurement unit. rollouts: diagnostic rollouts spent so far.
    """

    def __init__(self, objective: TrialObjective, values: Mapping[str, float], parameters: ParameterSet,
                 holdout: TrialObjective | None = None, bias: Sequence[Any] | None = None,
                 bias_candidate: Sequence[Any] | None = None) -> None:
        self.objective, self.params, self.holdout = objective, parameters, holdout
        for what, b in (("tracker bias", bias), ("tracker bias candidate", bias_candidate)):
            if b is not None and len(b) != len(objective.excitations):
                raise ValueError(f"{what}: {len(b)} trajectories for {len(objective.excitations)} excitations")
        self.bias = list(bias) if bias else None
        self.bias_candidate = list(bias_candidate) if bias_candidate and self.bias is None else None
        self._candidate_by_trial = _by_trial(objective.excitations, self.bias_candidate)
        self.full = parameters.complete(dict(values))
        self.free = list(parameters.free)
        self.u0 = np.array([s.to_unit(self.full[s.name]) for s in self.free], float)
        self.rollouts = 0
        self._probed: dict[tuple, tuple[list, Any, np.ndarray | None]] = {}  # residuals measured (the causes and
        # objective kept: their ids in the key stay theirs)
        self.camera_pose: np.ndarray | None = None  # the pose causes applied now (:class:`~.causes.CameraPose`)
        self.unit = getattr(objective, "unit", "px")
        self.reals = objective.real
        rates = [1.0 / float(np.median(np.diff(r.time))) for r in self.reals if r.num_frames > 2]
        self.rate = float(np.median(rates)) if rates else 30.0
        self.duration_s = min((float(r.time[-1] - r.time[0]) for r in self.reals if r.num_frames > 1), default=1.0)
        self.camera = getattr(objective.twin, "camera", None)
        base, _ = objective.evaluate(self.full)
        self.rollouts += base.rollouts
        self.base = base
        self.failed = bool(base.failed)
        if self.failed:
            return
        self.r0 = residual_vector(self.measured(base.sim), self.reals)
        self.index = SampleIndex(base.sim, self.reals)
        self.sigma2 = noise_variance(self.r0, self.index)
        self.ok = np.isfinite(self.r0)

    @property
    def twin(self) -> Any:
        return self.objective.twin

    def values_at(self, u: np.ndarray) -> dict[str, float]:
        """Complete values with the free parameters at normalised ``u`` (F,) (clipped to [0, 1])."""
        vals = dict(self.full)
        for s, x in zip(self.free, u):
            vals[s.name] = s.from_unit(float(x))
        return vals

    def residual(self, causes: Sequence[Any], thetas: Sequence[float], u: np.ndarray | None = None, *,
                 objective: TrialObjective | None = None) -> np.ndarray | None:
        """The residual (M,) with the free parameters at ``u`` and each cause at its size, or None when
        the twin cannot be simulated there (diverged, refused) or the samples do not line up.

        Args:
            causes: :class:`~.causes.Cause` objects (may be empty).
            thetas: their sizes, in each cause's unit.
            u: free parameters, normalised (F,); default the optimum.
            objective: evaluate on this objective instead (the holdout; same twin).

        A point probed before (the same cause objects at the same sizes, the same ``u`` and objective) gives
        the residual measured then (a copy), without a rollout: the twin is deterministic, so it is the
        residual a second probe would measure.
        """
        key = (tuple(id(c) for c in causes), np.asarray(thetas, float).tobytes(),
               np.asarray(self.u0 if u is None else u, float).tobytes(), id(objective))
        if key not in self._probed:  # e.g. a composite's part is probed at the step its own screen probed
            self._probed[key] = (list(causes), objective, self._residual(causes, thetas, u, objective))
        r = self._probed[key][2]
        return None if r is None else r.copy()

    def _residual(self, causes: Sequence[Any], thetas: Sequence[float], u: np.ndarray | None,
                  objective: TrialObjective | None) -> np.ndarray | None:
        """:meth:`residual`, measured (no memo)."""
        obj = self.objective if objective is None else objective
        if objective is None and (u is None or np.array_equal(u, self.u0)) and all(
                not (c.changes_rollout or c.changes_commands or type(c).adjust_values is not _BASE_ADJUST)
                for c in causes):  # only the measurement changes: transform the optimum's own trajectories
            sims = list(self.base.sim)
            for c, th in zip(causes, thetas):
                sims = [c.transform(self, s, th) for s in sims]
            return residual_vector(self.measured(sims), obj.real)
        values = self.values_at(self.u0 if u is None else u)
        for c, th in zip(causes, thetas):
            values = c.adjust_values(self, values, th)
        excs = [e for e in obj.excitations]
        commands = [(c, th) for c, th in zip(causes, thetas) if c.changes_commands]
        if commands:
            for c, th in commands:
                excs = [c.excitation(self, e, th) for e in excs]
            obj = TrialObjective(obj.twin, excs, obj.real, obj.parameters, noise=obj.noise)
        physical = [(c, th) for c, th in zip(causes, thetas) if c.changes_rollout]
        with contextlib.ExitStack() as stack:
            if physical:
                obj._cache.clear()  # the rollout cache keys on parameter values; these change the model
                stack.callback(obj._cache.clear)
                for c, th in physical:
                    stack.enter_context(c.applied(self, th))
            ev, _ = obj.evaluate(values)
        self.rollouts += ev.rollouts
        if ev.failed:
            return None
        sims = list(ev.sim)
        for c, th in zip(causes, thetas):
            if c.changes_measurement:
                sims = [c.transform(self, s, th) for s in sims]
        r = residual_vector(self.measured(sims) if objective is None else sims, obj.real)
        if objective is None and r.shape != self.r0.shape:
            return None
        return r

    def measured(self, sims: Sequence[Any]) -> list[Any]:
        """The twin's training trajectories as the robot's camera and tracker would give them: plus the
        tracker bias when one was measured (module docstring), else unchanged. ``sims``: one per
        training excitation, same order."""
        return add_bias(sims, self.bias) if self.bias else list(sims)

    def candidate_bias(self, sim: Any) -> Any | None:
        """The candidate tracker bias (``bias_candidate``) measured on the training excitation ``sim`` is a
        rollout of (matched by its ``trial_id``), or None: none measured, or ``sim`` is not a training trial's
        (a holdout trial: the bias was measured on the training motions only)."""
        return self._candidate_by_trial.get(getattr(sim, "trial_id", None))

    @property
    def candidate_bias_rms(self) -> float:
        """RMS of the candidate tracker bias over its valid samples (px; NaN when none was measured)."""
        x = [np.asarray(b.keypoints)[np.asarray(b.valid)] for b in self.bias_candidate or ()]
        x = np.concatenate([v.ravel() for v in x]) if x else np.zeros(0)
        return math.sqrt(float(np.mean(x * x))) if x.size else math.nan

    def ssr(self, r: np.ndarray, rows: np.ndarray | None = None) -> float:
        """Sum of squared residuals over the finite samples of ``rows`` (default all), unit²."""
        keep = self.ok if rows is None else self.ok & rows
        x = r[keep]
        return float(np.sum(np.where(np.isfinite(x), x, 0.0) ** 2)) if x.size else 0.0

    def rms(self, r: np.ndarray, rows: np.ndarray | None = None) -> float:
        """RMS of the residual over ``rows`` (default all), unit."""
        keep = self.ok if rows is None else self.ok & rows
        n = int(keep.sum())
        return math.sqrt(self.ssr(r, rows) / n) if n else math.nan


def _by_trial(excitations: Sequence[Any], bias: Sequence[Any] | None) -> dict[str, Any]:
    """``{training excitation name: its bias trajectory}`` (empty without a bias, or when two training
    excitations share a name: a trajectory could then not be matched to its own bias)."""
    names = [getattr(e, "name", None) for e in excitations]
    if not bias or len(set(names)) != len(names):
        return {}
    return dict(zip(names, bias))
