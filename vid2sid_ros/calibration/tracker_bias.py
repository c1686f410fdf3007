"""The tracker's bias, measured on the twin: film the twin the way the real rig was filmed.

A real trial's keypoints come out of a camera and a tracker; the twin's come out of a
projection of its model points. The two measurement models differ: the tracker's
estimate of a marker (or of a centreline) depends on the pixel grid, the exposure (motion
blur), the optics and the noise, and that error is *systematic*: it is a function of the
pose and the motion, the same in the real video and in any video of the same motion. A
least-squares fit of projected keypoints to tracked ones absorbs the systematic part into
the parameters (on the finger, camera noise + marker tracker, 20 sim2sim seeds: actuator_gain
estimated high in 20 of 20, joint_friction outside its residual-based 95 % interval in 8 of
20, up to 3.7 of its standard deviations off), and no covariance computed from the residuals
sees it. On the finger the part that moves the parameters comes from the camera model
(blur, exposure, noise, together with the tracker's colour threshold): the same
estimate-bias computed from clean renders does not predict it, from renders through the camera
model with another noise seed it does.

Vid2Sid films both sides. :func:`twin_tracker_bias` does that once, at the identified
point: it renders the twin on each training excitation, passes the frames through the
rig's camera model (:class:`~vid2sid_ros.sim.camera_model.SensorNoiseModel`, the same
one that made a sim2sim real side; none for a real video, whose camera is not modelled)
and the rig's tracker, and returns the bias ``b = tracked − projected`` per frame and
keypoint (px). :func:`~vid2sid_ros.calibration.identifiability.check_identifiability`
adds it to the twin's projected keypoints, so the final residual and the Gauss–Newton
interval are those of a twin measured like the robot (a measurement-consistent residual;
the linearised effect of ``b`` on the estimate is ``(JᵀJ)⁻¹Jᵀb``, e.g. Ljung, *System
Identification*, 2nd ed., §8.3 on biased measurements; the GUM, JCGM 100:2008 §3.2.4,
asks that a recognised systematic effect be corrected and its correction's uncertainty
carried). The renders are diagnostics, like the identifiability check: the identified
values do not depend on them, so they are not charged to the calibration's budget and are
counted in the report's ``rollouts``.

The camera model's noise in the twin's render is one more noise draw: it is in the
measurement-consistent residual and so in the interval, not averaged away.

A real video's training trials were also compressed: a lossy codec blurs a small coloured marker's
colour (chroma subsampling, block transforms) and moves the tracker's centroid by a part of a pixel
(on a 160x120 mp4v clip of the rig's own twin, 0.19 px RMS on top of the 0.43 px of the clean render's
bias). When every training video shares one codec, the twin's clean renders are passed through that
codec (encoded and decoded at the clip's frame rate, :attr:`TwinCamera.codec`) before they are tracked;
a codec this machine cannot write leaves them clean (``TwinCamera.source`` says which).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation
from ..core.trajectory import Trajectory
from ..sim.base import Twin

__all__ = ["TwinCamera", "TrackerBiasError", "twin_tracker_bias", "twin_camera_for"]


class TrackerBiasError(RuntimeError):
    """The twin could not be filmed (no frames, a diverged rollout, tracker names that differ)."""


@dataclass
class TwinCamera:
    """How to film the twin like the real rig: a tracker factory and an optional camera model.

    Attributes:
        make_tracker: ``() -> tracker`` with ``track(frames, *, time, invalid_frames, ...) -> Trajectory``
            (a fresh tracker per clip: trackers keep per-stream state).
        sensor_model: a :class:`~vid2sid_ros.sim.camera_model.SensorNoiseModel` applied to the
            rendered frames before tracking, or None (clean renders).
        seed: noise seed of the camera model (the twin's render is a draw of its own).
        source: one line saying where the camera model came from (for the report).
        codec: ``(FourCC, container suffix, frame rate Hz)`` of the real videos: clean renders are encoded
            and decoded with it before they are tracked; None: tracked as rendered.
    """

    make_tracker: Callable[[], Any]
    sensor_model: Any | None = None
    seed: int = 0
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    codec: tuple[str, str, float] | None = None


def twin_camera_for(rig: Any, real: Any, *, real_video: bool = False) -> tuple[TwinCamera | None, str]:
    """The twin's camera for ``rig`` given how ``real`` was measured, or None and why not.

    Needs a rig with a ``tracker`` and image-keypoint (px) training trajectories. When
    ``real.meta["noise"] == "camera"`` (a sim2sim real side, made by the rig's camera model) the
    camera model is the rig config's ``noise`` entry (else ``SensorNoiseModel.default()``, as
    :func:`~vid2sid_ros.benchmark.sim2sim.make_sim2sim_trial` uses) with a seed of its own.
    Any other real side (a video of the robot) only with ``real_video``: the twin's renders
    are then tracked clean (the real camera is not modelled), passed through the videos' codec first when
    they share one (:attr:`TwinCamera.codec`). A sim2sim side measured without a tracker (``noise``
    ``keypoint`` or ``none``) never gets a bias term.

    Args:
        rig: a :class:`~vid2sid_ros.sim.registry.Rig` (or None: not applicable).
        real: the :class:`~vid2sid_ros.core.trial.RealTrial`.
        real_video: also film the twin for a real side not made by the rig's camera model.

    Returns:
        ``(TwinCamera, "")`` or ``(None, reason)``.
    """
    if rig is None or not getattr(rig, "tracker", None):
        return None, "the rig has no tracker"
    noise = (getattr(real, "meta", None) or {}).get("noise")
    if noise in ("keypoint", "none"):
        return None, f"the real keypoints were not tracked (sim2sim noise {noise!r})"
    if any(t.kind != "image" for t in real.train):
        return None, "the training trials are not image keypoints"
    if noise != "camera" and not real_video:
        return None, ("the real side was not made by the rig's camera model (set calibration.tracker_bias: true "
                      "to film the twin for a real video)")
    from ..perception import rig_tracker

    def make() -> Any:
        return rig_tracker(rig)[0]

    if noise == "camera":
        from ..sim.camera_model import SensorNoiseModel

        cfg = (getattr(rig, "config", None) or {}).get("noise")
        model = SensorNoiseModel.from_config(cfg) if cfg else SensorNoiseModel.default()
        seed = int((real.meta or {}).get("seed", 0) or 0)
        return TwinCamera(make, model, seed=10_007 + seed,
                          source="rendered, the rig's camera model (the one that made the real side), "
                                 "the rig's tracker"), ""
    codec = _video_codec(rig)
    if codec is not None:
        return TwinCamera(make, None, codec=codec,
                          source=f"rendered clean (the real camera is not modelled), passed through the real videos' "
                                 f"codec ({codec[0]}), the rig's tracker"), ""
    return TwinCamera(make, None, source="rendered clean (the real camera is not modelled), the rig's tracker"), ""


#: FourCCs a decoder reports for a stream that OpenCV's writer names otherwise (FFmpeg's MPEG-4 part 2)
_FOURCC_ALIASES = {"FMP4": "mp4v", "DIVX": "mp4v", "XVID": "mp4v", "H264": "avc1", "h264": "avc1"}


def _video_codec(rig: Any) -> tuple[str, str, float] | None:
    """``(FourCC, suffix, fps)`` shared by every video trial of ``rig`` whose codec this machine can write,
    else None (no video trial, several codecs, an unreadable file, or no writer for it)."""
    import os
    import tempfile

    import cv2

    found = set()
    for t in getattr(rig, "trials", None) or ():
        if getattr(t, "kind", None) != "video":
            continue
        path = Path(str(t.source["video"]["path"]))
        if not path.is_file():  # never open anything but a regular file again (a FIFO would block)
            return None
        cap = cv2.VideoCapture(str(path))
        try:
            if not cap.isOpened():
                return None
            v = int(cap.get(cv2.CAP_PROP_FOURCC))
            fps = float(cap.get(cv2.CAP_PROP_FPS)) or 30.0
        finally:
            cap.release()
        fourcc = "".join(chr((v >> 8 * i) & 0xFF) for i in range(4))
        if not (fourcc.isascii() and fourcc.isprintable() and fourcc.strip()):
            return None  # no codec the container names (raw frames, an unknown stream)
        found.add((_FOURCC_ALIASES.get(fourcc, fourcc), path.suffix or ".mp4", fps))
    if len(found) != 1:
        return None
    codec = found.pop()
    fd, probe = tempfile.mkstemp(suffix=codec[1])
    os.close(fd)
    try:  # a writer that cannot open here: the renders stay clean
        w = cv2.VideoWriter(probe, cv2.VideoWriter_fourcc(*codec[0]), codec[2], (16, 16))
        ok = w.isOpened()
        w.release()
    finally:
        os.unlink(probe)
    return codec if ok else None


def twin_tracker_bias(twin: Twin, excitations: Sequence[Excitation], physics: Mapping[str, float],
                      camera: TwinCamera) -> tuple[list[Trajectory], int]:
    """The tracker's bias on the twin at ``physics``, per excitation.

    Args:
        twin: the twin (its parameters are set to ``physics``).
        excitations: E excitations (the training ones).
        physics: physics parameter values (SI; measurement nuisances excluded).
        camera: how to film the twin (:class:`TwinCamera`).

    Returns:
        ``(bias, rollouts)``: E trajectories of the twin's steps whose ``keypoints`` are
        ``tracked − projected`` (T, K, 2) px, valid where both are (a frame the camera model
        dropped or the tracker lost is invalid), and the rollouts spent (one per excitation).

    Raises:
        TrackerBiasError: the twin returned no frames, diverged, or the tracker's keypoints
            are not the twin's.
    """
    out: list[Trajectory] = []
    for i, exc in enumerate(excitations):
        twin.set_parameters(dict(physics))
        if camera.sensor_model is None and camera.codec is not None:  # through the real videos' codec, streamed
            res, tracked = _film_encoded(twin, exc, camera.make_tracker(), camera.codec)
        elif camera.sensor_model is None:  # clean renders (a real video): tracked as they are made, none kept
            res, tracked = _film_streamed(twin, exc, camera.make_tracker())
        else:  # the camera model blurs and drops across frames: it takes the whole rendered trial
            res = twin.rollout(exc, render=True)
        if res.diverged:
            raise TrackerBiasError(f"the twin diverged while filming '{exc.name}': {res.message}")
        proj = res.trajectory
        if camera.sensor_model is not None:
            if res.frames is None:
                raise TrackerBiasError(f"the twin returned no frames for '{exc.name}' (render=True)")
            frames, dropped = camera.sensor_model.apply(res.frames, seed=camera.seed + 7919 * i)
            tracked = camera.make_tracker().track(frames, time=proj.time, invalid_frames=dropped, source="sim",
                                                  trial_id=exc.name)
        elif tracked is None or tracked.num_frames != proj.num_frames:
            raise TrackerBiasError(f"the twin returned no frames for '{exc.name}' (render=True)")
        else:
            tracked = replace(tracked, time=proj.time)
        if set(tracked.names) != set(proj.names):
            raise TrackerBiasError(f"tracker keypoints {tracked.names} differ from the twin's {proj.names}")
        tracked = tracked.select(proj.names)
        valid = np.asarray(tracked.valid) & np.asarray(proj.valid)
        bias = np.where(valid[:, :, None], np.asarray(tracked.keypoints) - np.asarray(proj.keypoints), 0.0)
        out.append(replace(proj, keypoints=bias, valid=valid))
    return out, len(excitations)


def _film_streamed(twin: Twin, exc: Excitation, tracker: Any) -> tuple[Any, Trajectory | None]:
    """``(rollout result, tracked trajectory or None)``: the twin rendered on ``exc`` with each frame
    handed to ``tracker.track`` as it is made (:func:`~vid2sid_ros.sim.base.rollout_frames`; the
    tracker runs in a helper thread fed through a queue of two frames), so at most a few camera
    frames are in memory whatever the trial's length. None when the twin rendered no frame.

    Raises:
        Whatever the tracker raised (re-raised here), or the twin's rollout error.
    """
    import queue
    import threading

    from ..sim.base import rollout_frames

    q: queue.Queue = queue.Queue(maxsize=2)
    done = object()
    box: dict[str, Any] = {}

    def frames():
        while (f := q.get()) is not done:
            yield f
        box["ended"] = True  # the end marker is taken: nothing more will come

    def consume():
        try:
            box["traj"] = tracker.track(frames(), source="sim", trial_id=exc.name)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            box["err"] = err
            # keep draining until the end marker (the renderer must never block on a full queue), unless the
            # tracker failed after taking it (e.g. "no frames" from a twin that rendered none): then it came
            while not box.get("ended") and q.get() is not done:
                pass

    worker = threading.Thread(target=consume, name="tracker-bias", daemon=True)
    worker.start()
    try:
        res = rollout_frames(twin, exc, lambda k, f: q.put(np.array(f, copy=True)))
    finally:
        q.put(done)
        worker.join()
    err = box.get("err")
    if err is not None and "no frames" not in str(err):
        raise err
    return res, box.get("traj")


def _film_encoded(twin: Twin, exc: Excitation, tracker: Any, codec: tuple[str, str, float]
                  ) -> tuple[Any, Trajectory | None]:
    """``(rollout result, tracked trajectory or None)``: the twin rendered on ``exc``, each frame encoded with
    ``codec`` (FourCC, suffix, fps) into a temporary file as it is made, then decoded one frame at a time into
    ``tracker.track`` (at most a few frames in memory); None when the twin rendered no frame.

    Raises:
        TrackerBiasError: the encoder could not be opened or fewer frames decoded than were rendered.
    """
    import os
    import tempfile

    import cv2

    from ..sim.base import rollout_frames

    fd, path = tempfile.mkstemp(suffix=codec[1], prefix="vid2sid_twin_")
    os.close(fd)
    box: dict[str, Any] = {"n": 0}

    def write(_k: int, frame: np.ndarray) -> None:
        if "w" not in box:
            box["w"] = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*codec[0]), codec[2],
                                       (int(frame.shape[1]), int(frame.shape[0])))
            if not box["w"].isOpened():
                raise TrackerBiasError(f"the {codec[0]} encoder cannot write the twin's frames")
        box["w"].write(cv2.cvtColor(np.asarray(frame, np.uint8), cv2.COLOR_RGB2BGR))
        box["n"] += 1

    try:
        try:
            res = rollout_frames(twin, exc, write)
        finally:
            if "w" in box:
                box["w"].release()
        if box["n"] == 0:
            return res, None

        def frames():
            cap, got = cv2.VideoCapture(path), 0
            try:
                while got < box["n"]:
                    ok, f = cap.read()
                    if not ok:
                        raise TrackerBiasError(f"{got} of {box['n']} frames of the twin decoded after {codec[0]}")
                    got += 1
                    yield cv2.cvtColor(f, cv2.COLOR_BGR2RGB)
            finally:
                cap.release()

        return res, tracker.track(frames(), source="sim", trial_id=exc.name)
    finally:
        os.unlink(path)


def add_bias(sim: Sequence[Trajectory], bias: Sequence[Trajectory]) -> list[Trajectory]:
    """The twin's measured trajectories plus the tracker bias, paired by command step.

    Samples without a bias estimate (the tracker lost the twin's marker) keep the
    projected value. ``sim`` and ``bias`` are per excitation, same order.
    """
    out = []
    for s, b in zip(sim, bias):
        steps = {int(k): i for i, k in enumerate(np.asarray(b.steps))}
        kp = np.array(s.keypoints, dtype=float, copy=True)
        bn = b.select(s.names) if tuple(b.names) != tuple(s.names) else b
        j = np.array([steps.get(int(k), -1) for k in np.asarray(s.steps)], dtype=np.int64).reshape(-1)
        i = np.flatnonzero(j >= 0)  # the sim's rows with a bias row (distinct rows: one addition each)
        kp[i] += np.where(np.asarray(bn.valid)[j[i]][..., None], bn.keypoints[j[i]], 0.0)
        out.append(replace(s, keypoints=kp))
    return out
