"""The calibration loop (no ROS): propose, evaluate, record, repeat.

:func:`run_calibration` fits a twin's free parameters to a :class:`RealTrial` with any
:class:`~vid2sid_ros.calibration.proposers.proposer.Proposer`:

1. (optional) identifiability check at the start point
   (:mod:`~vid2sid_ros.calibration.identifiability`), a diagnostic not charged to the budget;
   then the effect check (:mod:`~vid2sid_ros.calibration.effects`, reusing that check's
   sensitivities): a free physics parameter that does not change the training rollouts
   between its bounds is refused (:class:`CalibrationError`, before the run directory is
   written); a free nuisance the training trials cannot see is frozen at its start value
   for every proposer (the frozen flag is what ``_sanitise``, ``evaluate`` and every
   proposer honour) and listed as ``unobservable_on_training`` in ``run.json``,
   ``result.json`` and ``result.yaml``;
2. iteration 0 evaluates the start point (spec nominal unless ``config.start``);
3. iterations 1..N: the proposer gets a :class:`ProposalContext` (specs, current values
   and evaluation, real trajectories, history, a metered ``evaluate`` callback, videos for
   proposers with ``wants_video``) and returns a :class:`Proposal`; the loop sanitises
   it (non-finite values rejected, out-of-bounds values clamped, missing names kept,
   unknown or frozen names ignored — each noted), evaluates it unless the proposer
   already did (rollouts charged either way), tracks the best parameters seen over
   every evaluation (proposers are stochastic), and appends the iteration to
   ``run_dir/iterations.jsonl`` (flush + fsync) the moment it completes;
4. at the end: the best parameters, an identifiability check there with the
   Gauss–Newton uncertainty (diagnostic), the holdout error, ``result.yaml`` (the
   parameter spec with ``nominal`` = identified values, loadable by
   :func:`~vid2sid_ros.core.parameters.load_parameter_set`, the twin and the ROS
   node), ``result.json`` and, when the twin has ``export_model(path)``, a
   calibrated copy of its model file.

Budget: ``rollout_budget`` counts every twin rollout a calibration pays for (one per
training excitation per evaluation, including iteration 0 and all of a proposer's
internal evaluations). ``context.evaluate`` raises
:class:`~vid2sid_ros.calibration.proposers.proposer.BudgetExhausted` when an evaluation would
exceed it. Identifiability and effect checks, video renders and the holdout score are
diagnostics, reported separately as ``diagnostic_rollouts``.

Robustness: a proposer that raises, returns NaN, out-of-bounds or missing values, or
something that is not a Proposal is recorded in the iteration's ``notes`` and the loop
carries on (with ``fallback`` when given); a diverging rollout, or one over the rollout
limits (``rollout_max_substeps`` / ``rollout_max_wall_s``, refused by the twin), is a
failed evaluation (``error_px = inf``), the current parameters stay where they were.
Each record names the proposer that actually proposed (a fallback included;
``extra["requested_proposer"]`` keeps the configured one). A run in which iterations were
asked for and none produced a proposal ends with ``status = "no_proposal"`` (in
``result.yaml``/``result.json``) and no calibrated model. Every result file is written
atomically (:mod:`vid2sid_ros.core.files`); a promised artefact that cannot be written (the
calibrated model, ``trials.json``) gives ``status = "artefacts_missing"`` with the file and
the reason under ``artefacts_missing``. The run directory is locked for the run's life
(:mod:`.run_lock`): a second run into it is refused.

Resume: run files are ``run.json`` (config, spec, iteration 0, start check),
``iterations.jsonl`` and ``proposer_state/iter_NNNN.json``. :func:`check_run_dir` makes every
refusal check before anything is written (another run there, settings that differ,
iterations without their ``run.json``, a sequence :func:`validate_records` refuses); nothing
completed is ever deleted. With ``config.resume`` the loop reloads the files (a torn last
line is dropped), re-runs the twin once at the current point (deterministic, not charged)
and continues. Records are round-tripped through JSON
before any proposer sees them, so a proposer that is a deterministic function of
``(context, seed)`` — its memory kept in ``Proposal.state`` — gives the same final
result whether or not the run was interrupted. All built-in proposers are.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, fields, replace as dc_replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.files import atomic_output, atomic_write_text
from ..core.names import did_you_mean
from ..core.parameters import ParameterSet, ParameterSpecError
from ..core.trajectory import format_error
from ..core.trial import RealTrial, jsonable, with_current_keys
from ..sim.base import DEFAULT_MAX_SUBSTEPS, RolloutLimits, Twin, TwinError
from ..sim.registry import Rig
from .effects import ParameterEffectError, check_parameter_effects
from .identifiability import IdentifiabilityReport, check_identifiability, state_intervals
from .nuisance import MeasurementModel, add_measurement_nuisances, offset_unit
from .objective import TrialObjective
from .proposers.proposer import BudgetExhausted, Evaluation, IterationRecord, Proposal, ProposalContext, Proposer
from .proposers.rationale import ensure_lead, truncate_text
from .run_lock import RunDirBusy, run_dir_lock
from .trial_curves import RENDERS_FILE, render_trials, save_trial_curves, trial_curves

ARTEFACTS_MISSING = "artefacts_missing"  #: status of a run whose promised artefacts could not all be written

__all__ = ["CalibrationConfig", "CalibrationResult", "CalibrationError", "run_calibration", "check_run_dir",
           "finished_stop",
           "mark_artefacts_missing", "ARTEFACTS_MISSING",
           "RolloutBudgetWarning", "rollout_budget_warnings",
           "RunDirCheck", "validate_records",
           "record_to_dict", "record_from_dict", "load_history", "UNLIMITED_ROLLOUTS", "LEGACY_RESULT_KEYS",
           "result_keys_current"]

#: Gauss-Newton (chord) iterations the final check takes towards its interval's centre (diagnostic rollouts)
FINAL_REFINE = 2

#: ``context.rollouts_remaining`` when the budget is unlimited (``rollout_budget=None``)
UNLIMITED_ROLLOUTS = 10 ** 9


class CalibrationError(RuntimeError):
    """A calibration cannot start or resume (bad config, foreign run directory...)."""


class RolloutBudgetWarning(UserWarning):
    """The spec's bounds allow proposals whose rollouts exceed the rollout limits.

    Such rollouts are refused by the twin and recorded as failed evaluations; the
    warning is given once, before iteration 0, so the bounds can be narrowed first.
    """


def rollout_budget_warnings(twin: Twin, params: ParameterSet, excitations, limits: RolloutLimits) -> list[str]:
    """Warnings about rollouts the spec's bounds allow beyond ``limits`` (up-front check).

    Twins whose cost depends on the parameters say how much through
    ``rollout_cost_bound(parameters, excitations) -> (substeps, explanation)``
    (the PyElastica tentacle); others are not checked.
    """
    bound = getattr(twin, "rollout_cost_bound", None)
    if not callable(bound) or limits.max_substeps is None:
        return []
    n, why = bound(params, list(excitations))
    if n <= limits.max_substeps:
        return []
    return [f"the parameter bounds allow rollouts of up to {n:,} physics substeps ({why}), over the budget of "
            f"{limits.max_substeps:,} (calibration.rollout_max_substeps): proposals there will be recorded as "
            "failed evaluations; narrow the bounds (or raise the budget) to avoid spending iterations on them"]


#: :attr:`CalibrationConfig.far_refit`'s choices
FAR_REFIT = ("always", "converged", "never")


@dataclass
class CalibrationConfig:
    """Budgets and switches of one calibration.

    Attributes:
        iterations: proposal iterations after iteration 0 (the start point).
        rollout_budget: twin rollouts the calibration may spend (None = unlimited).
        seed: handed to proposers as ``context.rng_seed``.
        identifiability: run the identifiability check at the start point.
        final_identifiability: run it at the best point too (with uncertainty).
        identifiability_step: finite-difference step, normalised units.
        identifiability_scheme: ``central`` or ``forward``.
        condition_threshold: condition number above which the check warns.
        target_error_px: stop early once the best training MAE is at or below this.
        stop_when_converged: stop (``stopped = "converged"``) after an iteration whose
            proposal says ``converged`` (its convergence test passed), or (``stopped = "stalled:
            <why>"``, not converged) whose proposal says it has no move left; False spends
            every iteration anyway.
        video: write side-by-side videos for the proposer (None: ``proposer.wants_video``).
        resume: continue the run found in ``run_dir``.
        max_rationale_chars: longest proposer rationale stored, characters; a longer one is cut
            and marked ``[truncated: N characters]`` (with a note).
        resume_changed: let ``resume`` continue although the model, rig config or real data
            differ from the interrupted run's (``run.json`` fingerprints); recorded in ``run.json``
            (``resumed_with_changes``). Default False: such a resume is refused.
        resume_extend: let ``resume`` raise the rollout budget (never lower it; None = unlimited is the
            highest): a run that ended at its rollout budget or its iterations then goes on when the raised
            ``iterations`` and ``rollout_budget`` leave room for another iteration (``vid2sid calibrate
            --resume`` with a larger ``--iterations``/``--budget``); the new limits are recorded in
            ``run.json`` (``config``, ``signature``, ``extended``). Default False: a resume keeps the
            run's budget (a benchmark compares methods at one budget).
        start: start values ``{name: value}`` (default: the spec's nominal values).
        noise: measurement noise (1 sigma) per unit, ``{"px": 1.0, "m": 0.001, "rad": 0.005}``,
            weighting trials of different kinds fitted together (rig config ``calibration.noise``;
            default :data:`~vid2sid_ros.core.trajectory.DEFAULT_NOISE`).
        nuisance: the measurement-nuisance switches (the rig config's ``nuisance:`` block,
            :mod:`~vid2sid_ros.calibration.nuisance`); None = defaults (latency free when
            the trials are commanded, marker offsets free for real trials only).
        rollout_max_substeps: physics substeps one rollout may take (None = no cap); a
            rollout over it is refused by the twin and recorded as a failed evaluation
            (:class:`~vid2sid_ros.sim.base.RolloutLimits`).
        rollout_max_wall_s: wall time one rollout may take, s (None = no cap, the default:
            a first PyElastica rollout includes numba compilation).
        diagnosis: test the final residuals for structure the free parameters cannot explain
            (:mod:`~vid2sid_ros.calibration.diagnosis`; diagnostic rollouts, not charged).
        far_refit: when that diagnosis may refit from afar where its local refits leave a systematic part
            (the free parameters and each leading cause re-optimised over their whole ranges: hundreds to
            thousands of diagnostic rollouts, up to minutes): ``always`` (default: a model error the free
            parameters absorbed by moving far, a dead-zone or a latency, is named although the fit it spoilt
            did not converge), ``converged`` (only after a ``converged`` stop: a sweep of many methods, where
            an unfinished baseline's refits from afar would finish its fit in every cell), ``never`` (local
            refits only: a service that answers one iteration at a time).
            ``diagnosis.statistics.far_refit_skipped`` says why they were not run.
        tracker_bias: film the twin at the result like the real rig (rendered, the rig's camera
            model when it made the real side, the rig's tracker) and carry the tracker's bias into
            the estimate (:mod:`~vid2sid_ros.calibration.bias_correction`: the least-squares optimum
            with the bias modelled, after the proposer's stop), the interval and the residual diagnosis
            (:mod:`~vid2sid_ros.calibration.tracker_bias`; one diagnostic rollout per training
            trial and, without ``final_identifiability``, a forward-difference check, not charged).
            Needs a rig target with a tracker and image-keypoint trials.
            None (default): only when the real side was made by the rig's own camera model
            (a sim2sim stand-in, ``real.meta["noise"] == "camera"``); True: also for a real video
            (the twin's renders tracked clean, through the videos' codec when they share one); False:
            never. None on a real video: the bias is measured for the residual diagnosis only, as a
            candidate cause of its own (not applied).
    """

    iterations: int = 10
    rollout_budget: int | None = 40
    seed: int = 0
    identifiability: bool = True
    final_identifiability: bool = True
    identifiability_step: float = 0.01
    identifiability_scheme: str = "central"
    condition_threshold: float = 1.0e3
    target_error_px: float | None = None
    stop_when_converged: bool = True
    video: bool | None = None
    resume: bool = False
    resume_changed: bool = False
    resume_extend: bool = False
    max_rationale_chars: int = 20000
    start: dict[str, float] | None = None
    nuisance: dict[str, Any] | None = None
    noise: dict[str, float] | None = None
    rollout_max_substeps: int | None = DEFAULT_MAX_SUBSTEPS
    rollout_max_wall_s: float | None = None
    diagnosis: bool = True
    far_refit: str = "always"
    tracker_bias: bool | None = None

    def __post_init__(self) -> None:
        try:
            RolloutLimits(self.rollout_max_substeps, self.rollout_max_wall_s)
        except ValueError as err:  # "rollout limit max_substeps must be ..." -> "config 'rollout_max_substeps' must be ..."
            key, rest = str(err).removeprefix("rollout limit ").split(" ", 1)
            raise CalibrationError(f"config 'rollout_{key}' {rest}") from None
        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def positive(v: Any) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0

        if not is_int(self.iterations) or self.iterations < 0:
            raise CalibrationError(f"config 'iterations' must be an integer >= 0, got {self.iterations!r}")
        if self.rollout_budget is not None and (not is_int(self.rollout_budget) or self.rollout_budget < 1):
            raise CalibrationError(f"config 'rollout_budget' must be a positive integer or null, "
                                   f"got {self.rollout_budget!r}")
        if not is_int(self.max_rationale_chars) or self.max_rationale_chars < 1:
            raise CalibrationError(f"config 'max_rationale_chars' must be an integer >= 1, got {self.max_rationale_chars!r}")
        if not is_int(self.seed):
            raise CalibrationError(f"config 'seed' must be an integer, got {self.seed!r}")
        for name in ("identifiability", "final_identifiability", "resume", "resume_changed", "resume_extend",
                     "diagnosis"):
            if not isinstance(getattr(self, name), bool):  # a quoted 'no' would otherwise be true
                raise CalibrationError(f"config '{name}' must be true or false, got {getattr(self, name)!r}")
        if self.far_refit not in FAR_REFIT:
            raise CalibrationError(f"config 'far_refit' must be one of {', '.join(FAR_REFIT)}, got {self.far_refit!r}")
        if self.tracker_bias is not None and not isinstance(self.tracker_bias, bool):
            raise CalibrationError(f"config 'tracker_bias' must be true, false or null, got {self.tracker_bias!r}")
        if self.video is not None and not isinstance(self.video, bool):
            raise CalibrationError(f"config 'video' must be true, false or null, got {self.video!r}")
        if self.identifiability_scheme not in ("central", "forward"):
            raise CalibrationError("config 'identifiability_scheme' must be 'central' or 'forward', "
                                   f"got {self.identifiability_scheme!r}")
        if not positive(self.identifiability_step) or self.identifiability_step >= 0.5:
            raise CalibrationError("config 'identifiability_step' must be a number in (0, 0.5) (normalised units), "
                                   f"got {self.identifiability_step!r}")
        if not positive(self.condition_threshold):
            raise CalibrationError(f"config 'condition_threshold' must be a number > 0, got {self.condition_threshold!r}")
        if self.target_error_px is not None and not (
                isinstance(self.target_error_px, (int, float)) and not isinstance(self.target_error_px, bool)
                and math.isfinite(self.target_error_px) and self.target_error_px >= 0):
            raise CalibrationError(f"config 'target_error_px' must be a number >= 0 (px) or null, "
                                   f"got {self.target_error_px!r}")
        if self.start is not None:
            if not isinstance(self.start, Mapping):
                raise CalibrationError(f"config 'start' must map parameter names to values, got {self.start!r}")
            for k, v in self.start.items():
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise CalibrationError(f"config 'start': value of '{k}' must be a finite number, got {v!r}")
        if self.noise is not None and not (isinstance(self.noise, Mapping) and all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                and v > 0 for k, v in self.noise.items())):
            raise CalibrationError(f"config 'noise' must map units (px, m, rad) to noise levels > 0, got {self.noise!r}")
        if self.nuisance is not None:
            from .nuisance import NuisanceConfigError, parse_nuisance_config

            try:
                parse_nuisance_config(self.nuisance, source="config")
            except NuisanceConfigError as err:
                raise CalibrationError(str(err)) from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<config>") -> "CalibrationConfig":
        """Build from a mapping; unknown keys raise :class:`CalibrationError` naming them."""
        known = {f.name for f in fields(cls)}
        unknown = [k for k in data if k not in known]
        if unknown:
            raise CalibrationError(f"{source}: unknown calibration setting(s) {unknown}; valid: {', '.join(sorted(known))}")
        try:
            return cls(**dict(data))
        except CalibrationError as err:
            raise CalibrationError(f"{source}: calibration: {str(err).removeprefix('config ')}") from None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CalibrationResult:
    """Outcome of :func:`run_calibration`.

    Attributes:
        values: best parameters found (all parameters, SI units).
        error_px: training MAE at ``values``, in ``unit`` (the name is historic: px for
            video, m for 3-D points, rad for joints, "sigma" for mixed kinds weighted by
            their noise, :mod:`vid2sid_ros.calibration.objective`). initial_error_px: at the start point.
        per_keypoint_px: training MAE per keypoint at ``values`` (``unit``).
        holdout_mae_px: holdout MAE at ``values`` in ``holdout_unit`` (None without holdout trials).
        history: iteration records, iteration 0 (start point) first.
        rollouts: rollouts charged to the budget. iterations: proposal iterations run.
        diagnostic_rollouts: rollouts of identifiability checks, renders, holdout scoring.
        wall_s: wall time of the calibration (summed over resumed sessions).
        stopped: why the loop ended.
        parameters: the physics spec with ``nominal`` = identified values (measurement nuisances such as
            ``latency`` are in ``values``, never in this spec: they are not written into the model).
        identifiability: check at the start point; final_identifiability: at ``values``.
        uncertainty: ``{name: standard deviation in the parameter's unit}`` (Gauss–Newton).
        files: written files (``iterations``, ``result_yaml``, ``result_json``, ``model``).
        status: ``"ok"``, or ``"no_proposal"`` when proposal iterations were asked for
            and not one of them produced a proposal (every proposer failed): ``values``
            are then the start point, nothing was calibrated and no model is exported;
            or ``"artefacts_missing"`` when the calibration ran but an artefact it promises
            (calibrated model, ``trials.json``, the report) could not be written.
        artefacts_missing: ``[{"file": name, "error": one line}]`` of those artefacts.
        best_iteration: the iteration whose evaluation gave ``values`` (0 = start point).
        best_proposer: the proposer that actually produced ``values`` (a fallback when
            it stepped in; ``"initial"`` for the start point).
        unit, holdout_unit: the measurement unit of the training / holdout errors.
        diagnosis: the residual diagnosis at ``values``
            (:meth:`vid2sid_ros.calibration.diagnosis.Diagnosis.to_dict`: ``misspecified``,
            ``kinds``, ``summary``, ``findings``...), None when switched off.
        phases: wall time, CPU time (s) and charged / diagnostic rollouts of each phase of this
            process's part of the run (:class:`~vid2sid_ros.calibration.phases.PhaseLedger`).
        bias_correction: when the twin was filmed like the robot, the move of the calibration's point to the
            least-squares optimum with the tracker's bias modelled
            (:meth:`~vid2sid_ros.calibration.bias_correction.BiasCorrection.to_dict`; ``applied``: ``values``
            are that optimum, ``before`` the point the stop reason is said of); None otherwise.
    """

    values: dict[str, float]
    error_px: float
    per_keypoint_px: dict[str, float]
    initial_error_px: float
    holdout_mae_px: float | None
    history: list[IterationRecord]
    rollouts: int
    iterations: int
    diagnostic_rollouts: int
    wall_s: float
    stopped: str
    proposer: str
    parameters: ParameterSet
    identifiability: IdentifiabilityReport | None = None
    final_identifiability: IdentifiabilityReport | None = None
    uncertainty: dict[str, float] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    status: str = "ok"
    best_iteration: int = 0
    best_proposer: str = "initial"
    unit: str = "px"
    holdout_unit: str = "px"
    diagnosis: dict[str, Any] | None = None
    artefacts_missing: list[dict[str, str]] = field(default_factory=list)
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    bias_correction: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (history as record dicts): the errors as ``training_mae``,
        ``initial_mae``, ``per_keypoint_mae`` (in ``unit``) and ``holdout_mae`` (in ``holdout_unit``);
        :func:`result_keys_current` reads the ``*_px`` names of older run directories."""
        return jsonable({
            "proposer": self.proposer, "status": self.status, "best_iteration": self.best_iteration,
            "best_proposer": self.best_proposer, "values": self.values, "unit": self.unit,
            "holdout_unit": self.holdout_unit, "training_mae": self.error_px,
            "per_keypoint_mae": self.per_keypoint_px, "initial_mae": self.initial_error_px,
            "holdout_mae": self.holdout_mae_px, "rollouts": self.rollouts, "iterations": self.iterations,
            "diagnostic_rollouts": self.diagnostic_rollouts, "wall_s": self.wall_s, "stopped": self.stopped,
            "uncertainty": self.uncertainty, "residual_diagnosis": self.diagnosis,
            **({"bias_correction": self.bias_correction} if self.bias_correction is not None else {}),
            "identifiability": self.identifiability.to_dict() if self.identifiability else None,
            "final_identifiability": self.final_identifiability.to_dict() if self.final_identifiability else None,
            "files": {k: str(v) for k, v in self.files.items()},
            **({"artefacts_missing": self.artefacts_missing} if self.artefacts_missing else {}),
            "history": [record_to_dict(r, with_state=False) for r in self.history]})


#: ``result.json`` / ``result.yaml`` error keys of older run directories -> the current ones (the
#: errors are in the trial's measurement unit, px only for image keypoints: the key does not say px)
LEGACY_RESULT_KEYS: dict[str, str] = {"error_px": "training_mae", "initial_error_px": "initial_mae",
                                      "holdout_mae_px": "holdout_mae", "per_keypoint_px": "per_keypoint_mae",
                                      "training_mae_px": "training_mae", "initial_mae_px": "initial_mae"}


def result_keys_current(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a ``result.json`` summary (or ``result.yaml``'s ``calibration`` block) with the
    error keys of older run directories (``error_px``, ``holdout_mae_px``, ...:
    :data:`LEGACY_RESULT_KEYS`) under their current names; a current key wins over an old one."""
    return with_current_keys(doc, LEGACY_RESULT_KEYS)


# -- records <-> JSON ------------------------------------------------------------------
def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def record_to_dict(r: IterationRecord, *, with_state: bool = True) -> dict[str, Any]:
    """JSON-ready dict of a record (non-finite numbers become null)."""
    extra = dict(r.extra)
    if not with_state:
        extra.pop("proposer_state", None)
    return jsonable({"iteration": r.iteration, "proposer": r.proposer, "values": r.values,
                      "error_px": _num(r.error_px),
                      "per_keypoint_px": {k: _num(v) for k, v in r.per_keypoint_px.items()},
                      "rationale": r.rationale, "confidence": _num(r.confidence),
                      "rollouts_used": r.rollouts_used, "wall_s": r.wall_s, "notes": list(r.notes), "extra": extra})


def record_from_dict(d: Mapping[str, Any], *, source: str = "<record>") -> IterationRecord:
    """Inverse of :func:`record_to_dict` (null errors become ``inf``).

    Raises:
        CalibrationError: on a missing field (names ``source``).
    """
    try:
        return IterationRecord(
            iteration=int(d["iteration"]), proposer=str(d["proposer"]),
            values={k: float(v) for k, v in d["values"].items()},
            error_px=math.inf if d.get("error_px") is None else float(d["error_px"]),
            per_keypoint_px={k: (math.nan if v is None else float(v)) for k, v in (d.get("per_keypoint_px") or {}).items()},
            rationale=str(d.get("rationale", "")),
            confidence=0.0 if d.get("confidence") is None else float(d["confidence"]),
            rollouts_used=int(d.get("rollouts_used", 0)), wall_s=float(d.get("wall_s", 0.0)),
            notes=list(d.get("notes") or []), extra=dict(d.get("extra") or {}))
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise CalibrationError(f"{source}: malformed iteration record ({type(err).__name__}: {err})") from None


def _roundtrip(r: IterationRecord) -> IterationRecord:
    return record_from_dict(json.loads(json.dumps(record_to_dict(r))))


def load_history(run_dir: str | Path) -> list[IterationRecord]:
    """Records of a run directory: iteration 0 from ``run.json`` then ``iterations.jsonl``.

    A torn (unparseable) last line is ignored. Proposer states are re-attached.

    Raises:
        FileNotFoundError: if ``run.json`` is missing. CalibrationError: on a malformed
            record or a sequence :func:`validate_records` refuses (naming the line).
    """
    run_dir = Path(run_dir)
    meta_path = run_dir / "run.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"no calibration run in {run_dir} (run.json missing)")
    meta = _read_meta(meta_path)
    initial = record_from_dict(meta["initial"], source=str(meta_path))
    recs, _, lines = _read_jsonl(run_dir, with_lines=True)
    validate_records(initial, recs, lines, source=str(run_dir / "iterations.jsonl"),
                     initial_rollouts=meta.get("initial_rollouts"))
    return [initial, *recs]


def _read_meta(meta_path: Path) -> dict[str, Any]:
    """``run.json`` as a dict.

    Raises:
        CalibrationError: naming the file when it is not a JSON object with the run fields.
    """
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as err:
        raise CalibrationError(f"{meta_path}: corrupt run file ({type(err).__name__}: {err}); cannot resume this "
                               "run: choose another output directory") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("initial"), dict):
        raise CalibrationError(f"{meta_path}: not a calibration run file (expected a JSON object with 'initial'); "
                               "cannot resume this run: choose another output directory")
    return meta


def _signature_diff(key: str, old: Any, new: Any) -> str:
    """A short description of how a resume signature entry differs."""
    if key == "parameters" and isinstance(old, list) and isinstance(new, list):
        o = {p.get("name"): p for p in old if isinstance(p, Mapping)}
        n = {p.get("name"): p for p in new if isinstance(p, Mapping)}
        if list(o) != list(n):
            return f"parameter names {list(o)} vs {list(n)}"
        changed = [f"{name}.{f}: {o[name].get(f)!r} vs {n[name].get(f)!r}"
                   for name in o for f in sorted(set(o[name]) | set(n[name])) if o[name].get(f) != n[name].get(f)]
        return "; ".join(changed[:4]) + (f" (+{len(changed) - 4} more)" if len(changed) > 4 else "")
    text = f"{old!r} vs {new!r}"
    return text if len(text) <= 300 else text[:300] + "..."


def _read_jsonl(run_dir: Path, *, with_lines: bool = False):
    """(records, byte length of the good prefix[, 1-based line numbers]) of iterations.jsonl."""
    path = run_dir / "iterations.jsonl"
    if not path.is_file():
        return ([], 0, []) if with_lines else ([], 0)
    data = path.read_bytes()
    records: list[IterationRecord] = []
    lines: list[int] = []
    pos = good = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:  # no trailing newline: torn last line
            break
        raw = data[pos:nl]
        last = not data[nl + 1:].strip()  # only the last line can be torn by an interruption
        line_no = data.count(b"\n", 0, pos) + 1
        if raw.strip():
            try:
                d = json.loads(raw, parse_constant=lambda c: _refuse_constant(c, path, line_no))
            except (json.JSONDecodeError, UnicodeDecodeError):
                if last:
                    break
                raise CalibrationError(
                    f"{path} line {line_no} is corrupt (not JSON) but later lines follow; this is not an "
                    "interrupted write: repair or remove the line by hand (nothing was changed)") from None
            rec = record_from_dict(d, source=f"{path} line {line_no}")
            state_file = rec.extra.get("proposer_state_file")
            if state_file:
                sp = run_dir / state_file
                try:
                    rec.extra["proposer_state"] = json.loads(sp.read_text())
                except (OSError, ValueError) as err:
                    if last:
                        break
                    raise CalibrationError(f"{path} line {line_no}: proposer state {sp} is missing or corrupt "
                                           f"({type(err).__name__}); nothing was changed") from None
            records.append(rec)
            lines.append(line_no)
        pos = good = nl + 1
    return (records, good, lines) if with_lines else (records, good)


def _refuse_constant(c: str, path: Path, line_no: int) -> float:
    """``json.loads`` hook: the loop writes non-finite numbers as null, never NaN/Infinity."""
    raise CalibrationError(f"{path} line {line_no}: non-finite number {c} (a run writes a failed evaluation's "
                           "error as null); the file was edited or written by something else: repair or remove "
                           "the line by hand, or choose another output directory (nothing was changed)")


def _fsync_write(path: Path, text: str, *, append: bool = False) -> None:
    """Write (or append) ``text`` and fsync it.

    Raises:
        OSError: with ``filename`` = ``path`` (a full disk reports at flush/fsync, where
            Python leaves ``filename`` None).
    """
    try:
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        if err.filename is None:
            err.filename = str(path)
        raise


def _atomic_json(path: Path, data: Any, *, indent: int | None = 1) -> None:
    """``data`` as JSON at ``path``, atomically. ``indent=None`` for a large file no one reads by eye (a proposer's
    state, its Jacobian of M x n numbers): Python's JSON encoder runs in C only without an indent (about 2x)."""
    atomic_write_text(path, json.dumps(jsonable(data), indent=indent))


# -- run-directory checks (nothing written) ----------------------------------------------
def _resume_key(key: str, value: Any) -> Any:
    """A resume signature entry as compared: the parameters without their ``meaning`` (words for a reader,
    reworded between versions; a run resumes when what is fitted is the same)."""
    if key != "parameters" or not isinstance(value, list):
        return value
    return [{f: x for f, x in p.items() if f != "meaning"} if isinstance(p, Mapping) else p for p in value]


def _signature(proposer_name: str, cfg: CalibrationConfig, params: ParameterSet, real: RealTrial) -> dict[str, Any]:
    """What must not change between an interrupted run and its resume."""
    return {"proposer": proposer_name, "seed": cfg.seed, "rollout_budget": cfg.rollout_budget,
            "parameters": params.to_dict()["parameters"],
            "train_trials": [t.trial_id for t in real.train], "start": cfg.start}


@dataclass
class RunDirCheck:
    """What :func:`check_run_dir` found in a run directory to be resumed.

    Attributes:
        meta: the ``run.json`` object. initial: iteration 0's record.
        records: the validated records of ``iterations.jsonl`` (iteration 1 first).
        good: byte length of the good prefix of ``iterations.jsonl`` (a torn last line
            after it is dropped on resume).
        changed: fingerprints that differ from the interrupted run's (resumed with
            ``resume_changed``).
        finished: the stop reason of a run that ended (its ``result.json`` was written after the
            last record: converged, stalled, budget exhausted, iterations done, target reached),
            else None (an interrupted run, or one that did all its iterations resumed with more
            ``iterations``, which are not part of the resume signature). A finished run is not
            continued (:func:`finished_stop`).
    """

    meta: dict[str, Any]
    initial: IterationRecord
    records: list[IterationRecord]
    good: int
    changed: list[str] = field(default_factory=list)
    finished: str | None = None


#: suffix :func:`_finish` adds to the stop reason when no proposal was made
_NO_PROPOSAL = "; no proposal was made in"


def finished_stop(run_dir: str | Path, records: Sequence[IterationRecord]) -> str | None:
    """The stop reason of a run that ended, or None when it was interrupted.

    A run has ended when its ``result.json`` (written atomically once, after the loop stopped)
    says why (``stopped``) and counts exactly the iterations of ``records`` (a resumed run that
    was interrupted again has more records than its older result). Continuing an ended run would
    append iterations the run had decided not to make (after ``converged``: a new proposal and a
    new stop line), so a resume of it runs no iteration.

    Args:
        run_dir: the run directory. records: its validated iterations (iteration 1 first).

    Returns:
        The stop reason as the loop decided it (without the "no proposal" note), or None.
    """
    path = Path(run_dir) / "result.json"
    try:
        res = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(res, dict) or not isinstance(res.get("stopped"), str) or not res["stopped"]:
        return None
    n = res.get("iterations")
    if not isinstance(n, int) or isinstance(n, bool) or n != len(records):
        return None
    return res["stopped"].split(_NO_PROPOSAL)[0]


def check_run_dir(run_dir: str | Path | None, *, proposer_name: str, config: CalibrationConfig,
                  parameters: ParameterSet, real: RealTrial | None,
                  fingerprints: Mapping[str, str] | None = None) -> RunDirCheck | None:
    """Every refusal check of a run directory, before anything is written to it.

    Callers that write their own files into the run directory (the CLI's
    ``real_trial.json``) call this first; :func:`run_calibration` calls it again.
    ``parameters`` may be the physics spec: the measurement nuisances ``config.nuisance``
    enables are added as :func:`run_calibration` adds them.

    Checks: a fresh run's budget below one evaluation (one rollout per training
    excitation); a run (``run.json``) exists without ``config.resume``; ``resume`` without a
    directory or a run; completed iterations (``iterations.jsonl``, ``proposer_state/``)
    without their ``run.json`` (never started afresh over them); a resume whose proposer,
    seed, budget, spec, trials or start differ; a resume whose model (or a file it includes),
    rig config or real data changed (``fingerprints`` vs ``run.json``'s, see
    :mod:`.fingerprint`; allowed with ``config.resume_changed``); an ``iterations.jsonl``
    that is not a valid sequence (:func:`validate_records`).

    ``real`` None (the trial is not built yet: a benchmark checking all its run
    directories before the first one starts) skips the signature comparison, which needs
    the trial; every other check is made.

    Returns:
        None for a fresh run, else the validated contents to resume from.

    Raises:
        CalibrationError: naming the directory or file (and line) and how to recover.
    """
    cfg = config
    if (real is not None and not cfg.resume and cfg.rollout_budget is not None
            and cfg.rollout_budget < len(real.train_excitations)):  # one evaluation = one rollout per excitation
        raise CalibrationError(f"rollout budget {cfg.rollout_budget} cannot pay for one evaluation "
                               f"({len(real.train_excitations)} rollouts)")
    if run_dir is None:
        if cfg.resume:
            raise CalibrationError("resume needs a run directory")
        return None
    rd = Path(run_dir)
    if rd.exists() and not rd.is_dir():
        raise CalibrationError(f"{rd} is a file, expected a run directory")
    meta_path, jl, sd = rd / "run.json", rd / "iterations.jsonl", rd / "proposer_state"
    if not meta_path.is_file():
        leftovers = [p.name for p in (jl,) if p.is_file() and p.stat().st_size > 0]
        if sd.is_dir() and any(sd.iterdir()):
            leftovers.append("proposer_state/")
        if leftovers:
            raise CalibrationError(
                f"{rd}: run.json is missing but {' and '.join(leftovers)} hold(s) completed iterations; neither "
                "resuming nor starting afresh is safe (that would discard them): restore run.json from a backup, "
                f"or move {', '.join(leftovers)} out of the way, or choose another output directory "
                "(nothing was changed)")
        if cfg.resume:
            raise CalibrationError(f"cannot resume {rd}: no calibration run there (run.json missing); run without "
                                   "--resume to start one")
        return None
    if not cfg.resume:
        raise CalibrationError(f"{rd} already holds a calibration run (run.json); resume it (--resume) or choose "
                               "an empty output directory")
    meta = _read_meta(meta_path)
    signature: dict[str, Any] = {}
    if real is not None:
        # the spec as run_calibration sees it: measurement nuisances added (idempotent when already there)
        parameters = add_measurement_nuisances(parameters, cfg.nuisance, keypoints=real.keypoint_names,
                                               excitations=real.train_excitations, real_trial=real.truth is None,
                                               unit=offset_unit(real.train), source="config")
        signature = _signature(proposer_name, cfg, parameters, real)
    old_sig = meta.get("signature") if isinstance(meta.get("signature"), dict) else {}
    for k, v in signature.items():
        if k == "rollout_budget" and cfg.resume_extend and _budget_raised(jsonable(old_sig.get(k)), jsonable(v)):
            continue  # a resume that extends the run: recorded in run.json by _resume_run
        if _resume_key(k, jsonable(old_sig.get(k))) != _resume_key(k, jsonable(v)):
            how = ("resume with the same budget or a larger one" if k == "rollout_budget" and cfg.resume_extend
                   else "resume with the same settings")
            raise CalibrationError(f"cannot resume {rd}: '{k}' differs from the interrupted run "
                                   f"({_signature_diff(k, jsonable(old_sig.get(k)), jsonable(v))}); "
                                   f"{how} or choose another output directory")
    changed: list[str] = []
    if fingerprints:
        from .fingerprint import WHAT, changed_fingerprints

        old_fp = meta.get("fingerprints") if isinstance(meta.get("fingerprints"), dict) else {}
        changed = changed_fingerprints(old_fp, fingerprints)
        if changed and not cfg.resume_changed:
            raise CalibrationError(f"cannot resume {rd}: {' and '.join(WHAT.get(k, k) for k in changed)} changed "
                                   "since the interrupted run; its iterations were computed against the old one: "
                                   "start a new run in another output directory, or resume anyway with "
                                   "--resume-changed (recorded in run.json) (nothing was changed)")
    initial = record_from_dict(meta["initial"], source=str(meta_path))
    records, good, lines = _read_jsonl(rd, with_lines=True)
    validate_records(initial, records, lines, source=str(jl), initial_rollouts=meta.get("initial_rollouts"))
    finished = finished_stop(rd, records)
    if finished == "iterations done" and len(records) < cfg.iterations:  # more iterations asked: it goes on
        finished = None
    elif (finished == "rollout budget exhausted" and cfg.resume_extend and real is not None
          and len(records) < cfg.iterations):  # a larger budget asked: it goes on when it pays for an evaluation
        used = int(meta.get("initial_rollouts", 0)) + sum(r.rollouts_used for r in records)
        if cfg.rollout_budget is None or cfg.rollout_budget - used >= len(real.train_excitations):
            finished = None
    return RunDirCheck(meta, initial, records, good, changed, finished)


def _budget_raised(old: Any, new: Any) -> bool:
    """Whether rollout budget ``new`` is larger than ``old`` (None: unlimited, larger than any number)."""
    if old is None:
        return False
    return new is None or (isinstance(new, int) and isinstance(old, int) and new > old)


def validate_records(initial: IterationRecord, records: list[IterationRecord], lines: list[int], *,
                     source: str, initial_rollouts: Any = None) -> None:
    """Refuse an ``iterations.jsonl`` that is not the sequence a run writes.

    Rules: iteration indices run 1, 2, 3... after iteration 0 (no duplicate, no gap);
    ``rollouts_used`` is an integer >= 0 and ``extra.rollouts_total`` (when present)
    equals iteration 0's rollouts plus the sum so far (a duplicated or dropped line
    breaks it); every number written is finite (the loop writes a failed evaluation's
    error as null, never NaN or Infinity); values are finite.

    Args:
        initial: iteration 0 (from ``run.json``). records, lines: the parsed records and
            their 1-based line numbers in ``source``.
        source: file name for messages. initial_rollouts: ``run.json``'s count.

    Raises:
        CalibrationError: ``"<source> line N: <what>; ... (nothing was changed)"``.
    """
    total = initial_rollouts if isinstance(initial_rollouts, int) and not isinstance(initial_rollouts, bool) \
        else initial.rollouts_used
    expected = initial.iteration + 1
    for rec, line in zip(records, lines):
        where = f"{source} line {line}"
        fix = ("; the file was edited or mixed with another run's: repair or remove the line by hand, or choose "
               "another output directory (nothing was changed)")
        if rec.iteration != expected:
            what = "a duplicate of an earlier iteration" if rec.iteration < expected else "iterations are missing"
            raise CalibrationError(f"{where}: iteration {rec.iteration} where {expected} was expected ({what}){fix}")
        if rec.rollouts_used < 0:
            raise CalibrationError(f"{where}: rollouts_used {rec.rollouts_used} is negative{fix}")
        total += rec.rollouts_used
        rt = rec.extra.get("rollouts_total")
        if rt is not None and rt != total:
            raise CalibrationError(f"{where}: rollouts_total {rt!r} but the iterations so far used {total} "
                                   f"rollout(s){fix}")
        bad = [k for k, v in (("error_px", rec.error_px), ("confidence", rec.confidence), ("wall_s", rec.wall_s))
               if math.isnan(v) or (k != "error_px" and math.isinf(v))]
        if rec.error_px == -math.inf:
            bad.append("error_px")
        bad += [f"values.{k}" for k, v in rec.values.items() if not math.isfinite(v)]
        if bad:
            raise CalibrationError(f"{where}: non-finite number(s) in {', '.join(bad)} (a run writes a failed "
                                   f"evaluation's error as null){fix}")
        expected += 1


# -- the loop --------------------------------------------------------------------------
def _resolve(target: Rig | Twin, parameters: ParameterSet | None) -> tuple[Twin, ParameterSet, dict[str, Any]]:
    if isinstance(target, Rig):
        twin = target.make_twin()
        params = parameters or target.parameters
        info = {"name": target.name, "description": target.description}
    else:
        twin = target
        params = parameters or twin.parameters
        info = {"name": params.rig or type(twin).__name__, "description": ""}
    info.update({"keypoints": list(twin.keypoint_names), "actuators": list(twin.actuator_names)})
    return twin, params, info


def _sanitise(proposed: Any, params: ParameterSet, current: Mapping[str, float]) -> tuple[dict[str, float], list[str]]:
    """Full value dict from a proposal's values, with a note for every repair."""
    notes: list[str] = []
    out = dict(current)
    if not isinstance(proposed, Mapping):
        return out, [f"proposal values must be a mapping, got {type(proposed).__name__}; parameters unchanged"]
    for name, v in proposed.items():
        if name not in params:
            notes.append(f"unknown parameter '{name}' ignored (valid: {', '.join(params.free_names)})")
            continue
        spec = params[name]
        if spec.frozen:
            notes.append(f"'{name}' is frozen; proposed value ignored")
            continue
        try:
            x = float(v)
        except (TypeError, ValueError):
            notes.append(f"'{name}': value {v!r} is not a number; kept {current[name]:.6g} {spec.unit}")
            continue
        if not math.isfinite(x):
            notes.append(f"'{name}': non-finite value {v!r} rejected; kept {current[name]:.6g} {spec.unit}")
            continue
        c = spec.clip(x)
        if c != x:
            notes.append(f"'{name}': {x:.6g} {spec.unit} outside [{spec.lower:.6g}, {spec.upper:.6g}], clamped to {c:.6g}")
        out[name] = c
    missing = [n for n in params.free_names if n not in proposed]
    if missing and len(missing) < len(params.free_names):
        notes.append(f"no value for {', '.join(missing)}: kept current")
    elif missing:
        notes.append("proposal named no free parameter: parameters unchanged")
    return out, notes


class _Session:
    """Mutable state of one calibration (budget meter, best, history, files)."""

    def __init__(self, twin: Twin, params: ParameterSet, real: RealTrial, cfg: CalibrationConfig,
                 run_dir: Path | None) -> None:
        self.twin, self.params, self.real, self.cfg, self.run_dir = twin, params, real, cfg, run_dir
        self.objective = TrialObjective(twin, real.train_excitations, real.train, params, noise=cfg.noise)
        # diagnostics (identifiability checks, the restart point of a resume) keep their own rollout cache:
        # what the metered objective charges then depends only on the metered evaluations, which the records
        # hold, so a resumed run charges exactly what the uninterrupted run charged
        self.diag_objective = TrialObjective(twin, real.train_excitations, real.train, params, noise=cfg.noise)
        self.used = 0
        self.diagnostic = 0
        self.best: tuple[float, dict[str, float], dict[str, float]] = (math.inf, params.nominal(), {})
        self.iter_log: list[dict[str, Any]] = []
        self.iter_evals: list[Evaluation] = []
        self.current: dict[str, float] = params.nominal()
        self.iteration = 0  # the iteration being run (evaluations are credited to it)
        self.best_iteration = 0
        self.rig: Rig | None = None  # the target when it is a rig (its tracker films the twin)
        self.unobservable: list[str] = []  # free nuisances held at their start value (no training effect)
        self.executor: Any = None  # where batched evaluations run (calibration.executor); None: serially
        from .phases import PhaseLedger

        self.phases = PhaseLedger(lambda: (self.used, self.diagnostic))
        self.executor_state: Any = None
        #: iteration 0's evaluation of a new run (the report's initial curves reuse it); None on a resume
        self.initial_eval: Evaluation | None = None

    @property
    def remaining(self) -> int:
        return UNLIMITED_ROLLOUTS if self.cfg.rollout_budget is None else max(self.cfg.rollout_budget - self.used, 0)

    def consider_best(self, values: Mapping[str, float], error: float, per_kp: Mapping[str, float]) -> None:
        if math.isfinite(error) and error < self.best[0]:
            self.best = (float(error), dict(values), dict(per_kp))
            self.best_iteration = self.iteration

    def evaluate(self, values: Mapping[str, float]) -> Evaluation:
        """The metered callback handed to proposers (``context.evaluate``)."""
        full = self.complete_values(values)
        cost = self.objective.cost
        if self.remaining < cost:
            raise BudgetExhausted(f"rollout budget exhausted: {self.remaining} rollout(s) left, an evaluation "
                                  f"costs {cost} (budget {self.cfg.rollout_budget})")
        if self.executor is not None and self.executor.backend == "threads":  # a MuJoCo twin's trials side by side
            from .batch import evaluate_batch

            return self._charge(evaluate_batch(self.objective, [full], self.executor, state=self.executor_state)[0])
        ev, _ = self.objective.evaluate(full)
        return self._charge(ev)

    def complete_values(self, values: Mapping[str, float]) -> dict[str, float]:
        """``values`` over the current point, free ones clipped to their bounds.

        Raises:
            TypeError, ParameterSpecError, ValueError: not a mapping, an unknown name, a non-finite value.
        """
        if not isinstance(values, Mapping):
            raise TypeError(f"evaluate() expects a mapping {{name: value}}, got {type(values).__name__}")
        unknown = [k for k in values if k not in self.params]
        if unknown:
            raise ParameterSpecError(f"evaluate(): unknown parameter(s) {unknown}; valid: {', '.join(self.params.names)}")
        full = dict(self.current)
        for k, v in values.items():
            x = float(v)
            if not math.isfinite(x):
                raise ValueError(f"evaluate(): parameter '{k}' is not finite ({v!r})")
            if not self.params[k].frozen:
                full[k] = self.params[k].clip(x)
        return full

    def _charge(self, ev: Evaluation) -> Evaluation:
        """Charge and log one charged evaluation."""
        self.used += ev.rollouts
        self.iter_evals.append(ev)
        self.iter_log.append({"values": {n: ev.values[n] for n in self.params.free_names}, "error_px": _num(ev.error_px),
                              "failed": ev.failed, "rollouts": ev.rollouts,
                              **({"message": ev.message} if ev.message else {})})
        self.consider_best(ev.values, ev.error_px, ev.per_keypoint_px)
        return ev

    def evaluate_many(self, points: Sequence[Mapping[str, float]]) -> list[Evaluation]:
        """``[self.evaluate(p) for p in points]``, the rollouts run on the session's executor
        (:func:`~vid2sid_ros.calibration.batch.evaluate_batch`); serially where the budget might not
        pay for every point (so ``BudgetExhausted`` comes where the loop would raise it)."""
        points = [self.complete_values(p) for p in points]
        if self.executor is None or self.remaining < self.objective.cost * len(points):
            return [self.evaluate(p) for p in points]
        from .batch import evaluate_batch

        return [self._charge(ev) for ev in evaluate_batch(self.objective, points, self.executor,
                                                          state=self.executor_state)]

    def diagnostic_eval(self, values: Mapping[str, float]) -> Evaluation:
        ev, _ = self.diag_objective.evaluate(values)
        self.diagnostic += ev.rollouts
        return ev


def run_calibration(
    target: Rig | Twin,
    real: RealTrial,
    proposer: Proposer,
    config: CalibrationConfig | None = None,
    run_dir: str | Path | None = None,
    *,
    fallback: Proposer | None = None,
    parameters: ParameterSet | None = None,
    on_iteration: Callable[[IterationRecord], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    executor: Any = None,
    phases: Any = None,
) -> CalibrationResult:
    """Calibrate ``target``'s free parameters to ``real`` (see the module docstring).

    Args:
        target: a :class:`~vid2sid_ros.sim.registry.Rig` (its twin is built) or a twin.
        real: the real trial (training trajectories are fitted, holdout only scored).
        proposer: any object with ``name`` and ``propose(context)``.
        config: budgets and switches (default :class:`CalibrationConfig`).
        run_dir: where ``run.json``, ``iterations.jsonl``, ``result.yaml``... go; None
            writes nothing (no resume).
        fallback: proposer used for an iteration when ``proposer`` raises.
        parameters: spec override (default the rig's/twin's); its frozen flags decide
            what is calibrated.
        on_iteration: called with each completed record (iteration 0 included).
        on_warning: called at once with each up-front warning (rollout budget); default
            ``warnings.warn(..., RolloutBudgetWarning)``. The text also goes into
            iteration 0's notes.
        executor: a :class:`~vid2sid_ros.calibration.executor.Executor` for the batched evaluations
            (the identifiability checks' and a proposer's finite differences, ``context.evaluate_many``);
            None runs them serially. The results are the same on every backend.
        phases: a :class:`~vid2sid_ros.calibration.phases.PhaseLedger` the caller started (loading the rig
            and the real trial): the run's phases are added to it and ``result.json`` holds them all.

    Returns:
        CalibrationResult.

    Raises:
        CalibrationError: another run holds ``run_dir``'s lock (:mod:`.run_lock`; one line naming
            it); ``run_dir`` holds another run (without ``resume``) or a run
            with a different proposer, seed, spec or budget; nothing left to calibrate; a
            training trajectory with no valid measurement in any frame; a free physics parameter
            that does not change the training rollouts between its bounds
            (:mod:`~vid2sid_ros.calibration.effects`; all before anything is written).
    """
    try:
        with run_dir_lock(run_dir):  # one run per directory, taken before anything in it is looked at
            return _run_calibration(target, real, proposer, config, run_dir, fallback=fallback, parameters=parameters,
                                    on_iteration=on_iteration, on_warning=on_warning, executor=executor, phases=phases)
    except RunDirBusy as err:
        raise CalibrationError(str(err)) from None


@dataclass
class _Setup:
    """What :func:`_open_session` checked and derived before a run starts (module docstring)."""

    rd: Path | None
    pre: "RunDirCheck | None"
    fingerprints: dict[str, Any]
    rig_info: dict[str, Any]
    budget_warnings: list[str]
    signature: dict[str, Any]
    wants_video: bool
    meta_path: Path | None


def _run_calibration(target: Rig | Twin, real: RealTrial, proposer: Proposer, config: CalibrationConfig | None,
                     run_dir: str | Path | None, *, fallback: Proposer | None, parameters: ParameterSet | None,
                     on_iteration: Callable[[IterationRecord], None] | None,
                     on_warning: Callable[[str], None] | None, executor: Any = None,
                     phases: Any = None) -> CalibrationResult:
    """:func:`run_calibration` with the run directory's lock held: the checks and the session
    (:func:`_open_session`), the start point (:func:`_start_run`) or the resumed history
    (:func:`_resume_run`), the iterations (:func:`_iterate`), the final checks and results (:func:`_finish`)."""
    cfg = config or CalibrationConfig()
    s, setup = _open_session(target, real, proposer, cfg, run_dir, parameters=parameters, on_warning=on_warning,
                             executor=executor, phases=phases)
    t_start = time.perf_counter()
    s.phases.start("start")  # calibration.phases: wall, CPU and rollouts per phase into result.json
    if setup.pre is not None:
        history, start_report, prior_wall, current_eval = _resume_run(s, setup)
    else:  # a new run: the start point is evaluated and recorded as iteration 0
        history, start_report, current_eval = _start_run(s, setup, proposer, on_iteration, on_warning)
        prior_wall = 0.0
    stopped = _iterate(s, setup, history, current_eval, proposer, fallback, on_iteration)
    return _finish(s, history, start_report, stopped, proposer.name, prior_wall + (time.perf_counter() - t_start),
                   setup.rig_info)


def _open_session(target: Rig | Twin, real: RealTrial, proposer: Proposer, cfg: CalibrationConfig,
                  run_dir: str | Path | None, *, parameters: ParameterSet | None,
                  on_warning: Callable[[str], None] | None, executor: Any, phases: Any) -> tuple[_Session, _Setup]:
    """Every check that needs no rollout (nothing is written yet), then the session.

    Raises:
        CalibrationError: as :func:`run_calibration` (frozen spec, keypoints, an empty trial, an unknown
            start parameter, unreadable inputs, another run in ``run_dir``).
    """
    twin, params, rig_info = _resolve(target, parameters)
    params = add_measurement_nuisances(params, cfg.nuisance, keypoints=twin.keypoint_names,
                                       excitations=real.train_excitations, real_trial=real.truth is None,
                                       unit=offset_unit(real.train), source="config")
    if not params.free:
        raise CalibrationError("nothing to calibrate: every parameter is frozen")
    if (any(t.kind != "joints" for t in real.train) and tuple(real.keypoint_names) != tuple(twin.keypoint_names)
            and not set(real.keypoint_names) <= set(twin.keypoint_names)):  # joint trials are checked by measure()
        raise CalibrationError(f"real trial keypoints {real.keypoint_names} differ from the twin's {twin.keypoint_names}")
    for i, t in enumerate(real.train):  # nothing to fit: refused before the run directory is written
        if not np.asarray(t.valid).any():
            raise CalibrationError(f"real trial train[{i}] ('{t.trial_id}'): no valid measurement in any of its "
                                   f"{len(t.valid)} frames (every keypoint lost or outside the image); nothing to fit")
    rd = Path(run_dir) if run_dir is not None else None
    if cfg.start:
        unknown = [k for k in cfg.start if k not in params]
        if unknown:
            raise CalibrationError(f"config 'start': unknown parameter(s) {unknown}"
                                   + did_you_mean(unknown[0], params.names) + f"; valid: {', '.join(params.names)}")
    from .fingerprint import run_fingerprints

    try:
        fingerprints = run_fingerprints(target, real, twin) if rd is not None else {}
    except (OSError, TwinError) as err:  # a model file that is no longer a readable regular file
        raise CalibrationError(f"cannot fingerprint the run's inputs: {err}") from None
    pre = check_run_dir(rd, proposer_name=proposer.name, config=cfg, parameters=params, real=real,
                        fingerprints=fingerprints)
    limits = RolloutLimits(cfg.rollout_max_substeps, cfg.rollout_max_wall_s)
    if hasattr(twin, "rollout_limits"):
        twin.rollout_limits = limits
    budget_warnings = rollout_budget_warnings(
        twin, params, list(real.train_excitations) + list(real.holdout_excitations), limits)
    for w in budget_warnings:
        _warn(w, on_warning)
    s = _Session(twin, params, real, cfg, rd)
    s.rig = target if isinstance(target, Rig) else None
    if phases is not None:  # the caller's earlier phases (loading) go into result.json too
        phases.count_with(lambda: (s.used, s.diagnostic))
        s.phases = phases
    if executor is not None and executor.backend != "serial":
        from .batch import ObjectiveState

        s.executor, s.executor_state = executor, ObjectiveState(s.objective)
    s.current = params.complete(cfg.start or {}) if cfg.start else params.nominal()
    if cfg.start:
        s.current = params.clip(s.current)
    wants_video = cfg.video if cfg.video is not None else bool(getattr(proposer, "wants_video", False))
    setup = _Setup(rd, pre, fingerprints, rig_info, budget_warnings, _signature(proposer.name, cfg, params, real),
                   bool(wants_video), rd / "run.json" if rd is not None else None)
    return s, setup


def _resume_run(s: _Session, setup: _Setup) -> tuple[list[IterationRecord], IdentifiabilityReport | None,
                                                        float, Evaluation]:
    """The history of the run in ``setup.rd`` to continue (:func:`_resume_session`); a resume with
    ``--resume-changed`` says so for good in ``run.json``. Opens the ``iterations`` phase."""
    pre, rd = setup.pre, setup.rd
    if pre.changed:  # resumed with --resume-changed: the run says so for good
        import datetime

        meta = dict(pre.meta)
        meta["resumed_with_changes"] = list(meta.get("resumed_with_changes") or []) + [{
            "changed": list(pre.changed), "after_iteration": (pre.records[-1] if pre.records else pre.initial).iteration,
            "old": {k: (pre.meta.get("fingerprints") or {}).get(k) for k in pre.changed},
            "new": {k: setup.fingerprints[k] for k in pre.changed},
            "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}]
        _atomic_json(setup.meta_path, meta)
    _record_extension(s, setup)
    _hold_unobservable(s, _read_meta(rd / "run.json").get("unobservable_on_training") or [])
    history, start_report, prior_wall, current_eval = _resume_session(s, pre, rd)
    s.phases.start("iterations")
    return history, start_report, prior_wall, current_eval


def _record_extension(s: _Session, setup: _Setup) -> None:
    """A resume that raised the run's iterations or rollout budget (``config.resume_extend``) says so for good
    in ``run.json``: its ``config`` and ``signature`` hold the new limits (a later resume is compared with
    them; the report counts against them) and ``extended`` lists each extension (after which iteration, the
    old and new limits, when)."""
    import datetime

    meta = _read_meta(setup.meta_path)
    conf = dict(meta.get("config") or {})
    old = {"iterations": conf.get("iterations"), "rollout_budget": conf.get("rollout_budget")}
    new = {"iterations": s.cfg.iterations, "rollout_budget": s.cfg.rollout_budget}
    pre = setup.pre
    if old == new or pre.finished:  # a finished run is not continued: its limits stay as they were
        return
    meta["config"] = {**conf, **new}
    meta["signature"] = {**(meta.get("signature") or {}), "rollout_budget": s.cfg.rollout_budget}
    meta["extended"] = list(meta.get("extended") or []) + [{
        "after_iteration": (pre.records[-1] if pre.records else pre.initial).iteration, "old": old, "new": new,
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}]
    _atomic_json(setup.meta_path, meta)


def _start_checks(s: _Session, setup: _Setup, on_warning: Callable[[str], None] | None
                  ) -> IdentifiabilityReport | None:
    """The start point's identifiability check and the check that every free parameter changes the
    training rollouts (diagnostic rollouts); nuisances only the holdout sees are held. Then, every refusal
    check passed, the run directory is created.

    Raises:
        CalibrationError: a free physics parameter with no effect on the training rollouts.
    """
    cfg, params = s.cfg, s.params
    start_report = None
    if cfg.identifiability:
        start_report = check_identifiability(s.diag_objective, s.current, parameters=params,
                                             step=cfg.identifiability_step, scheme=cfg.identifiability_scheme,
                                             condition_threshold=cfg.condition_threshold, warn=False,
                                             executor=s.executor, executor_state=s.executor_state)
        s.diagnostic += start_report.rollouts
    # every free parameter must change the training rollouts (a physics one that does not is refused);
    # a nuisance only the holdout sees is held at its start value for every proposer
    try:  # on an objective of its own: its probes never evict the session's cached start point
        probe = TrialObjective(s.twin, s.real.train_excitations, s.real.train, params, noise=cfg.noise)
        effects = check_parameter_effects(probe, params, s.current, report=start_report,
                                          explain=getattr(s.twin, "no_effect_cause", None))
    except ParameterEffectError as err:
        raise CalibrationError(str(err)) from None
    s.diagnostic += effects.rollouts
    _hold_unobservable(s, effects.unobservable)
    if s.unobservable:
        setup.budget_warnings = setup.budget_warnings + [_unobservable_note(s)]
        _warn(_unobservable_note(s), on_warning)
    _warn_identifiability(start_report, s.unobservable)  # after a refusal it would give the wrong advice
    if setup.rd is not None:  # every refusal check has passed: now the run directory may be written
        setup.rd.mkdir(parents=True, exist_ok=True)
    return start_report


def _start_run(s: _Session, setup: _Setup, proposer: Proposer, on_iteration: Callable[[IterationRecord], None] | None,
               on_warning: Callable[[str], None] | None
               ) -> tuple[list[IterationRecord], IdentifiabilityReport | None, Evaluation]:
    """A new run: the start checks (:func:`_start_checks`), then (phase ``iterations``) the start point
    evaluated and recorded as iteration 0, and ``run.json`` written.

    Raises:
        CalibrationError: a start check refused the run, the budget cannot pay for one evaluation, or the
            start point cannot be simulated.
    """
    cfg = s.cfg
    start_report = _start_checks(s, setup, on_warning)
    params = s.params
    s.phases.start("iterations")
    t0 = time.perf_counter()
    if s.remaining < s.objective.cost:
        raise CalibrationError(f"rollout budget {cfg.rollout_budget} cannot pay for one evaluation "
                               f"({s.objective.cost} rollouts)")
    current_eval = s.initial_eval = s.evaluate(s.current)
    init = IterationRecord(
        iteration=0, proposer="initial", values=dict(current_eval.values), error_px=current_eval.error_px,
        per_keypoint_px=dict(current_eval.per_keypoint_px),
        rationale="start point: " + ("the values given in the config" if cfg.start else "the spec's nominal values"),
        confidence=0.0, rollouts_used=s.used, wall_s=time.perf_counter() - t0,
        notes=list(setup.budget_warnings) + ([current_eval.message] if current_eval.failed else []),
        extra={"evaluations": list(s.iter_log), "best_error_px": _num(s.best[0]), "rollouts_total": s.used,
               "current_after": {n: s.current[n] for n in params.free_names}, "failed": current_eval.failed})
    init = _roundtrip(init)
    if setup.meta_path is not None:
        _atomic_json(setup.meta_path, {
            "version": 1, "signature": setup.signature, "fingerprints": setup.fingerprints, "config": cfg.to_dict(),
            "rig": setup.rig_info, "real_source": s.real.source, "initial": record_to_dict(init),
            "unit": s.objective.unit,  # of every record's error_px (historic name)
            "initial_rollouts": s.used, "initial_wall_s": init.wall_s, "diagnostic_rollouts": s.diagnostic,
            "unobservable_on_training": list(s.unobservable),
            "identifiability": start_report.to_dict() if start_report else None})
    if on_iteration:
        on_iteration(init)
    if current_eval.failed:
        raise CalibrationError(f"the start point cannot be simulated: {current_eval.message}")
    return [init], start_report, current_eval


def _iterate(s: _Session, setup: _Setup, history: list[IterationRecord], current_eval: Evaluation,
             proposer: Proposer, fallback: Proposer | None,
             on_iteration: Callable[[IterationRecord], None] | None) -> str:
    """The calibration's iterations after ``history`` (appended to it, each record written and passed to
    ``on_iteration`` as it completes); returns why they stopped."""
    cfg, pre = s.cfg, setup.pre
    stopped = "iterations done"
    first = len(history)
    if pre is not None and pre.finished:  # an ended run is not continued: its results are rewritten as they were
        stopped, first = pre.finished, cfg.iterations + 1
    for it in range(first, cfg.iterations + 1):
        if s.remaining < s.objective.cost:
            return "rollout budget exhausted"
        if cfg.target_error_px is not None and s.best[0] <= cfg.target_error_px:
            return f"target error {cfg.target_error_px} {s.objective.unit} reached"
        rec, current_eval, budget_out, converged, stall = _iteration(s, setup, history, current_eval, it, proposer,
                                                                     fallback)
        history.append(rec)
        if setup.rd is not None:
            _append_record(setup.rd, rec)
        if on_iteration:
            on_iteration(rec)
        if budget_out:
            return "rollout budget exhausted"
        if converged and cfg.stop_when_converged:  # the proposer's own test: more iterations change nothing
            # the result is the point the test passed at, even where another point seen had a lower training MAE
            # (the proposer's objective, e.g. least squares, is not the MAE): "converged" is said of these values
            # (a converged proposal's evaluation succeeded, so it is the current evaluation)
            s.best = (float(current_eval.error_px), dict(current_eval.values), dict(current_eval.per_keypoint_px))
            s.best_iteration = it
            return "converged"
        if stall and cfg.stop_when_converged:  # no move left, and the convergence test fails: say so
            return f"stalled: {stall}"
    return "iterations done" if first <= cfg.iterations else stopped


def _iteration(s: _Session, setup: _Setup, history: list[IterationRecord], current_eval: Evaluation, it: int,
               proposer: Proposer, fallback: Proposer | None
               ) -> tuple[IterationRecord, Evaluation, bool, bool, str]:
    """Iteration ``it``: ask the proposer (its fallback when it fails), evaluate the proposal, move when it
    can be simulated. Returns ``(record, current evaluation after it, budget exhausted, converged, stall)``."""
    params, cfg = s.params, s.cfg
    t0 = time.perf_counter()
    s.iteration = it
    s.iter_log, s.iter_evals = [], []
    used_before = s.used
    notes: list[str] = []
    videos = _write_videos(s, it, notes) if (setup.wants_video and setup.rd is not None) else {}
    ctx = ProposalContext(parameters=params, current=dict(s.current), current_eval=current_eval, real=s.real.train,
                          history=tuple(history), iteration=it, evaluate=s.evaluate,
                          rollouts_remaining=s.remaining, iterations_remaining=cfg.iterations - it + 1,
                          videos=videos, rig=setup.rig_info, rng_seed=cfg.seed,
                          excitations=tuple(s.real.train_excitations), evaluate_many=s.evaluate_many)
    before, error_before = dict(s.current), current_eval.error_px
    proposal, who, budget_out = _ask(proposer, fallback, ctx, notes)
    made = proposal is not None
    if proposal is None:
        proposal, made = _search_best(s, params)
    values, rationale, conf = _checked_proposal(proposal, params, s.current, cfg, notes)
    ev = proposal.best_evaluation
    if ev is not None and not (any(ev is e for e in s.iter_evals) and _same(ev.values, values, params)):
        if not any(ev is e for e in s.iter_evals):
            notes.append("proposal carried an evaluation the loop did not run; re-evaluated")
        ev = None
    if ev is None and _same(values, s.current, params) and not current_eval.failed:
        ev = current_eval
    if ev is None:
        try:
            ev = s.evaluate(values)
        except BudgetExhausted as err:
            notes.append(f"proposal not evaluated: {err}")
            budget_out = True
    if ev is not None and ev.failed:
        notes.append(f"evaluation failed: {ev.message}; current parameters kept")
    elif ev is not None:
        s.current, current_eval = dict(ev.values), ev
    rationale = ensure_lead(rationale, params, before, values, observation=_observed(ev, error_before, s.objective.unit))
    converged = bool(getattr(proposal, "converged", False)) and ev is not None and not ev.failed
    stall = "" if converged else str(getattr(proposal, "stalled", "") or "")
    extra = _record_extra(s, proposal, ev, made, who, proposer.name, converged, stall, videos)
    rec = IterationRecord(iteration=it, proposer=who, values=values,
                          error_px=ev.error_px if ev is not None else math.inf,
                          per_keypoint_px=dict(ev.per_keypoint_px) if ev is not None else {},
                          rationale=rationale, confidence=conf, rollouts_used=s.used - used_before,
                          wall_s=time.perf_counter() - t0, notes=notes, extra=extra)
    return _roundtrip(rec), current_eval, budget_out, converged, stall


def _search_best(s: _Session, params: ParameterSet) -> tuple[Proposal, bool]:
    """No proposal returned: the best point of this iteration's own search, else the parameters unchanged
    (``(proposal, whether a point was made)``)."""
    valid = [e for e in s.iter_evals if not e.failed]
    if valid:
        b = min(valid, key=lambda e: e.error_px)
        return Proposal(values={n: b.values[n] for n in params.free_names},
                        rationale="no proposal returned; the best point of this iteration's search is kept",
                        confidence=0.0, best_evaluation=b), True
    return Proposal(values={}, rationale="no valid proposal; parameters unchanged", confidence=0.0), False


def _checked_proposal(proposal: Proposal, params: ParameterSet, current: Mapping[str, float],
                      cfg: CalibrationConfig, notes: list[str]) -> tuple[dict[str, float], str, float]:
    """``(values inside the spec, rationale bounded in length, confidence in [0, 1])`` of ``proposal``;
    what was changed is noted in ``notes``."""
    values, vnotes = _sanitise(proposal.values, params, current)
    notes.extend(vnotes)
    notes.extend(str(n) for n in (getattr(proposal, "notes", None) or []))
    conf = _num(proposal.confidence)
    if conf is None or not 0.0 <= conf <= 1.0:
        notes.append(f"confidence {proposal.confidence!r} outside [0, 1]; clamped")
        conf = 0.0 if conf is None else min(max(conf, 0.0), 1.0)
    rationale = proposal.rationale if isinstance(proposal.rationale, str) else str(proposal.rationale)
    if len(rationale) > cfg.max_rationale_chars:  # stored in every record and the report: bounded
        notes.append(f"rationale of {len(rationale):,} characters cut to {cfg.max_rationale_chars:,}")
        rationale = truncate_text(rationale, cfg.max_rationale_chars)
    return values, rationale, conf


def _observed(ev: Evaluation | None, error_before: float, unit: str) -> str:
    """What the evaluation of a proposal measured, for the rationale's lead (what a person reads first)."""
    if ev is None:
        return "the proposed point was not evaluated (the rollout budget ran out)"
    if ev.failed:
        return f"the proposed point could not be simulated, so the parameters were kept ({ev.message})"
    return (f"the training MAE went {format_error(error_before, unit)} → {format_error(ev.error_px, unit)} at "
            "the proposed values")


def _record_extra(s: _Session, proposal: Proposal, ev: Evaluation | None, made: bool, who: str, requested: str,
                  converged: bool, stall: str, videos: Mapping[str, Path]) -> dict[str, Any]:
    """The record's ``extra``: the iteration's evaluations and the proposer's own fields and state."""
    extra: dict[str, Any] = {
        "evaluations": list(s.iter_log), "best_error_px": _num(s.best[0]), "rollouts_total": s.used,
        "current_after": {n: s.current[n] for n in s.params.free_names},
        "failed": bool(ev is None or ev.failed), "evaluated": ev is not None, "proposal_made": made}
    if who != requested:
        extra["requested_proposer"] = requested
    if converged:
        extra["converged"] = True
    if stall:
        extra["stalled"] = stall
    if proposal.diagnosis:
        extra["diagnosis"] = dict(proposal.diagnosis)
    if proposal.excitation_change:
        extra["excitation_change_requested"] = dict(proposal.excitation_change)
    for k, v in (getattr(proposal, "extra", None) or {}).items():
        extra.setdefault(k, v)
    if videos:
        extra["videos"] = {k: str(p) for k, p in videos.items()}
    state = getattr(proposal, "state", None)
    if state is not None:
        extra["proposer_state"] = state
    return extra


def _warn(text: str, on_warning: Callable[[str], None] | None) -> None:
    """One up-front warning: to ``on_warning``, else ``warnings.warn`` (:class:`RolloutBudgetWarning`)."""
    if on_warning is not None:
        on_warning(text)
    else:
        import warnings

        warnings.warn(text, RolloutBudgetWarning, stacklevel=3)


def _hold_unobservable(s: _Session, names: Sequence[str]) -> ParameterSet:
    """Freeze ``names`` (nuisances the training trials cannot see) at the session's start values.

    Every proposal passes through the frozen flags (``_sanitise`` ignores a frozen parameter, the
    metered ``evaluate`` keeps its value, proposers optimise ``free_names``), so no proposer can move
    them. Returns the new spec (also set on the session and its objective)."""
    names = [n for n in names if n in s.params and not s.params[n].frozen]
    s.unobservable = list(names)
    if not names:
        return s.params
    held = s.params.with_nominal({n: s.current[n] for n in names}).with_frozen(names)
    s.params = held
    s.objective = TrialObjective(s.twin, s.real.train_excitations, s.real.train, held, noise=s.cfg.noise)
    return held


def _warn_identifiability(report: IdentifiabilityReport | None, held: Sequence[str]) -> None:
    """Warn the start check's :class:`IdentifiabilityWarning`, unless each weak direction it names is a
    parameter now held as unobservable on the training data (its advice, "add an excitation or freeze
    one", is then already done)."""
    if report is None or not report.warning:
        return
    if held and report.weak_directions and all(
            {k for k, w in d.get("combination", {}).items() if abs(w) > 0.5} <= set(held)
            for d in report.weak_directions):
        return
    import warnings

    from .identifiability import IdentifiabilityWarning

    warnings.warn(report.warning, IdentifiabilityWarning, stacklevel=3)


def _unobservable_note(s: _Session) -> str:
    names = ", ".join(f"{n} = {s.current[n]:.6g} {s.params[n].unit}" for n in s.unobservable)
    return (f"held at the start value, unobservable on the training data (changing it does not change any "
            f"training rollout; only held-out data could show it): {names}")


def _write_run_results(s: _Session, result: CalibrationResult, history: list[IterationRecord],
                       identified: ParameterSet, nuisance_vals: Mapping[str, float], uncertainty: Mapping[str, float],
                       final_report: IdentifiabilityReport | None, diagnosis: Mapping[str, Any] | None,
                       curves: Any, physics_vals: Mapping[str, float], rig_info: Mapping[str, Any],
                       holdout: float | None, stopped: str) -> None:
    """The run's artefacts, each written atomically: the calibrated model, ``trials.json``,
    then ``result.yaml`` and ``result.json``, which say which artefacts could not be written.

    An artefact the run promises that could not be written (a model that no longer exports, a
    full disk) sets ``status`` to ``"artefacts_missing"`` and lists it under
    ``calibration.artefacts_missing`` (``[{file, error}]``); result.yaml/result.json themselves
    failing raise.

    Raises:
        OSError: ``result.yaml`` or ``result.json`` cannot be written (``filename`` names it).
    """
    import yaml

    params, rd = s.params, s.run_dir
    status = result.status
    result.files = {"result_yaml": rd / "result.yaml", "result_json": rd / "result.json",
                    "iterations": rd / "iterations.jsonl", "trials": rd / "trials.json"}
    missing: list[dict[str, str]] = []
    export = getattr(s.twin, "export_model", None)
    if callable(export) and status == "ok":  # nothing was calibrated: no "calibrated" model
        model_path = rd / f"calibrated_model{getattr(s.twin, 'model_suffix', '.xml')}"
        tmp = model_path
        try:
            s.twin.set_parameters(physics_vals)
            with atomic_output(model_path) as tmp:
                export(tmp)
            result.files["model"] = model_path
        except Exception as err:  # noqa: BLE001 - recorded as a missing artefact, the run says so
            missing.append({"file": model_path.name, "error": _one_line(err).replace(str(tmp), str(model_path))})
    try:
        save_trial_curves(rd, curves)
    except (OSError, ValueError, TypeError) as err:
        missing.append({"file": "trials.json", "error": _one_line(err)})
        result.files.pop("trials")
    if missing:
        status = result.status = ARTEFACTS_MISSING
        result.artefacts_missing = missing
        result.stopped += "; not written: " + "; ".join(f"{m['file']} ({m['error']})" for m in missing)
    doc = identified.to_dict()
    doc["calibration"] = jsonable({
        "status": status, **({"artefacts_missing": missing} if missing else {}),
        "proposer": result.proposer, "best_proposer": result.best_proposer,
        "best_iteration": result.best_iteration, "training_mae": result.error_px,
        "initial_mae": history[0].error_px,
        "holdout_mae": holdout, "rollouts": s.used, "iterations": len(history) - 1, "stopped": stopped,
        "measurement_unit": s.objective.unit, "holdout_unit": result.holdout_unit, "real_source": s.real.source,
        "uncertainty": {n: {"std": u, "unit": params[n].unit} for n, u in uncertainty.items()
                        if n not in nuisance_vals},
        "interval_95": {n: {k: v for k, v in iv.items() if k != "method"}
                        for n, iv in _stated_intervals(final_report).items()},
        "identifiability_warning": final_report.warning if final_report else None,
        **({"unobservable_on_training": list(s.unobservable)} if s.unobservable else {})})
    if nuisance_vals:  # identified with the physics, reported apart, never written into the model
        doc["nuisance"] = jsonable({n: {"value": v, "unit": params[n].unit, "meaning": params[n].meaning,
                                        "lower": params[n].lower, "upper": params[n].upper,
                                        **({"std": uncertainty[n]} if n in uncertainty else {})}
                                    for n, v in nuisance_vals.items()})
    if diagnosis is not None:  # the warning comes before any claim that the parameters are physical
        head = {k: doc.pop(k) for k in ("rig",) if k in doc}
        doc = {**head, "diagnosis": jsonable({"misspecified": diagnosis["misspecified"],
                                              "summary": diagnosis["text"],
                                              "findings": diagnosis["findings"]}), **doc}
    atomic_write_text(rd / "result.yaml", yaml.safe_dump(doc, sort_keys=False))
    s.phases.stop()  # the run's phases end with its artefacts written
    result.phases = s.phases.to_dict()
    _atomic_json(rd / "result.json", {**result.to_dict(), "rig": dict(rig_info),
                                      "phases": result.phases,
                                      **({"executor": s.executor.describe()} if s.executor is not None else {}),
                                      "intervals": _stated_intervals(final_report),
                                      "unobservable_on_training": list(s.unobservable),
                                      # what each trial's source lost (perception.quality.check_tracking)
                                      "tracking": jsonable((s.real.meta or {}).get("tracking") or {})})


def _one_line(err: BaseException) -> str:
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= 500 else text[:497] + "..."


def mark_artefacts_missing(run_dir: str | Path, missing: list[dict[str, str]]) -> None:
    """Record artefacts written after the run (the report) that could not be written.

    Sets ``status: artefacts_missing`` and extends ``calibration.artefacts_missing`` in
    ``result.yaml`` and ``result.json`` (both rewritten atomically).

    Args:
        run_dir: a finished run directory. missing: ``[{"file": name, "error": one line}]``.

    Raises:
        OSError: the result files cannot be rewritten either (``filename`` names one).
    """
    import yaml

    from ..core.yamlio import loads_yaml

    rd = Path(run_dir)
    doc = loads_yaml((rd / "result.yaml").read_text(encoding="utf-8"), source=str(rd / "result.yaml"))
    cal = doc.setdefault("calibration", {})
    if cal.get("status") == "ok":
        cal["status"] = ARTEFACTS_MISSING
    cal["artefacts_missing"] = list(cal.get("artefacts_missing") or []) + list(missing)
    atomic_write_text(rd / "result.yaml", yaml.safe_dump(doc, sort_keys=False))
    res = json.loads((rd / "result.json").read_text(encoding="utf-8"))
    if res.get("status") == "ok":
        res["status"] = ARTEFACTS_MISSING
    res["artefacts_missing"] = list(res.get("artefacts_missing") or []) + list(missing)
    _atomic_json(rd / "result.json", res)


def _resume_session(s: _Session, pre: RunDirCheck, rd: Path) -> tuple[list[IterationRecord],
                                                                       IdentifiabilityReport | None, float, Evaluation]:
    """Restore a session from a checked run directory, so the loop goes on exactly where it stopped.

    The rollout meter is the start's rollouts plus every record's; the best is the lowest finite
    error over every evaluation recorded (not only each iteration's proposal); the restart point is
    the point the loop had moved to after the last record (``extra["current_after"]``: after a
    rejected or diverged proposal it is NOT the last proposed point), re-evaluated without charge.
    A torn last line of ``iterations.jsonl`` (past ``pre.good`` bytes) is cut off.

    Args:
        s: the new session (its meter, best, iteration and current point are set here).
        pre: what :func:`check_run_dir` found. rd: the run directory.

    Returns:
        ``(history, start identifiability report or None, wall time of the earlier runs in s,
        the evaluation at the restart point)``; history starts with the initial record.
    """
    meta, records, good = pre.meta, pre.records, pre.good
    history = [pre.initial]
    jl = rd / "iterations.jsonl"
    if jl.is_file() and jl.stat().st_size != good:
        with open(jl, "r+b") as f:  # drop a torn last line
            f.truncate(good)
    history.extend(records)
    s.used = int(meta.get("initial_rollouts", 0)) + sum(r.rollouts_used for r in records)
    s.diagnostic = int(meta.get("diagnostic_rollouts", 0))
    prior_wall = float(meta.get("initial_wall_s", 0.0)) + sum(r.wall_s for r in records)
    start_report = _report_from_dict(meta["identifiability"]) if meta.get("identifiability") else None
    for r in history:
        s.iteration = r.iteration
        for e in r.extra.get("evaluations", []):
            if not e.get("failed"):
                s.objective.replay_paid(e["values"])  # the rollout cache as the uninterrupted run had it
            if e.get("error_px") is not None:
                s.consider_best(s.params.complete(e["values"]), float(e["error_px"]), {})
        if math.isfinite(r.error_px):
            s.consider_best(r.values, r.error_px, r.per_keypoint_px)
    s.current = s.params.complete(history[-1].extra.get("current_after", history[-1].values))
    current_eval = s.diagnostic_eval(s.current)  # deterministic re-run, not charged
    s.best = (s.best[0], s.best[1], s.best[2] or {})
    return history, start_report, prior_wall, current_eval


def _ask(proposer: Proposer, fallback: Proposer | None, ctx: ProposalContext,
         notes: list[str]) -> tuple[Proposal | None, str, bool]:
    """(proposal or None, who proposed, budget exhausted during the search).

    "Who" is the proposer that actually produced the proposal: the loop's ``fallback``
    when it stepped in, or the one a proposer delegated to internally (a VLM's own
    fallback says so in ``Proposal.extra["proposed_by"]``).
    """
    for p in ([proposer] + ([fallback] if fallback is not None else [])):
        try:
            prop = p.propose(ctx)
        except BudgetExhausted as err:
            notes.append(f"{p.name}: rollout budget exhausted during its search ({err})")
            return None, p.name, True
        except Exception as err:  # noqa: BLE001 - any proposer failure is recorded, the loop goes on
            notes.append(f"proposer '{p.name}' raised {type(err).__name__}: {err}")
            continue
        if not isinstance(prop, Proposal):
            notes.append(f"proposer '{p.name}' returned {type(prop).__name__}, not a Proposal; ignored")
            continue
        if p is not proposer:
            notes.append(f"fallback '{p.name}' used")
        by = (prop.extra or {}).get("proposed_by") if isinstance(prop.extra, Mapping) else None
        return prop, (by if isinstance(by, str) and by else p.name), False
    return None, proposer.name, False


def _same(a: Mapping[str, float], b: Mapping[str, float], params: ParameterSet) -> bool:
    return all(n in a and n in b and float(a[n]) == float(b[n]) for n in params.free_names)


def _append_record(rd: Path, rec: IterationRecord) -> None:
    d = record_to_dict(rec)
    state = d["extra"].pop("proposer_state", None)
    if state is not None:
        sd = rd / "proposer_state"
        sd.mkdir(exist_ok=True)
        name = f"proposer_state/iter_{rec.iteration:04d}.json"
        _atomic_json(rd / name, state, indent=None)
        d["extra"]["proposer_state_file"] = name
    _fsync_write(rd / "iterations.jsonl", json.dumps(d) + "\n", append=True)


def _report_from_dict(d: Mapping[str, Any]) -> IdentifiabilityReport:
    cn = d.get("condition_number")
    return IdentifiabilityReport(list(d["names"]), dict(d["point"]), dict(d["sensitivity_px"]),
                                 list(d["singular_values"]), math.inf if cn is None else float(cn),
                                 list(d.get("weak_directions", [])), d.get("warning"), dict(d.get("uncertainty", {})),
                                 int(d.get("rollouts", 0)), float(d.get("step", 0.0)), str(d.get("scheme", "central")),
                                 [list(map(float, row)) for row in d.get("correlation") or []],
                                 {k: [float(a), float(b)] for k, (a, b) in (d.get("interval") or {}).items()},
                                 {k: float(v) for k, v in (d.get("centre") or {}).items()},
                                 dict(d.get("measurement_bias") or {}), dict(d.get("interval_kind") or {}),
                                 dict(d.get("interval_note") or {}))


def _stated_intervals(report: IdentifiabilityReport | None) -> dict[str, dict[str, Any]]:
    """The final check's 95 % intervals as the report reads them (``{name: {lower, upper, method}}``)."""
    if report is None:
        return {}
    filmed = bool((report.measurement_bias or {}).get("applied"))
    method = ("95 %, Gauss–Newton at the least-squares optimum" +
              (", the twin filmed like the robot (tracker bias included)" if filmed else "") +
              ", local (linearised)")
    kinds, notes = report.interval_kind or {}, report.interval_note or {}
    return {n: {"lower": lo, "upper": hi, "method": method,
                **({"centre": float(report.centre[n])} if n in (report.centre or {}) else {}),
                **({"kind": kinds[n]} if n in kinds else {}), **({"note": notes[n]} if n in notes else {})}
            for n, (lo, hi) in report.interval.items()}


def _write_videos(s: _Session, it: int, notes: list[str]) -> dict[str, Path]:
    """Side-by-side real | sim video of the first training trial at the current values.

    Streamed: the twin's frames are encoded into ``sim_iter_NNN.mp4`` as they are rendered
    (:func:`~vid2sid_ros.sim.base.rollout_frames`), and the side-by-side is composed from that
    file decoded frame by frame and the real footage's bounded thumbnails, so a long trial
    filmed at a large size never has its frames in memory at once.
    """
    try:
        from ..io.video import iter_video, write_side_by_side
        from ..sim.base import rollout_frames
    except ImportError as err:
        notes.append(f"videos not written: vid2sid_ros.io.video unavailable ({err})")
        return {}
    exc = s.real.train_excitations[0]
    try:
        s.twin.set_parameters(MeasurementModel(s.params).split(s.current)[0])
        vd = s.run_dir / "videos"
        vd.mkdir(exist_ok=True)
        sim_path = vd / f"sim_iter_{it:03d}.mp4"
        with _StreamedVideo(sim_path, exc.rate) as sim_writer:
            res = rollout_frames(s.twin, exc, sim_writer.write)
        s.diagnostic += 1
        if sim_writer.size is None:
            notes.append("videos not written: the twin returned no frames with render=True")
            return {}
        frame_of, traj_a, every, rows = _real_footage(s, sim_writer.size)
        real_path = vd / "real.mp4"
        if not real_path.exists():
            with _StreamedVideo(real_path, exc.rate / every) as real_writer:
                for i in range(rows):
                    real_writer.write(i, frame_of(i * every))
        sbs = vd / f"side_by_side_iter_{it:03d}.mp4"
        T = min(res.trajectory.num_frames, traj_a.num_frames)
        write_side_by_side(sbs, (frame_of(k) for k in range(T)), iter_video(sim_path, check_length=False),
                           exc.rate, traj_a=traj_a, traj_b=res.trajectory)
    except Exception as err:  # noqa: BLE001 - a video problem never stops a calibration
        notes.append(f"videos not written: {type(err).__name__}: {err}")
        return {}
    return {"real": real_path, "sim": sim_path, "side_by_side": sbs, "overlay": sbs}


def _real_footage(s: _Session, size: tuple[int, int]) -> tuple[Callable[[int], np.ndarray], Any, int, int]:
    """``(frame of trial row k, trajectory in those frames' pixels, row stride, frames kept)`` of the first
    training trial: its kept camera thumbnails (thumbnail ``i`` is row ``i * stride``; keypoints scaled
    to them), or grey frames of the twin's ``size`` (W, H) px with the real keypoints drawn, made one at
    a time, when no footage was kept."""
    traj = s.real.train[0]
    frames = s.real.first_frames()
    if frames is None:
        return (lambda k: _draw_keypoints(traj, (size[1], size[0]), rows=[k])[0]), traj, 1, traj.num_frames
    info = (s.real.meta.get("trials") or {}).get((traj.meta or {}).get("trial"), {})
    info = info if isinstance(info, Mapping) else {}
    scale, every = float(info.get("frame_scale") or 1.0), max(1, int(info.get("frame_every") or 1))
    scaled = dc_replace(traj, keypoints=np.asarray(traj.keypoints) * scale)
    return (lambda k: frames[min(k // every, len(frames) - 1)]), scaled, every, len(frames)


class _StreamedVideo:
    """An mp4v file written one RGB frame at a time (``write(row, frame)``), opened at the first frame's
    size; ``size`` = (W, H) px once a frame came, else None (then no file is left)."""

    def __init__(self, path: Path, fps: float) -> None:
        self.path, self.fps, self.size, self._w = Path(path), float(fps), None, None

    def write(self, _row: int, frame: np.ndarray) -> None:
        import cv2

        if self._w is None:
            self.size = (int(frame.shape[1]), int(frame.shape[0]))
            self._w = cv2.VideoWriter(str(self.path), cv2.VideoWriter_fourcc(*"mp4v"), self.fps, self.size)
            if not self._w.isOpened():
                raise OSError(f"{self.path}: the mp4v encoder cannot write here")
        self._w.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))

    def __enter__(self) -> "_StreamedVideo":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._w is not None:
            self._w.release()


def _free_columns_of(report: IdentifiabilityReport | None) -> np.ndarray | None:
    """The final identifiability check's forward differences when they are the residual diagnosis's free
    columns (measured at the point it diagnoses with the diagnosis's own probe step), else None (the
    diagnosis measures them)."""
    from .diagnosis.result import THRESHOLDS

    if report is None or report.forward_jacobian is None or report.step != THRESHOLDS["probe_step"]:
        return None
    return report.forward_jacobian


def _bias_correction(s: _Session, values: Mapping[str, float], camera: Any,
                     final_report: IdentifiabilityReport | None) -> Any:
    """The estimate corrected for the tracker's bias (:mod:`~vid2sid_ros.calibration.bias_correction`) when the
    twin can be filmed like the robot (``camera``), else None. The final identifiability check's chord-refined
    centre when it ran with the bias; otherwise a forward-difference check with the twin filmed (``n + 1``
    evaluations, one rendered rollout per training trial and the chord steps, counted in ``s.diagnostic``)."""
    if camera is None or s.cfg.iterations <= 0:  # nothing was calibrated: the start point is not an estimate
        return None
    from .bias_correction import correct_for_tracker_bias

    report = final_report
    if report is None:
        report = check_identifiability(s.objective, values, parameters=s.params, step=s.cfg.identifiability_step,
                                       scheme="forward", condition_threshold=s.cfg.condition_threshold,
                                       warn=False, twin_camera=camera, refine=FINAL_REFINE, executor=s.executor,
                                       executor_state=s.executor_state)
        s.diagnostic += report.rollouts
    correction = correct_for_tracker_bias(s.objective, values, s.params, report)
    s.diagnostic += correction.rollouts
    return correction


def _diagnosis_bias(s: _Session, values: Mapping[str, float], camera: Any) -> tuple[list | None, str]:
    """The tracker's bias at ``values`` for the residual diagnosis when no final identifiability check
    measured it (:func:`~vid2sid_ros.calibration.tracker_bias.twin_tracker_bias`; one diagnostic rendered
    rollout per training trial, counted in ``s.diagnostic``): ``(bias, "")``, or ``(None, why)`` when the
    twin cannot be filmed (the diagnosis then compares the projection, and the result says why)."""
    from .nuisance import MeasurementModel
    from .tracker_bias import TrackerBiasError, twin_tracker_bias

    try:
        bias, spent = twin_tracker_bias(s.objective.twin, s.objective.excitations,
                                        MeasurementModel(s.params).split(values)[0], camera)
    except Exception as err:  # noqa: BLE001 - a twin that cannot be filmed: the diagnosis runs on the projection
        return None, str(err) if isinstance(err, TrackerBiasError) else f"{type(err).__name__}: {err}"
    s.diagnostic += spent
    return bias, ""


def _bias_candidate(s: _Session, values: Mapping[str, float], camera: Any, why_not: str) -> list | str:
    """The tracker's bias on renders of the twin at ``values`` (clean, or through the real videos' codec), for the
    diagnosis to weigh as a candidate cause when the bias was not applied
    (:class:`~vid2sid_ros.calibration.diagnosis.causes.TrackerBias`: a real video without
    ``calibration.tracker_bias: true``), or why not (a string). ``camera``/``why_not``: the run's
    own twin camera (set only when the bias was meant to be applied and could not be measured) and why none.
    One diagnostic rendered rollout per training trial (counted in ``s.diagnostic``)."""
    if s.cfg.tracker_bias is False:
        return "calibration.tracker_bias is false"
    if camera is not None:  # the twin was to be filmed for the bias itself and could not be
        return why_not or "the twin could not be filmed"
    from .tracker_bias import twin_camera_for

    clean, why = twin_camera_for(s.rig, s.real, real_video=True)
    if clean is None:
        return why
    bias, failed = _diagnosis_bias(s, values, clean)
    return bias if bias is not None else failed


def _draw_keypoints(traj, shape: tuple[int, int], rows: Sequence[int] | None = None) -> np.ndarray:
    """Grey (H, W) = ``shape`` frames with the real keypoints as white discs (when no real video exists),
    one per trajectory row in ``rows`` (None: every row), (len(rows), H, W, 3) uint8."""
    import cv2

    h, w = int(shape[0]), int(shape[1])
    rows = range(traj.num_frames) if rows is None else rows
    frames = np.full((len(rows), h, w, 3), 60, np.uint8)
    for i, t in enumerate(rows):
        for k in range(traj.num_keypoints):
            if t < traj.num_frames and traj.valid[t, k]:
                x, y = traj.keypoints[t, k]
                cv2.circle(frames[i], (int(round(x)), int(round(y))), 5, (255, 255, 255), -1, cv2.LINE_AA)
    return frames


def _far_refit_args(cfg: CalibrationConfig, stopped: str) -> dict[str, Any]:
    """Whether the final diagnosis may refit from afar (``cfg.far_refit``: always, after a ``converged`` stop
    only, or never), and why not."""
    if cfg.far_refit == "never":
        return {"far_refit": False, "far_refit_why_not": "far_refit is 'never' in this calibration's configuration"}
    converged = stopped.strip().lower().startswith("converged")
    if cfg.far_refit == "converged" and not converged:
        return {"far_refit": False, "far_refit_why_not": "the calibration did not converge (far_refit: converged)"}
    return {"far_refit": True, "converged": converged}


def _final_diagnosis(s: _Session, history: list[IterationRecord], best_vals: Mapping[str, float],
                     final_report: IdentifiabilityReport | None, correction: Any, camera: Any, why_not: str,
                     hobj: TrialObjective | None, stopped: str) -> dict[str, Any]:
    """The residual diagnosis at the result (:func:`~vid2sid_ros.calibration.diagnosis.diagnose`), its rollouts
    counted as diagnostic; a diagnosis that raises is reported in the dict, never losing the calibration's result."""
    params = s.params
    diagnosis: dict[str, Any]
    from .diagnosis import diagnose

    try:
        bias, bias_failed = (final_report.bias_trajectories if final_report is not None else None), ""
        if correction is not None and correction.bias is not None:  # the bias the estimate was corrected for
            bias = correction.bias
        if bias is None and camera is not None and final_report is None:
            bias, bias_failed = _diagnosis_bias(s, best_vals, camera)
        candidate = None if bias is not None else _bias_candidate(s, best_vals, camera, bias_failed or (
            (final_report.measurement_bias or {}).get("reason") if final_report is not None else "") or why_not)
        diag = diagnose(s.objective, best_vals, parameters=params, holdout=hobj,
                        intervals=final_report.interval if final_report is not None else None,
                        measurement_bias=bias, tracker_bias_candidate=candidate,
                        free_jacobian=None if correction is not None and correction.applied
                        else _free_columns_of(final_report),
                        resolution_scale=next((r.error_px for r in history if math.isfinite(r.error_px)), None),
                        **_far_refit_args(s.cfg, stopped))
        s.diagnostic += diag.rollouts
        diagnosis = diag.to_dict()
        if bias_failed:
            diagnosis.setdefault("statistics", {})["tracker_bias_not_measured"] = bias_failed
    except Exception as err:  # noqa: BLE001 - a diagnosis problem never loses the calibration result
        import traceback

        diagnosis = {"misspecified": None, "kinds": [], "findings": [], "failed": True,
                     "summary": f"residual diagnosis failed: {type(err).__name__}: {err}",
                     "text": f"residual diagnosis failed: {type(err).__name__}: {err}",
                     "traceback": traceback.format_exc()[-4000:]}
    return diagnosis


def _finish(s: _Session, history: list[IterationRecord], start_report: IdentifiabilityReport | None, stopped: str,
            proposer_name: str, wall: float, rig_info: Mapping[str, Any]) -> CalibrationResult:
    params, cfg, rd = s.params, s.cfg, s.run_dir
    best_err, best_vals, _ = s.best
    best_vals = params.complete(best_vals)
    final_report = None
    uncertainty: dict[str, float] = {}
    s.phases.start("final_identifiability")
    camera, why_not = None, "calibration.tracker_bias is false"
    if cfg.tracker_bias is not False:  # the estimate, its interval and its diagnosis see the twin filmed
        from .tracker_bias import twin_camera_for

        camera, why_not = twin_camera_for(s.rig, s.real, real_video=bool(cfg.tracker_bias))
    if cfg.final_identifiability:
        final_report = check_identifiability(s.objective, best_vals, parameters=params, step=cfg.identifiability_step,
                                             scheme=cfg.identifiability_scheme,
                                             condition_threshold=cfg.condition_threshold, twin_camera=camera,
                                             refine=FINAL_REFINE, executor=s.executor,
                                             executor_state=s.executor_state)
        if camera is None:
            final_report.measurement_bias = {"applied": False, "reason": why_not}
        s.diagnostic += final_report.rollouts
    correction = _bias_correction(s, best_vals, camera, final_report)
    if correction is not None and correction.applied:  # the estimate is the optimum with the tracker's bias
        best_vals = params.complete(correction.values)
        if final_report is not None:  # the interval (centred there already) is stated about the new value
            state_intervals(final_report, params, best_vals)
    if final_report is not None:
        uncertainty = dict(final_report.uncertainty)
    s.phases.start("best_point")
    best_eval = s.diagnostic_eval(best_vals)  # per-keypoint numbers and a fresh state (not charged)
    holdout = None
    holdout_unit = s.objective.unit
    s.phases.start("holdout")
    if s.real.holdout:
        hobj = TrialObjective(s.twin, s.real.holdout_excitations, s.real.holdout, params, noise=cfg.noise)
        holdout_unit = hobj.unit
        hev, _ = hobj.evaluate(best_vals)
        s.diagnostic += hev.rollouts
        holdout = None if hev.failed else hev.error_px
    s.phases.start("diagnosis")
    diagnosis = (_final_diagnosis(s, history, best_vals, final_report, correction, camera, why_not,
                                  hobj if s.real.holdout else None, stopped) if cfg.diagnosis else None)
    curves = None
    s.phases.start("trial_curves")
    if rd is not None:  # real vs initial vs calibrated twin per trial, for the report (diagnostic rollouts)
        objectives = [("train", s.objective)]
        if s.real.holdout:
            objectives.append(("holdout", hobj))  # the holdout objective scored above
        # the start point's and the best point's evaluations on the training trials are at hand: no rollout
        curves, spent = trial_curves(objectives, history[0].values, best_vals,
                                     evaluations={"train": (s.initial_eval, best_eval)})
        s.diagnostic += spent
        # the twin as the report's overlay video shows it (diagnostic rollouts; a twin that cannot render: none)
        _, spent, _why = render_trials(objectives, history[0].values, best_vals, rd / RENDERS_FILE,
                                       real_frames=s.real.frames, frame_info=s.real.meta.get("trials"))
        s.diagnostic += spent
    s.phases.start("write")
    measurement = MeasurementModel(params)
    physics_vals, nuisance_vals = measurement.split(best_vals)
    identified = measurement.physics_only().with_nominal(physics_vals)  # what the twin and result.yaml hold
    proposals = [r for r in history[1:] if r.extra.get("proposal_made", True)]
    status = "no_proposal" if cfg.iterations > 0 and not proposals else "ok"
    by_iter = {r.iteration: r.proposer for r in history}
    result = CalibrationResult(
        values=best_vals, error_px=best_eval.error_px, per_keypoint_px=dict(best_eval.per_keypoint_px),
        initial_error_px=history[0].error_px, holdout_mae_px=holdout, history=history, rollouts=s.used,
        iterations=len(history) - 1, diagnostic_rollouts=s.diagnostic, wall_s=wall, stopped=stopped,
        proposer=proposer_name, parameters=identified, identifiability=start_report,
        final_identifiability=final_report, uncertainty=uncertainty, status=status,
        best_iteration=s.best_iteration, best_proposer=by_iter.get(s.best_iteration, proposer_name),
        unit=s.objective.unit, holdout_unit=holdout_unit, diagnosis=diagnosis,
        bias_correction=correction.to_dict() if correction is not None else None)
    if status != "ok":
        result.stopped += f"{_NO_PROPOSAL} {len(history) - 1} iteration(s)"
    if rd is not None:
        _write_run_results(s, result, history, identified, nuisance_vals, uncertainty, final_report, diagnosis,
                           curves, physics_vals, rig_info, holdout, stopped)
    s.phases.stop()  # (already stopped when the results were written)
    if not result.phases:
        result.phases = s.phases.to_dict()
    return result
