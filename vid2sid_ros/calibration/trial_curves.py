"""What the report plots per trial: the real trajectory, the twin before and after calibration.

:func:`trial_curves` replays every training and holdout excitation of a
:class:`~vid2sid_ros.calibration.observation.RealTrial` through the twin at the initial
(uncalibrated) and at the calibrated parameter values and returns one JSON-ready entry
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
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..core.parameters import ParameterSet
from ..sim.base import Twin
from .observation import RealTrial, jsonable

__all__ = ["trial_curves", "save_trial_curves", "TRIALS_FILE"]

#: file name of the per-trial curves inside a run directory
TRIALS_FILE = "trials.json"


def _rollout(twin: Twin, params: ParameterSet, values: Mapping[str, float], exc) -> tuple[dict | None, str, int]:
    """(trajectory dict or None, failure message, rollouts spent)."""
    try:
        twin.set_parameters(params.complete(values))
        res = twin.rollout(exc)
    except Exception as err:  # noqa: BLE001 - a failed curve is reported in the file, never raised
        return None, f"{type(err).__name__}: {err}", 1
    if res.diverged:
        return None, f"diverged: {res.message}", 1
    return res.trajectory.to_dict(), "", 1


def trial_curves(twin: Twin, params: ParameterSet, real: RealTrial, initial: Mapping[str, float],
                 calibrated: Mapping[str, float]) -> tuple[dict[str, Any], int]:
    """Real, initial-twin and calibrated-twin trajectories of every trial.

    Args:
        twin: the twin that was calibrated (its parameters are changed; the caller resets them).
        params: the parameter spec (completes partial value dicts).
        real: the real trial (train and holdout excitations with their trajectories).
        initial: the start point of the calibration (SI).
        calibrated: the identified values (SI).

    Returns:
        ``(document, rollouts)``: the ``trials.json`` document of the module docstring and
        the number of twin rollouts spent (``2 * number of trials``).
    """
    trials = []
    spent = 0
    for split, trajs, excs in (("train", real.train, real.train_excitations),
                               ("holdout", real.holdout, real.holdout_excitations)):
        for traj, exc in zip(trajs, excs):
            entry: dict[str, Any] = {
                "name": traj.trial_id or exc.name, "split": split,
                "excitation": {"name": exc.name, "rate": float(exc.rate), "actuator_names": list(exc.actuator_names),
                               "values": np.asarray(exc.values).tolist()},
                "real": traj.to_dict()}
            messages = []
            for key, values in (("initial", initial), ("calibrated", calibrated)):
                d, msg, n = _rollout(twin, params, values, exc)
                spent += n
                entry[key] = d
                if msg:
                    messages.append(f"{key} twin: {msg}")
            if messages:
                entry["message"] = "; ".join(messages)
            trials.append(entry)
    doc = {"version": 1, "initial_values": dict(params.complete(initial)),
           "calibrated_values": dict(params.complete(calibrated)), "trials": trials}
    return jsonable(doc), spent


def save_trial_curves(run_dir: str | Path, doc: Mapping[str, Any]) -> Path:
    """Write ``doc`` (from :func:`trial_curves`) to ``run_dir/trials.json`` atomically.

    Raises:
        OSError: the run directory cannot be written.
    """
    path = Path(run_dir) / TRIALS_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    os.replace(tmp, path)
    return path
