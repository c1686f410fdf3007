"""What the report reads from a run directory, as named types.

:func:`load_run` gathers one calibration run directory written by
:func:`vid2sid_ros.calibration.loop.run_calibration`: ``result.json`` (values, errors,
stop reason, identifiability, uncertainty), ``result.yaml`` (the identified parameter
spec), ``iterations.jsonl`` (every iteration), ``run.json`` (the requested iterations and
budget), ``trials.json`` (real / initial twin / calibrated twin per trial,
:mod:`vid2sid_ros.calibration.trial_curves`) and, on sim2sim runs, the hidden truth from
``truth.json`` (``{"values": {name: value}}``, e.g. a ROS stand-in rig's) or
``real_trial.json``.

:func:`load_designed_trials` gathers what active learning left in a run (or, for a phase
``RUN/phase_K`` of an active calibration, in its parent ``RUN``): ``designed_trial.yaml``,
``designed_excitation.csv``, ``active_learning.jsonl`` and ``active_learning.json``
(:mod:`vid2sid_ros.calibration.active`).

:class:`TrajectoryPanel` and :func:`save_trajectories` / :func:`load_trajectories` keep
caller-made plot panels (e.g. the demo's swing angle) next to a run.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation
from ..core.trajectory import Trajectory

__all__ = ["ReportError", "RunSummary", "TrialCurves", "TrajectoryPanel", "ReportSection", "load_run",
           "DesignedTrials", "load_designed_trials", "DESIGN_FILES",
           "save_trajectories", "load_trajectories", "is_converged", "stop_kind"]


class ReportError(ValueError):
    """A run directory or report input is unusable (the message names the file)."""


@dataclass
class TrajectoryPanel:
    """Real and simulated trajectories of one trial for a caller-made plot.

    Attributes:
        label: panel title (e.g. ``"free decay"``).
        real: real keypoints (T, K, 2) px.
        sim: calibrated twin's keypoints, frames paired with ``real`` by step.
        split_time: time (s) where the holdout starts (None: no split marked).
        derived: extra series ``{name: (unit, real (T,), sim (T,))}`` on ``real.time``.
    """

    label: str
    real: Trajectory
    sim: Trajectory
    split_time: float | None = None
    derived: dict[str, tuple[str, np.ndarray, np.ndarray]] = field(default_factory=dict)


@dataclass
class ReportSection:
    """A free section: paragraphs of text and/or one table (all text is HTML-escaped)."""

    title: str
    paragraphs: Sequence[str] = ()
    headers: Sequence[str] = ()
    rows: Sequence[Sequence[Any]] = ()


@dataclass
class TrialCurves:
    """One trial of ``trials.json``: the real trajectory and the twin before and after.

    Attributes:
        name: trial id. split: ``"train"`` or ``"holdout"``.
        excitation: the commanded excitation (values (T, A) in actuator units, rate Hz).
        real: (T, K, 2) px. initial / calibrated: the twin at the start / identified values,
            None when the twin failed there (``message`` says why).
    """

    name: str
    split: str
    excitation: Excitation | None
    real: Trajectory
    initial: Trajectory | None
    calibrated: Trajectory | None
    message: str = ""


@dataclass
class RunSummary:
    """What the report needs from one run directory (see :func:`load_run`)."""

    label: str
    path: Path
    result: dict[str, Any]
    records: list[Any]
    parameters: Any  # ParameterSet with nominal = identified values
    rig: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    trials: list[TrialCurves] = field(default_factory=list)
    truth: dict[str, float] | None = None
    #: measurement nuisances of ``result.yaml: nuisance:`` (latency, marker offsets): ParameterSpecs of
    #: kind ``nuisance`` with nominal = identified value; identified with the physics, never in the model spec
    nuisance: list[Any] = field(default_factory=list)

    @property
    def stopped(self) -> str:
        return str(self.result.get("stopped") or "")

    @property
    def converged(self) -> bool:
        return is_converged(self.stopped)

    @property
    def start_values(self) -> dict[str, float]:
        return dict(self.records[0].values) if self.records else {}


def stop_kind(stopped: str) -> str:
    """The stop reason as one word: converged | budget | iterations | interrupted | target | stalled | other.

    ``converged`` only for a stop reason that starts with it (the loop writes exactly
    ``"converged"`` after a proposer's convergence test passed, plus any appended note): a
    reason that merely mentions the word ("stalled: ... not converged") is not a convergence.
    """
    s = (stopped or "").lower().strip()
    if s.startswith("converged"):
        return "converged"
    if s.startswith("stalled"):
        return "stalled"
    for key, kind in (("target", "target"), ("budget", "budget"),
                      ("interrupt", "interrupted"), ("iterations", "iterations")):
        if key in s:
            return kind
    return "other"


def is_converged(stopped: str) -> bool:
    """True when the run ended because its fit converged (or reached its target error)."""
    return stop_kind(stopped) in ("converged", "target")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise ReportError(f"{path}: cannot read ({err})") from None
    except json.JSONDecodeError as err:
        raise ReportError(f"{path}: not valid JSON: {err}") from None


def _excitation(d: Mapping[str, Any] | None) -> Excitation | None:
    if not d:
        return None
    return Excitation(str(d["name"]), float(d["rate"]), np.asarray(d["values"], float),
                      tuple(d.get("actuator_names") or ("u0",)))


def load_trials(path: Path) -> list[TrialCurves]:
    """Read ``trials.json`` (see :mod:`vid2sid_ros.calibration.trial_curves`).

    Raises:
        ReportError: malformed file (names it and the trial).
    """
    doc = _read_json(path)
    out = []
    for i, t in enumerate(doc.get("trials") or [] if isinstance(doc, Mapping) else []):
        try:
            out.append(TrialCurves(str(t["name"]), str(t.get("split", "train")), _excitation(t.get("excitation")),
                                   Trajectory.from_dict(t["real"]),
                                   Trajectory.from_dict(t["initial"]) if t.get("initial") else None,
                                   Trajectory.from_dict(t["calibrated"]) if t.get("calibrated") else None,
                                   str(t.get("message", ""))))
        except (KeyError, TypeError, ValueError) as err:
            raise ReportError(f"{path}: trials[{i}]: {type(err).__name__}: {err}") from None
    return out


def load_run(run_dir: str | Path, label: str | None = None) -> RunSummary:
    """Read a finished calibration run directory.

    Raises:
        ReportError: the directory has no finished calibration (names the missing file)
            or a file is malformed (names it).
    """
    from ..calibration.loop import load_history
    from ..core.parameters import ParameterSpecError, load_parameter_set

    d = Path(run_dir)
    for f in ("result.json", "result.yaml", "run.json"):
        if not (d / f).is_file():
            raise ReportError(f"{d}: not a finished calibration run ({f} missing)")
    from ..calibration.loop import result_keys_current

    result = result_keys_current(_read_json(d / "result.json"))  # older runs: error_px, holdout_mae_px...
    meta = _read_json(d / "run.json")
    try:
        records = load_history(d)
        params = load_parameter_set(d / "result.yaml")
    except (ParameterSpecError, ValueError, KeyError) as err:
        raise ReportError(f"{d}: {err}") from None
    if not result.get("real_source") and meta.get("real_source"):
        result["real_source"] = meta["real_source"]
    try:  # measurement nuisances (latency, camera pose, marker offsets): identified, never in the model spec
        from ..core.yamlio import YAMLInputError, load_yaml

        doc = load_yaml(d / "result.yaml") or {}
    except YAMLInputError as err:  # not UTF-8, not YAML, a duplicate key (file:line)
        raise ReportError(str(err)) from None
    except OSError as err:
        raise ReportError(f"{d / 'result.yaml'}: {err}") from None
    nuisance = _nuisance_specs(doc.get("nuisance"), d / "result.yaml", skip=set(params.names))
    trials = load_trials(d / "trials.json") if (d / "trials.json").is_file() else []
    truth = None
    if isinstance(result.get("truth"), Mapping):
        truth = {str(k): float(v) for k, v in result["truth"].items()}
    elif (d / "truth.json").is_file():  # e.g. the ROS stand-in rig's hidden parameters (vid2sid bringup)
        t = _read_json(d / "truth.json").get("values")
        truth = {str(k): float(v) for k, v in t.items()} if isinstance(t, Mapping) else None
    elif (d / "real_trial.json").is_file():
        t = _read_json(d / "real_trial.json").get("truth")
        truth = {str(k): float(v) for k, v in t.items()} if isinstance(t, Mapping) else None
    return RunSummary(label or str(result.get("proposer") or d.name), d, result, records, params,
                      dict(result.get("rig") or meta.get("rig") or {}), dict(meta.get("config") or {}), trials, truth,
                      nuisance)


#: the files active learning writes into a run (calibration.active): recommendation, profile, records, summary
DESIGN_FILES = ("designed_trial.yaml", "designed_excitation.csv", "active_learning.jsonl", "active_learning.json")


@dataclass
class DesignedTrials:
    """What active learning left in a run directory (see :func:`load_designed_trials`).

    Attributes:
        where: the directory holding the files (the run, or an active calibration's ``RUN`` above ``phase_K``).
        records: one design record a line of ``active_learning.jsonl`` (``DesignResult.to_dict()`` plus
            ``design``, ``applied``, ``reason``, ``rollouts``, ``warning``, ``limits``...), file order.
        summary: ``active_learning.json`` (``warning_before``, ``warning_after``, ``rollouts_charged``,
            ``designs``...), None without it.
        yaml_text: ``designed_trial.yaml`` as written (the ``trials:`` entry to paste), None without it.
        excitation: ``designed_excitation.csv`` (values (T, A) in actuator units, rate Hz), None without it.
        problems: one line per file that is present but unusable (names the file and what is wrong).
    """

    where: Path
    records: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    yaml_text: str | None = None
    excitation: Excitation | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def designs(self) -> list[dict[str, Any]]:
        """Every design record: the summary's (it also holds designs not written to the log), else the log's."""
        listed = (self.summary or {}).get("designs")
        if isinstance(listed, list) and listed and all(isinstance(d, Mapping) for d in listed):
            return [dict(d) for d in listed]
        return list(self.records)


def load_designed_trials(run_dir: str | Path) -> DesignedTrials | None:
    """Read the active-learning files of a run (module docstring); never raises.

    Args:
        run_dir: a run directory; for ``RUN/phase_K`` the files are looked for in ``RUN`` too.

    Returns:
        :class:`DesignedTrials`, or None when the run has none of :data:`DESIGN_FILES`. A file
        that cannot be read or parsed is left out and named in ``problems`` (one line each).
    """
    import re

    d = Path(run_dir)
    dirs = [d] + ([d.parent] if re.fullmatch(r"phase_\d+", d.name) else [])
    where = next((x for x in dirs if any((x / f).is_file() for f in DESIGN_FILES)), None)
    if where is None:
        return None
    out = DesignedTrials(where)
    out.records = _design_records(where / "active_learning.jsonl", out.problems)
    p = where / "active_learning.json"
    if p.is_file():
        try:
            doc = _read_json(p)
            if not isinstance(doc, Mapping):
                raise ReportError(f"{p.name}: expected a JSON object, got {type(doc).__name__}")
            out.summary = dict(doc)
        except ReportError as err:
            out.problems.append(f"{p.name}: {str(err).removeprefix(str(p) + ': ')}")
    p = where / "designed_trial.yaml"
    if p.is_file():
        try:
            out.yaml_text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            out.problems.append(f"{p.name}: cannot read ({err})")
    p = where / "designed_excitation.csv"
    if p.is_file():
        from ..core.excitation import ExcitationError, build_excitation

        try:
            out.excitation = build_excitation({"kind": "csv", "path": str(p)})
        except (ExcitationError, OSError, UnicodeDecodeError, ValueError) as err:
            out.problems.append(f"{p.name}: not a command profile (expected a time column then one column per "
                                f"actuator): {' '.join(str(err).split())[:300]}")
    return out


def _design_records(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    """The JSON objects of ``active_learning.jsonl`` up to the first bad line (named in ``problems``)."""
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        problems.append(f"{path.name}: cannot read ({err})")
        return []
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(f"{path.name}: line {i} is not JSON ({err.msg}); it and the lines after it are not shown")
            break
        if not isinstance(rec, Mapping):
            problems.append(f"{path.name}: line {i} is not a JSON object (a design record); it and the lines after "
                            "it are not shown")
            break
        out.append(dict(rec))
    return out


def _nuisance_specs(block: Any, path: Path, *, skip: set[str]) -> list[Any]:
    """``result.yaml: nuisance: {name: {value, unit, meaning, lower, upper[, std]}}`` as ParameterSpecs
    (kind ``nuisance``, nominal = the identified value); names in ``skip`` (the model spec's) are left out.

    Raises:
        ReportError: an entry that is not a mapping or not a valid spec (names the file and entry).
    """
    from ..core.parameters import ParameterSpec, ParameterSpecError

    if block is None:
        return []
    if not isinstance(block, Mapping):
        raise ReportError(f"{path}: nuisance: expected a mapping of name -> {{value, unit, lower, upper}}, got "
                          f"{type(block).__name__}")
    specs = []
    for name, d in block.items():
        if str(name) in skip:
            continue
        if not isinstance(d, Mapping) or "value" not in d:
            raise ReportError(f"{path}: nuisance.{name}: expected a mapping with value, unit, lower, upper, got {d!r}")
        try:
            specs.append(ParameterSpec(str(name), str(d.get("unit", "")), d.get("lower"), d.get("upper"),
                                       d.get("value"), str(d.get("meaning", "")), kind="nuisance"))
        except ParameterSpecError as err:
            raise ReportError(f"{path}: nuisance.{name}: {err}") from None
    return specs


# -- trajectories.json -----------------------------------------------------------------
def save_trajectories(path: str | Path, panels: Sequence[TrajectoryPanel]) -> Path:
    """Store panels as JSON next to a run (so the report can be rebuilt later)."""
    out = []
    for p in panels:
        out.append({"label": p.label, "real": p.real.to_dict(), "sim": p.sim.to_dict(), "split_time": p.split_time,
                    "derived": {k: {"unit": u, "real": _nan_list(r), "sim": _nan_list(s)}
                                for k, (u, r, s) in p.derived.items()}})
    path = Path(path)
    from ..core.files import atomic_write_text

    atomic_write_text(path, json.dumps(out))
    return path


def load_trajectories(path: str | Path) -> list[TrajectoryPanel]:
    """Inverse of :func:`save_trajectories`.

    Raises:
        ReportError: malformed file (names it).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        return [TrajectoryPanel(d["label"], Trajectory.from_dict(d["real"]), Trajectory.from_dict(d["sim"]),
                                d.get("split_time"),
                                {k: (v["unit"], _from_nan_list(v["real"]), _from_nan_list(v["sim"]))
                                 for k, v in (d.get("derived") or {}).items()})
                for d in data]
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ReportError(f"{path}: cannot read trajectories ({type(err).__name__}: {err})") from None


def _nan_list(a: np.ndarray) -> list[float | None]:
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(a, float).ravel()]


def _from_nan_list(v: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if x is None else x for x in v], float)


def finite(x: Any) -> float | None:
    """``float(x)`` when finite, else None."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None
