"""A rig's trials -> the :class:`~vid2sid_ros.core.trial.RealTrial` a calibration fits.

Each trial's source (:mod:`vid2sid_ros.io.sources`) gives a :class:`~vid2sid_ros.io.sources.Recording`;
:func:`split_recording` cuts it into the parts the rig's excitations describe
(:func:`vid2sid_ros.rigs.loader.load_rig` made one excitation per trial part):

- ``split: train`` / ``holdout``: the whole trial is fitted / held out;
- ``split: {train_fraction: f}``: time slots ``[0, n)`` are fitted (``n = round(f S)``, S =
  the trial's slots); the holdout part replays the WHOLE trial (the twin continues from
  the same initial state) with the training slots marked invalid, so only the rest is scored.

Sim and real rows are paired by time slot (``Trajectory.steps``): a repaired clip with a
dropped frame simply has no row for that slot.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.excitation import Excitation
from ..core.rig import Rig, TrialSpec
from ..core.trajectory import Trajectory
from ..core.trial import RealTrial
from ..io.sources import SOURCES, Recording, SourceContext, SourceError
from .schema import RigConfigError

__all__ = ["build_real_trial", "split_recording", "load_recording", "checked_recording", "clip_real_trial",
           "trial_measurement", "MIN_TRAIN_FRAMES"]

#: fewest valid training frames a trial part must keep
MIN_TRAIN_FRAMES = 10


def load_recording(rig: Rig, trial: TrialSpec, *, keep_frames: bool = False) -> Recording:
    """Read one trial's measurements through its source kind.

    Raises:
        RigConfigError: the source's one-line error (``file:trials[i].source.<kind>: ...``).
    """
    kind = trial.kind
    base = rig.source.parent if rig.source is not None else None
    ctx = SourceContext(where=f"{trial.where}.source.{kind}", base_dir=base, rig=rig, trial=trial,
                        keep_frames=keep_frames)
    try:
        rec = SOURCES[kind].load(trial.source[kind], ctx)
    except SourceError as err:
        raise RigConfigError(str(err)) from None
    return checked_recording(rig, rec)


def trial_measurement(rig: Rig, trial: TrialSpec) -> Trajectory | None:
    """What one trial measures, read through its source kind's ``measurement`` without its data.

    Returns:
        A zero-row trajectory with the kind (``joints`` / ``points``), names, units, frame and
        declared noise (``meta["noise"]``, 1 sigma in the unit: ``joint_csv.noise``, ``mocap.noise``)
        of what :func:`load_recording` would give; None for image keypoints in px (a video,
        a sim2sim stand-in, a bag's camera), measured through the rig's camera and tracker.

    Raises:
        RigConfigError: the source's one-line error (``file:trials[i].source.<kind>: ...``).
    """
    kind = trial.kind
    base = rig.source.parent if rig.source is not None else None
    ctx = SourceContext(where=f"{trial.where}.source.{kind}", base_dir=base, rig=rig, trial=trial)
    try:
        return SOURCES[kind].measurement(trial.source[kind], ctx)
    except SourceError as err:
        raise RigConfigError(str(err)) from None


def checked_recording(rig: Rig, rec: Recording) -> Recording:
    """``rec`` after the one tracking check every source gets
    (:func:`~vid2sid_ros.perception.quality.check_tracking` on the whole recording, threshold
    ``tracking.min_tracked_fraction`` of the rig config): its summary in
    ``rec.meta["tracking"]`` and ``trajectory.meta["tracking"]``, its warnings appended to
    ``rec.warnings``. A source that already ran it (a tracked clip) keeps its own."""
    from ..perception.quality import check_tracking, min_tracked_fraction

    traj = rec.trajectory
    done = (traj.meta or {}).get("tracking")
    if not isinstance(done, dict):
        chk = check_tracking(traj, min_fraction=min_tracked_fraction(rig.config, rig.where))
        done = chk.to_dict()
        rec.warnings = list(rec.warnings) + chk.warnings
        rec.trajectory = traj._with(meta={**dict(traj.meta or {}), "tracking": done})
    rec.meta = {**dict(rec.meta or {}), "tracking": done}
    return rec


def _parts(rig: Rig, trial: TrialSpec) -> list[tuple[str, Excitation]]:
    out = []
    for label in ("train", "holdout"):
        for e in rig.excitations.get(label, []):
            if (e.meta or {}).get("trial") == trial.name:
                out.append((label, e))
    return out


#: relative difference of an excitation's rate and a recording's below which they are one rate: times
#: written with 6 decimals (0.033333 s) give a 30 Hz file 30.0003 Hz (1e-5); 1e-4 drifts one frame in 10 000
RATE_TOLERANCE = 1e-4


def _fit_excitation(exc: Excitation, slots: int, rec: Recording, trial: TrialSpec) -> Excitation:
    """The part's excitation over the recording's ``slots`` (free motion: zeros at the recording's rate,
    which for a variable-frame-rate clip is its nominal rate, not the probed container average; commanded:
    the recording's own commands when it has them, else the configured ones, which must cover it)."""
    if rec.excitation is not None and rec.excitation is not exc:
        src = rec.excitation
        if src.num_steps < slots:
            raise RigConfigError(f"{trial.where}.source: the recorded commands cover {src.num_steps} of {slots} slots")
        return Excitation(exc.name, src.rate, src.values[:slots], src.actuator_names, dict(exc.meta))
    if (exc.meta or {}).get("kind") == "free_decay":  # no commands: one zero row per slot at the recording's rate
        return Excitation(exc.name, rec.rate, np.zeros((slots, exc.values.shape[1])), exc.actuator_names,
                          dict(exc.meta))
    if abs(exc.rate - rec.rate) > RATE_TOLERANCE * rec.rate:
        raise RigConfigError(f"{trial.where}.excitation: rate {exc.rate:g} Hz differs from the recording's "
                             f"{rec.rate:g} Hz; give one command row per frame (set 'rate' in the excitation)")
    if exc.num_steps < slots:
        raise RigConfigError(f"{trial.where}.excitation: has {exc.num_steps} rows, the recording {slots} slots")
    return Excitation(exc.name, exc.rate, exc.values[:slots], exc.actuator_names, dict(exc.meta))


def split_recording(rig: Rig, trial: TrialSpec, rec: Recording) -> list[tuple[str, Trajectory, Excitation]]:
    """Cut a recording into the trial's parts: ``[(label, trajectory, excitation)]``.

    Raises:
        RigConfigError: too few valid frames in a training part, or excitations that do
            not fit the recording (rate, length).
    """
    traj = rec.trajectory
    steps = np.asarray(traj.steps)
    slots = int(steps[-1]) + 1
    out = []
    parts = _parts(rig, trial)
    full = next((e for _, e in parts if "scored_from_frame" in (e.meta or {})), None)
    for label, exc in parts:
        meta = dict(exc.meta or {})
        if meta.get("part") == "train" and full is not None:
            n_train = int(round(float(trial.split) * slots))
            e = _fit_excitation(full, slots, rec, trial)
            e = Excitation(exc.name, e.rate, e.values, e.actuator_names, meta)
            e = Excitation(e.name, e.rate, e.values[:n_train], e.actuator_names, {**meta, "frames": [0, n_train]})
            keep = steps < n_train
            t = Trajectory(traj.time[keep], traj.keypoints[keep], traj.valid[keep], traj.names, "real", e.name,
                           steps[keep], {**dict(traj.meta), "part": "train", "trial": trial.name},
                           kind=traj.kind, unit=traj.unit, frame=traj.frame)
        elif "scored_from_frame" in meta:
            n_train = int(round(trial.split * slots)) if isinstance(trial.split, float) else 0
            e = _fit_excitation(exc, slots, rec, trial)
            e = Excitation(e.name, e.rate, e.values, e.actuator_names,
                           {**meta, "scored_from_frame": n_train, "frames": [n_train, slots]})
            valid = traj.valid.copy()
            valid[steps < n_train] = False
            if not valid.any():
                continue
            t = Trajectory(traj.time, traj.keypoints, valid, traj.names, "real", e.name, steps,
                           {**dict(traj.meta), "part": "holdout", "trial": trial.name},
                           kind=traj.kind, unit=traj.unit, frame=traj.frame)
        else:
            e = _fit_excitation(exc, slots, rec, trial)
            t = Trajectory(traj.time, traj.keypoints, traj.valid, traj.names, "real", e.name, steps,
                           {**dict(traj.meta), "part": label, "trial": trial.name},
                           kind=traj.kind, unit=traj.unit, frame=traj.frame)
        if label == "train":
            n_valid = int(t.valid.all(axis=1).sum())
            if n_valid < MIN_TRAIN_FRAMES:
                raise RigConfigError(f"{trial.where}: only {n_valid} valid frames in the training part (need at "
                                     f"least {MIN_TRAIN_FRAMES}); the recording is too short or the keypoints are "
                                     "lost (check the tracker)")
        out.append((label, t, e))
    return out


def build_real_trial(rig: Rig, *, keep_frames: bool = False,
                     recordings: dict[str, Recording] | None = None) -> RealTrial:
    """Load every trial of ``rig`` and assemble the :class:`RealTrial` (train / holdout parts).

    The rig's excitations are replaced by the fitted ones (free-motion excitations sized
    to each recording's time slots), so the twin and the real trial agree.

    Args:
        rig: a rig with ``trials`` (from :func:`vid2sid_ros.rigs.load_rig`).
        keep_frames: keep camera frames (thumbnails for video) in ``RealTrial.frames``.
        recordings: already-read recordings by trial name (the others are loaded).

    Returns:
        The RealTrial; ``truth`` = the hidden parameters when the trials are sim2sim;
        ``meta["trials"]`` = per-trial source metadata and warnings.

    Raises:
        RigConfigError: a trial that cannot be read or split (one line naming file:key).
    """
    if not rig.trials:
        raise RigConfigError(f"{rig.source or rig.name}: trials: the rig has no trials")
    parts: dict[str, list[tuple[Trajectory, Excitation]]] = {"train": [], "holdout": []}
    frames: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {"trials": {}, "warnings": [], "tracking": {}}
    truth = None
    for trial in rig.trials:
        rec = (recordings or {}).get(trial.name)
        rec = checked_recording(rig, rec) if rec is not None else load_recording(rig, trial, keep_frames=keep_frames)
        if rec.truth is not None:
            truth = rec.truth
        split = split_recording(rig, trial, rec)
        slots = int(np.asarray(rec.trajectory.steps)[-1]) + 1
        train_rows = [e.num_steps for label, _, e in split if label == "train"]
        meta["trials"][trial.name] = {**rec.meta, "rate": rec.rate, "warnings": list(rec.warnings),
                                      "frame_scale": rec.frame_scale, "frame_every": rec.frame_every, "slots": slots,
                                      "train_frames": train_rows[0] if train_rows else 0}
        for label, traj, exc in split:
            parts[label].append((traj, exc))
            if rec.frames is not None and label == "train":
                frames[traj.trial_id] = rec.frames
        meta["warnings"] += [f"trial '{trial.name}': {w}" for w in rec.warnings]
        if isinstance(rec.meta.get("tracking"), dict):
            meta["tracking"][trial.name] = rec.meta["tracking"]
    if len(rig.trials) == 1:  # the single-clip keys the demo and report read
        only = next(iter(meta["trials"].values()))
        meta.update({k: only[k] for k in ("fps", "frames", "retimed", "slots", "train_frames") if k in only})
    rig.excitations = {label: [e for _, e in parts[label]] for label in ("train", "holdout")}
    src = ", ".join(f"{t.name} ({t.kind})" for t in rig.trials)
    try:
        return RealTrial([t for t, _ in parts["train"]], [e for _, e in parts["train"]],
                         [t for t, _ in parts["holdout"]], [e for _, e in parts["holdout"]], frames=frames,
                         source=f"rig '{rig.name}' trials: {src}", truth=truth, meta=meta)
    except ValueError as err:
        raise RigConfigError(f"{rig.source or rig.name}: trials: {err}") from None


def clip_real_trial(rig: Rig, clip: Any, *, train_fraction: float | None = None, retime: bool = True) -> RealTrial:
    """The RealTrial of an already-tracked clip for ``rig``'s first (video) trial.

    Args:
        rig: a rig whose first trial is a free-motion or commanded video trial.
        clip: a :class:`~vid2sid_ros.io.clip.TrackedClip`.
        train_fraction: override of the trial's split (fraction of time slots fitted).
        retime: repair dropped/repeated frames first.

    Raises:
        RigConfigError: no trial, too few valid training frames, excitation mismatch.
    """
    import dataclasses

    from ..io.sources import recording_from_clip
    from .loader import part_excitations

    if not rig.trials:
        raise RigConfigError(f"{rig.source or rig.name}: trials: the rig has no trial for the clip")
    spec = rig.trials[0]
    if train_fraction is not None:
        spec = dataclasses.replace(spec, split=float(train_fraction))
    rec = recording_from_clip(clip, name=spec.name, retime=retime)
    slots = int(np.asarray(rec.trajectory.steps)[-1]) + 1
    acts = next((e.actuator_names for sets in rig.excitations.values() for e in sets), ("u0",))
    exc = spec.excitation or Excitation("free_decay", clip.fps, np.zeros((slots, len(acts))), acts,
                                        meta={"kind": "free_decay"})
    one = dataclasses.replace(rig, trials=[spec], excitations=part_excitations(spec, exc))
    real = build_real_trial(one, recordings={spec.name: rec})
    rig.excitations = one.excitations
    return real

