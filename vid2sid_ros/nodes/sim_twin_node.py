"""sim_twin_node: the simulated twin, stepped in lockstep with the excitation commands.

* Subscribes ``/vid2sid/excitation/command``. Each command advances the twin by exactly one
  command period (a new ``trial_id`` resets it first) and publishes the rendered frame on
  ``/vid2sid/sim/image_raw``, stamped ``command.header.stamp + command.period`` — the end
  of the command period, where the lockstep rule (:mod:`vid2sid_ros.core.lockstep`) puts
  the frame of that step — with ``header.frame_id = frame_id``. The step index is thus
  recovered exactly from the stamp by the tracker. A command that never arrived (a step
  gap) is made up by holding the previous command for the missing periods, without a
  frame, so the twin's time stays aligned with the rig's; the gap is logged and counted.
* Physics (and camera nuisance) parameters are ROS parameters ``physics.<name>`` /
  ``nuisance.<name>`` with the spec's unit, meaning and bounds in their descriptors, so
  ``ros2 param set /sim_twin_node physics.pip_stiffness 0.2`` and the calibrator both
  update them. A change during a trial takes effect at the next trial (reset), so one
  trial is never simulated with two parameter sets; ``apply_parameters: immediately``
  applies it at once.
* Latches the camera frames on ``/tf_static`` (world -> ``<camera>_link`` ->
  ``<camera>_optical_frame`` of the real and the sim camera, REP 103/105) from the rig
  config's camera pose (:class:`~vid2sid_ros.nodes.common.CameraTfPublisher`), and again at
  the new pose when parameters targeting ``camera.x`` ... ``camera.yaw`` change (a
  calibration that identified the pose, applied).
* Serves ``/vid2sid/sim/rollout`` (Rollout.srv): a headless, faster-than-real-time
  rollout on a second twin instance at the current parameters plus the request's
  overrides (not persisted). Frames of a rendered rollout go to
  ``/vid2sid/sim/rollout/image_raw`` so the live lockstep stream is not disturbed. The
  returned trajectory holds the twin's projected keypoints (ground truth, no tracker).

Twin work runs on dedicated worker threads (one for the lockstep twin, one for
rollouts): each owns its twin and thus its OpenGL context, which must stay on the
thread that created it; the spin thread only enqueues. The node spins a single-threaded
executor (:func:`~vid2sid_ros.nodes.common.make_executor`): while a rollout request is
served, commands wait in a deep subscription queue (``qos.commands.depth``)
and none is lost; the lockstep worker keeps stepping the ones already queued.
"""

from __future__ import annotations

import concurrent.futures
import math
import re

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from ..core.excitation import ExcitationError
from ..core.parameters import ParameterSet
from ..io.image_msg import array_to_image
from .common import ExcitationCommand, camera_info_msg, publish_camera_tf, create_qos_subscription, create_stream_publisher, \
    qos_params, qos_profile, excitation_from_commands, run_node, \
    resolve_rig, ros_param_name, stamp_from_s, trajectory_to_msg
from .graph import TOPICS
from .lockstep_twin import LockstepTwin
from .params import RIG_CONFIG, Param, declare, unused_overrides, values

__all__ = ["SimTwinNode", "PARAMS", "make_node", "main", "twin_parameter_params"]

from vid2sid_ros.srv import Rollout  # noqa: E402  (interfaces checked by .common)

PARAMS = [
    Param("rig", "finger", "built-in rig name of the twin (or set rig_config)", read_only=True),
    RIG_CONFIG,
    Param("width", 0, "render width; 0 = the twin's default", "px", 0, 4096, read_only=True),
    Param("height", 0, "render height; 0 = the twin's default", "px", 0, 4096, read_only=True),
    Param("frame_id", "sim_camera_optical_frame", "header.frame_id of the rendered frames and their camera_info "
          "(the camera's optical frame, REP 103: z forward, x right, y down)"),
    Param("world_frame", "world", "tf frame of the rig's world, parent of the camera frames", read_only=True),
    Param("real_frame_id", "real_camera_optical_frame", "optical frame id of the real camera (its images' "
          "frame_id); its static transform is published from the rig config's camera pose too", read_only=True),
    Param("publish_tf", True, "publish the static transforms world -> <camera>_link -> <camera>_optical_frame of "
          "the real and the sim camera from the rig config's camera pose", read_only=True),
    Param("publish_frames", True, "render and publish a frame per command step"),
    Param("apply_parameters", "next_trial", "when a parameter change reaches the lockstep twin",
          choices=("next_trial", "immediately")),
    Param("rollout_excitation", "train:0", "default profile of /vid2sid/sim/rollout when the request names none "
          "('<set>:<index>' or a profile name of the rig)"),
] + qos_params(("images", "streams", "commands"))


def twin_parameter_params(parameters: ParameterSet, values_: dict[str, float] | None = None) -> list[Param]:
    """ROS parameters for a twin's parameter set: ``<kind>.<name>``, unit, meaning and bounds."""
    v = values_ or parameters.nominal()
    return [Param(ros_param_name(s.name, s.kind), float(v[s.name]),
                  (s.meaning or s.name) + (f"; writes {s.target}" if s.target else "") + (" (frozen: not calibrated)"
                                                                                       if s.frozen else ""),
                  s.unit, s.lower, s.upper) for s in parameters]


_CAMERA_POSE_TARGET = re.compile(r"(^|,)\s*camera\.(x|y|z|roll|pitch|yaw)\b")


def _moves_camera(target: str | None) -> bool:
    """Whether a parameter's ``target`` writes the camera's pose (``camera.x`` ... ``camera.yaw``)."""
    return bool(target) and _CAMERA_POSE_TARGET.search(str(target)) is not None


class SimTwinNode(Node):
    """The lockstep twin (see module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__("sim_twin_node", **kwargs)
        declare(self, PARAMS)
        p = values(self, PARAMS)
        self._rig = resolve_rig(p["rig_config"] or p["rig"])
        self.parameters: ParameterSet = self._rig.parameters
        self._param_names = {ros_param_name(s.name, s.kind): s.name for s in self.parameters}
        declare(self, twin_parameter_params(self.parameters), on_change=self._on_twin_params)
        #: physics.* / nuisance.* values given for parameters this rig does not have (warned once)
        self.ignored_parameters = unused_overrides(self, ("physics.", "nuisance."))
        twin_kw = {k: p[k] for k in ("width", "height") if p[k] > 0}
        self._pub = create_stream_publisher(self, Image, TOPICS["sim_image"], qos_profile(self, "images", publisher=True))
        self._info_pub = create_stream_publisher(self, CameraInfo, TOPICS["sim_camera_info"], qos_profile(self, "images", publisher=True))
        self._pub_rollout = create_stream_publisher(self, Image, TOPICS["sim_rollout_image"], qos_profile(self, "images", publisher=True))
        self._info_pub_rollout = create_stream_publisher(self, CameraInfo, TOPICS["sim_rollout_camera_info"],
                                                         qos_profile(self, "images", publisher=True))
        self.lockstep = LockstepTwin(lambda: self._rig.make_twin(**twin_kw), self._publish_frame, self.get_logger(),
                                     render=lambda: bool(self.get_parameter("publish_frames").value),
                                     name=self.get_name())
        self.lockstep.set_parameters(self.current_values())
        self._rollout_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sim_twin_rollout")
        self._rollout_twin = self._rollout_pool.submit(lambda: self._rig.make_twin(**twin_kw)).result()
        self.keypoint_names = tuple(self.lockstep.twin.keypoint_names)
        #: the static transforms published (parent, child, translation m, quaternion xyzw); [] when none
        self.static_transforms: list = []
        self._tf = None
        #: twin parameters that move the camera (targets camera.x ... camera.yaw): a change republishes the tf
        self._pose_params = {n for n, spec in self._param_names.items() if _moves_camera(self.parameters[spec].target)}
        if p["publish_tf"]:
            self._tf = publish_camera_tf(self, self._camera_now(self.current_values()), p["world_frame"],
                                         (p["real_frame_id"], self.get_parameter("frame_id").value))
        group = MutuallyExclusiveCallbackGroup()
        create_qos_subscription(self, ExcitationCommand, TOPICS["excitation"], self.lockstep.submit, "commands",
                                 callback_group=group)
        create_qos_subscription(self, ExcitationCommand, TOPICS["trial_end"], lambda _m: self.lockstep.end_trial(),
                                "streams", callback_group=group)
        self.create_service(Rollout, TOPICS["rollout"], self._srv_rollout, callback_group=ReentrantCallbackGroup())
        self.get_logger().info(f"twin of rig '{self._rig.name}' ready ({type(self.lockstep.stepper).__name__}); "
                               "parameters: " + ", ".join(f"{n}={v:.4g}" for n, v in self.lockstep.applied.items()))

    # -- parameters -------------------------------------------------------------------------
    def current_values(self) -> dict[str, float]:
        """Twin parameters from the ROS parameters, ``{spec name: value}`` (SI)."""
        return {self._param_names[n]: float(self.get_parameter(n).value) for n in self._param_names}

    def _on_twin_params(self, changes: dict) -> None:
        upd = {self._param_names[n]: float(v) for n, v in changes.items() if n in self._param_names}
        if upd:
            self.lockstep.set_parameters(upd, immediately=self.get_parameter("apply_parameters").value == "immediately")
        if self._tf is not None and self._pose_params & set(changes):
            self._republish_tf({**self.current_values(), **upd})

    def _camera_now(self, vals: dict[str, float]):
        """A callable giving the rollout twin's camera at ``vals`` (spec name -> SI value), or None
        when the twin has no ``camera_at`` (a model's own camera)."""
        camera_at = getattr(self._rollout_twin, "camera_at", None)
        if camera_at is None:
            return None

        def at():
            self._rollout_twin.set_parameters(vals)
            return camera_at()

        return lambda: self._rollout_pool.submit(at).result()  # the twin lives on its worker thread

    def _republish_tf(self, vals: dict[str, float]) -> None:
        """Latch the camera transforms at the pose of ``vals`` (a calibration applied camera.*
        nuisances): the new /tf_static message replaces the old one. Runs on the rollout worker,
        after any rollout in progress, so the parameter callback returns at once."""
        def job():
            try:
                self._rollout_twin.set_parameters(vals)  # on its own worker thread (this job runs there)
                frames = self._tf.publish(self._rollout_twin.camera_at())
            except Exception as err:  # noqa: BLE001 - the old transforms stay; said once per change
                self.get_logger().error(f"camera transforms not updated: {type(err).__name__}: {err}")
                return
            self.static_transforms = frames
            parent, child, t, _q = frames[0]
            self.get_logger().info(f"camera pose changed (camera nuisance parameters): {self._tf.publisher.topic_name} "
                                   f"{parent} -> {child} now at ({t[0]:.4f}, {t[1]:.4f}, {t[2]:.4f}) m")

        self._rollout_pool.submit(job)

    def _publish_frame(self, frame: np.ndarray, stamp_s: float, _command) -> None:
        img = array_to_image(frame, "rgb8", Image)
        img.header.stamp = stamp_from_s(stamp_s)
        img.header.frame_id = self.get_parameter("frame_id").value
        self._pub.publish(img)
        self._info_pub.publish(camera_info_msg(getattr(self.lockstep.twin, "camera", None), img.header.stamp,
                                               img.header.frame_id))  # beside the image, same stamp and frame

    # -- rollout service --------------------------------------------------------------------
    def _srv_rollout(self, request, response):
        try:
            overrides = dict(zip(request.names, request.values))
            if len(request.names) != len(request.values):
                raise ValueError(f"{len(request.names)} names but {len(request.values)} values")
            unknown = [n for n in overrides if n not in self.parameters]
            if unknown:
                raise ValueError(f"unknown parameter(s) {unknown}; valid: {', '.join(self.parameters.names)}")
            bad = [n for n, v in overrides.items() if not (math.isfinite(v) and self.parameters[n].lower <= v
                                                           <= self.parameters[n].upper)]
            if bad:
                raise ValueError("value(s) outside the bounds: " + ", ".join(
                    f"{n}={overrides[n]} not in [{self.parameters[n].lower}, {self.parameters[n].upper}]" for n in bad))
            if request.commands:
                exc = excitation_from_commands(request.commands, request.commands[0].trial_id or "rollout")
            else:
                from .excitation_node import resolve_excitation

                exc = resolve_excitation(self._rig.name, request.excitation or
                                         self.get_parameter("rollout_excitation").value, "", 0.0, rig=self._rig)
            vals = {**self.current_values(), **overrides}

            def run():
                self._rollout_twin.set_parameters(vals)
                return self._rollout_twin.rollout(exc, render=bool(request.render))

            res = self._rollout_pool.submit(run).result()
        except (ValueError, ExcitationError, KeyError) as err:
            response.success, response.message = False, str(err)
            return response
        except Exception as err:  # noqa: BLE001 - the service answers, the node survives
            response.success, response.message = False, f"rollout failed: {type(err).__name__}: {err}"
            return response
        response.success = not res.diverged
        response.message = res.message if res.diverged else (res.message or "ok")
        response.trajectory = trajectory_to_msg(res.trajectory, stamp=self.get_clock().now().to_msg())
        if request.render and res.frames is not None:
            t0 = self.get_clock().now().nanoseconds * 1e-9
            for k, fr in enumerate(res.frames):
                img = array_to_image(np.asarray(fr), "rgb8", Image)
                img.header.stamp = stamp_from_s(t0 + (k + 1) * exc.period)
                img.header.frame_id = self.get_parameter("frame_id").value
                self._pub_rollout.publish(img)
                self._info_pub_rollout.publish(camera_info_msg(getattr(self._rollout_twin, "camera", None),
                                                               img.header.stamp, img.header.frame_id))
        return response

    def destroy_node(self) -> None:
        # the attributes are absent when __init__ failed half-way
        if getattr(self, "lockstep", None) is not None:
            self.lockstep.shutdown()
        if getattr(self, "_rollout_pool", None) is not None:
            self._rollout_pool.shutdown(wait=True, cancel_futures=True)
        super().destroy_node()


def make_node(**kwargs) -> SimTwinNode:
    return SimTwinNode(**kwargs)


def main(args=None) -> None:
    """``ros2 run vid2sid_ros <this node>``: init, build, spin until Ctrl-C/SIGTERM, destroy."""
    run_node(make_node, args)


if __name__ == "__main__":
    main()
