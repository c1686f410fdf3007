"""camera_node: OpenCV capture (device index, video file or stream URL) -> sensor_msgs/Image.

Publishes ``/vid2sid/real/image_raw`` at ``fps`` from a timer, each frame stamped with
its capture time (the clock read right after ``VideoCapture.read`` returns) and
``header.frame_id = frame_id``. Images are ``rgb8`` or ``bgr8`` with cv_bridge's layout
(``step = width * 3``, ``is_bigendian = 0``; see :mod:`vid2sid_ros.io.image_msg`).

A source that cannot be opened is not fatal: the node logs one clear error, keeps
running (so the rest of the graph and the recording go on) and retries every
``reopen_interval`` seconds. A file that ends is looped (``loop``) or left closed.
"""

from __future__ import annotations

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from ..io.image_msg import array_to_image
from .common import camera_info_msg, create_stream_publisher, qos_params, qos_profile, run_node
from .graph import TOPICS
from .params import Param, declare, values

__all__ = ["CameraNode", "PARAMS", "make_node", "main", "open_capture"]

PARAMS = [
    Param("source", "0", "capture source: device index ('0'), video file path, or stream URL (rtsp://, http://)",
          read_only=True),
    Param("fps", 30.0, "publishing rate (and requested device frame rate)", "Hz", 1.0, 240.0, read_only=True),
    Param("width", 0, "output width; 0 = the source's", "px", 0, 8192, read_only=True),
    Param("height", 0, "output height; 0 = the source's", "px", 0, 8192, read_only=True),
    Param("encoding", "rgb8", "image encoding of the published frames", choices=("rgb8", "bgr8")),
    Param("frame_id", "real_camera_optical_frame", "header.frame_id of the published frames and their camera_info "
          "(the camera's optical frame, REP 103: z forward, x right, y down)"),
    Param("loop", False, "restart a video file when it ends"),
    Param("camera_info_file", "", "camera_calibration CameraInfo YAML of this camera, published beside the images "
          "on camera_info; empty = uncalibrated (K all zero, image size only)", read_only=True),
    Param("reopen_interval", 2.0, "retry period when the source cannot be opened", "s", 0.1, 3600.0),
] + qos_params(("images",))


def open_capture(source: str, fps: float = 0.0, width: int = 0, height: int = 0):
    """Open an OpenCV capture for a device index, file or URL.

    Returns:
        ``(capture, None)`` when opened, ``(None, reason)`` otherwise.
    """
    import cv2

    src = int(source) if source.strip().isdigit() else source
    cap = cv2.VideoCapture(src)
    if not cap.isOpened():
        cap.release()
        kind = "device" if isinstance(src, int) else ("stream" if "://" in str(src) else "file")
        return None, f"cannot open camera {kind} {source!r}"
    if isinstance(src, int):
        if fps > 0:
            cap.set(cv2.CAP_PROP_FPS, fps)
        if width > 0 and height > 0:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, width)
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, height)
    return cap, None


class CameraNode(Node):
    """Timer-driven OpenCV capture (see module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__("camera_node", **kwargs)
        declare(self, PARAMS)
        self._p = values(self, PARAMS)
        self._pub = create_stream_publisher(self, Image, TOPICS["real_image"], qos_profile(self, "images", publisher=True))
        self._info_pub = create_stream_publisher(self, CameraInfo, TOPICS["real_camera_info"], qos_profile(self, "images", publisher=True))
        self._intrinsics = None
        if self._p["camera_info_file"]:
            from types import SimpleNamespace

            from ..core.camera import load_camera_info

            self._intrinsics = SimpleNamespace(**load_camera_info(self._p["camera_info_file"]))  # CameraError: 1 line
        self._cap = None
        self.frames_published = 0
        self.read_failures = 0
        self.open_error: str | None = None
        self._group = MutuallyExclusiveCallbackGroup()
        self._open()
        self._timer = self.create_timer(1.0 / self._p["fps"], self._tick, callback_group=self._group)
        self._reopen_timer = self.create_timer(self._p["reopen_interval"], self._retry_open, callback_group=self._group)

    def _open(self) -> None:
        self._cap, err = open_capture(self._p["source"], self._p["fps"], self._p["width"], self._p["height"])
        if err is not None:
            if err != self.open_error:
                self.get_logger().error(f"{err}; the graph keeps running, retrying every "
                                        f"{self._p['reopen_interval']:g} s")
            self.open_error = err
        else:
            if self.open_error:
                self.get_logger().info(f"camera source {self._p['source']!r} opened")
            self.open_error = None

    def _retry_open(self) -> None:
        if self._cap is None:
            self._open()

    def _tick(self) -> None:
        import cv2

        if self._cap is None:
            return
        ok, frame = self._cap.read()
        stamp = self.get_clock().now().to_msg()
        if not ok or frame is None:
            self.read_failures += 1
            if self._p["loop"] and self._cap.get(cv2.CAP_PROP_FRAME_COUNT) > 0:
                self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
                return
            self.get_logger().warning(f"camera source {self._p['source']!r}: no frame (end of file or device lost); "
                                      "closing it, will retry")
            self._cap.release()
            self._cap = None
            return
        w, h = self._p["width"], self._p["height"]
        if w > 0 and h > 0 and (frame.shape[1] != w or frame.shape[0] != h):
            frame = cv2.resize(frame, (w, h), interpolation=cv2.INTER_AREA)
        enc = self.get_parameter("encoding").value
        if enc == "rgb8":
            frame = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        msg = array_to_image(frame, enc, Image)
        msg.header.stamp = stamp
        msg.header.frame_id = self.get_parameter("frame_id").value
        self._pub.publish(msg)
        info = camera_info_msg(self._intrinsics, stamp, msg.header.frame_id)
        if self._intrinsics is None:  # uncalibrated: at least the size
            info.width, info.height = int(frame.shape[1]), int(frame.shape[0])
        self._info_pub.publish(info)
        self.frames_published += 1

    def destroy_node(self) -> None:
        if getattr(self, "_cap", None) is not None:
            self._cap.release()
            self._cap = None
        super().destroy_node()


def make_node(**kwargs) -> CameraNode:
    return CameraNode(**kwargs)


def main(args=None) -> None:
    """``ros2 run vid2sid_ros <this node>``: init, build, spin until Ctrl-C/SIGTERM, destroy."""
    run_node(make_node, args)


if __name__ == "__main__":
    main()
