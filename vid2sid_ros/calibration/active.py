"""Active learning: calibrate, design the trial that separates what the data cannot, run it, go on.

:func:`run_active_calibration` wraps :func:`~vid2sid_ros.calibration.loop.run_calibration`
for any proposer (reasoner, VLMs, baselines, least-squares peers) in phases:

1. phase 0 calibrates on the training trials for ``after_iteration`` iterations (with the
   same share of the rollout budget as of the iterations: proposers that spread their budget
   over the run's iterations would otherwise spend all of it before the design), then the
   identifiability check at its best point (``final_identifiability``) decides;
2. when the check reports a weak direction (``trigger: flagged``, the default), the residual
   diagnosis reports indistinguishable causes, or always (``trigger: always``, the
   fixed-iteration mode), the next excitation is designed within the rig's limits, its
   rollouts charged to the budget: D-optimal for the parameters of the weak directions
   (:func:`~vid2sid_ros.calibration.design.design_excitation`), or, for indistinguishable
   causes and no flagged parameter (or ``criterion: separation``), the one that best separates
   the causes' predictions (:func:`~vid2sid_ros.calibration.design.design_separating_excitation`);
   when nothing is designed (no problem flagged, a design that failed or could not be run), a
   last phase spends the rest of the budget and iterations on the same data;
3. with a stand-in real rig (sim2sim), the stand-in runs the designed excitation at once: the
   new trial is saved (``active_trial_K.json``, the extended real trial) and recorded
   (``active_learning.jsonl``, flushed and fsynced) the moment it completes, and the next
   phase calibrates on the extended data from the previous phase's best point with the rest
   of the budget and iterations (up to ``max_trials`` designed trials);
4. with recorded data (video, bag, mocap: no stand-in), the design is a recommendation only:
   the exact profile is saved (``designed_excitation.csv`` and ``designed_trial.yaml``, a
   ``trials:`` entry to paste into the rig config) after the calibration.

Each phase is its own run directory (``RUN/phase_K``, resumable like any run); on
``resume`` a designed trial already recorded is loaded from its file, never run again.
``RUN/active_learning.json`` sums up: rollouts charged (calibration + design), design
rollouts apart, robot (stand-in) trials run, the warning before and after, each design's
rationale.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation
from ..core.files import atomic_write_text
from ..core.trajectory import Trajectory
from ..core.trial import RealTrial
from .design import (CRITERIA, RECOMMEND_SIGMA, DesignResult, ExcitationLimits, ExcitationRefused,
                     design_excitation, design_separating_excitation, profile_from_change, steepest_change,
                     trial_name, validate_profile)
from .loop import CalibrationConfig, CalibrationError, CalibrationResult, run_calibration
from .objective import TrialObjective

__all__ = ["ActiveSession", "SESSION_LOG", "choose_design", "recommend_trial",
           "ActiveLearningConfig", "ActiveResult", "run_active_calibration", "parse_active_learning",
           "flagged_parameters", "tied_causes", "TRIGGERS"]

TRIGGERS = ("flagged", "always")
#: a parameter is flagged when its loading on a weak direction is at least this (unit-norm loadings)
FLAG_LOADING = 0.3


@dataclass(frozen=True)
class ActiveLearningConfig:
    """The ``calibration.active_learning`` block of a rig config.

    Attributes:
        enabled: design trials at all.
        max_trials: designed trials at most.
        after_iteration: proposal iterations of each phase before the next design.
        criterion: :data:`~vid2sid_ros.calibration.design.CRITERIA`.
        trigger: ``flagged`` (design only when the identifiability check reports a weak
            direction) or ``always`` (design at ``after_iteration`` regardless).
        design_budget: most design rollouts per design (None: up to half the remaining budget).
        limits: the excitation limits block (``max_amplitude``, ``frequency_hz``, ``max_duration_s``;
            :meth:`~vid2sid_ros.calibration.design.ExcitationLimits.from_rig`).
    """

    enabled: bool = False
    max_trials: int = 1
    after_iteration: int = 4
    criterion: str = "d_optimal"
    trigger: str = "flagged"
    design_budget: int | None = None
    limits: dict[str, Any] = field(default_factory=dict)


def parse_active_learning(raw: Any, *, source: str = "calibration.active_learning") -> ActiveLearningConfig:
    """Validate the config block (None or ``false``: off; ``true``: on with defaults).

    Raises:
        CalibrationError: one line naming ``source.KEY`` and what was expected.
    """
    if raw is None or raw is False:
        return ActiveLearningConfig()
    if raw is True:
        return ActiveLearningConfig(enabled=True)
    if not isinstance(raw, Mapping):
        raise CalibrationError(f"{source}: expected true/false or a mapping, got {raw!r}")
    keys = {"enabled", "max_trials", "after_iteration", "criterion", "trigger", "design_budget", "max_amplitude",
            "frequency_hz", "max_duration_s"}
    unknown = sorted(k for k in raw if k not in keys)
    if unknown:
        raise CalibrationError(f"{source}: unknown key(s) {unknown}; valid: {', '.join(sorted(keys))}")
    d = dict(raw)
    en = d.get("enabled", True)
    if not isinstance(en, bool):
        raise CalibrationError(f"{source}.enabled: expected true or false, got {en!r}")
    for key, lo in (("max_trials", 1), ("after_iteration", 0)):
        v = d.get(key, getattr(ActiveLearningConfig, key))
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise CalibrationError(f"{source}.{key}: expected an integer >= {lo}, got {v!r}")
    if d.get("criterion", "d_optimal") not in CRITERIA:
        raise CalibrationError(f"{source}.criterion: expected one of {', '.join(CRITERIA)}, got {d['criterion']!r}")
    if d.get("trigger", "flagged") not in TRIGGERS:
        raise CalibrationError(f"{source}.trigger: expected one of {', '.join(TRIGGERS)}, got {d['trigger']!r}")
    db = d.get("design_budget")
    if db is not None and (isinstance(db, bool) or not isinstance(db, int) or db < 1):
        raise CalibrationError(f"{source}.design_budget: expected an integer >= 1 (rollouts) or null, got {db!r}")
    _check_limit_types(d, source)
    limits = {k: d[k] for k in ("max_amplitude", "frequency_hz", "max_duration_s") if k in d}
    return ActiveLearningConfig(en, int(d.get("max_trials", 1)), int(d.get("after_iteration", 4)),
                                d.get("criterion", "d_optimal"), d.get("trigger", "flagged"), db, limits)


def _is_positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _check_limit_types(d: Mapping[str, Any], source: str) -> None:
    """The limit keys' types and signs (what needs no rig: one actuator count, the command rate,
    are checked by :meth:`~vid2sid_ros.calibration.design.ExcitationLimits.from_rig`).

    Raises:
        CalibrationError: ``source.KEY: expected ..., got ...``.
    """
    amp = d.get("max_amplitude")
    if amp is not None and not (_is_positive(amp) or (isinstance(amp, (list, tuple)) and amp
                                                      and all(_is_positive(v) for v in amp))):
        raise CalibrationError(f"{source}.max_amplitude: expected a number > 0 (command units, every actuator) or "
                               f"a list of numbers > 0 (one per actuator), got {amp!r}")
    band = d.get("frequency_hz")
    if band is not None and not (isinstance(band, (list, tuple)) and len(band) == 2
                                 and all(_is_positive(v) for v in band) and float(band[0]) < float(band[1])):
        raise CalibrationError(f"{source}.frequency_hz: expected [low, high] Hz with 0 < low < high, got {band!r}")
    dur = d.get("max_duration_s")
    if dur is not None and not _is_positive(dur):
        raise CalibrationError(f"{source}.max_duration_s: expected a number > 0 s, got {dur!r}")


def tied_causes(diagnosis: Mapping[str, Any] | None) -> list[str] | None:
    """The cause names of an *indistinguishable* diagnosis (``Diagnosis.to_dict()``), or None for any other."""
    if not diagnosis or diagnosis.get("verdict") != "indistinguishable":
        return None
    names = [c["cause"] for f in diagnosis.get("findings", []) if f.get("kind") == "indistinguishable"
             for c in (f.get("evidence") or {}).get("causes", []) if c.get("cause")]
    return names or None


def flagged_parameters(report: Any) -> list[str]:
    """Parameters with a loading >= :data:`FLAG_LOADING` on any weak direction of an identifiability report."""
    out: list[str] = []
    for w in (getattr(report, "weak_directions", None) or []):
        for name, load in (w.get("combination") or {}).items():
            if abs(float(load)) >= FLAG_LOADING and name not in out:
                out.append(name)
    return out


@dataclass
class ActiveResult:
    """Outcome of :func:`run_active_calibration`.

    Attributes:
        result: the last phase's calibration result (values, errors, final identifiability).
        phases: every phase's result, phase 0 first.
        designs: one record per design (``DesignResult.to_dict()`` plus ``applied``, ``trial``,
            ``warning_before``).
        rollouts: rollouts charged to the budget (every phase's plus every design's).
        design_rollouts: of which design rollouts.
        robot_trials: designed trials run on the (stand-in) real rig.
        warning_before, warning_after: the identifiability warning on the original data (at the
            first phase's result) and on the final data (at the final result); None = none.
        real: the real trial the last phase fitted (extended by the designed trials).
        files: written files.
        phase_trials: the number of training trials each phase fitted.
    """

    result: CalibrationResult
    phases: list[CalibrationResult]
    designs: list[dict[str, Any]]
    rollouts: int
    design_rollouts: int
    robot_trials: int
    warning_before: str | None
    warning_after: str | None
    real: RealTrial
    files: dict[str, str] = field(default_factory=dict)
    phase_trials: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        r = self.result
        return {"values": dict(r.values), "error": r.error_px, "unit": r.unit, "rollouts_charged": self.rollouts,
                "design_rollouts": self.design_rollouts, "robot_trials": self.robot_trials,
                "warning_before": self.warning_before, "warning_after": self.warning_after,
                "phases": [{"rollouts": p.rollouts, "iterations": p.iterations, "stopped": p.stopped,
                            "error": p.error_px, "training_trials": n}
                           for p, n in zip(self.phases, self.phase_trials or [len(self.real.train)] * len(self.phases))],
                "designs": self.designs, "files": dict(self.files)}


def _fitted_spec(spec: Any, config: CalibrationConfig, real: RealTrial) -> Any:
    """The spec the calibration fitted: ``spec`` plus its measurement nuisances (latency, marker offsets)."""
    from .nuisance import add_measurement_nuisances, offset_unit

    return add_measurement_nuisances(spec, config.nuisance, keypoints=real.keypoint_names,
                                     excitations=real.train_excitations, real_trial=real.truth is None,
                                     unit=offset_unit(real.train), source="config")


def _append_jsonl(path: Path, record: Mapping[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a torn last line: the design is made again
    return out


def _extended(real: RealTrial, traj: Trajectory, exc: Excitation) -> RealTrial:
    return RealTrial(list(real.train) + [traj], list(real.train_excitations) + [exc], list(real.holdout),
                     list(real.holdout_excitations), frames=dict(real.frames), source=real.source,
                     truth=real.truth, meta={**dict(real.meta), "designed_trials": int(
                         (real.meta or {}).get("designed_trials", 0)) + 1})


def _csv_text(exc: Excitation) -> str:
    rows = ["time," + ",".join(exc.actuator_names)]
    rows += [f"{t:.6f}," + ",".join(f"{v:.9g}" for v in row) for t, row in zip(exc.time, exc.values)]
    return "\n".join(rows) + "\n"


def _limits_record(limits: ExcitationLimits) -> dict[str, Any]:
    """The rig's command limits a design kept to, for the record (and the report's profile plot)."""
    return {"actuators": list(limits.actuator_names), "amplitude": list(limits.amplitude),
            "command_range": [list(limits.range_of(i)) for i in range(len(limits.amplitude))],
            "frequency_hz": list(limits.frequency_hz), "max_duration_s": limits.max_duration_s}


def _rounded(key: str, value: Any) -> Any:
    """A profile value as a config should show it: times (``duration``, ``t_*``) to 1 µs, other floats
    (a rate, an amplitude) to 6 significant digits; anything else unchanged."""
    if isinstance(value, bool) or not isinstance(value, float) or not math.isfinite(value):
        return value
    if key == "duration" or key.startswith("t_"):
        return round(value, 6)
    return float(f"{value:.6g}")


def _source_block(target: Any) -> str:
    """The ``source:`` of a designed trial: the kind the rig's recorded trials use (their first non-stand-in
    trial), its options kept and its file replaced by ``PATH/TO/RECORDING``; a video without such a trial."""
    trials = [t for t in (getattr(target, "trials", None) or ()) if getattr(t, "kind", "") != "sim2sim"]
    if not trials or not isinstance(trials[0].source.get(trials[0].kind), Mapping):
        return "{video: PATH/TO/RECORDING}"
    kind = trials[0].kind
    block = {k: v for k, v in trials[0].source[kind].items() if v is not None}
    if "path" in block:
        block["path"] = "PATH/TO/RECORDING"
    inner = ", ".join(f"{k}: {v if k == 'path' else json.dumps(v)}" for k, v in block.items())
    return f"{{{kind}: {{{inner}}}}}"


def _trial_block(design: DesignResult, csv_name: str, target: Any = None) -> str:
    prof = {k: _rounded(k, v) for k, v in design.profile.items() if k != "name"}
    inline = ", ".join(f"{k}: {json.dumps(v)}" for k, v in prof.items())
    return ("# a designed trial: record it on the robot, then add this entry to the rig config's trials:\n"
            "# " + design.rationale.replace("\n", " ") + "\n"
            f"- name: {trial_name(design.profile.get('name') or 'designed')}\n"
            f"  source: {_source_block(target)}   # the recording of this trial\n"
            f"  excitation: {{{inline}}}\n"
            f"  # the same commands sample by sample: {csv_name} ({{kind: csv, path: {csv_name}}})\n")


def run_active_calibration(
    target: Any,
    real: RealTrial,
    make_proposer: Callable[[], Any],
    config: CalibrationConfig,
    active: ActiveLearningConfig,
    run_dir: str | Path | None = None,
    *,
    stand_in: Callable[[Excitation], Trajectory] | None = None,
    limits: ExcitationLimits | None = None,
    on_design: Callable[[dict[str, Any]], None] | None = None,
    **run_kwargs: Any,
) -> ActiveResult:
    """Calibrate in phases with designed trials between them (module docstring).

    Args:
        target: the rig or twin (as :func:`~vid2sid_ros.calibration.loop.run_calibration`).
        real: the recorded training/holdout trials.
        make_proposer: builds a fresh proposer per phase (a phase's proposer state is its own).
        config: budgets for the whole calibration: ``rollout_budget`` (required: the designs are
            charged to it) and ``iterations`` are shared by all phases and designs.
        active: the switch and its settings (``enabled`` False: one plain calibration).
        run_dir: the run directory (phases in ``phase_K``); None writes nothing.
        stand_in: ``excitation -> real trajectory`` of the (stand-in) real rig; None = recorded
            data, the design is a recommendation only.
        limits: the rig's excitation limits (default :meth:`ExcitationLimits.from_rig` of the twin,
            the training excitations and ``active.limits``).
        on_design: called with each design record the moment it is recorded.
        run_kwargs: passed on to every ``run_calibration`` (fallback, parameters, on_iteration...).

    Returns:
        ActiveResult.

    Raises:
        CalibrationError: no rollout budget, or as ``run_calibration``.
        ExcitationRefused: the rig's limits cannot be established (bad ``limits`` block).
    """
    if not active.enabled:
        res = run_calibration(target, real, make_proposer(), config, run_dir, **run_kwargs)
        rep = res.final_identifiability or res.identifiability
        w = rep.warning if rep else None
        return ActiveResult(res, [res], [], res.rollouts, 0, 0, w, w, real)
    if config.rollout_budget is None:
        raise CalibrationError("active learning needs a rollout budget (calibration.rollout_budget): the designed "
                               "trials are charged to it")
    run = _ActiveRun(target, real, make_proposer, config, active, run_dir, stand_in, limits, on_design, run_kwargs)
    k = 0
    while True:
        last = k >= active.max_trials or stand_in is None
        res = run.phase(k, last)
        report = res.final_identifiability
        flagged = flagged_parameters(report) if report else []
        request = run.proposer_request(res)
        tied = (res.diagnosis or {}).get("verdict") == "indistinguishable"
        trigger = bool(flagged) or active.trigger == "always" or request is not None or tied
        go_on = False
        if k >= active.max_trials or not trigger or run.left < 4 * (len(run.real.train) + 1):
            if not last and not trigger:
                run.designs.append({"applied": False, "reason": "neither the identifiability check nor the residual "
                                                                "diagnosis flags a problem"})
        else:
            go_on = run.resume_design(k) or run.design_and_apply(k, res, flagged, request, tied)
        run.start = {n: res.values[n] for n in run.spec.free_names}
        k += 1
        if go_on:
            continue
        if not last and run.iterations > 0 and run.left >= len(run.real.train):
            run.phase(k, True)  # no trial added: the rest of the budget and iterations on the same data
        break
    return run.finish()


class _ActiveRun:
    """The state of one :func:`run_active_calibration`: budget spent, phases, designs, the growing real data."""

    def __init__(self, target, real, make_proposer, config, active, run_dir, stand_in, limits, on_design,
                 run_kwargs) -> None:
        self.target, self.real, self.make_proposer = target, real, make_proposer
        self.config, self.active, self.stand_in, self.on_design = config, active, stand_in, on_design
        self.run_kwargs = run_kwargs
        self.rd = Path(run_dir) if run_dir is not None else None
        if self.rd is not None:
            self.rd.mkdir(parents=True, exist_ok=True)
        self.records = _read_jsonl(self.rd / "active_learning.jsonl") if self.rd is not None else []
        self.twin = target.make_twin() if hasattr(target, "make_twin") else target
        self.limits = limits or ExcitationLimits.from_rig(self.twin, real.train_excitations, active.limits)
        self.spec = run_kwargs.get("parameters") or getattr(target, "parameters", None) or self.twin.parameters
        self.budget, self.iterations = int(config.rollout_budget), int(config.iterations)
        self.phases: list[CalibrationResult] = []
        self.phase_trials: list[int] = []
        self.designs: list[dict[str, Any]] = []
        self.files: dict[str, str] = {}
        self.spent = self.design_spent = self.robot = 0
        self.start = config.start
        self.warning_before: str | None = None

    @property
    def left(self) -> int:
        """Rollouts left in the budget."""
        return self.budget - self.spent

    def record(self, rec: dict[str, Any], *, once: bool = False) -> None:
        """Keep a design record and append it to ``active_learning.jsonl`` (fsynced); ``once``: not twice."""
        rec = _jsonable(rec)
        self.designs.append(rec)
        if self.rd is not None and not (once and rec in self.records):
            _append_jsonl(self.rd / "active_learning.jsonl", rec)
        if self.on_design and rec.get("design"):
            self.on_design(rec)

    def phase(self, k: int, last: bool) -> CalibrationResult:
        """Phase ``k``: calibrate on the current data with its share of the budget (module docstring)."""
        iters = self.iterations if last else min(self.active.after_iteration, self.iterations)
        # a phase before a design gets its share of the remaining budget, in proportion to its iterations
        # (proposers that spread their budget over the run's iterations would otherwise spend it all here)
        share = self.left if last else max(1, self.left * iters // max(self.iterations, 1))
        cfg = replace(self.config, iterations=iters, rollout_budget=max(share, 1), start=self.start,
                      final_identifiability=True,
                      resume=bool(self.rd is not None and (self.rd / f"phase_{k}" / "run.json").exists()))
        res = run_calibration(self.target, self.real, self.make_proposer(), cfg,
                              self.rd / f"phase_{k}" if self.rd else None, **self.run_kwargs)
        self.phases.append(res)
        self.phase_trials.append(len(self.real.train))
        self.spent += res.rollouts
        self.iterations -= res.iterations
        if k == 0:
            self.warning_before = res.final_identifiability.warning if res.final_identifiability else None
        return res

    def proposer_request(self, res: CalibrationResult) -> DesignResult | None:
        """A proposer's valid ``excitation_change`` as a design; a refused one is recorded (never rolled out)."""
        request, refused = _proposer_request(res, self.real, self.limits)
        if refused is not None:
            self.record(refused, once=True)
        return request

    def resume_design(self, k: int) -> bool:
        """Load design ``k + 1``'s recorded trial (a resumed run never runs it again); False without one."""
        rec = next((r for r in self.records if r.get("design") == k + 1 and r.get("trial_file")), None)
        if rec is None or self.rd is None or not (self.rd / rec["trial_file"]).is_file():
            return False
        self.real = RealTrial.load(self.rd / rec["trial_file"])
        self.design_spent += int(rec["rollouts"])
        self.spent += int(rec["rollouts"])
        self.robot += 1 if rec.get("applied") else 0
        self.designs.append(rec)
        return True

    def design_and_apply(self, k: int, res: CalibrationResult, flagged: list[str], request: DesignResult | None,
                         tied: bool) -> bool:
        """Design trial ``k + 1`` and run it on the stand-in (or save the recommendation); True to go on."""
        allowance = min(self.active.design_budget or self.left // 2, self.left)  # never over the budget
        try:
            design = choose_design(self.twin, self.real, self.spec, self.config, self.active, self.limits, res,
                                   flagged, request, tied, allowance)
        except ValueError as err:
            self.designs.append({"applied": False, "reason": f"design failed: {err}"})
            return False
        self.design_spent += design.rollouts
        self.spent += design.rollouts
        report = res.final_identifiability
        rec = {"design": k + 1, **design.to_dict(), "warning": report.warning if report else None,
               "limits": _limits_record(self.limits)}
        if self.stand_in is None:
            rec.update(applied=False, reason="recorded data: the designed trial is a recommendation")
            if self.rd is not None:
                self.files["designed_excitation"] = str(atomic_write_text(self.rd / "designed_excitation.csv",
                                                                          _csv_text(design.excitation)))
                self.files["designed_trial"] = str(atomic_write_text(
                    self.rd / "designed_trial.yaml", _trial_block(design, "designed_excitation.csv", self.target)))
            self.record(rec)
            return False
        need = 3 * (len(self.real.train) + 1)  # three evaluations of the extended data
        if self.left < need:  # no robot time for a trial nobody can fit
            rec.update(applied=False, reason=f"designed but not run: the {self.left} rollouts left cannot pay for "
                                             f"{need} (three evaluations of the extended data)")
            self.record(rec)
            return False
        traj = self.stand_in(design.excitation)
        self.real = _extended(self.real, traj, design.excitation)
        self.robot += 1
        rec.update(applied=True, trial=design.excitation.name, trial_file=f"active_trial_{k + 1}.json")
        if self.rd is not None:  # the trial first, then its record: a record always has its file
            self.real.save(self.rd / rec["trial_file"])
        self.record(rec)
        return True

    def finish(self) -> ActiveResult:
        """The result, and ``active_learning.json`` (atomic)."""
        final = self.phases[-1]
        rep = final.final_identifiability
        out = ActiveResult(final, self.phases, self.designs, self.spent, self.design_spent, self.robot,
                           self.warning_before, rep.warning if rep else None, self.real, self.files,
                           list(self.phase_trials))
        if self.rd is not None:
            self.files["active_learning"] = str(self.rd / "active_learning.json")
            atomic_write_text(self.rd / "active_learning.json", json.dumps(_jsonable(out.to_dict()), indent=1))
        return out


def choose_design(twin: Any, real: RealTrial, spec: Any, config: CalibrationConfig, active: ActiveLearningConfig,
                  limits: ExcitationLimits, res: CalibrationResult, flagged: Sequence[str],
                  request: DesignResult | None, tied: bool, allowance: int) -> DesignResult:
    """The next trial after phase result ``res``: a proposer's validated request, else a separation design
    (``criterion: separation``, or tied causes and no flagged parameter), else D-optimal for ``flagged``.

    Args:
        twin: the evaluation twin; real: the data the phase fitted; spec: its free parameters.
        config: the phase's calibration config (noise, nuisances); active: the switch's settings.
        limits: the rig's excitation limits; res: the phase's result (the design is made at its values).
        flagged: parameters of the identifiability check's weak directions (nuisances are dropped).
        request: a proposer's ``excitation_change`` already validated (:func:`_proposer_request`), or None.
        tied: the residual diagnosis reports indistinguishable causes.
        allowance: most design rollouts.

    Raises:
        ValueError: the design failed (a diverged candidate rollout, no candidate...).
    """
    if request is not None:
        return request
    fitted = _fitted_spec(spec, config, real)
    objective = TrialObjective(twin, real.train_excitations, real.train, fitted, noise=config.noise)
    at = {n: v for n, v in res.values.items() if n in fitted}
    flagged = [n for n in flagged if n not in objective.measurement.names]  # a nuisance is not designed for
    design = None
    if active.criterion == "separation" or (tied and not flagged):
        design = design_separating_excitation(objective, at, limits, parameters=fitted, max_rollouts=allowance,
                                              tied=tied_causes(res.diagnosis))
    if design is None:
        design = design_excitation(objective, at, limits, flagged=flagged or None, criterion="d_optimal",
                                   max_rollouts=allowance)
    return design


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (np.floating, np.integer)):
        return _jsonable(x.item())
    return x


def _proposer_request(res: CalibrationResult, real: RealTrial, limits: ExcitationLimits
                      ) -> tuple[DesignResult | None, dict[str, Any] | None]:
    """The last ``excitation_change`` a proposer asked for in this phase, validated like a design.

    Returns ``(design, None)`` for a request within the limits (clips noted), ``(None, record)``
    for a refused one (the record says why; nothing is rolled out), ``(None, None)`` without one.
    """
    for r in reversed(res.history):
        change = (r.extra or {}).get("excitation_change_requested")
        if not change:
            continue
        who = f"{r.proposer} at iteration {r.iteration}"
        try:
            prof = profile_from_change(change, real.train_excitations[0], limits)
            prof, exc, notes = validate_profile(prof, limits)
        except ExcitationRefused as err:
            return None, {"applied": False, "source": "proposer request", "requested": dict(change),
                          "reason": f"excitation_change of {who} refused: {err}", "rollouts": 0}
        clip = f"; {'; '.join(notes)}" if notes else ""
        rationale = (f"excitation_change requested by {who} ({r.rationale.strip()[:200]}): a chirp "
                     f"{prof['f0']:g}–{prof['f1']:g} Hz, amplitude {prof['amplitude']:g}{clip}")
        return DesignResult(prof, exc, "proposer_request", [], math.nan, math.nan, math.nan, math.nan, [], 0,
                            rationale, notes), None
    return None, None


def recommend_trial(target: Any, real: RealTrial, result: CalibrationResult, config: CalibrationConfig,
                    active: ActiveLearningConfig, run_dir: str | Path, *,
                    parameters: Any = None) -> dict[str, Any] | None:
    """After a finished calibration: design the next trial at its result and save it as a recommendation.

    For ``vid2sid calibrate`` (recorded or stand-in data alike, the trial is not run): when the
    result's identifiability check flags parameters (D-optimal design), its residual diagnosis
    reports indistinguishable causes (separation design), or ``active.trigger == "always"``, the
    designed profile is written to ``RUN/designed_excitation.csv`` and ``RUN/designed_trial.yaml``
    (a ``trials:`` entry to paste), the record to ``RUN/active_learning.jsonl`` and under
    ``designed_trial`` in ``RUN/result.json``. Its design rollouts come after the calibration's
    budget was spent: they are reported apart (``design_rollouts``), not charged.

    Returns:
        The design record (``rationale``, ``profile``, ``rollouts``, ``files``), or None when nothing
        is flagged (active learning off, no weak direction and no tied causes).

    Raises:
        ExcitationRefused: the rig's limits cannot be established (bad ``limits`` block).
    """
    if not active.enabled:
        return None
    report = result.final_identifiability or result.identifiability
    twin = target.make_twin() if hasattr(target, "make_twin") else target
    spec = _fitted_spec(parameters or getattr(target, "parameters", None) or twin.parameters, config, real)
    objective = TrialObjective(twin, real.train_excitations, real.train, spec, noise=config.noise)
    at = {n: v for n, v in result.values.items() if n in spec}
    flagged = [n for n in (flagged_parameters(report) if report else []) if n not in objective.measurement.names]
    tied = (result.diagnosis or {}).get("verdict") == "indistinguishable"
    if not flagged and not tied and active.trigger != "always":
        return None
    limits = ExcitationLimits.from_rig(twin, real.train_excitations, active.limits)
    if active.criterion == "separation" or (not flagged and (result.diagnosis or {}).get("verdict")
                                            == "indistinguishable"):
        design = design_separating_excitation(objective, at, limits, parameters=spec,
                                              tied=tied_causes(result.diagnosis))
        if design is None:
            return None
    else:
        design = design_excitation(objective, at, limits, flagged=flagged or None, max_rollouts=active.design_budget)
    rd = Path(run_dir)
    rec = {"design": 1, **design.to_dict(), "applied": False,
           "reason": "a recommendation: record this trial on the rig and add it to the rig config's trials",
           "design_rollouts": design.rollouts, "charged": False, "limits": _limits_record(limits),
           "warning": report.warning if report else None}
    if design.criterion == "separation" and not design.score_after >= RECOMMEND_SIGMA:
        # a trial that separates nothing is no recommendation: the causes are one effect on this rig
        rec["reason"] = (f"no trial within the rig's limits separates the causes by more than the noise (best "
                         f"{design.score_after:.3g} σ): on this rig they are probably one effect; no trial "
                         "recommended")
        rec["files"] = None
        _append_jsonl(rd / "active_learning.jsonl", _jsonable(rec))
        _record_in_result(rd, rec)
        return rec
    rec["files"] = {"csv": str(atomic_write_text(rd / "designed_excitation.csv", _csv_text(design.excitation))),
                    "trial": str(atomic_write_text(rd / "designed_trial.yaml",
                                                   _trial_block(design, "designed_excitation.csv", target)))}
    _append_jsonl(rd / "active_learning.jsonl", _jsonable(rec))
    _record_in_result(rd, rec)
    return rec


def _record_in_result(rd: Path, rec: Mapping[str, Any]) -> None:
    """``rec`` under ``designed_trial`` in ``rd/result.json`` (atomically), when the run wrote one."""
    res_json = rd / "result.json"
    if res_json.is_file():
        data = json.loads(res_json.read_text(encoding="utf-8"))
        data["designed_trial"] = _jsonable(rec)
        atomic_write_text(res_json, json.dumps(data, indent=1))


#: the record file of a session's designs (one JSON object a line, fsynced)
SESSION_LOG = "active_learning.jsonl"


class ActiveSession:
    """Active learning for a calibration that grows one request at a time (the ROS calibrator's sessions).

    Where :func:`run_active_calibration` runs a whole calibration with its stand-in in one
    call, a ROS session is asked for a few iterations at a time (``/vid2sid/propose``) and
    its trials are run by another node. This class keeps the science and the files; the
    node only plays the trial and hands back what the tracker made of it.

    The session directory holds:

    * ``phase_K/``: the calibration run after the session's first K designs (run, refused or
      failed: each design ends its phase; a normal run directory: each request resumes it);
    * ``active_trial_K.json``: the real data after designed trial K (:class:`RealTrial`),
      written atomically the moment the trial completes, before its record;
    * ``active_learning.jsonl``: one record per design (fsynced): run on the rig (``applied``
      true, its trial id and file), refused (``applied`` false and ``reason``), or failed.

    A session rebuilt on the same directory (the next request, or the node restarted) loads
    the last recorded trial file: a designed trial is never run twice, and the next phase
    starts from the values the last design was made at (``start``) with the budget left
    (``phase_budget``).

    Budget: one budget, ``budget`` rollouts, pays for every phase and every design. A design's
    rollouts are charged the moment it is recorded, whether the rig runs it, refuses it, or the
    design fails (charged its whole allowance, the most it may have spent): the record's
    ``charged_after`` is what the session has spent with it. Each design ends its phase, and
    the next phase starts with what is left, ``budget − charged_after`` (fixed once it starts:
    its resume signature); a design is only made when what is left pays for it and three
    evaluations of the data. So the session never spends more than ``budget``.

    Args:
        session_dir: the session's directory (created by the first phase's run).
        base: the recorded trials the session started from.
        active: the switch's settings (``enabled`` is not looked at: the caller decided).
        limits: the rig's excitation limits (:meth:`ExcitationLimits.from_rig`).
        budget: rollouts the whole session may spend (phases and designs).

    Raises:
        ObservationError: a recorded trial file is malformed (names the file).
    """

    def __init__(self, session_dir: str | Path, base: RealTrial, active: ActiveLearningConfig,
                 limits: ExcitationLimits, budget: int) -> None:
        self.dir = Path(session_dir)
        self.active, self.limits, self.budget = active, limits, int(budget)
        self.records = _read_jsonl(self.dir / SESSION_LOG)
        runs = [r for r in self.records if r.get("applied") and r.get("trial_file")
                and (self.dir / r["trial_file"]).is_file()]
        self.real = base
        #: values the last designed trial was designed at (the next phase's start), None before one
        self.start: dict[str, float] | None = None
        self._charged_before = 0
        if runs:
            self.real = RealTrial.load(self.dir / runs[-1]["trial_file"])
        self.trials_run = len(runs)
        #: designs recorded with their charge (run, refused or failed): each one ended a phase
        self.phase = 0
        for rec in self.records:
            if rec.get("charged_after") is not None and (not rec.get("applied") or rec in runs):
                self.phase += 1
                self._charged_before = max(self._charged_before, int(rec["charged_after"]))
                if rec.get("at"):
                    self.start = {str(k): float(v) for k, v in rec["at"].items()}

    # -- the current phase -------------------------------------------------------------------------
    @property
    def phase_dir(self) -> Path:
        """Run directory of the current phase: ``phase_K`` after the session's first K designs."""
        return self.dir / f"phase_{self.phase}"

    def phase_budget(self) -> int:
        """Rollouts the current phase may spend: the session's budget minus what the earlier phases and
        designs were charged (fixed once the phase started: a resume signature entry)."""
        return self.budget - self._charged_before

    def _phase_designs(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("design") and r.get("phase") == self.phase]

    def charged(self, result: CalibrationResult) -> int:
        """Rollouts the session has charged with the current phase at ``result``: earlier phases and
        designs, this phase's rollouts and its designs."""
        return self._charged_before + int(result.rollouts) + sum(int(r.get("rollouts") or 0)
                                                                 for r in self._phase_designs())

    # -- designing ---------------------------------------------------------------------------------
    def not_yet(self, result: CalibrationResult) -> str:
        """Why no trial is designed at ``result`` whatever the data say (``max_trials`` run, fewer than
        ``after_iteration`` iterations on the current data), in one line; "" when one may be."""
        a = self.active
        if self.trials_run >= a.max_trials:
            return f"{self.trials_run} designed trial(s) already run (max_trials {a.max_trials})"
        done = len(result.history) - 1
        if done < a.after_iteration:
            return (f"{done} of the {a.after_iteration} iteration(s) on the current data done (after_iteration); "
                    "no trial designed yet")
        return ""

    def next_design(self, twin: Any, result: CalibrationResult, config: CalibrationConfig,
                    spec: Any) -> tuple[DesignResult | None, str]:
        """Design the next trial at ``result`` (the current phase's) when the session should.

        Checked in order: ``max_trials`` designed trials not yet run; the phase has done
        ``after_iteration`` iterations; the identifiability check flags a weak direction, the
        diagnosis reports tied causes, a proposer asked for an ``excitation_change`` (validated;
        a refused request is recorded with its reason) or ``trigger: always``; the budget left pays
        for the design and three evaluations of the extended data.

        Args:
            twin: the evaluation twin (design rollouts run on it).
            result: the current phase's calibration result.
            config: the phase's calibration config (noise, nuisances).
            spec: the free parameters of the session.

        Returns:
            ``(design, "")``, or ``(None, why not)`` in one line (a failed design is recorded).
        """
        a = self.active
        not_yet = self.not_yet(result)
        if not_yet:
            return None, not_yet
        report = result.final_identifiability or result.identifiability
        flagged = flagged_parameters(report) if report else []
        request, refused = _proposer_request(result, self.real, self.limits)
        if refused is not None and _jsonable({**refused, "phase": self.phase}) not in self.records:
            self._record({**refused, "phase": self.phase})  # once per phase, not once per request
        tied = (result.diagnosis or {}).get("verdict") == "indistinguishable"
        if not (flagged or tied or request is not None or a.trigger == "always"):
            why = "neither the identifiability check nor the residual diagnosis flags a problem"
            return None, why + (f"; {refused['reason']}" if refused else "")
        left = self.budget - self.charged(result)
        need = 3 * (len(self.real.train) + 1)
        allowance = min(a.design_budget or left // 2, left - need)
        if allowance < 1:
            return None, (f"the {max(left, 0)} rollout(s) left in the session's budget of {self.budget} cannot pay "
                          f"for a design and {need} (three evaluations of the extended data)")
        try:
            design = choose_design(twin, self.real, spec, config, a, self.limits, result, flagged, request, tied,
                                   allowance)
        except ValueError as err:  # its rollouts are not known: charged its whole allowance (the most it spent)
            self._end_phase({"design": self._next_design_number(), "phase": self.phase, "applied": False,
                             "at": {k: float(v) for k, v in result.values.items()}, "rollouts": allowance,
                             "reason": f"design failed: {err}; charged its allowance of {allowance} rollouts",
                             "charged_after": self.charged(result) + allowance})
            return None, f"design failed: {err}"
        return design, ""

    def command_profile(self, design: DesignResult) -> dict[str, Any]:
        """The profile the rig's excitation node is sent to play ``design`` (JSON-ready).

        The designed profile rebuilt exactly as the excitation node builds it
        (:func:`~vid2sid_ros.core.excitation.build_excitation`) must give the designed
        commands, within the limits: a profile whose samples were clipped one by one (an
        asymmetric command range) cannot be sent as a profile and is refused.

        Raises:
            ExcitationRefused: the reason, in one line (nothing is sent).
        """
        from ..core.excitation import ExcitationError, build_excitation

        prof = _jsonable({k: v for k, v in design.profile.items()})
        prof.setdefault("rate", self.limits.rate)
        try:
            exc = build_excitation(prof, self.limits.actuator_names)
        except ExcitationError as err:
            raise ExcitationRefused(f"designed profile refused: {err}") from None
        want = np.asarray(design.excitation.values, float)
        if exc.values.shape != want.shape or not np.allclose(exc.values, want, atol=1e-9):
            raise ExcitationRefused("designed profile refused: its commands were clipped sample by sample into the "
                                    "actuator range, which an excitation profile cannot express; nothing sent")
        rng = [self.limits.range_of(i) for i in range(len(self.limits.actuator_names))]
        for i, (lo, hi) in enumerate(rng):
            col = exc.values[:, i]
            if np.any(col < lo - 1e-12) or np.any(col > hi + 1e-12):
                raise ExcitationRefused(f"designed profile refused: {self.limits.actuator_names[i]} leaves "
                                        f"[{lo:g}, {hi:g}] (largest |command| {float(np.max(np.abs(col))):g})")
        if exc.duration > self.limits.max_duration_s + 1e-9:
            raise ExcitationRefused(f"designed profile refused: {exc.duration:g} s, longer than the "
                                    f"{self.limits.max_duration_s:g} s a trial may last")
        if self.limits.max_rate is not None:  # from the held command too, as the excitation node checks it
            held = None if self.limits.held is None else np.asarray(self.limits.held, float)
            fast, lim = steepest_change(exc.values, exc.rate, held), np.asarray(self.limits.max_rate, float)
            if np.any(fast > lim * (1 + 1e-9)):
                i = int(np.argmax(fast / lim))
                raise ExcitationRefused(f"designed profile refused: {self.limits.actuator_names[i]} changes at "
                                        f"{fast[i]:.4g} per s, faster than max_rate {lim[i]:.4g}; nothing sent")
        return prof

    # -- outcomes (each recorded, fsynced) ----------------------------------------------------------
    def _record(self, rec: dict[str, Any]) -> dict[str, Any]:
        rec = _jsonable(rec)
        self.dir.mkdir(parents=True, exist_ok=True)
        _append_jsonl(self.dir / SESSION_LOG, rec)
        self.records.append(rec)
        return rec

    def _next_design_number(self) -> int:
        return sum(1 for r in self.records if r.get("design")) + 1

    def _end_phase(self, rec: dict[str, Any]) -> dict[str, Any]:
        """Record a charged design; the next phase starts with the budget left after it, from its values."""
        rec = self._record(rec)
        self._charged_before = int(rec["charged_after"])
        self.start = dict(rec.get("at") or {}) or self.start
        self.phase += 1
        return rec

    def _design_record(self, design: DesignResult, result: CalibrationResult) -> dict[str, Any]:
        n = self._next_design_number()
        lim = self.limits
        return {"design": n, "phase": self.phase, **design.to_dict(),
                "at": {k: float(v) for k, v in result.values.items()},
                "limits": {"actuators": list(lim.actuator_names), "amplitude": list(lim.amplitude),
                           "command_range": [list(lim.range_of(i)) for i in range(len(lim.actuator_names))],
                           "frequency_hz": list(lim.frequency_hz), "max_duration_s": lim.max_duration_s,
                           "max_rate": None if lim.max_rate is None else list(lim.max_rate),
                           "held": None if lim.held is None else list(lim.held), "source": dict(lim.source)}}

    def refuse(self, design: DesignResult, result: CalibrationResult, reason: str) -> dict[str, Any]:
        """Record a design that was not run on the rig (refused by a limit, the trial failed): charged, not
        added; the phase ends (the next one starts with the budget left)."""
        return self._end_phase({**self._design_record(design, result), "applied": False, "reason": reason,
                                "charged_after": self.charged(result) + design.rollouts})

    def complete(self, design: DesignResult, result: CalibrationResult, trial_id: str, trajectory: Trajectory,
                 excitation: Excitation) -> dict[str, Any]:
        """The rig ran ``design`` as trial ``trial_id``: add it to the real data and persist it at once.

        ``excitation`` is the commands the rig was actually sent (rebuilt from the command
        stream), ``trajectory`` what the tracker made of them. A trial that stopped early
        (fewer commands than designed) or in which nothing was tracked is recorded as refused
        and not added.

        Returns:
            The record (``applied`` true, ``trial``, ``trial_file``, ``training_trials``), or the refusal.
        """
        if excitation.num_steps != design.excitation.num_steps:
            return self.refuse(design, result, f"trial {trial_id} stopped after {excitation.num_steps} of "
                                               f"{design.excitation.num_steps} commands; not added to the data")
        tracked = int(np.asarray(trajectory.valid).any(axis=1).sum())
        if tracked == 0:
            return self.refuse(design, result, f"trial {trial_id}: no frame tracked; not added to the data")
        rec = self._design_record(design, result)
        real = _extended(self.real, trajectory, excitation)
        rec.update(applied=True, trial=trial_id, trial_file=f"active_trial_{self.trials_run + 1}.json",
                   tracked_steps=tracked, training_trials=len(real.train),
                   charged_after=self.charged(result) + design.rollouts)
        real.save(self.dir / rec["trial_file"])  # the trial first, then its record: a record always has its file
        rec = self._end_phase(rec)
        self.real = real
        self.trials_run += 1
        return rec
