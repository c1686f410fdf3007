"""The rig config schema: ONE table of keys, used to validate a file and to write its reference page.

Every key of a rig config is one :class:`Key` row of :data:`KEYS` (path, type, unit,
default, meaning). :func:`validate_tree` walks a loaded YAML document against the table
and reports the FIRST problem as ``file:key: expected X, got Y (did you mean Z?)``
(nearest valid key by :func:`difflib.get_close_matches`); :func:`reference_markdown`
renders the same table for ``docs/rig_config.md`` (a test keeps the page in sync).

Paths: ``a.b`` = key ``b`` of mapping ``a``; ``a[]`` = every item of list ``a``;
``a.*`` = any key of the free-form mapping ``a`` (e.g. keypoint names). Trial source
kinds (``trials[].source.<kind>``) add their own rows from :mod:`vid2sid_ros.io.sources` (:func:`source_keys`).

Types: ``string``, ``number`` (finite int or float), ``integer``, ``boolean``, ``path``
(a file: absolute, relative to the config file, or ``pkg:`` = inside the installed
``vid2sid_ros`` package), ``mapping``, ``list``, ``numbers[N]`` (N numbers), ``strings``
(a list of strings), ``null``; ``a | b`` = either; choices are listed in ``choices``.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

__all__ = ["Key", "KEYS", "RigConfigError", "REQUIRED", "validate_tree", "describe_value", "reference_markdown",
           "source_keys", "all_keys"]


class RigConfigError(ValueError):
    """A rig config is invalid. The message is one line: ``file:key: what was expected, what was found``."""


class _Required:
    def __repr__(self) -> str:
        return "required"


#: marker default of a key that must be given
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Key:
    """One key of the rig config.

    Attributes:
        path: dotted path (``trials[].source``; ``*`` = any name).
        type: accepted types, ``|``-separated (see module docstring).
        unit: SI unit of numbers (``s``, ``m``, ``px``...), ``""`` for none.
        default: value when absent (:data:`REQUIRED` = must be given; None = absent/none).
        doc: meaning, one or two sentences.
        choices: allowed string values (empty = any).
        alias_of: the documented key this one spells another way (a source option beside its kind
            key: ``trials[].source.fps`` = ``trials[].source.video.fps``); validated, not a row of
            the reference table ("" = a key of its own).
    """

    path: str
    type: str
    unit: str = ""
    default: Any = None
    doc: str = ""
    choices: tuple[str, ...] = ()
    alias_of: str = ""


def _nuisance_keys(at: str, doc: str = "") -> tuple[Key, ...]:
    """The rows of a ``nuisance`` block at ``at`` (the top level, or inside ``calibration``)."""
    rows = [
        Key(at, "mapping", default={}, doc=doc or "Measurement nuisances identified with the physics and reported "
            "apart: `latency` (measurement delay behind the commands: the camera's, the motion capture's or the "
            "joint-state log's; default on when the trials are commanded) and `marker_offsets` (a constant offset "
            "per keypoint; default on for recorded trials), interpreted by "
            "`vid2sid_ros/calibration/nuisance.py` and read alike by `vid2sid calibrate`, `demo`, `benchmark` and "
            "`calibrator_node`. Camera-pose nuisances are `camera.*` parameters.")]
    for name, unit, bounds in (("latency", "s", "[-0.05, 0.05]"),
                               ("marker_offsets", "px or m", "[-5, 5] px, [-0.01, 0.01] m for motion capture")):
        rows += [Key(f"{at}.{name}", "boolean | mapping", doc="`true`/`false` or `{enabled, bounds}`."),
                 Key(f"{at}.{name}.enabled", "boolean", default=True, doc="On (when the block is given)."),
                 Key(f"{at}.{name}.bounds", "numbers[2]", unit, bounds, "[lower, upper] with lower < 0 < upper.")]
    return tuple(rows)


_EXC_DOC = ("an excitation profile: `kind` (sine, chirp, step, multisine, csv) and its keys "
            "(see `excitations.*` below)")

#: the whole rig config (trial source kinds add theirs: :func:`source_keys`)
KEYS: tuple[Key, ...] = (
    # -- identity -----------------------------------------------------------------------------
    Key("rig", "string", default="the file name", doc="Identifier of the rig (letters, digits, `_`, `-`). A "
        "built-in rig name (finger, tentacle, tentacle_water, pendulum) as the whole config selects that rig. "
        "Loading a config never runs code: a `module:function` reference is refused unless `--allow-code` "
        "or `VID2SID_ALLOW_CODE=1` is given."),
    Key("rig_options", "mapping", default={}, doc="Legacy: options of a built-in twin (same as `model.options`) or "
        "keyword arguments of an allowed `module:function` rig."),
    Key("rig_options.*", "string | number | boolean | list | mapping | null", doc="One option."),
    Key("description", "string", default="", doc="What moves and what the keypoints are, in plain words: report "
        "titles and captions and VLM prompts use it."),
    # -- model --------------------------------------------------------------------------------
    Key("model", "path | mapping", default=REQUIRED, doc="The twin: an MJCF (`.xml`) or URDF (`.urdf`) file, or a "
        "mapping with exactly one of `path`, `robot_description`, `builtin`."),
    Key("model.path", "path", doc="MJCF or URDF file (as the short form)."),
    Key("model.robot_description", "string", doc="URDF XML text (the `robot_description` ROS parameter), compiled "
        "by MuJoCo; mesh paths relative to the config file."),
    Key("model.builtin", "string", doc="A twin shipped with the package, by registry name.",
        choices=("finger", "tentacle", "tentacle_water", "toy")),
    Key("model.options", "mapping", default={}, doc="Options of the built-in twin (its `default_config()` keys, e.g. "
        "`width`, `height`, `geometry`)."),
    Key("model.options.*", "string | number | boolean | list | mapping | null", doc="One option."),
    Key("max_physics_timestep", "number", "s", 0.004, "Upper bound of the fixed physics step of a model file "
        "(each frame period is split into equal substeps no longer than this, or than the model's own "
        "`<option timestep>` when that is finer; the exported model keeps its own timestep)."),
    # -- parameters ---------------------------------------------------------------------------
    Key("parameters", "path | mapping", default="the built-in twin's spec", doc="Parameter spec: a YAML file "
        "(`parameters: [{name, unit, lower, upper, nominal, target, kind, scale, frozen, meaning}]`) or the same "
        "inline, as `{parameters: [...]}` or `{NAME: {unit, lower, upper, nominal, ...}}`. Required for model files."),
    Key("parameters.*", "mapping | list | string", doc="One parameter `{unit, lower, upper, nominal, target, kind, "
        "scale, frozen, meaning}` (or the `parameters` list / `rig` name of the file form)."),
    Key("free", "strings", default="every unfrozen parameter", doc="Calibrate exactly these parameters; the "
        "others keep their nominal values."),
    # -- what is observed ---------------------------------------------------------------------
    Key("keypoints", "mapping", default=REQUIRED, doc="Keypoint name -> site or body of the model, in trajectory "
        "order. Required for model files (built-in twins define theirs)."),
    Key("keypoints.*", "string", doc="The site (or body) whose world position is the keypoint."),
    Key("markers", "list", default=[], doc="Colour markers added to the model for tracking, without editing the "
        "model file (small spheres that do not collide)."),
    Key("markers[].name", "string", default=REQUIRED, doc="Marker (and keypoint) name."),
    Key("markers[].site", "string", doc="Site the marker sits on (give `site` or `body`)."),
    Key("markers[].body", "string", doc="Body the marker sits on, at its origin."),
    Key("markers[].rgba", "numbers[4]", "1", [1.0, 0.0, 0.0, 1.0], "Colour, red green blue alpha in [0, 1]."),
    Key("markers[].radius", "number", "m", 0.01, "Sphere radius."),
    Key("markers[].pos", "numbers[3]", "m", [0.0, 0.0, 0.0], "Offset of the marker centre from the site's (or "
        "body's) frame origin, in that frame."),
    Key("actuators", "strings | list", default="the model's actuator order", doc="Actuator order of excitation "
        "columns. Each item is the name of an actuator of the model, or a mapping that ADDS an actuator to the "
        "model (a URDF has no MuJoCo actuators): `{name, joint, kind, gear, kp, kv, ctrlrange, forcerange}`."),
    Key("actuators[].name", "string", default=REQUIRED, doc="Actuator name (the excitation column)."),
    Key("actuators[].joint", "string", default=REQUIRED, doc="Joint it drives."),
    Key("actuators[].kind", "string", default="motor", choices=("motor", "position", "velocity"),
        doc="motor: force/torque = gear x command; position: servo to the command (kp, kv); velocity: kv."),
    Key("actuators[].gear", "number", "N*m or N per unit", 1.0, "Transmission gear (the motor's gain; a "
        "parameter target `actuator_gear[NAME,0]` can free it)."),
    Key("actuators[].kp", "number", "N*m/rad or N/m", 10.0, "Position gain (kind position)."),
    Key("actuators[].kv", "number", "N*m*s/rad or N*s/m", 1.0, "Velocity gain (kind position or velocity)."),
    Key("actuators[].ctrlrange", "numbers[2]", "command units", None, "Command limits [lower, upper]."),
    Key("actuators[].forcerange", "numbers[2]", "N*m or N", None, "Force limits [lower, upper]."),
    # -- camera -------------------------------------------------------------------------------
    Key("camera", "mapping", default={}, doc="Pinhole camera that films the robot; the same camera projects the "
        "twin's keypoints and renders its frames. Intrinsics from `camera_info` or the fields below."),
    Key("camera.camera_info", "path", doc="`sensor_msgs/CameraInfo` YAML as written by ROS `camera_calibration` "
        "(`image_width`, `image_height`, `camera_matrix`, `distortion_model: plumb_bob`, "
        "`distortion_coefficients`)."),
    Key("camera.width", "integer", "px", 640, "Image width (the rig's `make_twin(width=, height=)` renders another "
        "size with the same view: intrinsics scaled with the image, `fx` and `cx` by width / `camera.width`)."),
    Key("camera.height", "integer", "px", 480, "Image height."),
    Key("camera.fx", "number", "px", doc="Focal length along x (default: from `fovy`)."),
    Key("camera.fy", "number", "px", doc="Focal length along y (default: `fx`)."),
    Key("camera.cx", "number", "px", doc="Principal point column (default: image centre)."),
    Key("camera.cy", "number", "px", doc="Principal point row (default: image centre)."),
    Key("camera.fovy", "number", "deg", 45.0, "Vertical field of view, when `fx`/`fy` are not given."),
    Key("camera.distortion", "list", "1", [0.0, 0.0, 0.0, 0.0, 0.0], "plumb_bob coefficients [k1, k2, p1, p2, k3] "
        "(or the 8 of rational_polynomial), OpenCV's model; the twin's render is distorted the same way."),
    Key("camera.pose", "mapping", doc="Camera in the world (REP 103). Pose components can be nuisance parameters "
        "with targets `camera.x`, `camera.y`, `camera.z`, `camera.roll`, `camera.pitch`, `camera.yaw` (m, rad); the "
        "intrinsics too (`camera.fx`, `camera.fy`, `camera.cx`, `camera.cy` px, `camera.k1` ... `camera.k3`)."),
    Key("camera.pose.position", "numbers[3]", "m", REQUIRED, "Optical centre in the world frame."),
    Key("camera.pose.look_at", "numbers[3]", "m", doc="A world point on the optical axis (or give `rpy`)."),
    Key("camera.pose.up", "numbers[3]", "1", [0.0, 0.0, 1.0], "World direction shown upwards in the image."),
    Key("camera.pose.rpy", "numbers[3]", "rad", doc="Roll, pitch, yaw of the camera body (x forward, z up) in the "
        "world, instead of `look_at`."),
    Key("camera.name", "string", doc="A camera of a built-in twin's model (e.g. the finger's `front`)."),
    Key("projection", "mapping", default={}, doc="Legacy planar camera: the image plane is parallel to the motion "
        "plane (x right, z up). Its fields can be nuisance parameters (`camera.px_per_m` ...)."),
    Key("projection.anchor", "string", doc="Site or body whose position `origin_x`/`origin_y` refer to."),
    Key("projection.width", "integer", "px", 640, "Image width."),
    Key("projection.height", "integer", "px", 480, "Image height."),
    Key("projection.origin_x", "number", "px", doc="Image column where the anchor projects."),
    Key("projection.origin_y", "number", "px", doc="Image row where the anchor projects (negative: above the frame)."),
    Key("projection.px_per_m", "number", "px/m", doc="Image scale at the anchor's depth."),
    Key("projection.roll", "number", "rad", 0.0, "Camera roll about its optical axis."),
    Key("projection.distance", "number", "m", 0.0, "Camera distance to the anchor plane; 0 = orthographic."),
    Key("projection.radial_k1", "number", "1", 0.0, "First radial distortion coefficient."),
    Key("projection.drift_x", "number", "px/s", 0.0, "Horizontal camera drift during a clip."),
    Key("projection.drift_y", "number", "px/s", 0.0, "Vertical camera drift during a clip."),
    # -- tracking -----------------------------------------------------------------------------
    Key("tracker", "mapping", default="the built-in twin's", doc="How keypoints are found in real (and rendered) "
        "frames: colour markers or a soft body's centreline."),
    Key("tracker.kind", "string", default="markers", choices=("markers", "centerline"), doc="Tracker."),
    Key("tracker.markers", "list", doc="Colour blobs to track (kind markers)."),
    Key("tracker.markers[].name", "string", default=REQUIRED, doc="Keypoint name."),
    Key("tracker.markers[].hsv_lower", "numbers[3]", "1", REQUIRED, "Lower HSV bound, OpenCV scale (H 0-180, S, V "
        "0-255); a lower hue above the upper hue wraps through 0 (red)."),
    Key("tracker.markers[].hsv_upper", "numbers[3]", "1", REQUIRED, "Upper HSV bound."),
    Key("tracker.markers[].min_area_px", "number", "px^2", 6, "Smallest blob."),
    Key("tracker.markers[].max_area_px", "number", "px^2", doc="Largest blob."),
    Key("tracker.aruco", "list", doc="ArUco tags to track: `{name, id, dictionary}`."),
    Key("tracker.aruco[].name", "string", default=REQUIRED, doc="Keypoint name."),
    Key("tracker.aruco[].id", "integer", default=REQUIRED, doc="Tag id."),
    Key("tracker.aruco[].dictionary", "string", default="DICT_4X4_50", doc="OpenCV ArUco dictionary."),
    Key("tracker.min_area_px", "number", "px^2", 6, "Default smallest blob of every marker."),
    Key("tracker.max_area_px", "number", "px^2", doc="Default largest blob."),
    Key("tracker.roi_radius_px", "number", "px", 24, "Search window radius around the last detection."),
    Key("tracker.*", "string | number | boolean | list | mapping | null", doc="Other keys of the tracker kind "
        "(centerline: see `vid2sid_ros/perception/centerline.py`); checked by the tracker itself."),
    # -- excitation ---------------------------------------------------------------------------
    Key("excitations", "mapping", default="the built-in twin's", doc="Named excitation profiles, reusable by "
        "trials (`NAME: {kind, ...}`); or the legacy sets `{train: [...], holdout: [...]}` of a built-in twin."),
    Key("excitations.*", "mapping | list", doc="A profile: `kind` plus `name`, `duration` (s), `rate` (Hz), "
        "`offset`, `actuator` and the kind's keys: sine `amplitude frequency phase`; chirp `amplitude f0 f1` (linear "
        "sweep f0 -> f1 Hz); step `amplitude t_step t_release`; multisine `amplitude frequencies seed` (seeded "
        "uniform phases, peak normalised to the amplitude); csv `path` (header row, columns = actuators, optional "
        "uniform `time` column giving the rate; one row per command step, held over its period). Formulas and "
        "timing: \"Excitations\" above. Or a list of profiles (legacy set)."),
    # -- trials -------------------------------------------------------------------------------
    Key("trials", "list", default="one sim2sim trial per built-in excitation", doc="The recorded trials of the "
        "robot. Physics parameters are shared by all; per-trial initial states and time offsets are per trial."),
    Key("trials[].name", "string", default="t0, t1, ...", doc="Trial id (unique)."),
    Key("trials[].source", "mapping", default=REQUIRED, doc="Where the trial's measurements come from: exactly one "
        "source kind (below) as key; its options either inside its block or beside it "
        "(`{video: clip.mp4, fps: 30}` = `{video: {path: clip.mp4, fps: 30}}`)."),
    Key("trials[].excitation", "string | mapping | null", default="none", doc="The commands sent during the trial: "
        "a name from `excitations`, an inline profile, or `none` (free motion, zero commands over the recording)."),
    Key("trials[].init", "mapping", default={}, doc="Initial state of this trial: `qpos[joint]` / `qvel[joint]` "
        "(optionally `qpos[joint,component]`) -> a number, or `free` to identify it as a per-trial nuisance "
        "parameter `<trial>_qpos_<joint>` (training trials only: a held-out trial is never fitted), which starts at 0 clamped into its bounds (else their middle), not at "
        "the pose of the first frame: for a free decay give `init_bounds` or `calibration.start` values."),
    Key("trials[].init.*", "number | string", "rad | m | rad/s | m/s", doc="Joint coordinate (rad for hinge, m "
        "for slide; per second for qvel), or `free`."),
    Key("trials[].init_bounds", "mapping", doc="Bounds of free initial-state coordinates: `qpos[joint]: [lower, "
        "upper]` (default: the joint range, else [-pi, pi] rad / [-1, 1] m; qvel [-10, 10])."),
    Key("trials[].init_bounds.*", "numbers[2]", "rad | m | rad/s | m/s", doc="[lower, upper]."),
    Key("trials[].frames", "mapping", default={"start": 0, "stop": None}, doc="Frame range of the recording used."),
    Key("trials[].frames.start", "integer", "frame", 0, "First frame used."),
    Key("trials[].frames.stop", "integer | null", "frame", None, "One past the last frame used; null = to the end."),
    Key("trials[].time_offset", "number", "s", 0.0, "Time from the initial state to the first used frame."),
    Key("trials[].split", "string | mapping", default="train", choices=("train", "holdout"), doc="`train` (fitted), "
        "`holdout` (the whole trial held out, scored at the end) or `{train_fraction: f}` (the first f of the "
        "trial's time fitted, the rest scored as holdout)."),
    Key("trials[].split.train_fraction", "number", "1", 0.6, "Fraction of the trial's time slots fitted, in "
        "(0, 1]."),
    Key("trial", "mapping", doc="Legacy single trial (`video`, `fps`, `excitation`, `train_fraction`, "
        "`start_frame`, `max_frames`, `repair_frame_timing`, `background_region`, `tracker`); read as "
        "`trials: [...]` with one video trial."),
    Key("trial.video", "path", doc="Legacy: the clip."),
    Key("trial.fps", "number | null", "Hz", None, "Legacy: frame rate override."),
    Key("trial.excitation", "string | mapping | null", default="none", doc="Legacy: as `trials[].excitation`."),
    Key("trial.train_fraction", "number", "1", 0.6, "Legacy: as `trials[].split.train_fraction`."),
    Key("trial.start_frame", "integer", "frame", 0, "Legacy: as `trials[].frames.start`."),
    Key("trial.max_frames", "integer | null", "frame", None, "Legacy: frames used after `start_frame`."),
    Key("trial.repair_frame_timing", "boolean", default=True, doc="Legacy: as the video source's option."),
    Key("trial.background_region", "numbers[4]", "px", doc="Legacy: as the video source's option."),
    Key("trial.tracker", "mapping", doc="Legacy: as the top-level `tracker`."),
    Key("trial.tracker.*", "string | number | boolean | list | mapping | null", doc="Tracker keys."),
    Key("real", "mapping", doc="Legacy calibrate config: the real trial, one of `sim2sim: {seed, truth, noise, "
        "truth_range}`, `trajectory: FILE.json` (a RealTrial JSON), `bag: DIR | {path, train, holdout}`."),
    Key("real.sim2sim", "mapping | null", doc="A stand-in real trial: the twin at hidden parameters (as the "
        "sim2sim source)."),
    Key("real.sim2sim.*", "string | number | list | mapping | null", doc="seed, truth, noise, truth_range."),
    Key("real.trajectory", "path", doc="A RealTrial JSON file."),
    Key("real.bag", "path | mapping", doc="A rosbag2 recorded by `vid2sid bringup`."),
    Key("real.bag.*", "string | list", doc="path, train, holdout (trial ids)."),
    # -- calibration --------------------------------------------------------------------------
    *_nuisance_keys("nuisance"),
    Key("calibration", "mapping", default={}, doc="Budgets and switches of `vid2sid calibrate` (command-line flags "
        "override them)."),
    Key("calibration.iterations", "integer", default=10, doc="Proposal iterations after the start point."),
    Key("calibration.rollout_budget", "integer | null", "rollouts", 40, "Twin rollouts the calibration may spend "
        "(one per training trial per evaluation); null = unlimited."),
    Key("calibration.seed", "integer", default=0, doc="Seed of proposers (and of the sim2sim truth)."),
    Key("calibration.identifiability", "boolean", default=True, doc="Sensitivity check at the start (diagnostic "
        "rollouts, not charged)."),
    Key("calibration.final_identifiability", "boolean", default=True, doc="The same at the result, with "
        "per-parameter uncertainty."),
    Key("calibration.tracker_bias", "boolean | null", default=None, doc="With final_identifiability: film the "
        "twin at the result like the real rig (render, camera model, tracker) and carry the tracker's bias into "
        "the interval (one diagnostic rollout per training trial); null = only for a sim2sim real side made by "
        "the rig's camera model, true = also for a real video (clean renders, through the videos' codec when they "
        "share one), false = never. Left null on a real video, the bias is still measured for the residual "
        "diagnosis, as a candidate cause of its own."),
    Key("calibration.start", "mapping", default={"kind": "nominal"}, doc="How the search starts: `{kind: "
        "multistart | nominal, points, guess}` (kind defaults to multistart when `points` is given) or start "
        "values `{PARAMETER: value}`."),
    Key("calibration.start.*", "string | number | integer | null", doc="`kind`, `points` (multistart rollouts "
        "charged to the budget), `guess` (a named start plugin, e.g. `pendulum_circle`) or a parameter value."),
    Key("calibration.active_learning", "boolean | mapping", default=False, doc="Design the next trial when the "
        "identifiability check flags parameters that trade off (docs/active_learning.md); `true` = on with defaults. "
        "In sim2sim the stand-in runs it and it joins the training data; on recorded data it is saved as a "
        "recommendation (`designed_excitation.csv`, `designed_trial.yaml`). `--active-learning` turns it on."),
    Key("calibration.active_learning.enabled", "boolean", default=True, doc="Active learning on (when the block "
        "is given)."),
    Key("calibration.active_learning.max_trials", "integer", "trials", 1, "Designed trials at most."),
    Key("calibration.active_learning.after_iteration", "integer", "iterations", 4, "Proposal iterations before "
        "each design."),
    Key("calibration.active_learning.criterion", "string", default="d_optimal", doc="Design criterion: "
        "`d_optimal` (log det of the information on the flagged parameters, normalised; causes the diagnosis ties "
        "with no parameter flagged are separated anyway) or `separation` (always: the trial that best separates "
        "the predictions of the causes the residual diagnosis cannot tell apart).",
        choices=("d_optimal", "separation")),
    Key("calibration.active_learning.trigger", "string", default="flagged", doc="`flagged` (design only when the "
        "identifiability check reports a weak direction, the residual diagnosis ties causes, or the proposer asks "
        "for an excitation change) or `always` (at `after_iteration`).", choices=("flagged", "always")),
    Key("calibration.active_learning.design_budget", "integer | null", "rollouts", None, "Most design rollouts "
        "per design (charged to `rollout_budget`); null = up to half the remaining budget."),
    Key("calibration.active_learning.max_amplitude", "number | list", "actuator units", None, "Largest "
        "|command| a designed trial may send, per actuator; also capped by the actuator's `ctrlrange`; with "
        "neither, the largest command of the rig's training trials."),
    Key("calibration.active_learning.frequency_hz", "list", "Hz", [0.05, 15.0], "[low, high] band of designed "
        "chirps and multisines (the top is capped at a fifth of the command rate)."),
    Key("calibration.active_learning.max_duration_s", "number | null", "s", None, "Longest designed trial; null "
        "= the longest training trial."),
    Key("calibration.identifiability_step", "number", "1", 0.01, "Finite-difference step of the identifiability "
        "check, in normalised units (0 < step < 0.5)."),
    Key("calibration.identifiability_scheme", "string", default="central", doc="Finite differences of the "
        "identifiability check.", choices=("central", "forward")),
    Key("calibration.condition_threshold", "number", "1", 1000.0, "Condition number above which the "
        "identifiability check warns."),
    Key("calibration.target_error_px", "number | null", "measurement unit", None, "Stop once the best training "
        "error is at or below this (in the trials' unit: px, m, rad or sigma); null = never."),
    Key("calibration.stop_when_converged", "boolean", default=True, doc="Stop when the proposer's convergence test "
        "passes (or it has no move left); false spends every iteration."),
    Key("calibration.video", "boolean | null", default=None, doc="Write side-by-side videos for the proposer; "
        "null = when the proposer watches video."),
    Key("calibration.max_rationale_chars", "integer", "characters", 20000, "Longest proposer rationale stored; a "
        "longer one is cut and marked."),
    Key("calibration.noise", "mapping", doc="Measurement noise (1 sigma) per unit, weighting trials of different "
        "kinds fitted together."),
    Key("calibration.noise.px", "number", "px", 1.0, "Image keypoint noise."),
    Key("calibration.noise.m", "number", "m", 0.001, "Motion-capture (and slide joint) noise."),
    Key("calibration.noise.rad", "number", "rad", 0.005, "Hinge joint noise."),
    *_nuisance_keys("calibration.nuisance", "The `nuisance:` switches given inside `calibration` instead of at the "
                    "top level (not both)."),
    Key("calibration.rollout_max_substeps", "integer | null", "substeps", 1000000, "Physics substeps one rollout "
        "may take; a rollout over it is a failed evaluation; null = no cap."),
    Key("calibration.rollout_max_wall_s", "number | null", "s", None, "Wall time one rollout may take; null = no "
        "cap."),
    Key("calibration.diagnosis", "boolean", default=True, doc="Run the residual diagnosis at the result "
        "(diagnostic rollouts, not charged)."),
    Key("calibration.far_refit", "string", default="always", doc="When the residual diagnosis may refit from afar "
        "(the free parameters and each leading cause over their whole ranges): always, converged (only after a "
        "converged stop) or never.", choices=("always", "converged", "never")),
    Key("proposer", "string", default="reasoner", doc="Proposer name (reasoner, gemini, openai-compatible, random, "
        "nelder-mead, golden-cd, bo, bo-tpe, cmaes, least-squares, mujoco-sysid)."),
    Key("proposer_options", "mapping", default={}, doc="Keyword arguments of the proposer."),
    Key("proposer_options.*", "string | number | boolean | list | mapping | null", doc="One option."),
    Key("fallback", "string | null", default=None, doc="Proposer used for an iteration when the main one fails."),
    Key("out", "string", default="runs/<rig>_<proposer>", doc="Run directory of `vid2sid calibrate`."),
    Key("tracking", "mapping", default={}, doc="What every trial source reports about its measurements "
        "(`vid2sid_ros/perception/quality.py`): the tracked fraction per keypoint (in `result.json` `tracking`, the "
        "terminal summary and the report), jumps between frames, and colour blobs unlike a marker (elongated, "
        "or far from the marker's usual size), each a warning naming the keypoint and the frames."),
    Key("tracking.min_tracked_fraction", "number", "1", default=0.9, doc="Warn about a keypoint valid in fewer "
        "than this fraction of its trial's frames (lost, at the image border, partly hidden, dropped frames), "
        "in [0, 1]; 0 = never."),
    Key("noise", "mapping", doc="Sensor noise of stand-in (sim2sim) video: `SensorNoiseModel` fields "
        "(`vid2sid_ros/sim/camera_model.py`)."),
    Key("noise.gaussian_sigma", "number", "DN", 0.0, "Read-noise standard deviation (8-bit digital numbers)."),
    Key("noise.poisson", "number", "e-", 0.0, "Full-well capacity at DN 255 (shot noise); 0 = off."),
    Key("noise.blur_px", "number", "px", 0.0, "Gaussian optical blur standard deviation; 0 = off."),
    Key("noise.motion_blur", "number", "1", 0.0, "Exposure time as a fraction of the frame period, in [0, 1]."),
    Key("noise.gamma", "number", "1", 1.0, "Response-curve gamma; 1 = linear."),
    Key("noise.exposure", "number", "1", 1.0, "Intensity gain; 1 = as rendered."),
    Key("noise.drop_prob", "number", "1", 0.0, "Probability that a frame is dropped, in [0, 1)."),
    Key("noise.seed", "integer", default=0, doc="Seed of the noise."),
    Key("render", "mapping", default={}, doc="Rendering of a model file's twin (MuJoCo's offscreen renderer)."),
    Key("render.maxgeom", "integer", "", "4 x (geoms + sites + bodies) + 32 x tendons + 100",
        "Size of the scene's geom buffer; raise it when run.log says MuJoCo's \"Pre-allocated visual geom buffer "
        "is full\" (a whole number from 100 to 200000)."),
    Key("report", "mapping", default={}, doc="Report options (`title`)."),
    Key("report.title", "string", doc="The report's title."),
)

def source_keys() -> tuple[Key, ...]:
    """Rows of the registered trial source kinds (:data:`vid2sid_ros.io.sources.SOURCES`):
    ``trials[].source.<kind>`` and its options, inside the block or beside the kind key."""
    from ..io.sources import SOURCES

    rows: dict[str, Key] = {}
    for kind, sk in SOURCES.items():
        base = f"trials[].source.{kind}"
        rows[base] = Key(base, "path | mapping" if sk.shorthand else "mapping | null",
                         doc=sk.doc + (f" A string is its `{sk.shorthand}`." if sk.shorthand else ""))
        for opt, typ, unit, default, doc in sk.keys:
            rows[f"{base}.{opt}"] = Key(f"{base}.{opt}", typ, unit, REQUIRED if default == "required" else default,
                                        doc)
        for opt, typ, unit, default, doc in sk.keys:  # options may sit beside the kind key
            path = f"trials[].source.{opt}"
            if path not in rows:
                rows[path] = Key(path, typ, unit, None, f"Beside the kind key: the option of that kind ({kind}: "
                                 f"{doc[0].lower()}{doc[1:]})", alias_of=f"{base}.{opt}")
    return tuple(rows.values())


def all_keys() -> tuple[Key, ...]:
    """Every key: :data:`KEYS` plus the registered trial source kinds' rows."""
    return KEYS + source_keys()


def describe_value(v: Any) -> str:
    """Short description of a value for error messages: ``'abc' (string)``, ``3 (integer)``."""
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping",
             type(None): "null"}
    t = names.get(type(v), "mapping" if isinstance(v, Mapping) else type(v).__name__)
    r = repr(v)
    return f"{r[:60]}{'...' if len(r) > 60 else ''} ({t})"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


def _type_ok(token: str, v: Any) -> bool:
    token = token.strip()
    if token in ("string", "path"):
        return isinstance(v, str) and bool(v.strip())
    if token == "number":
        return _is_number(v)
    if token == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if token == "boolean":
        return isinstance(v, bool)
    if token == "mapping":
        return isinstance(v, Mapping)
    if token == "list":
        return isinstance(v, list)
    if token == "strings":
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    if token == "null":
        return v is None
    if token.startswith("numbers["):
        n = int(token[len("numbers["):-1])
        return isinstance(v, list) and len(v) == n and all(_is_number(x) for x in v)
    raise ValueError(f"rig schema: unknown type token {token!r}")


def _expected(key: Key) -> str:
    parts = []
    for t in key.type.split("|"):
        t = t.strip()
        parts.append({"numbers[2]": "a list of 2 numbers", "numbers[3]": "a list of 3 numbers",
                      "numbers[4]": "a list of 4 numbers", "strings": "a list of strings", "integer": "an integer",
                      "mapping": "a mapping", "list": "a list", "null": "null", "path": "a file path",
                      "boolean": "true or false"}.get(t, f"a {t}"))
    out = " or ".join(parts)
    if key.unit and key.unit != "1":
        out += f" ({key.unit})"
    return out


def _children(path: str, keys: Sequence[Key]) -> dict[str, Key]:
    prefix = path + "." if path else ""
    out = {}
    for k in keys:
        if k.path.startswith(prefix):
            rest = k.path[len(prefix):]
            if rest and "." not in rest.replace("[]", "") and not rest.endswith("[]"):
                out[rest] = k
    return out


def _fail(file: str, where: str, msg: str) -> RigConfigError:
    return RigConfigError(f"{file}:{where}: {msg}" if where else f"{file}: {msg}")


def validate_tree(doc: Any, file: str, *, path: str = "", where: str = "",
                  keys: Sequence[Key] | None = None) -> None:
    """Check ``doc`` (the mapping at schema ``path``, shown as ``where``) against the table.

    Checks: unknown keys (with the nearest valid key), types, choices, required keys,
    recursively through mappings and lists of mappings.

    Raises:
        RigConfigError: ``file:where.key: expected X, got Y (did you mean Z?)``.
    """
    keys = all_keys() if keys is None else keys
    if not isinstance(doc, Mapping):
        raise _fail(file, where, f"expected a mapping, got {describe_value(doc)}")
    kids = _children(path, keys)
    star = kids.pop("*", None)
    for name, value in doc.items():
        if not isinstance(name, str):
            raise _fail(file, where, f"keys must be strings, got {describe_value(name)}")
        sub_where = f"{where}.{name}" if where else name
        key = kids.get(name)
        if key is None:
            if star is None:
                close = difflib.get_close_matches(name, list(kids), n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise _fail(file, sub_where, f"unknown key{hint}; valid keys here: {', '.join(sorted(kids))}")
            key, sub_path = star, f"{path}.*" if path else "*"
        else:
            sub_path = key.path
        check_value(key, value, file, sub_where, keys=keys, path=sub_path)
    for name, key in kids.items():
        if key.default is REQUIRED and name not in doc and not _required_elsewhere(key, doc):
            raise _fail(file, f"{where}.{name}" if where else name, "missing (required)")


def _required_elsewhere(key: Key, doc: Mapping[str, Any]) -> bool:
    # top-level model/keypoints are only required for model files; the loader checks them
    return key.path in ("model", "keypoints")


def check_value(key: Key, value: Any, file: str, where: str, *, keys: Sequence[Key] | None = None,
                path: str | None = None) -> None:
    """Check one value against its :class:`Key` (type, choices), recursing into mappings/lists.

    Raises:
        RigConfigError: naming ``file:where``.
    """
    keys = all_keys() if keys is None else keys
    path = key.path if path is None else path
    tokens = [t.strip() for t in key.type.split("|")]
    if value is None and (key.default is None or "null" in tokens) and key.default is not REQUIRED:
        return
    if not any(_type_ok(t, value) for t in tokens):
        raise _fail(file, where, f"expected {_expected(key)}, got {describe_value(value)}")
    if isinstance(value, str) and key.choices and value not in key.choices:
        close = difflib.get_close_matches(value, list(key.choices), n=1, cutoff=0.5)
        raise _fail(file, where, f"expected one of {', '.join(key.choices)}, got {value!r}"
                    + (f" (did you mean {close[0]}?)" if close else ""))
    if isinstance(value, Mapping) and _children(path, keys):
        validate_tree(value, file, path=path, where=where, keys=keys)
    elif isinstance(value, list) and _children(path + "[]", keys):
        for i, item in enumerate(value):
            if isinstance(item, str) and "strings" in tokens:  # e.g. actuators: names and/or mappings
                continue
            validate_tree(item, file, path=path + "[]", where=f"{where}[{i}]", keys=keys)


def _fmt_default(d: Any) -> str:
    if d is REQUIRED:
        return "**required**"
    if d is None:
        return "—"
    if isinstance(d, str) and " " in d:
        return d
    return f"`{d!r}`".replace("'", "") if not isinstance(d, str) else f"`{d}`"


def reference_markdown() -> str:
    """The key table of ``docs/rig_config.md`` (between its ``<!-- keys -->`` markers): one row per
    key; a source option given beside its kind key (:attr:`Key.alias_of`) is the row of the option
    inside the kind's block, not a row of its own."""
    rows = ["| key | type | unit | default | meaning |", "|---|---|---|---|---|"]
    for k in all_keys():
        if k.alias_of:
            continue
        doc = k.doc + (f" One of: {', '.join(k.choices)}." if k.choices else "")
        rows.append(f"| `{k.path}` | {k.type.replace('|', '&#124;')} | {k.unit.replace('|', '&#124;') or '—'} | "
                    f"{_fmt_default(k.default)} | {doc.replace('|', '&#124;')} |")
    return "\n".join(rows) + "\n"

