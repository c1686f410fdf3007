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
import os
import zipfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.files import atomic_write_text
from ..core.trial import jsonable
from .objective import TrialObjective

__all__ = ["trial_curves", "save_trial_curves", "render_trials", "TRIALS_FILE", "RENDERS_FILE"]

#: file name of the per-trial curves inside a run directory
TRIALS_FILE = "trials.json"
#: file name of the twin's rendered frames per trial (initial / calibrated), for the report's overlay video
RENDERS_FILE = "twin_renders.npz"


def _curves(objective: TrialObjective, values: Mapping[str, float],
            done: Any = None) -> tuple[list[dict | None], str, int]:
    """Twin trajectories of every trial of ``objective`` at ``values`` (the objective applies
    whatever measurement model it has, so the curves are what the fit compared); ``done``: the
    :class:`~vid2sid_ros.calibration.proposers.proposer.Evaluation` of ``values`` on this objective the caller
    already has (no rollout), or None."""
    ev = done if done is not None else objective.evaluate(values)[0]
    sims: list[dict | None] = [t.to_dict() for t in ev.sim]
    sims += [None] * (objective.cost - len(sims))
    if ev.failed and len(ev.sim) == objective.cost:  # the last rollout ran but is unusable
        sims[-1] = None
    return sims, (ev.message if ev.failed else ""), 0 if done is not None else int(ev.rollouts)


def trial_curves(objectives: Sequence[tuple[str, TrialObjective]], initial: Mapping[str, float],
                 calibrated: Mapping[str, float], *,
                 evaluations: Mapping[str, tuple[Any, Any]] | None = None) -> tuple[dict[str, Any], int]:
    """Real, initial-twin and calibrated-twin trajectories of every trial.

    Args:
        objectives: ``[(split, objective), ...]`` — e.g. ``("train", training objective)``,
            ``("holdout", holdout objective)``; each holds its excitations and real trajectories.
        initial: the start point of the calibration (SI).
        calibrated: the identified values (SI).
        evaluations: ``{split: (evaluation at initial or None, evaluation at calibrated or None)}`` the
            caller already made on an objective identical to that split's (same twin, excitations, real
            trials and parameters): their trajectories are used, no rollout spent.

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
        have = (evaluations or {}).get(split) or (None, None)
        ini, ini_msg, n1 = _curves(obj, initial, have[0])
        cal, cal_msg, n2 = _curves(obj, calibrated, have[1])
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


def _thumbs(frames: np.ndarray, rows: np.ndarray, width: int) -> np.ndarray:
    """``frames[rows]`` resized to ``width`` px (aspect kept, even height), (n, h, width, 3) uint8."""
    import cv2

    H, W = frames.shape[1:3]
    h = max(2, int(round(H * width / W)) // 2 * 2)
    return np.stack([cv2.resize(np.ascontiguousarray(frames[r]), (width, h), interpolation=cv2.INTER_AREA)
                     for r in rows])


def _savez_fast(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """``np.savez_compressed(path, **arrays)`` at deflate level 1 instead of numpy's 6: the same
    ``.npz`` for ``np.load``, about 6x less CPU on rendered frames for files about 12 % larger.

    Raises:
        OSError: the file cannot be written.
    """
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for key, arr in arrays.items():
            with zf.open(f"{key}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(arr), allow_pickle=False)


def _footage(traj, steps: np.ndarray, objectives, real_frames: Mapping[str, np.ndarray],
             frame_info: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, float] | None:
    """``(frames, index of the frame shown at each of ``steps``, frame scale)`` of the camera footage of
    ``traj``, or None: none kept, or a retimed recording (time slots are not video rows)."""
    rec = str((traj.meta or {}).get("trial") or "")
    rf = real_frames.get(traj.trial_id) if traj.trial_id else None
    if rf is None and rec:  # a time split: the recording's frames are kept under its training part's id
        for _s, obj in objectives:
            for t in obj.real:
                if (t.meta or {}).get("trial") == rec and t.trial_id in real_frames:
                    rf = real_frames[t.trial_id]
    if rf is None or len(rf) == 0:
        return None
    info = frame_info.get(rec) if isinstance(frame_info.get(rec), Mapping) else {}
    if info.get("retimed"):
        return None
    every = max(1, int(info.get("frame_every") or 1))
    idx = np.asarray(steps, np.int64) // every  # recording row = time slot when not retimed
    if idx.min() < 0 or idx.max() >= len(rf):
        return None
    return np.asarray(rf), idx, float(info.get("frame_scale") or 1.0)


def _renders_steps(twin: Any) -> bool:
    """Whether ``twin.rollout`` takes ``render_steps`` and ``render_width`` (render only some rows, small:
    the MuJoCo twins)."""
    import inspect

    try:
        return {"render_steps", "render_width"} <= set(inspect.signature(twin.rollout).parameters)
    except (TypeError, ValueError):
        return False


def render_trials(objectives: Sequence[tuple[str, TrialObjective]], initial: Mapping[str, float],
                  calibrated: Mapping[str, float], path: str | Path, *, real_frames: Mapping[str, np.ndarray]
                  | None = None, frame_info: Mapping[str, Any] | None = None, width: int = 200,
                  max_frames: int = 100) -> tuple[Path | None, int, str]:
    """Render the twin at the initial and the calibrated values on every trial that measures image keypoints
    (the report's overlay video and contact sheet show only those; a joint-space or 3-D trial is skipped), for
    the report.

    The twin is rendered through its own camera (the rig's, as configured: fitted camera
    nuisances move the measured keypoints, not this render). Frames are thinned to at most
    ``max_frames`` per trial and shrunk to ``width`` px, then stored losslessly in one
    ``.npz`` (``path``, written atomically) with, per trial index ``i`` in ``trials.json``
    order: ``i_initial``, ``i_calibrated`` (n, h, width, 3) uint8 RGB, ``i_steps`` (n,) the
    command steps shown and, when ``real_frames`` holds the trial's camera frames row-aligned
    with its trajectory, ``i_real``; ``i_size`` = (W, H) px of the camera image the frames were shrunk from.

    Args:
        objectives: as :func:`trial_curves`.
        initial, calibrated: parameter values (SI).
        path: the ``.npz`` to write.
        real_frames: ``{trial_id: (N, H, W, 3) uint8}`` (``RealTrial.frames``): the camera frames
            of a trial (row-aligned with it), or a recording's thumbnails (a time split's parts share them).
        frame_info: ``RealTrial.meta["trials"]``: per recording ``frame_every`` (``frames[i]`` is row
            ``i * frame_every``), ``frame_scale`` (thumbnail size / camera image) and ``retimed``.
        width: frame width in px. max_frames: frames kept per trial.

    Returns:
        ``(path or None, rollouts spent, why not written)`` — never raises on a twin that
        cannot render (no OpenGL, no ``render=True`` support): the reason is returned.
    """
    arrays: dict[str, np.ndarray] = {}
    spent, i, why = 0, 0, ""
    for _split, obj in objectives:
        measurement = obj.measurement
        for traj, exc in zip(obj.real, obj.excitations):
            if getattr(traj, "kind", "image") != "image":  # the report's overlay and contact sheet show only
                why = why or "no trial measures image keypoints"  # image-keypoint trials: no render needed
                i += 1
                continue
            T = traj.num_frames
            stride = max(1, int(np.ceil(T / max_frames)))
            steps = np.asarray(traj.steps if traj.steps is not None else np.arange(T))[::stride]
            for label, values in (("initial", initial), ("calibrated", calibrated)):
                thinned = _renders_steps(obj.twin) and bool(len(steps)) and int(steps.max()) < exc.num_steps
                try:
                    obj.twin.set_parameters(measurement.split(obj.parameters.complete(values))[0])
                    # only the frames shown (a twin's row k is command step k); else every step, thinned below
                    # at the thumbnails' width: the same view, rendered small instead of shrunk
                    res = (obj.twin.rollout(exc, render=True, render_steps=steps, render_width=width) if thinned
                           else obj.twin.rollout(exc, render=True))
                    spent += 1
                except Exception as err:  # noqa: BLE001 - a render problem never loses the calibration
                    why = f"{label} twin on '{exc.name}': {type(err).__name__}: {err}"
                    continue
                if res.frames is None or res.diverged:
                    why = f"{label} twin on '{exc.name}': " + ("no frames" if res.frames is None else "diverged")
                    continue
                st = np.asarray(res.trajectory.steps if res.trajectory.steps is not None
                                else np.arange(res.trajectory.num_frames))
                row = {int(v): r for r, v in enumerate(st)}
                rows = np.array([row.get(int(v), -1) for v in steps])
                if thinned and np.array_equal(rows, steps):
                    rows = np.arange(len(steps))  # frames[j] is the row of steps[j]
                elif thinned:
                    why = f"{label} twin on '{exc.name}': its rows are not its command steps"
                    continue
                if (rows < 0).any() or rows.max() >= len(res.frames):
                    why = f"{label} twin on '{exc.name}': rendered frames do not cover the trial's steps"
                    continue
                arrays[f"{i}_{label}"] = _thumbs(res.frames, rows, width)
                cam = obj.twin.camera if thinned else None
                arrays[f"{i}_size"] = np.array((cam.width, cam.height) if cam is not None else res.frames.shape[2:0:-1],
                                               np.int64)  # camera image (W, H) px
            arrays[f"{i}_steps"] = steps.astype(np.int64)
            footage = _footage(traj, steps, objectives, real_frames or {}, frame_info or {})
            if footage is not None:
                rf, idx, scale = footage
                arrays[f"{i}_real"] = _thumbs(rf, idx, width)
                arrays.setdefault(f"{i}_size", np.array([round(rf.shape[2] / scale), round(rf.shape[1] / scale)],
                                                        np.int64))
            i += 1
    if not any(k.endswith(("_initial", "_calibrated", "_real")) for k in arrays):
        return None, spent, why or "nothing rendered"
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp.npz")
    try:  # the renders only feed the report's video: a full disk or a file-size limit costs the video, not the run
        _savez_fast(tmp, arrays)
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        return None, spent, f"cannot write {path.name}: {err.strerror or err}"
    return path, spent, why
