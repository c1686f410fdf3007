"""Stand-in "real" trials from a twin with hidden parameters (sim2sim validation).

:func:`draw_ground_truth` draws the hidden parameters, seeded, uniformly in normalised
coordinates inside ``[low, high]`` (default 0.15..0.85 of each free parameter's range,
linear or log as its spec says) so that no truth hugs a bound (a bound-hugging truth
is recovered "for free" by any optimiser that clamps); frozen parameters keep their
nominal values.

:func:`make_sim2sim_trial` rolls the twin out at the truth on the rig's training and
holdout excitations and turns the result into a :class:`RealTrial`:

- ``noise="camera"`` (default for rigs that render): the real side goes through the
  camera — rendered frames, the sensor noise model (``sim.camera_model.SensorNoiseModel``:
  Gaussian/Poisson noise, blur, gamma, dropped frames), and the rig's marker tracker
  (``perception.markers.MarkerTracker``). A dropped frame repeats the previous one in its
  own time slot and is marked invalid (``meta["tracking"][trial]["dropped_frames"]`` counts
  them; the default model drops 1 %); every frame stays at its exact time, so the stand-in
  is never re-timed (``perception.frame_timing`` is for real clips only). The twin's sim side keeps using projected
  ground-truth keypoints (no render, much faster), so the real/sim gap contains the
  real tracking error exactly as with a real robot.
- ``noise="keypoint"``: projected keypoints plus i.i.d. Gaussian pixel noise of
  ``keypoint_sigma_px`` (for twins that cannot render, and for fast tests).
- ``noise="none"``: exact projected keypoints.
- ``noise="sensor"``: projected keypoints plus i.i.d. Gaussian pixel noise at the image
  measurement's default σ (1 px, :data:`~vid2sid_ros.core.trajectory.DEFAULT_NOISE`): the
  benchmark's choice for a rig none of whose trials measures image keypoints.

A rig config trial that measures something else than image keypoints is measured the way
its source measures it (:func:`vid2sid_ros.rigs.trials.trial_measurement`), whatever
``noise`` says for the image trials: a ``joint_csv`` trial (or a bag's ``measurement:
joints``) gives the twin's joint coordinates at the truth (rad for hinges, m for slides,
:func:`vid2sid_ros.sim.measurement.measure`), a ``mocap`` trial its markers' world positions
(m), each plus i.i.d. Gaussian noise at the trial's declared σ (``joint_csv.noise``,
``mocap.noise``; else :data:`~vid2sid_ros.core.trajectory.DEFAULT_NOISE`: 0.005 rad,
1 mm), or exact with ``noise="none"``. No frame is rendered for them. The σ applied per trial is in
``meta["measurement"][trial]`` (:func:`stand_in_measurements` says it before any rollout).

Every stand-in trial then goes through the check every trial source runs
(:func:`vid2sid_ros.perception.quality.check_tracking`): its tracked fraction per keypoint, the
causes and frames of what was lost, jumps and blobs unlike a marker join
``meta["tracking"][trial]``, and its warnings ``meta["warnings"]`` (which ``vid2sid calibrate``
prints before the run and ``result.json`` keeps).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation
from ..core.parameters import ParameterSet, draw_ground_truth  # noqa: F401  (re-exported)
from ..core.trajectory import DEFAULT_NOISE, Trajectory
from ..core.trial import RealTrial
from ..perception.quality import check_tracking, min_tracked_fraction
from ..sim.base import Twin, TwinError, in_image_valid
from ..sim.registry import Rig

__all__ = ["draw_ground_truth", "make_sim2sim_trial", "check_camera_noise", "NOISE_MODES", "Sim2SimError",
           "sim2sim_stand_in", "stand_in_measurements", "measures_image", "describe_stand_in", "sensor_sigma"]

NOISE_MODES = ("camera", "keypoint", "sensor", "none")


class Sim2SimError(RuntimeError):
    """The stand-in real trial could not be produced (twin diverged, tracker missing...)."""


def _tracked(rig: Rig, frames: np.ndarray, gt: Trajectory, *, seed: int, trial: str,
             noise_cfg: Mapping[str, Any] | None) -> tuple[Trajectory, dict[str, Any], np.ndarray]:
    """Noisy frames -> the rig's tracker (markers or centreline) -> trajectory (dropped frames invalid)."""
    try:
        from ..perception import rig_tracker
        from ..sim.camera_model import SensorNoiseModel
    except ImportError as err:
        raise Sim2SimError(f"camera noise needs perception.markers and sim.camera_model: {err}") from None
    cfg = noise_cfg if noise_cfg is not None else (rig.config or {}).get("noise")
    model = SensorNoiseModel.from_config(cfg) if cfg else SensorNoiseModel.default()
    noisy, dropped = model.apply(frames, seed=seed)
    if not rig.tracker:
        raise Sim2SimError(f"rig '{rig.name}' has no tracker configuration; use noise='keypoint'")
    tracker, _ = rig_tracker(rig)
    tr = tracker.track(noisy, time=gt.time, invalid_frames=dropped, source="real", trial_id=trial)
    if set(tr.names) != set(gt.names):
        raise Sim2SimError(f"tracker keypoints {tr.names} differ from the twin's {gt.names}")
    tr = Trajectory(gt.time, tr.keypoints, tr.valid, tuple(tr.names), "real", trial, gt.steps,
                    {"blobs": tr.meta.get("blobs", {}), "dropped": np.asarray(dropped, bool).tolist()}).select(gt.names)
    err = np.linalg.norm(tr.keypoints - gt.keypoints, axis=2)
    info = {"tracking_error_px_mean": float(np.nanmean(err)) if np.isfinite(err).any() else None,
            "tracking_error_px_max": float(np.nanmax(err)) if np.isfinite(err).any() else None,
            "invalid_fraction": float(1.0 - tr.valid.mean()), "dropped_frames": int(np.sum(dropped))}
    return tr, info, np.asarray(noisy)


def check_camera_noise(rig: Rig, twin: Twin | None = None) -> None:
    """Refuse camera-noise sim2sim when the stand-in render has nothing the rig's tracker looks for.

    A colour-marker tracker (``tracker.markers``) finds a keypoint only where a pixel's HSV
    colour is inside its range; a MuJoCo model with bare sites and grey links renders no
    such pixel, and the stand-in trial used to fail after every rollout was paid for
    ("no valid keypoint overlaps the real trial"). Each tracker marker's hue range and
    lowest saturation (OpenCV scale) is tested against every colour the render can show
    (:func:`~vid2sid_ros.sim.mujoco_model.rendered_colours`: the model's geoms and sites and
    the config's ``markers:`` spheres, which are in the compiled model). Lighting keeps hue
    and can only lower saturation, so no matching colour means no detection. Twins without
    a MuJoCo model (PyElastica) and non-colour trackers (centreline, ArUco) are not checked.

    Args:
        rig: the rig (tracker config, twin factory, config source for the message).
        twin: a twin of ``rig`` to inspect (default: one is built and closed).

    Raises:
        Sim2SimError: one line naming ``FILE:tracker.markers[i]`` and the fix (add a
            ``markers:`` entry on the keypoint's site, or use ``--noise keypoint``).
    """
    cfg = rig.tracker or {}
    specs = [m for m in (cfg.get("markers") or []) if isinstance(m, Mapping) and "hsv_lower" in m and "hsv_upper" in m]
    if cfg.get("kind", "markers") != "markers" or not specs:
        return
    own = twin is None
    twin = rig.make_twin() if own else twin
    try:
        model = getattr(twin, "model", None)
        try:
            import mujoco

            from ..sim.mujoco_model import rendered_colours
        except ImportError:
            return
        if not isinstance(model, mujoco.MjModel):
            return
        colours = rendered_colours(model)
    finally:
        close = getattr(twin, "close", None)
        if own and callable(close):
            close()
    import cv2

    hsv = (cv2.cvtColor(np.round(colours * 255).astype(np.uint8)[None], cv2.COLOR_RGB2HSV)[0].astype(int)
           if len(colours) else np.zeros((0, 3), int))
    src = rig.where
    all_markers = list(cfg.get("markers") or [])
    missing = []
    for m in specs:
        lo, hi = [int(x) for x in m["hsv_lower"]], [int(x) for x in m["hsv_upper"]]
        h = hsv[:, 0]
        in_hue = (h >= lo[0]) & (h <= hi[0]) if lo[0] <= hi[0] else (h >= lo[0]) | (h <= hi[0])
        if not np.any(in_hue & (hsv[:, 1] >= lo[1])):
            missing.append((all_markers.index(m), m, lo, hi))
    if not missing:
        return
    i, m, lo, hi = missing[0]
    site = dict((rig.config or {}).get("keypoints") or {}).get(m.get("name"), m.get("name"))
    more = f" (and {len(missing) - 1} more marker(s))" if len(missing) > 1 else ""
    raise Sim2SimError(
        f"{src}:tracker.markers[{i}]: marker '{m.get('name')}' (hue {lo[0]}..{hi[0]}, saturation >= {lo[1]}) matches "
        f"no colour of the model or of its markers: entries{more}, so the camera-noise stand-in render has nothing "
        f"to track; add a coloured sphere on its site to the config (markers: [{{name: m_{m.get('name')}, "
        f"site: {site}, rgba: [r, g, b, 1]}}] in the tracker's hue range) or use --noise keypoint")


def stand_in_measurements(rig: Rig) -> dict[str, Trajectory | None]:
    """What each trial of a rig config measures (:func:`vid2sid_ros.rigs.trials.trial_measurement`).

    Returns:
        ``{trial name: zero-row trajectory (kind, names, units, declared noise) | None (image keypoints)}``;
        empty for a rig without trials (a built-in rig: image keypoints).

    Raises:
        RigConfigError: a trial source that cannot be read.
    """
    from ..rigs.trials import trial_measurement

    return {t.name: trial_measurement(rig, t) for t in (getattr(rig, "trials", None) or ())}


def measures_image(rig: Rig, measured: Mapping[str, Trajectory | None] | None = None) -> bool:
    """True when some excitation of ``rig`` is measured as image keypoints (a trial with no
    ``measurement`` template, or an excitation of no trial: a built-in rig's), or it has none."""
    measured = stand_in_measurements(rig) if measured is None else measured
    excitations = [e for v in (getattr(rig, "excitations", None) or {}).values() for e in v]
    return not excitations or any(_measured_as(measured, e) is None for e in excitations)


def _measured_as(measured: Mapping[str | None, Trajectory | None], exc: Excitation) -> Trajectory | None:
    """What ``exc`` is measured as: its trial's entry (``meta["trial"]``), else the entry of no trial (None)."""
    return measured.get((exc.meta or {}).get("trial"), measured.get(None))


def sensor_sigma(like: Trajectory) -> np.ndarray:
    """σ (K,) of a trial's stand-in noise, in each keypoint's unit: the trial's declared noise
    (``like.meta["noise"]``), else the unit's default (:data:`~vid2sid_ros.core.trajectory.DEFAULT_NOISE`;
    :func:`vid2sid_ros.core.trajectory.noise_levels`, the σ the objective weights the trial by)."""
    from ..core.trajectory import noise_levels

    return noise_levels(like)


#: what a stand-in measurement of each kind is, as the protocol line names it
_MEASURED_AS = {"joints": "joint positions", "points": "mocap marker positions"}


def describe_stand_in(rig: Rig, noise: str, measured: Mapping[str, Trajectory | None] | None = None
                      ) -> tuple[str, str]:
    """How the stand-in real side is measured and what the twin's side is, for the protocol line.

    Args:
        rig: the rig. noise: a resolved :data:`NOISE_MODES` entry.
        measured: :func:`stand_in_measurements` of ``rig`` (read when None).

    Returns:
        ``(real side, sim side)``: e.g. ``(" rendered + sensor noise + marker tracker", "projected
        ground-truth keypoints")`` for an image rig, ``(", trial 'drive' as joint positions (rad) +
        Gaussian noise σ = 0.005 rad", "the twin's joint positions")`` for a joint-state rig.
    """
    measured = stand_in_measurements(rig) if measured is None else measured
    image = measures_image(rig, measured)
    real, sim = [], []
    if image:
        real.append({"camera": " rendered + sensor noise + marker tracker",
                     "keypoint": " + Gaussian keypoint noise",
                     "sensor": f" + Gaussian keypoint noise σ = {DEFAULT_NOISE['px']:g} px"}.get(noise, " (no noise)"))
        sim.append("projected ground-truth keypoints")
    others = {n: m for n, m in measured.items() if m is not None}
    for name, like in others.items():
        what = _MEASURED_AS.get(like.kind, like.kind)
        if noise == "none":
            how = "exact"
        else:
            sigma = sensor_sigma(like)
            how = "+ Gaussian noise σ = " + ", ".join(dict.fromkeys(f"{v:g} {u}" for v, u in zip(sigma, like.units)))
        real.append(f", trial '{name}' as {what} ({like.unit_label}) {how}")
    for kind in dict.fromkeys(m.kind for m in others.values()):
        sim.append(f"the twin's {_MEASURED_AS.get(kind, kind)}")
    return "".join(real), " and ".join(sim)


def _rows(traj: Trajectory, rows: np.ndarray, rate: float, first_step: int = 1) -> Trajectory:
    """Selected rows of an upsampled rollout, stamped at the command times like the twin's own frames
    (frame k at (k + first_step) / rate, :func:`~.misspecification.delayed_rows`)."""
    from dataclasses import replace

    return replace(traj, time=(np.arange(rows.size) + first_step) / rate, keypoints=traj.keypoints[rows],
                   valid=traj.valid[rows], steps=np.arange(rows.size))


def make_sim2sim_trial(rig: Rig, truth: Mapping[str, float], *, seed: int = 0, noise: str = "camera",
                       keypoint_sigma_px: float = 0.5, noise_config: Mapping[str, Any] | None = None,
                       twin: Twin | None = None, misspecify: Mapping[str, float] | str | None = None,
                       measured: Mapping[str | None, Trajectory | None] | None = None) -> RealTrial:
    """A stand-in real trial from ``rig``'s twin at ``truth`` (see module docstring).

    Args:
        rig: the rig (twin factory, excitations, tracker config).
        truth: hidden parameter values (full or free-only dict, SI).
        seed: noise seed.
        noise: one of :data:`NOISE_MODES`.
        keypoint_sigma_px: σ of the ``keypoint`` noise mode, px.
        noise_config: keyword arguments of ``SensorNoiseModel`` (default: the rig config's
            ``noise`` entry, else ``SensorNoiseModel.default()``); the seed is always ``seed``-derived.
        twin: reuse this twin instead of building one (its parameters are overwritten; a
            model-changing misspecification always builds its own).
        misspecify: ``{kind: size}`` or the CLI text (``"latency=0.02,frozen"``): the real side
            differs from the twin as :mod:`~vid2sid_ros.benchmark.misspecification` documents;
            what was done is in ``meta["misspecification"]`` (with the realised latency, s).
        measured: what each excitation's trial measures, by ``meta["trial"]`` (None: an excitation of
            no trial) -> zero-row trajectory | None (image keypoints); default
            :func:`stand_in_measurements` of ``rig``.

    Raises:
        Sim2SimError: unknown noise mode, a diverged rollout at the truth, missing tracker, a
            camera-noise render without the tracker's colours (:func:`check_camera_noise`), or a
            training trial with no valid keypoint in any frame (e.g. a ``camera`` misspecification
            that turns the camera away from the rig).
        MisspecificationError: a bad or inexpressible misspecification.
    """
    from .misspecification import CAMERA_KINDS, check_misspecification, parse_misspecify

    if noise not in NOISE_MODES:
        raise Sim2SimError(f"unknown noise mode {noise!r}; valid: {', '.join(NOISE_MODES)}")
    measured = stand_in_measurements(rig) if measured is None else measured
    mis = parse_misspecify(misspecify)
    camera_only = sorted(k for k in mis if k in CAMERA_KINDS)
    if camera_only and not measures_image(rig, measured):
        raise Sim2SimError(f"rig '{rig.name}': --misspecify {', '.join(camera_only)} changes what a camera sees, "
                           "but no trial of the rig measures image keypoints (its trials measure "
                           + ", ".join(sorted({m.kind for m in measured.values() if m is not None})) + ")")
    if "rolling_shutter" in mis:
        check_misspecification(rig, {"rolling_shutter": mis["rolling_shutter"]})
    twin, full, mis_info = _real_side_twin(rig, truth, mis, twin, check_render=noise == "camera"
                                           and measures_image(rig, measured))
    rng = np.random.default_rng([int(seed), 0xC0FFEE])
    mis_rng = np.random.default_rng([int(seed), 0xD209])
    out: dict[str, list[Trajectory]] = {"train": [], "holdout": []}
    frames_out: dict[str, np.ndarray] = {}
    tracking: dict[str, Any] = {}
    warnings: list[str] = []
    measured_as: dict[str, Any] = {}
    min_fraction = min_tracked_fraction(rig.config, rig.where)
    for label in ("train", "holdout"):
        for i, exc in enumerate(rig.excitations.get(label, [])):
            like = _measured_as(measured, exc)
            res, gt = _rollout_as_sampled(twin, exc, mis, mis_info, render=(noise == "camera" and like is None),
                                          like=like)
            if like is not None:  # measured as the trial's source measures it: joints / mocap markers
                sigma = sensor_sigma(like) if noise != "none" else np.zeros(gt.num_keypoints)
                kp = gt.keypoints + rng.normal(0.0, 1.0, size=gt.keypoints.shape) * sigma[None, :, None]
                tr = gt._with(keypoints=kp, valid=np.isfinite(kp).all(axis=2), source="real", trial_id=exc.name,
                              meta=dict(like.meta))
                measured_as[exc.name] = {"kind": like.kind, "units": list(like.units), "sigma": sigma.tolist()}
            elif noise == "camera":
                if res.frames is None:
                    raise Sim2SimError(f"rig '{rig.name}': the twin returned no frames; use noise='keypoint'")
                tr, info, noisy = _tracked(rig, res.frames, gt, seed=int(rng.integers(2 ** 31)), trial=exc.name,
                                           noise_cfg=noise_config)
                tracking[exc.name] = info
                if label == "train" and i == 0:
                    frames_out[exc.name] = noisy  # what the camera saw
            elif noise in ("keypoint", "sensor"):
                sd = keypoint_sigma_px if noise == "keypoint" else DEFAULT_NOISE["px"]
                kp = gt.keypoints + rng.normal(0.0, sd, size=gt.keypoints.shape)
                tr = Trajectory(gt.time, kp, in_image_valid(gt, twin), gt.names, "real", exc.name, gt.steps)
            else:
                tr = Trajectory(gt.time, gt.keypoints, in_image_valid(gt, twin), gt.names, "real", exc.name, gt.steps)
            if mis:
                tr = _misspecified_measurement(tr, exc.name, mis, mis_info, mis_rng)
            # the one tracking check of every source: tracked fraction per keypoint, jumps, blobs unlike a marker
            chk = check_tracking(tr, min_fraction=min_fraction)
            tracking.setdefault(exc.name, {}).update(chk.to_dict())
            warnings += [f"trial '{exc.name}': {w}" for w in chk.warnings]
            if label == "holdout":
                tr = _scored_continuation(tr, exc)
            out[label].append(tr)
    _check_stand_in_seen(rig, out["train"], mis)
    return RealTrial(out["train"], list(rig.excitations["train"]), out["holdout"],
                     list(rig.excitations.get("holdout", [])), frames=frames_out,
                     source=f"sim2sim {rig.name} seed {seed} noise {noise}", truth=dict(full),
                     meta={"noise": noise, "seed": seed, "keypoint_sigma_px": keypoint_sigma_px if noise == "keypoint"
                           else None, "tracking": tracking, "warnings": warnings,
                           **({"measurement": measured_as} if measured_as else {}),
                           **({"misspecification": {"kinds": dict(mis), "applied": mis_info}} if mis else {})})


def _real_side_twin(rig: Rig, truth: Mapping[str, float], mis: Mapping[str, float], twin: Twin | None, *,
                    check_render: bool) -> tuple[Twin, dict[str, float], dict[str, Any]]:
    """The stand-in's twin at ``truth`` with the misspecification ``mis`` applied: ``(twin, all parameter values
    (SI), what the misspecification did)``. A model-changing misspecification, or no ``twin``, builds its own
    (the caller's is never changed). ``check_render``: refuse a render without the tracker's colours now
    (:func:`check_camera_noise`), before any rollout."""
    from .misspecification import MODEL_KINDS, apply_model_changes, perturb_real_twin

    if any(k in mis for k in MODEL_KINDS) or twin is None:
        twin = rig.make_twin()
    if check_render:
        check_camera_noise(rig, twin)
    full = rig.parameters.complete(dict(truth))
    real_values, mis_info = (perturb_real_twin(twin, rig.parameters, full, mis,
                                               excitations=[e for v in rig.excitations.values() for e in v])
                             if mis else (full, {}))
    twin.set_parameters(real_values)
    if mis:
        bindings = _free_model_bindings(rig, twin)
        before = {(f, i): float(getattr(twin.model, f)[i]) for bs in bindings.values() for f, i, _ in bs}
        apply_model_changes(twin, mis_info)
        _truth_from_model(twin, rig.parameters, full, mis, mis_info, bindings, before)
    return twin, full, mis_info


def _free_model_bindings(rig: Rig, twin: Twin) -> dict[str, list[tuple[str, tuple[int, ...], float]]]:
    """``{free parameter: [(model field, index, ratio), ...]}`` of its MjModel targets (empty for a twin
    that does not expose its bindings, or a parameter with no model target)."""
    bound = getattr(twin, "_bindings", None) or {}
    return {n: [(b.field, tuple(b.index), float(b.ratio)) for b in bound.get(n, ()) if b.kind == "model"]
            for n in rig.parameters.free_names}


def _truth_from_model(twin: Twin, parameters: ParameterSet, full: dict[str, float], mis: Mapping[str, float],
                      mis_info: dict[str, Any], bindings: Mapping[str, list[tuple[str, tuple[int, ...], float]]],
                      before: Mapping[tuple[str, tuple[int, ...]], float]) -> None:
    """Make ``full`` (the truth scored against) what the real side has when a model-changing misspecification
    rewrote a field element a free parameter sets: that parameter's truth becomes the value read back from the
    model (recorded in ``mis_info["truth_from_model"]``).

    Raises:
        MisspecificationError: the changed element cannot be expressed as the parameter's value (it has
            several targets, or a ratio).
    """
    from .misspecification import MODEL_KINDS, MisspecificationError

    kinds = ", ".join(k for k in mis if k in MODEL_KINDS) or ", ".join(mis)
    moved: dict[str, Any] = {}
    for name, targets in bindings.items():
        for field, index, ratio in targets:
            now = float(getattr(twin.model, field)[index])
            if now == before[(field, index)]:
                continue
            element = f"{field}[{','.join(str(i) for i in index)}]"
            target = str(parameters[name].target)
            if len(targets) != 1 or ratio != 1.0:
                raise MisspecificationError(f"--misspecify {kinds}: changes {element} (target '{target}'), which free "
                                            f"parameter '{name}' "
                                            f"sets through {len(targets)} target(s) (ratio {ratio:g}); its truth "
                                            "cannot be stated as the parameter's value: freeze it or pick another "
                                            "misspecification")
            moved[name] = {"field": element, "target": target, "drawn": float(full[name]), "real": now}
            full[name] = now
    if moved:
        mis_info["truth_from_model"] = moved


def _rollout_as_sampled(twin: Twin, exc: Any, mis: Mapping[str, float], mis_info: dict[str, Any], *,
                        render: bool, like: Trajectory | None = None) -> tuple[Any, Trajectory]:
    """The twin's rollout of ``exc`` sampled as the real side's sensor would (latency, rolling shutter).

    Returns the rollout result and its measured trajectory: image keypoints, or what ``like``
    measures (:func:`vid2sid_ros.sim.measurement.measure`: joints, mocap points), the delayed
    one (the result's own trajectory is replaced too except for a latency-only rollout without
    frames or a ``like`` measurement). Records the realised delays in ``mis_info``;
    Sim2SimError on a diverged rollout.
    """
    from ..sim.measurement import measure
    from .misspecification import (LATENCY_UPSAMPLE, delayed_rows, first_step_of, rolling_shutter_frames,
                                   rolling_shutter_sample, upsampled_excitation)

    fine = "latency" in mis or "rolling_shutter" in mis
    res = twin.rollout(upsampled_excitation(exc) if fine else exc, render=render)
    if res.diverged:
        raise Sim2SimError(f"the twin diverged at the ground truth on '{exc.name}': {res.message}")
    try:
        gt = res.trajectory if like is None else measure(twin, res, like)
    except TwinError as err:  # the twin cannot measure what the trial does (a joint it lacks...)
        raise Sim2SimError(f"stand-in trial '{exc.name}': {err}") from None
    # the twin's frame convention: its first sample after one command step (the finger) or the initial
    # state (a user model); the delayed frames must follow it or a latency of 0 is a frame off
    first = first_step_of(res.trajectory.time, exc.rate) if fine else 1
    if "rolling_shutter" in mis and like is None:  # each keypoint at the time its image row is read (and any latency)
        readout, lat = float(mis["rolling_shutter"]), float(mis.get("latency", 0.0))
        kp, valid, read_t = rolling_shutter_sample(gt.keypoints, gt.valid, exc.num_steps, exc.rate, readout,
                                                   int(twin.camera.height), latency_s=lat, first_step=first)
        stamp = (np.arange(exc.num_steps) + first) / exc.rate
        lag = stamp[:, None] - read_t
        mis_info.setdefault("rolling_shutter", {"readout_s": readout, "upsample": LATENCY_UPSAMPLE,
                                                "lag_s": {}})["lag_s"][exc.name] = {
            "min": float(np.min(lag)), "max": float(np.max(lag)), "mean": float(np.mean(lag))}
        if "latency" in mis:
            mis_info["latency"] = {"requested_s": lat, "realised_s": lat, "upsample": LATENCY_UPSAMPLE}
        frames = (rolling_shutter_frames(res.frames, exc.num_steps, exc.rate, readout, latency_s=lat,
                                         first_step=first)
                  if res.frames is not None else None)
        from dataclasses import replace

        gt = replace(gt, time=stamp, keypoints=kp, valid=valid, steps=np.arange(exc.num_steps))
        res = type(res)(gt, frames, res.diverged, res.message)
    elif fine:  # a latency (or none: a joint/mocap trial of a rolling-shutter rig) on the fine rollout
        rows, realised = delayed_rows(exc.num_steps, mis.get("latency", 0.0), exc.rate, first_step=first)
        if "latency" in mis:
            mis_info["latency"] = {"requested_s": mis["latency"], "realised_s": realised,
                                   "upsample": LATENCY_UPSAMPLE}
        gt = _rows(gt, rows, exc.rate, first)
        if res.frames is not None:
            res = type(res)(gt, res.frames[rows], res.diverged, res.message)
    return res, gt


def _misspecified_measurement(tr: Trajectory, name: str, mis: Mapping[str, float], mis_info: dict[str, Any],
                              mis_rng: np.random.Generator) -> Trajectory:
    """The measured keypoints as a misspecified real side gives them (longer lens, measurement transforms)."""
    from .misspecification import focal_scaled, transform_real_trajectory

    if "focal" in mis and tr.kind == "image":  # the keypoints a lens (1 + SIZE) longer would measure
        fo = mis_info["focal"]
        tr = focal_scaled(tr, fo["cx"], fo["cy"], fo["scale"])
    tr, tinfo = transform_real_trajectory(tr, mis, mis_rng)
    for k, v in tinfo.items():
        mis_info.setdefault(k, {})[name] = v
    return tr


def _scored_continuation(tr: Trajectory, exc: Any) -> Trajectory:
    """A holdout trial split by time: samples before its ``scored_from_frame`` marked invalid (not scored)."""
    scored_from = int((exc.meta or {}).get("scored_from_frame", 0) or 0)
    if scored_from <= 0:
        return tr
    valid = np.asarray(tr.valid).copy()
    valid[np.asarray(tr.steps) < scored_from] = False
    return tr._with(valid=valid, meta=dict(tr.meta))


def _check_stand_in_seen(rig: Rig, train: Sequence[Trajectory], mis: Mapping[str, float]) -> None:
    """Sim2SimError when a training stand-in has no valid keypoint in any frame (nothing of it can be fitted)."""
    for tr in train:  # a stand-in nothing of which is seen cannot be fitted: refused before any run is written
        if not np.asarray(tr.valid).any():
            cause = (f"the stand-in camera moved by --misspecify camera={mis['camera']:g} (mm and mrad) sees none of "
                     "the keypoints; use a smaller size" if "camera" in mis else
                     "every keypoint is lost or outside the image at the ground truth")
            raise Sim2SimError(f"rig '{rig.name}': no valid keypoint in any of the {len(tr.valid)} frames of the "
                               f"stand-in trial '{tr.trial_id}': {cause}")


def sim2sim_stand_in(rig: Any, truth: Mapping[str, float], *, seed: int = 0, noise: str = "keypoint",
                     **kwargs: Any) -> Callable[[Excitation], Trajectory]:
    """``excitation -> trajectory`` of the sim2sim stand-in real rig at ``truth`` (the benchmark's stand-in).

    Each call runs :func:`~vid2sid_ros.benchmark.sim2sim.make_sim2sim_trial` on ``rig`` with
    the one excitation as its only training trial; the noise seed differs per call (``seed``,
    then ``seed + 1000 k``), so a designed trial's noise is independent of the others'. The
    excitation is measured as the rig's first training trial is (joint positions for a
    ``joint_csv`` rig, image keypoints for a filmed one: :func:`stand_in_measurements`).

    Raises:
        Sim2SimError: as ``make_sim2sim_trial`` (a diverged rollout at the truth...).
    """

    calls = {"k": 0}
    first = next(iter(rig.excitations.get("train", ())), None)
    like = stand_in_measurements(rig).get((first.meta or {}).get("trial")) if first is not None else None

    def run(exc: Excitation) -> Trajectory:
        calls["k"] += 1
        one = replace(rig, excitations={"train": [exc], "holdout": []}, trials=[])
        trial = make_sim2sim_trial(one, truth, seed=int(seed) + 1000 * calls["k"], noise=noise,
                                   measured={None: like}, **kwargs)
        return trial.train[0]

    return run
