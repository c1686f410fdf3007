"""Bags of one finger trial set, as this package records them and as a lab records them.

The finger twin at hidden parameters plays the real rig: each excitation is rolled out
and rendered (the 'camera'); the same frames, commands and joint angles are written

* as the package's own bag (``ExcitationCommand`` on ``/vid2sid/excitation/command`` + trial end,
  ``sensor_msgs/Image`` on ``/vid2sid/real/image_raw``), and
* as a lab's bag: ``/camera/image_raw`` (Image, bgr8) or ``/camera/image_raw/compressed``
  (CompressedImage, JPEG), ``/camera/camera_info``, ``/joint_states`` (JointState at
  the camera rate) and ``/forward_position_controller/commands`` (Float64MultiArray, no
  header, so receive times), trials separated by a 1 s pause.

Messages are rosbags typestore objects (no rclpy needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

T0 = 1_700_000_000.0  # s, bag start (an epoch time, like a real recording)


def rollouts(rig, truth, excitations):
    """``[(excitation, frames (T, H, W, 3) RGB, qpos (T, nq), joint names)]`` of the finger at ``truth``."""
    twin = rig.make_twin()
    twin.set_parameters(truth)
    out = []
    for exc in excitations:
        res = twin.rollout(exc, render=True)
        names = tuple(twin.model.joint(i).name for i in range(twin.model.njnt))
        out.append((exc, res.frames, np.asarray(res.state["qpos"]), names))
    return out


def _types(store):
    return store.types


def _header(store, t: float, frame_id: str = ""):
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    sec = int(np.floor(t))
    return Header(stamp=Time(sec=sec, nanosec=int(round((t - sec) * 1e9))), frame_id=frame_id)


def _image(store, rgb: np.ndarray, t: float, encoding: str = "rgb8"):
    data = rgb if encoding == "rgb8" else rgb[..., ::-1]
    H, W = rgb.shape[:2]
    return store.types["sensor_msgs/msg/Image"](header=_header(store, t, "camera"), height=H, width=W,
                                                 encoding=encoding, is_bigendian=0, step=W * 3,
                                                 data=np.ascontiguousarray(data).reshape(-1).copy())


def _compressed(store, rgb: np.ndarray, t: float, quality: int = 95):
    import cv2

    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(rgb[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return store.types["sensor_msgs/msg/CompressedImage"](header=_header(store, t, "camera"),
                                                           format="bgr8; jpeg compressed bgr8",
                                                           data=np.frombuffer(buf.tobytes(), np.uint8).copy())


def _camera_info(store, W: int, H: int, t: float, f: float):
    RoI = store.types["sensor_msgs/msg/RegionOfInterest"]
    return store.types["sensor_msgs/msg/CameraInfo"](
        header=_header(store, t, "camera"), height=H, width=W, distortion_model="plumb_bob",
        d=np.zeros(5), k=np.array([f, 0, (W - 1) / 2, 0, f, (H - 1) / 2, 0, 0, 1.0]),
        r=np.eye(3).ravel(), p=np.array([f, 0, (W - 1) / 2, 0, 0, f, (H - 1) / 2, 0, 0, 0, 1.0, 0]),
        binning_x=0, binning_y=0, roi=RoI(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))


def write_package_bag(path: Path, trials, *, drop: Sequence[int] = (), storage: str = "mcap") -> Path:
    """The package's own layout (what ``recorder_node`` writes); ``drop``: frame steps left out."""
    from vid2sid_ros.io.rosbag import BagWriter

    t = T0
    with BagWriter(path, storage=storage) as w:
        store = w.typestore
        Cmd = store.types["vid2sid_ros/msg/ExcitationCommand"]
        for exc, frames, _, _ in trials:
            for k in range(exc.num_steps):
                tk = t + k * exc.period
                w.write_object("/vid2sid/excitation/command", "vid2sid_ros/msg/ExcitationCommand",
                               Cmd(header=_header(store, tk), trial_id=exc.name, step=k, period=float(exc.period),
                                   actuator_names=list(exc.actuator_names), values=np.asarray(exc.values[k], float)),
                               int(tk * 1e9) + 1000)
                if k not in drop:
                    tf = tk + exc.period
                    w.write_object("/vid2sid/real/image_raw", "sensor_msgs/msg/Image", _image(store, frames[k], tf),
                                   int(tf * 1e9) + 2000)
            tend = t + exc.num_steps * exc.period
            w.write_object("/vid2sid/excitation/trial_end", "vid2sid_ros/msg/ExcitationCommand",
                           Cmd(header=_header(store, tend), trial_id=exc.name, step=exc.num_steps,
                               period=float(exc.period), actuator_names=list(exc.actuator_names),
                               values=np.zeros(0)), int(tend * 1e9) + 3000)
            t = tend + 1.0
    return path


LAB_TOPICS = {"image": "/camera/image_raw", "camera_info": "/camera/camera_info", "joint_states": "/joint_states",
              "command": "/forward_position_controller/commands"}


def write_lab_bag(path: Path, trials, *, compressed: bool = False, storage: str = "mcap", focal: float = 447.85,
                  drop: Sequence[int] = (), images: bool = True, command_type: str = "float64",
                  marker_topic: str | None = None) -> Path:
    """A lab's layout with standard types (module docstring).

    ``command_type``: ``float64`` (Float64MultiArray, no header), ``joint_trajectory``
    (JointTrajectory, one point, stamped) or ``joint_state`` (JointState effort targets,
    stamped), each on ``LAB_TOPICS["command"]``. ``marker_topic``: a std_msgs/String with the
    trial's name after each trial. ``images=False`` leaves the camera out.
    """
    from vid2sid_ros.io.rosbag import BagWriter

    t = T0
    img_topic = LAB_TOPICS["image"] + ("/compressed" if compressed else "")
    img_type = "sensor_msgs/msg/CompressedImage" if compressed else "sensor_msgs/msg/Image"
    with BagWriter(path, storage=storage) as w:
        store = w.typestore
        F64 = store.types["std_msgs/msg/Float64MultiArray"]
        Layout, Dim = store.types["std_msgs/msg/MultiArrayLayout"], store.types["std_msgs/msg/MultiArrayDimension"]
        JS = store.types["sensor_msgs/msg/JointState"]
        for exc, frames, qpos, jnames in trials:
            H, W = frames.shape[1:3]
            for k in range(exc.num_steps):
                tk = t + k * exc.period
                t_rx = int(tk * 1e9) + 700_000
                if command_type == "float64":
                    layout = Layout(dim=[Dim(label="flexor", size=1, stride=1)], data_offset=0)
                    w.write_object(LAB_TOPICS["command"], "std_msgs/msg/Float64MultiArray",
                                   F64(layout=layout, data=np.asarray(exc.values[k], float)), t_rx)
                elif command_type == "joint_trajectory":
                    JT, JTP = store.types["trajectory_msgs/msg/JointTrajectory"], \
                        store.types["trajectory_msgs/msg/JointTrajectoryPoint"]
                    Dur = store.types["builtin_interfaces/msg/Duration"]
                    pt = JTP(positions=np.asarray(exc.values[k], float), velocities=np.zeros(0),
                             accelerations=np.zeros(0), effort=np.zeros(0), time_from_start=Dur(sec=0, nanosec=0))
                    w.write_object(LAB_TOPICS["command"], "trajectory_msgs/msg/JointTrajectory",
                                   JT(header=_header(store, tk), joint_names=["flexor"], points=[pt]), t_rx)
                else:
                    w.write_object(LAB_TOPICS["command"], "sensor_msgs/msg/JointState",
                                   JS(header=_header(store, tk), name=["flexor"], position=np.zeros(0),
                                      velocity=np.zeros(0), effort=np.asarray(exc.values[k], float)), t_rx)
                tf = tk + exc.period
                if images and k not in drop:
                    msg = _compressed(store, frames[k], tf) if compressed else _image(store, frames[k], tf, "bgr8")
                    w.write_object(img_topic, img_type, msg, int(tf * 1e9) + 4_000_000)
                    w.write_object(LAB_TOPICS["camera_info"], "sensor_msgs/msg/CameraInfo",
                                   _camera_info(store, W, H, tf, focal), int(tf * 1e9) + 4_100_000)
                w.write_object(LAB_TOPICS["joint_states"], "sensor_msgs/msg/JointState",
                               JS(header=_header(store, tf), name=list(jnames), position=np.asarray(qpos[k], float),
                                  velocity=np.zeros(0), effort=np.zeros(0)), int(tf * 1e9) + 300_000)
            if marker_topic:
                tm = t + exc.num_steps * exc.period + 0.01
                w.write_object(marker_topic, "std_msgs/msg/String", store.types["std_msgs/msg/String"](data=exc.name),
                               int(tm * 1e9))
            t = t + exc.num_steps * exc.period + 1.0
    return path


def lab_block(path: Path, *, compressed: bool = False, joints: Sequence[str] = (), names=()) -> dict:
    """The rig-config ``bag`` block of :func:`write_lab_bag`'s bag."""
    topics = dict(LAB_TOPICS)
    if compressed:
        topics["image"] += "/compressed"
    block = {"path": str(path), "topics": topics, "command_names": ["flexor"], "actuators": {"flexor": "flexor_motor"},
             "rate": 30.0, "split": {"gap_s": 0.5}, "names": list(names)}
    if joints:
        block["joints"] = list(joints)
    return block
