"""A benchmark sweep as cells on the rollout executor.

A sweep is seeds x methods (per rig and misspecification, one :func:`run_benchmark
<vid2sid_ros.benchmark.run.run_benchmark>` call each). It runs in two rounds of tasks
on an :class:`~vid2sid_ros.calibration.executor.Executor`:

1. one task per seed (:func:`_prepare_seed`): the hidden truth, the stand-in real trial, the
   identifiability check at the nominal point and the rig's start stage;
2. one task per cell (seed, method) (:func:`_run_cell`): the calibration and its scores.

Each finished cell is written the moment it completes, atomically, as
``OUT/seed_S/METHOD/cell.json`` (the seed's own record as ``OUT/seed_S/seed.json``); a sweep
started again on the same ``OUT`` loads the cells it has and runs only the others (a seed whose
cells are all done is not prepared again). A cell whose worker dies (a killed process, a lost
Ray node) is retried once by the executor; if it dies again the cell is recorded as failed
(listed with the reason in the results' ``failed_cells``), it is not
written as done (a later run tries it again) and the sweep carries on. Every task is a
deterministic function of its seed, so the results do not depend on the backend or on the order
in which cells finish.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..calibration.executor import Executor, TaskFailure
from ..calibration.identifiability import IdentifiabilityWarning, check_identifiability
from ..core.parameters import ParameterSet, relative_parameter_error
from ..core.rig import Rig
from ..core.trial import jsonable, with_current_keys

__all__ = ["SweepSettings", "run_sweep", "CELL_FILE", "SEED_FILE", "LEGACY_CELL_KEYS", "cell_keys_current"]

#: a finished cell, inside its run directory ``OUT/seed_S/METHOD``
CELL_FILE = "cell.json"
#: a prepared seed's record (truth, tracking, identifiability, start), in ``OUT/seed_S``
SEED_FILE = "seed.json"


@dataclass
class SweepSettings:
    """Everything a cell needs besides its seed and method (the executor's shared state).

    Attributes mirror :func:`~vid2sid_ros.benchmark.run.run_benchmark`'s arguments;
    ``detected_as`` maps a misspecification kind to the diagnosis kind that names it.
    """

    rig: Rig
    budget: int | None
    iterations: int
    noise: str
    truth_range: tuple[float, float]
    final_identifiability: bool
    proposer_options: Mapping[str, Mapping[str, Any]]
    mis: Mapping[str, float]
    nuisance: Mapping[str, Any] | None
    nominal_identifiability: bool
    diagnosis: bool
    start: Any
    out_dir: Path | None
    detected_as: Mapping[str, str] = field(default_factory=dict)
    active_learning: Any = None  # an enabled calibration.active.ActiveLearningConfig, or None

    def for_worker(self) -> "SweepSettings":
        """Workers share the settings as they are: every task builds its own twin from the rig."""
        return self


@dataclass
class PreparedSeed:
    """A seed's stand-in real trial and the parameters every method starts from."""

    record: dict[str, Any]
    real: Any
    parameters: ParameterSet | None
    spent: int


def _atomic_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (a temporary file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(json.dumps(jsonable(data), indent=1))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


#: error keys of cells written by earlier versions -> the current ones (the errors are in the
#: measurement unit, ``unit`` / ``holdout_unit``: px only for image keypoints)
LEGACY_CELL_KEYS = {"train_mae_px": "train_mae", "holdout_mae_px": "holdout_mae",
                    "initial_train_mae_px": "initial_train_mae"}


def cell_keys_current(rec: dict[str, Any]) -> dict[str, Any]:
    """A cell (or a benchmark's per-method summary) with the ``*_px`` error keys of earlier versions
    under their current names (:data:`LEGACY_CELL_KEYS`); a current key wins. Such a record has
    no ``unit``: it stays absent (unknown), never guessed."""
    return with_current_keys(rec, LEGACY_CELL_KEYS)


def _load_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when absent or torn (written by an older, interrupted run)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _prepare_seed(st: SweepSettings, seed: int) -> PreparedSeed:
    """Task: the hidden truth, the stand-in real trial, the nominal identifiability check and the start stage."""
    from ..calibration.objective import TrialObjective
    from ..calibration.start import generic_start
    from .sim2sim import draw_ground_truth, make_sim2sim_trial

    rig, params = st.rig, st.rig.parameters
    free = params.free_names
    truth = draw_ground_truth(params, seed, low=st.truth_range[0], high=st.truth_range[1])
    twin = rig.make_twin()
    real = make_sim2sim_trial(rig, truth, seed=seed, noise=st.noise, twin=twin, misspecify=dict(st.mis) or None)
    truth = {**truth, **{n: real.truth[n] for n in free if n in (real.truth or {})}}  # what the real side has
    caught: list = []
    ident = None
    if st.nominal_identifiability:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", IdentifiabilityWarning)
            ident = check_identifiability(TrialObjective(twin, real.train_excitations, real.train, params),
                                          params.nominal())
    rec: dict[str, Any] = {"seed": seed, "truth": {n: truth[n] for n in free},
                           "tracking": real.meta.get("tracking"),
                           "identifiability_nominal": ident.to_dict() if ident else None, "methods": {},
                           **({"misspecification": real.meta.get("misspecification")} if st.mis else {})}
    if caught:
        rec["identifiability_warning"] = str(caught[0].message)
    seed_params, spent = None, 0
    if st.start is not None:  # the rig's start stage, once per seed: the same start for every method
        started = generic_start(twin, real, params, st.start, seed=seed, budget=st.budget,
                                where=f"{rig.where}:calibration.start")
        seed_params, spent = started.parameters, int(started.rollouts)
        rec["start"] = {"kind": st.start.kind, "guess": st.start.guess, "rollouts": spent,
                        "training_error": started.error, "notes": list(started.notes),
                        "values": {n: float(seed_params[n].nominal) for n in free}}
    close = getattr(twin, "close", None)
    if callable(close):
        close()
    return PreparedSeed(jsonable(rec), real, seed_params, spent)


def _own_point_error(res: Any, truth: Mapping[str, float], free: Sequence[str]) -> dict[str, Any]:
    """The method's own point's error, before the tracker-bias correction moved it (``own_rel_error``,
    ``own_mean_rel_error``; empty when nothing was moved). The correction spends diagnostic rollouts the
    budget does not charge, the same for every method, so the methods compare at equal budget on their own
    points (:mod:`~vid2sid_ros.calibration.bias_correction`)."""
    corr = getattr(res, "bias_correction", None) or {}
    if not corr.get("applied") or not corr.get("before"):
        return {}
    own = relative_parameter_error(corr["before"], truth, free)
    return {"own_values": {n: corr["before"][n] for n in free}, "own_rel_error": own,
            "own_mean_rel_error": float(np.mean(list(own.values())))}


def _run_cell(st: SweepSettings, item: tuple[int, str, dict[str, float], PreparedSeed]) -> dict[str, Any]:
    """Task: one method's calibration on one seed's stand-in trial, scored against the truth."""
    from ..calibration.loop import CalibrationConfig, run_calibration
    from ..calibration.proposers import make_proposer

    seed, m, truth, prep = item
    params = st.rig.parameters
    free = params.free_names
    budget = None if st.budget is None else st.budget - prep.spent
    proposer = make_proposer(m, **dict(st.proposer_options.get(m, {})))
    cfg = CalibrationConfig(iterations=st.iterations, rollout_budget=budget, seed=seed,
                            identifiability=False, final_identifiability=st.final_identifiability,
                            diagnosis=st.diagnosis, nuisance=None if st.nuisance is None else dict(st.nuisance),
                            far_refit="converged")  # an unfinished baseline's refits from afar: its fit, per cell
    run_dir = st.out_dir / f"seed_{seed}" / m if st.out_dir is not None else None
    if run_dir is not None and (run_dir / "run.json").exists():
        cfg.resume = True  # re-running a benchmark continues/reuses finished runs
    al_rec: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentifiabilityWarning)
        if st.active_learning is not None:  # phases with designed trials the stand-in runs (calibration/active.py)
            from .run import _active_run

            res, al_rec = _active_run(st.rig, prep.real, m, st.proposer_options, cfg, st.active_learning, run_dir,
                                      truth, seed, st.noise, st.mis, prep.parameters)
        else:
            res = run_calibration(st.rig, prep.real, proposer, cfg, run_dir, parameters=prep.parameters)
    real = prep.real
    rel = relative_parameter_error(res.values, truth, free)
    fin = res.final_identifiability
    rec = {"method": m, "seed": seed, "values": {n: res.values[n] for n in free},
           "rel_error": rel, "mean_rel_error": float(np.mean(list(rel.values()))),
           **_own_point_error(res, truth, free),
           "train_mae": res.error_px, "holdout_mae": res.holdout_mae_px, "unit": res.unit,
           "holdout_unit": res.holdout_unit,
           "initial_train_mae": res.initial_error_px, "rollouts": res.rollouts + prep.spent,
           "start_rollouts": prep.spent,
           "iterations": res.iterations, "wall_s": res.wall_s, "stopped": res.stopped,
           "uncertainty": res.uncertainty,
           "interval": dict(fin.interval) if fin else {},
           "measurement_bias": dict(fin.measurement_bias) if fin else {},
           "nuisance": {k: v for k, v in res.values.items() if k not in params.names}, **al_rec}
    if al_rec:  # the designs' rollouts are charged too
        rec["rollouts"] = al_rec["active_learning"]["rollouts_charged"] + prep.spent
    diag = res.diagnosis or {}
    kinds = list(diag.get("kinds") or [])
    rec["diagnosis"] = {"misspecified": diag.get("misspecified"), "kinds": kinds,
                        "verdict": diag.get("verdict"), "recommendation": diag.get("recommendation"),
                        "summary": diag.get("text") or diag.get("summary")}
    rec["detected"] = ({k: st.detected_as[k] in kinds for k in st.mis} if st.mis else None)
    rec["false_alarm"] = bool(diag.get("misspecified")) if not st.mis else None
    lat = (real.meta.get("misspecification") or {}).get("applied", {}).get("latency")
    if lat is not None and "latency" in res.values:
        rate = float(real.train_excitations[0].rate)
        rec["latency_error_frames"] = abs(float(res.values["latency"]) - float(lat["realised_s"])) * rate
    return jsonable(rec)


def _settings(st: SweepSettings) -> dict[str, Any]:
    """What a finished cell was computed with (JSON values), in the calibration's own words."""
    from ..core.trial import jsonable

    return jsonable({"rollout_budget": st.budget, "iterations": st.iterations, "noise": st.noise,
                     "truth_range": list(st.truth_range), "misspecify": dict(st.mis),
                     "final_identifiability": st.final_identifiability, "nuisance": st.nuisance,
                     "diagnosis": st.diagnosis})


def _check_same_settings(cell: dict[str, Any] | None, st: SweepSettings, where: Path | None) -> None:
    """Refuse to reuse a finished cell computed with other settings (one line naming the first).

    Raises:
        CalibrationError: ``cannot resume WHERE: 'KEY' differs from the interrupted run (OLD vs NEW)``.
    """
    if not cell or not isinstance(cell.get("settings"), dict):
        return
    from ..calibration.loop import CalibrationError

    now = _settings(st)
    for k, v in now.items():
        if k in cell["settings"] and cell["settings"][k] != v:
            raise CalibrationError(f"cannot resume {where}: '{k}' differs from the interrupted run "
                                   f"({cell['settings'][k]} vs {v})")


def run_sweep(st: SweepSettings, seeds: Sequence[int], methods: Sequence[str], executor: Executor | None,
              *, on_cell: Callable[[dict[str, Any]], None] | None = None,
              on_change: Callable[[list[dict[str, Any]]], None] | None = None,
              failures: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Run every unfinished cell (module docstring); return the per-seed records in seed order.

    Args:
        st: the shared settings. seeds, methods: the grid. executor: where tasks run (None: serial).
        on_cell: called in this thread with each cell's record as it finishes (loaded cells too).
        on_change: called with the per-seed records (finished cells so far) after each cell, to
            write partial results.
        failures: receives ``{"seed", "method" (None for the seed's preparation), "message"}`` per
            task whose worker died twice.

    Returns:
        ``[{"seed", "truth", ..., "methods": {method: record}}]``: finished cells only (a failed
        cell is in ``failures``, a seed whose preparation failed is left out).

    Raises:
        Whatever a seed's preparation or a cell raised (a bad stand-in trial, a run directory
        holding another run), as the serial benchmark did; a worker's death is not raised.
    """
    from ..calibration.executor import make_executor

    ex = executor if executor is not None else make_executor("serial")
    out = st.out_dir
    records: dict[int, dict[str, Any]] = {}
    todo: dict[int, list[str]] = {}
    for seed in seeds:  # what an earlier run of this sweep finished
        have = _load_json(out / f"seed_{seed}" / SEED_FILE) if out is not None else None
        cells = {m: _load_json(out / f"seed_{seed}" / m / CELL_FILE) if out is not None else None for m in methods}
        for m, c in cells.items():  # a finished cell is reused only for the same settings
            _check_same_settings(c, st, out / f"seed_{seed}" / m if out is not None else None)
        cells = {m: (cell_keys_current({k: v for k, v in c.items() if k != "settings"}) if c else c)
                 for m, c in cells.items()}
        missing = [m for m in methods if cells[m] is None]
        if have is not None:
            records[seed] = {**have, "methods": {m: c for m, c in cells.items() if c is not None}}
        if missing or have is None:
            todo[seed] = missing
    prep_seeds = list(todo)
    preps = dict(zip(prep_seeds, ex.map(_prepare_seed, prep_seeds, state=st)))
    for seed, p in preps.items():
        if isinstance(p, TaskFailure):
            if failures is not None:
                failures.append({"seed": seed, "method": None, "message": p.message})
            continue
        kept = records.get(seed, {}).get("methods", {})
        records[seed] = {**p.record, "methods": dict(kept)}
        if out is not None:
            _atomic_json(out / f"seed_{seed}" / SEED_FILE, {k: v for k, v in p.record.items() if k != "methods"})
    ordered = lambda: [records[s] for s in seeds if s in records]  # noqa: E731 - the per-seed records so far
    for seed in seeds:
        for m in methods:
            rec = records.get(seed, {}).get("methods", {}).get(m)
            if rec is not None and on_cell is not None:
                on_cell(rec)
    items = [(seed, m, records[seed]["truth"], preps[seed]) for seed in prep_seeds
             if not isinstance(preps[seed], TaskFailure) for m in todo[seed]]
    failures = failures if failures is not None else []

    def done(i: int, rec: Any) -> None:
        seed, m = items[i][0], items[i][1]
        if isinstance(rec, TaskFailure):
            failures.append({"seed": seed, "method": m, "message": rec.message})
        else:
            if out is not None:
                _atomic_json(out / f"seed_{seed}" / m / CELL_FILE, {**rec, "settings": _settings(st)})
            records[seed]["methods"][m] = rec
            if on_cell is not None:
                on_cell(rec)
        if on_change is not None:
            on_change(ordered())

    ex.map(_run_cell, items, state=st, on_done=done)
    for seed in seeds:  # methods in the order asked, whatever order the cells finished in
        if seed in records:
            got = records[seed]["methods"]
            records[seed]["methods"] = {m: got[m] for m in methods if m in got}
    return ordered()
