"""stand_in_rig_node: a second twin at HIDDEN parameters plays the real robot behind the camera.

For tests and demos without hardware. It subscribes to the rig driver topic
``/vid2sid/real/command`` (the same command stream the twin gets), steps its own twin
(same rig, parameters ``hidden.<name>``, read-only, default nominal) one command period
per command, passes the render through the sensor noise model
(:class:`~vid2sid_ros.sim.camera_model.SensorNoiseModel`: pixel noise, blur, motion
blur across consecutive frames, dropped frames) and publishes it on
``/vid2sid/real/image_raw`` like a camera, stamped at the end of the command period
(``command stamp + period``) plus an optional Gaussian stamp jitter (``stamp_jitter``)
that mimics a free-running camera clock.

The noise is one :class:`~vid2sid_ros.sim.camera_model.SensorNoiseStream` for the node's
life, seeded once with ``noise_seed``: the same seed and the same frames give the same
published images; a new trial forgets the previous frame (no motion blur across trials).
A frame the noise model drops is not published (a lossy camera); the tracker reports
the step as dropped.
"""

from __future__ import annotations

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from ..io.image_msg import array_to_image
from .common import ExcitationCommand, camera_info_msg, create_qos_subscription, create_stream_publisher, \
    qos_params, qos_profile, resolve_rig, \
    stamp_from_s, run_node
from .graph import TOPICS
from .lockstep_twin import LockstepTwin
from .params import RIG_CONFIG, Param, declare, unused_overrides, values

__all__ = ["StandInRigNode", "PARAMS", "make_node", "main"]

PARAMS = [
    Param("rig", "finger", "built-in rig name of the rig played by the stand-in (or set rig_config)", read_only=True),
    RIG_CONFIG,
    Param("width", 0, "camera width; 0 = the twin's default", "px", 0, 4096, read_only=True),
    Param("height", 0, "camera height; 0 = the twin's default", "px", 0, 4096, read_only=True),
    Param("frame_id", "real_camera_optical_frame", "header.frame_id of the published frames and their camera_info "
          "(the camera's optical frame, REP 103: z forward, x right, y down)"),
    Param("noise", True, "apply the rig's sensor noise model (config 'noise' of the rig) to the renders",
          read_only=True),
    Param("noise_seed", 0, "seed of the sensor noise", "", 0, 2**31 - 1, read_only=True),
    Param("drop_frames", False, "let the noise model drop frames (drop_prob) like a lossy camera", read_only=True),
    Param("stamp_jitter", 0.0, "standard deviation of the capture-stamp jitter", "s", 0.0, 0.1, read_only=True),
] + qos_params(("images", "streams"))


class StandInRigNode(Node):
    """A twin at hidden parameters published as the real camera (see module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__("stand_in_rig_node", **kwargs)
        declare(self, PARAMS)
        p = values(self, PARAMS)
        self._rig = resolve_rig(p["rig_config"] or p["rig"])
        hidden = [Param(f"hidden.{s.name}", float(s.nominal), f"hidden true value of {s.name}: {s.meaning}",
                        s.unit, s.lower, s.upper, read_only=True) for s in self._rig.parameters]
        declare(self, hidden)
        self.hidden = {s.name: float(self.get_parameter(f"hidden.{s.name}").value) for s in self._rig.parameters}
        #: hidden.* values given for parameters this rig does not have (warned once, not applied)
        self.ignored_hidden = unused_overrides(self, ("hidden.",))
        self._rng = np.random.default_rng(p["noise_seed"])
        self._jitter = float(p["stamp_jitter"])
        model = self._make_noise(p) if p["noise"] else None
        self._noise = model.stream() if model is not None else None
        self._noise_trial = ""
        twin_kw = {k: p[k] for k in ("width", "height") if p[k] > 0}
        self._pub = create_stream_publisher(self, Image, TOPICS["real_image"], qos_profile(self, "images", publisher=True))
        self._info_pub = create_stream_publisher(self, CameraInfo, TOPICS["real_camera_info"], qos_profile(self, "images", publisher=True))
        self.lockstep = LockstepTwin(lambda: self._rig.make_twin(**twin_kw), self._publish, self.get_logger(),
                                     postprocess=self._apply_noise if self._noise is not None else None,
                                     name=self.get_name())
        self.lockstep.set_parameters(self.hidden)
        group = MutuallyExclusiveCallbackGroup()
        create_qos_subscription(self, ExcitationCommand, TOPICS["rig_command"], self.lockstep.submit, "streams",
                                 callback_group=group)
        create_qos_subscription(self, ExcitationCommand, TOPICS["trial_end"], lambda _m: self.lockstep.end_trial(),
                                "streams", callback_group=group)
        self.get_logger().info("stand-in rig '%s' at hidden parameters: %s" % (
            self._rig.name, ", ".join(f"{n}={v:.4g}" for n, v in self.hidden.items())))

    def _make_noise(self, p: dict):
        cfg = dict((self._rig.config.get("noise") if isinstance(self._rig.config, dict) else None) or {})
        if not cfg:
            return None
        from ..sim.camera_model import SensorNoiseModel

        cfg["seed"] = int(p["noise_seed"])
        if not p["drop_frames"]:
            cfg["drop_prob"] = 0.0
        return SensorNoiseModel(**cfg)

    @property
    def frames_dropped_by_noise(self) -> int:
        """Frames the sensor model dropped (not published)."""
        return self._noise.frames_dropped if self._noise is not None else 0

    def _apply_noise(self, frame: np.ndarray, command) -> np.ndarray | None:
        """Sensor model of one frame (LockstepTwin's post-processing thread); None = dropped."""
        if self._noise is None:
            return frame
        if command.trial_id != self._noise_trial:
            self._noise.reset()  # new trial: no motion blur from the last frame of the previous one
            self._noise_trial = command.trial_id
        out, dropped = self._noise.apply(frame, out=frame)  # in place: the render is ours
        return None if dropped else out

    def _publish(self, frame: np.ndarray, stamp_s: float, _command) -> None:
        if self._jitter > 0:
            stamp_s += float(self._rng.normal(0.0, self._jitter))
        img = array_to_image(frame, "rgb8", Image)
        img.header.stamp = stamp_from_s(stamp_s)
        img.header.frame_id = self.get_parameter("frame_id").value
        self._pub.publish(img)
        # the camera that took it, beside the image (same stamp and frame), for Foxglove/RViz/image_proc
        self._info_pub.publish(camera_info_msg(getattr(self.lockstep.twin, "camera", None), img.header.stamp,
                                               img.header.frame_id))

    def destroy_node(self) -> None:
        if getattr(self, "lockstep", None) is not None:  # absent when __init__ failed
            self.lockstep.shutdown()
        super().destroy_node()


def make_node(**kwargs) -> StandInRigNode:
    return StandInRigNode(**kwargs)


def main(args=None) -> None:
    """``ros2 run vid2sid_ros <this node>``: init, build, spin until Ctrl-C/SIGTERM, destroy."""
    run_node(make_node, args)


if __name__ == "__main__":
    main()
