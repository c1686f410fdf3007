"""What the report plots per trial: the real trajectory, the twin before and after calibration.

:func:`trial_curves` replays every training and holdout excitation through the
calibration's objectives (:class:`~vid2sid_ros.calibration.objective.TrialObjective`, so any
measurement model the fit used applies) at the initial (uncalibrated) and at the calibrated
parameter values and returns one JSON-ready entry
per trial; :func:`save_trial_curves` writes them to ``run_dir/trials.json``, the file
:func:`vid2sid_ros.report.write_report` reads. These rollouts are diagnostics (the
calibration's rollout budget is not charged; the caller counts them).

File format (``trials.json``)::

    {"version": 1,
     "initial_values": {name: value},          # SI units, every parameter
     "calibrated_values": {name: value},
     "trials": [{"name": "chirp", "split": "train" | "holdout",
                 "excitation": {"name", "rate" [Hz], "actuator_names", "values" (T, A)},
                 "real": Trajectory.to_dict(),  # keypoints (T, K, 2) px
                 "initial": Trajectory.to_dict() | null,     # null: the twin failed there
                 "calibrated": Trajectory.to_dict() | null,
                 "message": "why a curve is missing" (optional)}]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.files import atomic_write_text
from .objective import TrialObjective
from .observation import jsonable

__all__ = ["trial_curves", "save_trial_curves", "TRIALS_FILE"]

#: file name of the per-trial curves inside a run directory
TRIALS_FILE = "trials.json"


def _curves(objective: TrialObjective, values: Mapping[str, float]) -> tuple[list[dict | None], str, int]:
    """Twin trajectories of every trial of ``objective`` at ``values`` (the objective applies
    whatever measurement model it has, so the curves are what the fit compared)."""
    ev, _ = objective.evaluate(values)
    sims: list[dict | None] = [t.to_dict() for t in ev.sim]
    sims += [None] * (objective.cost - len(sims))
    if ev.failed and len(ev.sim) == objective.cost:  # the last rollout ran but is unusable
        sims[-1] = None
    return sims, (ev.message if ev.failed else ""), int(ev.rollouts)


def trial_curves(objectives: Sequence[tuple[str, TrialObjective]], initial: Mapping[str, float],
                 calibrated: Mapping[str, float]) -> tuple[dict[str, Any], int]:
    """Real, initial-twin and calibrated-twin trajectories of every trial.

    Args:
        objectives: ``[(split, objective), ...]`` — e.g. ``("train", training objective)``,
            ``("holdout", holdout objective)``; each holds its excitations and real trajectories.
        initial: the start point of the calibration (SI).
        calibrated: the identified values (SI).

    Returns:
        ``(document, rollouts)``: the ``trials.json`` document of the module docstring and
        the number of twin rollouts spent (twice the number of trials at most).
    """
    trials = []
    spent = 0
    params = objectives[0][1].parameters if objectives else None
    for split, obj in objectives:
        if not obj.excitations:
            continue
        ini, ini_msg, n1 = _curves(obj, initial)
        cal, cal_msg, n2 = _curves(obj, calibrated)
        spent += n1 + n2
        for i, (traj, exc) in enumerate(zip(obj.real, obj.excitations)):
            entry: dict[str, Any] = {
                "name": traj.trial_id or exc.name, "split": split,
                "excitation": {"name": exc.name, "rate": float(exc.rate), "actuator_names": list(exc.actuator_names),
                               "values": np.asarray(exc.values).tolist()},
                "real": traj.to_dict(), "initial": ini[i], "calibrated": cal[i]}
            msgs = [f"{k} twin: {m}" for k, m, c in (("initial", ini_msg, ini[i]), ("calibrated", cal_msg, cal[i]))
                    if c is None and m]
            if msgs:
                entry["message"] = "; ".join(msgs)
            trials.append(entry)
    doc = {"version": 1, "initial_values": dict(params.complete(initial)) if params else dict(initial),
           "calibrated_values": dict(params.complete(calibrated)) if params else dict(calibrated), "trials": trials}
    return jsonable(doc), spent


def save_trial_curves(run_dir: str | Path, doc: Mapping[str, Any]) -> Path:
    """Write ``doc`` (from :func:`trial_curves`) to ``run_dir/trials.json`` atomically.

    Raises:
        OSError: the run directory cannot be written.
    """
    path = Path(run_dir) / TRIALS_FILE
    atomic_write_text(path, json.dumps(doc))
    return path
