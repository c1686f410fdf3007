"""Small helpers shared by the vid2sid nodes: stamps, message <-> core conversions, a
drop-oldest buffer queue, QoS profiles and the executor choice. No algorithm lives here.
"""

from __future__ import annotations

import collections
import math
import sys
import threading
from typing import Any, Generic, Iterable, Sequence, TypeVar

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from .._interfaces import require_interfaces

require_interfaces()

from vid2sid_ros.msg import ExcitationCommand, Keypoints, ParameterUpdate  # noqa: E402
from vid2sid_ros.msg import Trajectory as TrajectoryMsg  # noqa: E402

from ..core.excitation import Excitation  # noqa: E402
from ..core.parameters import ParameterSet  # noqa: E402
from ..core.trajectory import Trajectory  # noqa: E402
from ..calibration.loop import CalibrationError  # noqa: E402
from ..sim.base import TwinError  # noqa: E402

__all__ = ["wait_for_subscribers", "publish_camera_tf", "CameraTfPublisher", "TF_STATIC_QOS", "CAMERA_TF_TOPIC", "QOS_KINDS", "qos_params", "qos_profile", "describe_qos", "AdaptiveSubscription",
           "create_qos_subscription", "stamp_from_s", "s_from_stamp", "trajectory_to_msg", "trajectory_from_msg", "keypoints_msg",
           "excitation_from_commands", "excitation_to_commands", "parameter_update_msg", "BufferQueue",
           "STREAM_QOS", "COMMAND_QOS", "LATCHED_QOS", "ros_param_name", "msgtype_of", "resolve_rig", "make_executor",
           "create_stream_publisher", "camera_info_msg", "image_marker_msg", "KEYPOINT_COLOURS"]

#: images, commands, keypoints: reliable, deep enough for 2 s at 60 Hz so a busy
#: subscriber falls behind (late frames, counted) instead of losing messages.
STREAM_QOS = QoSProfile(depth=120, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
#: command subscriptions of nodes whose service callbacks can block for seconds (calibrator,
#: sim twin): commands arriving meanwhile wait in the reader queue; 10000 = 2.8 min at 60 Hz.
COMMAND_QOS = QoSProfile(depth=10000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
#: trajectories and parameter updates: few, must all arrive.
LATCHED_QOS = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
#: services (the server's request queue, a client's replies): deep. All clients of one service share its
#: reply topic and each drops what it does not own, so a burst of replies to many clients overran the
#: services default (depth 10) and answers that had been sent never reached their client
SERVICE_QOS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)


#: QoS of the graph's topics by kind: ``(depth, reliability)``, the defaults of the nodes'
#: ``qos.<kind>.depth`` / ``qos.<kind>.reliability`` parameters (history KEEP_LAST, volatile).
#: ``auto`` (images and camera_info, subscriptions only): start RELIABLE (what this graph's own
#: publishers offer, no loss under load) and switch to BEST_EFFORT, which matches both kinds of
#: publisher, as soon as a publisher offering BEST_EFFORT (sensor-data QoS, what many camera
#: drivers offer) is discovered -- the way ``ros2 bag record`` adapts to the offered QoS.
QOS_KINDS: dict[str, tuple[int, str, str]] = {
    "images": (120, "auto", "images and camera_info (2 s at 60 Hz)"),
    "streams": (120, "reliable", "commands, keypoints, image markers, trial-end notices"),
    "commands": (10000, "reliable", "the command stream of a node whose service calls block for seconds "
                                    "(2.8 min at 60 Hz)"),
    "results": (50, "reliable", "trajectories and parameter updates (few, each must arrive)"),
}
_RELIABILITY = {"reliable": ReliabilityPolicy.RELIABLE, "best_effort": ReliabilityPolicy.BEST_EFFORT}


def qos_params(kinds: Sequence[str]):
    """The ``qos.<kind>.depth`` / ``qos.<kind>.reliability`` parameters of a node using ``kinds``
    (:data:`QOS_KINDS`; read-only: QoS is fixed when a topic is created)."""
    from .params import Param

    out = []
    for k in kinds:
        depth, rel, what = QOS_KINDS[k]
        choices = ("auto", "reliable", "best_effort") if k == "images" else ("reliable", "best_effort")
        out.append(Param(f"qos.{k}.depth", depth, f"history depth (KEEP_LAST) of the {what} topics", "messages",
                         1, 1_000_000, read_only=True))
        out.append(Param(f"qos.{k}.reliability", rel, f"reliability of the {what} topics"
                         + ("; auto: subscriptions adapt to the publishers (best_effort once a best-effort "
                            "publisher is seen), publishers are reliable" if k == "images" else ""),
                         choices=choices, read_only=True))
    return out


def qos_profile(node: Any, kind: str, *, publisher: bool = False) -> QoSProfile:
    """The QoS of a ``kind`` topic from the node's ``qos.<kind>.*`` parameters (``auto``:
    RELIABLE, adapted later by :class:`AdaptiveSubscription`; a reliable publisher also
    serves best-effort subscribers)."""
    depth = int(node.get_parameter(f"qos.{kind}.depth").value)
    rel = str(node.get_parameter(f"qos.{kind}.reliability").value)
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=_RELIABILITY.get(rel, ReliabilityPolicy.RELIABLE))


def describe_qos(qos: Any) -> str:
    """One-line QoS profile: ``reliability, durability, history depth`` (history and depth are
    left out when unknown: DDS discovery does not carry a remote endpoint's history)."""
    def name(v):
        return getattr(v, "name", str(v)).lower()

    text = f"{name(qos.reliability)}, {name(qos.durability)}"
    return text + (f", {name(qos.history)} {int(qos.depth)}" if name(qos.history) != "unknown" else "")


class AdaptiveSubscription:
    """A subscription whose QoS mismatches are said once, and which adapts ``auto`` reliability.

    Created by :func:`create_qos_subscription`. On an incompatible-QoS event (a publisher
    the subscription cannot match) it logs one warning naming the topic, the subscription's
    profile and the publishers' offered profiles; with ``auto`` reliability it re-creates
    itself BEST_EFFORT (which matches reliable and best-effort publishers alike) from the
    node's QoS timer, outside the event's own callback.
    """

    def __init__(self, node: Any, msg_type: Any, topic: str, callback: Any, qos: QoSProfile, *, auto: bool,
                 **kwargs: Any) -> None:
        self.node, self.msg_type, self.topic, self.callback = node, msg_type, topic, callback
        self.qos, self.auto, self.kwargs = qos, auto, kwargs
        #: the warning logged at the first mismatch (None: none seen); mismatch events counted
        self.mismatch: str | None = None
        self.mismatch_count = 0
        self.adapted = False
        self._pending = False
        self.subscription = self._create()

    def _create(self):
        from rclpy.event_handler import SubscriptionEventCallbacks

        return self.node.create_subscription(
            self.msg_type, self.topic, self.callback, self.qos,
            event_callbacks=SubscriptionEventCallbacks(incompatible_qos=self._on_incompatible), **self.kwargs)

    def _offered(self) -> str:
        try:
            infos = self.node.get_publishers_info_by_topic(self.subscription.topic_name)
        except Exception:  # noqa: BLE001 - graph introspection is best effort
            return "unknown"
        return "; ".join(f"{i.node_namespace.rstrip('/')}/{i.node_name}: {describe_qos(i.qos_profile)}"
                         for i in infos) or "unknown"

    def _on_incompatible(self, info: Any) -> None:
        kind = getattr(info, "last_policy_kind", None)
        policy = str(getattr(kind, "name", kind)).replace("RMW_QOS_POLICY_", "").lower()
        can_adapt = self.auto and not self.adapted and self.qos.reliability == ReliabilityPolicy.RELIABLE
        self.mismatch_count += 1
        if self.mismatch is None:
            self.mismatch = (
                f"QoS mismatch on {self.subscription.topic_name}: this subscription requests "
                f"[{describe_qos(self.qos)}], publisher(s) offer [{self._offered()}] (incompatible policy: {policy})"
                + ("; switching the subscription to best_effort, which matches both" if can_adapt else
                   "; no messages from that publisher (set this node's qos.*.reliability to match)"))
            self.node.get_logger().warning(self.mismatch)
        if can_adapt:
            self._pending = True

    def adapt(self) -> None:
        """Re-create the subscription BEST_EFFORT if a mismatch asked for it (the node's QoS timer)."""
        if not self._pending:
            return
        self._pending = False
        self.adapted = True
        old = self.subscription
        self.qos = QoSProfile(depth=self.qos.depth, history=self.qos.history,
                              reliability=ReliabilityPolicy.BEST_EFFORT, durability=self.qos.durability)
        self.subscription = self._create()
        self.node.destroy_subscription(old)
        self.node.get_logger().info(f"{self.subscription.topic_name}: subscribed best_effort "
                                    f"[{describe_qos(self.qos)}]")


def create_qos_subscription(node: Any, msg_type: Any, topic: str, callback: Any, kind: str,
                            **kwargs: Any) -> AdaptiveSubscription:
    """A subscription of a ``kind`` topic (:data:`QOS_KINDS`) with the node's ``qos.<kind>.*``
    parameters, mismatches logged once and ``auto`` reliability adapted (:class:`AdaptiveSubscription`).

    ``kwargs`` go to ``node.create_subscription`` (``callback_group``, ``raw``). The node gets
    one 0.25 s timer (in the first subscription's callback group) that applies adaptations.
    """
    auto = str(node.get_parameter(f"qos.{kind}.reliability").value) == "auto"
    sub = AdaptiveSubscription(node, msg_type, topic, callback, qos_profile(node, kind), auto=auto, **kwargs)
    subs = node.__dict__.setdefault("_vid2sid_qos_subscriptions", [])
    subs.append(sub)
    if len(subs) == 1:
        node.create_timer(0.25, lambda: [s.adapt() for s in subs], callback_group=kwargs.get("callback_group"))
    return sub


#: where the camera transforms go when ``tf2_msgs`` cannot be imported (a venv set up before
#: ``make setup`` built ``vendor/tf2_msgs``): one ``geometry_msgs/TransformStamped`` per message,
#: transient local
CAMERA_TF_TOPIC = "vid2sid/camera_transforms"

#: the QoS of ``/tf_static``, as tf2_ros's ``StaticTransformBroadcaster`` (tf2_ros_py and
#: ``tf2_ros::StaticBroadcasterQoS``) offers it: reliable, transient local, keep last 1 -- one
#: message holds every static transform of the publisher; a new one replaces it for late joiners
TF_STATIC_QOS = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)


class CameraTfPublisher:
    """Latches the static transforms world -> ``<camera>_link`` -> ``<camera>_optical_frame``
    (REP 103 / REP 105) of each optical frame id, at a camera's pose.

    On ``/tf_static`` as one ``tf2_msgs/msg/TFMessage`` (:data:`TF_STATIC_QOS`) -- the real
    ``tf2_msgs`` of a ROS install, or ``vendor/tf2_msgs`` that ``make setup`` builds into the
    venv (same type hash). Only where ``tf2_msgs`` cannot be imported, on :data:`CAMERA_TF_TOPIC`
    as ``geometry_msgs/TransformStamped`` messages, and the node logs one line saying so.

    :meth:`publish` may be called again with a new pose (a calibration that identified it):
    the new message replaces the old one, as a tf2 static broadcaster's does.
    """

    def __init__(self, node: Any, world_frame: str, optical_frames: Sequence[str]) -> None:
        from geometry_msgs.msg import TransformStamped

        self.node, self.world_frame = node, world_frame
        self.optical_frames = tuple(dict.fromkeys(optical_frames))  # unique, in order
        self._transform_type = TransformStamped
        #: the last transforms published [(parent, child, translation (3,) m, quaternion xyzw)]
        self.frames: list = []
        try:
            from tf2_msgs.msg import TFMessage
        except ImportError:
            self._tf_message = None
            qos = QoSProfile(depth=2 * len(self.optical_frames), history=HistoryPolicy.KEEP_LAST,
                             reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.publisher = create_stream_publisher(node, TransformStamped, CAMERA_TF_TOPIC, qos)
            node.get_logger().info(f"camera transforms on {self.publisher.topic_name} (geometry_msgs/"
                                   "TransformStamped), not /tf_static: tf2_msgs cannot be imported "
                                   "(`make setup` builds it into the venv)")
        else:
            self._tf_message = TFMessage
            self.publisher = create_stream_publisher(node, TFMessage, "/tf_static", TF_STATIC_QOS)

    def publish(self, camera: Any) -> list:
        """Publish the transforms of every optical frame at ``camera``'s pose (a
        :class:`~vid2sid_ros.core.camera.PinholeCamera`: ``position`` m, ``roll``/``pitch``/``yaw``
        rad); returns them as :attr:`frames`."""
        from ..core.camera import camera_frames

        frames: list = []
        for optical in self.optical_frames:
            for parent, child, t, q in camera_frames(camera, self.world_frame, optical):
                if (parent, child) not in [(f[0], f[1]) for f in frames]:
                    frames.append((parent, child, t, q))
        stamp = self.node.get_clock().now().to_msg()
        msgs = []
        for parent, child, t, q in frames:
            m = self._transform_type()
            m.header.stamp, m.header.frame_id, m.child_frame_id = stamp, parent, child
            m.transform.translation.x, m.transform.translation.y, m.transform.translation.z = t
            (m.transform.rotation.x, m.transform.rotation.y, m.transform.rotation.z,
             m.transform.rotation.w) = q
            msgs.append(m)
        if self._tf_message is None:
            for m in msgs:
                self.publisher.publish(m)
        else:
            self.publisher.publish(self._tf_message(transforms=msgs))
        self.frames = frames
        return frames


def publish_camera_tf(node: Any, camera_at: Any, world_frame: str,
                      optical_frames: Sequence[str]) -> CameraTfPublisher | None:
    """A :class:`CameraTfPublisher` that has latched the transforms at ``camera_at()``'s pose
    (the rig config's camera); None, logged once, when the twin has no camera pose (a camera of
    the model file itself). Sets ``node.static_transforms``."""
    cam = camera_at() if callable(camera_at) else None
    if cam is None or not hasattr(cam, "roll"):
        node.get_logger().info("no camera pose in the rig config (the model's own camera): no camera transforms")
        return None
    tf = CameraTfPublisher(node, world_frame, optical_frames)
    node.static_transforms = tf.publish(cam)
    return tf


def wait_for_subscribers(node: Any, publisher: Any, names: Sequence[str], timeout: float) -> list[str]:
    """Wait until every node in ``names`` (in ``node``'s namespace) has a subscription matched
    to ``publisher`` -- or to one of them, when ``publisher`` is a sequence of publishers (a
    command stream and the robot's command topic) -- at most ``timeout`` s; returns the names
    still missing ([] = ready).

    Graph queries only (no spinning), polled every 50 ms: call it before the first message
    of a trial so that no subscriber misses its beginning.
    """
    import time

    wanted = [n for n in names if n]
    if not wanted:
        return []
    pubs = list(publisher) if isinstance(publisher, (list, tuple)) else [publisher]
    ns = node.get_namespace()
    deadline = time.monotonic() + float(timeout)
    while True:
        try:
            present = {i.node_name for pub in pubs for i in node.get_subscriptions_info_by_topic(pub.topic_name)
                       if i.node_namespace == ns}
        except Exception:  # noqa: BLE001 - a context going down: report them all missing
            return wanted
        missing = [n for n in wanted if n not in present]
        if not missing and sum(pub.get_subscription_count() for pub in pubs) >= len(wanted):
            return []
        if time.monotonic() >= deadline:
            return missing or ["(a subscriber discovered but not yet matched)"]
        time.sleep(0.05)


def make_executor(node: Any, *, context: Any = None, max_threads: int | None = None):
    """The executor a node spins on, alone (its own process, or one thread of the bringup).

    rclpy's executors rebuild the wait set of every entity of every node they hold on each
    wake-up (parameter services, QoS event handlers...), so one executor per node keeps a
    callback cheap (~0.5 ms of CPU on the 2-core bench machine against ~1.6 ms on one
    executor for six nodes), and ``SingleThreadedExecutor`` is the default: on the lockstep
    graph rclpy's ``MultiThreadedExecutor`` was measured to spin its wait loop at ~900
    wake-ups/s under load, 7-16 ms of CPU per command step for a node receiving one command
    (``bench/bench_ros_pipeline.py``). Nodes therefore keep heavy work on their own worker
    threads and their callbacks short. A node that really needs concurrent callbacks sets a
    class attribute ``executor_threads`` > 1 and gets a ``MultiThreadedExecutor`` with that
    many threads (capped by ``max_threads``, at least 2); no vid2sid node does.
    """
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    threads = int(getattr(node, "executor_threads", 1))
    if threads > 1:
        if max_threads is not None:
            threads = max(2, min(threads, int(max_threads)))
        return MultiThreadedExecutor(num_threads=threads, context=context)
    return SingleThreadedExecutor(context=context)


#: errors of bad input while a node is built (rig config, parameters, files, models): said in one line
_BAD_INPUT = (ValueError, KeyError, OSError, TwinError, CalibrationError)


def _program_name(make_node: Any) -> str:
    """The node module's short name, for one-line errors (``python -m`` runs it as ``__main__``)."""
    module = getattr(make_node, "__module__", None) or "node"
    if module == "__main__":  # python -m vid2sid_ros.nodes.X
        module = getattr(sys.modules["__main__"].__spec__, "name", None) or sys.argv[0]
    return module.rsplit(".", 1)[-1]


def run_node(make_node: Any, args: Any = None) -> None:
    """The body of every node's ``main(args=None)`` (the ros2/demos pattern, in one place).

    ``rclpy.init``, build the node with ``make_node()``, spin it on its own executor
    (:func:`make_executor`), return on SIGINT/SIGTERM (or an external shutdown), then destroy
    the node -- with the context still valid, so it can publish its last messages -- and
    shut rclpy down. Signals are handled in every phase (:mod:`vid2sid_ros.nodes.startup`):
    rclpy's own handlers are never installed, so a signal can never invalidate the context
    under a half-built node or before the node's goodbye; a signal during the imports or the
    construction ends the process at once, cleanly.

    Raises:
        SystemExit: code 2 when the node cannot be built from its input (a bad rig config,
            parameter, file or model: :data:`_BAD_INPUT`), after one line on stderr naming the
            node and the error (rclpy is shut down first); code 143 after SIGTERM (128 + 15;
            SIGINT: status 0). Run as a program (the executables), the process then ends at
            once (:func:`~vid2sid_ros.nodes.startup.fast_exit`); called in-process it returns.
    """
    import rclpy
    from rclpy._rclpy_pybind11 import RCLError
    from rclpy.executors import ExternalShutdownException
    from rclpy.signals import SignalHandlerOptions

    from .startup import StartupInterrupted, exit_status, fast_exit, raise_on_signal, received_signal

    node = None
    executor = None
    try:
        raise_on_signal(True)  # construction: a signal raises StartupInterrupted here (or at once if one came)
        try:
            rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
        except RCLError as err:  # malformed --ros-args (rcl says which): one line, exit 2
            print(f"vid2sid_ros {_program_name(make_node)}: bad ROS arguments: {str(err).splitlines()[0]}",
                  file=sys.stderr, flush=True)
            raise SystemExit(2) from None
        try:
            node = make_node()
        except BaseException as err:
            raise_on_signal(False)
            if received_signal() is not None:  # interrupted, whatever the exception it became on the way
                raise StartupInterrupted(received_signal()) from None  # (an ImportError from a C extension...)
            if not isinstance(err, _BAD_INPUT):
                raise
            # a bad rig config / parameter: one line, not a traceback (exit 2)
            print(f"vid2sid_ros {_program_name(make_node)}: {err}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
        raise_on_signal(False)  # from here signals are only recorded (no exception inside rclpy objects)
        executor = make_executor(node)
        executor.add_node(node)
        # spin until a signal is recorded (checked at least every 0.25 s) or the context is shut
        # down from elsewhere. rclpy's own handlers are not installed: they would shut the context
        # down at once, and destroy_node could then no longer publish what a stop owes the graph
        # (the excitation node's trial-end notice and on_stop command, the recorder's last messages)
        while rclpy.ok() and received_signal() is None:
            executor.spin_once(timeout_sec=0.25)
    except (KeyboardInterrupt, ExternalShutdownException, StartupInterrupted):
        pass
    except BaseException:
        if received_signal() is None:
            raise
        # a signal during start-up that surfaced as another exception (rclpy.init, an import): a clean stop
    finally:
        raise_on_signal(False)
        if executor is not None:
            executor.shutdown(timeout_sec=0)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    fast_exit(exit_status(received_signal()))


def create_stream_publisher(node: Any, msg_type: Any, topic: str, qos: QoSProfile = STREAM_QOS):
    """``node.create_publisher`` without rclpy's default QoS-event handlers.

    Each publisher otherwise adds two waitables (incompatible QoS, incompatible type)
    that the executor iterates on every wake-up, ~35 % of the CPU of a callback on a
    node with a few publishers (measured on the bench machine). An incompatible
    subscriber is still reported, by the subscriber's own handlers (the vid2sid
    subscriptions keep theirs: a camera driver with sensor-data QoS on a reliable
    subscription must not fail silently).
    """
    return node.create_publisher(msg_type, topic, qos,
                                 event_callbacks=PublisherEventCallbacks(use_default_callbacks=False))


def stamp_from_s(t: float) -> Time:
    """Seconds (float) -> builtin_interfaces/Time."""
    sec = math.floor(t)
    ns = int(round((t - sec) * 1e9))
    if ns >= 1_000_000_000:
        sec, ns = sec + 1, ns - 1_000_000_000
    return Time(sec=int(sec), nanosec=ns)


def s_from_stamp(stamp: Any) -> float:
    """builtin_interfaces/Time -> seconds (float)."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def msgtype_of(msg: Any) -> str:
    """ROS type name of an rclpy message instance, e.g. ``sensor_msgs/msg/Image``."""
    mod = type(msg).__module__.split(".")
    return f"{mod[0]}/{mod[1]}/{type(msg).__name__}"


def resolve_rig(name: str):
    """A :class:`~vid2sid_ros.core.rig.Rig` from a built-in rig name or a rig config file
    (the nodes' ``rig`` / ``rig_config`` parameters), through :func:`vid2sid_ros.rigs.load_rig`.

    A ``module:function`` reference is only imported with ``VID2SID_ALLOW_CODE=1`` in the
    environment (a node has no ``--allow-code`` flag).

    Raises:
        UnknownRigError: unknown name (lists the valid ones).
        RigConfigError: a bad config file, or refused code (one line naming the file and key).
    """
    from ..rigs import load_rig

    return load_rig(name)


def ros_param_name(spec_name: str, kind: str) -> str:
    """ROS parameter name of a twin parameter: ``physics.<name>`` or ``nuisance.<name>``."""
    return f"{kind}.{spec_name}"


def trajectory_to_msg(traj: Trajectory, *, stamp: Time | None = None, dropped: int | None = None,
                      late: int | None = None) -> TrajectoryMsg:
    """Core :class:`Trajectory` -> vid2sid_ros/Trajectory (row-major x/y/valid, T*K).

    ``dropped``/``late`` default to ``traj.meta['dropped_frames'|'late_frames']`` (0 if absent).
    """
    m = TrajectoryMsg()
    if stamp is not None:
        m.header.stamp = stamp
    m.source = traj.source
    m.trial_id = traj.trial_id
    m.keypoint_names = list(traj.names)
    m.num_steps = traj.num_frames
    m.time = traj.time.astype(float).tolist()
    m.x = traj.keypoints[..., 0].ravel().astype(float).tolist()
    m.y = traj.keypoints[..., 1].ravel().astype(float).tolist()
    m.valid = traj.valid.ravel().tolist()
    m.dropped_frames = int(traj.meta.get("dropped_frames", 0) if dropped is None else dropped)
    m.late_frames = int(traj.meta.get("late_frames", 0) if late is None else late)
    return m


def trajectory_from_msg(m: Any) -> Trajectory:
    """vid2sid_ros/Trajectory (rclpy or rosbags object) -> core :class:`Trajectory`.

    Steps are 0..T-1 (the message holds one row per command step). ``meta`` carries the
    dropped/late counts.

    Raises:
        ValueError: when the array lengths do not match ``num_steps * len(keypoint_names)``.
    """
    T, K = int(m.num_steps), len(m.keypoint_names)
    x, y = np.asarray(m.x, dtype=float), np.asarray(m.y, dtype=float)
    valid = np.asarray(m.valid, dtype=bool)
    if x.size != T * K or y.size != T * K or valid.size != T * K or len(m.time) != T:
        raise ValueError(f"Trajectory message of trial {m.trial_id!r}: expected T*K = {T}*{K} x/y/valid and T time "
                         f"entries, got {x.size}/{y.size}/{valid.size} and {len(m.time)}")
    kp = np.stack([x.reshape(T, K), y.reshape(T, K)], axis=2)
    return Trajectory(np.asarray(m.time, dtype=float), kp, valid.reshape(T, K), tuple(m.keypoint_names), m.source,
                      m.trial_id, np.arange(T),
                      {"dropped_frames": int(m.dropped_frames), "late_frames": int(m.late_frames)})


def keypoints_msg(source: str, trial_id: str, step: int, stamp: Time, names: Sequence[str], xy: np.ndarray,
                  valid: np.ndarray, frame_id: str = "") -> Keypoints:
    """Keypoints message of one frame; invalid keypoints carry NaN."""
    m = Keypoints()
    m.header.stamp = stamp
    m.header.frame_id = frame_id
    m.source, m.trial_id, m.step = source, trial_id, max(int(step), 0)
    m.names = list(names)
    xy = np.where(np.asarray(valid, bool)[:, None], np.asarray(xy, float), np.nan)
    m.x = xy[:, 0].tolist()
    m.y = xy[:, 1].tolist()
    m.valid = [bool(v) for v in valid]
    return m


#: RGBA (0..1) of the keypoint annotations: real = white dots, sim = red rings (the report's colours)
KEYPOINT_COLOURS = {"real": (1.0, 1.0, 1.0, 1.0), "sim": (0.9, 0.15, 0.15, 1.0)}


def camera_info_msg(intrinsics: Any, stamp: Time, frame_id: str):
    """``sensor_msgs/CameraInfo`` of a pinhole camera without distortion (the twins' cameras).

    Args:
        intrinsics: width, height (px), fx, fy, cx, cy (px) — a
            :class:`~vid2sid_ros.sim.base.CameraIntrinsics`; None = an uncalibrated camera
            (K all zero, as ``camera_calibration`` leaves it), size from ``width``/``height``
            attributes if present.
        stamp, frame_id: the header of the image it describes (same stamp and frame).
    """
    from sensor_msgs.msg import CameraInfo

    m = CameraInfo()
    m.header.stamp = stamp
    m.header.frame_id = frame_id
    m.distortion_model = "plumb_bob"
    m.d = [0.0] * 5
    m.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    if intrinsics is None:
        return m
    m.width, m.height = int(intrinsics.width), int(intrinsics.height)
    fx, fy, cx, cy = (float(getattr(intrinsics, k)) for k in ("fx", "fy", "cx", "cy"))
    if all(math.isfinite(v) for v in (fx, fy, cx, cy)):
        m.k = [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]
        m.p = [fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    return m


def image_marker_msg(source: str, stamp: Time, frame_id: str, xy: np.ndarray, valid: np.ndarray, *,
                     marker_id: int = 0, scale_px: float = 6.0):
    """``visualization_msgs/ImageMarker`` (POINTS) of one frame's tracked keypoints, for
    Foxglove's and RViz's image annotations: same stamp and frame as the image, one point
    per valid keypoint (px), coloured by ``source`` (:data:`KEYPOINT_COLOURS`)."""
    from geometry_msgs.msg import Point
    from std_msgs.msg import ColorRGBA
    from visualization_msgs.msg import ImageMarker

    m = ImageMarker()
    m.header.stamp = stamp
    m.header.frame_id = frame_id
    m.ns = f"vid2sid/{source}/keypoints"
    m.id = int(marker_id)
    m.type = ImageMarker.POINTS
    m.action = ImageMarker.ADD
    m.scale = float(scale_px)
    r, g, b, a = KEYPOINT_COLOURS.get(source, (1.0, 1.0, 0.0, 1.0))
    colour = ColorRGBA(r=r, g=g, b=b, a=a)
    m.outline_color = colour
    m.filled = 1
    m.fill_color = colour
    xy, valid = np.asarray(xy, float), np.asarray(valid, bool)
    m.points = [Point(x=float(x), y=float(y), z=0.0) for (x, y), v in zip(xy, valid) if v]
    m.outline_colors = [colour] * len(m.points)
    return m


def excitation_to_commands(exc: Excitation, trial_id: str, stamps: Iterable[float] | None = None
                           ) -> list[ExcitationCommand]:
    """One ExcitationCommand per step of ``exc`` (stamps in s, default 0)."""
    stamps = list(stamps) if stamps is not None else [0.0] * exc.num_steps
    out = []
    for k in range(exc.num_steps):
        c = ExcitationCommand()
        c.header.stamp = stamp_from_s(stamps[k])
        c.trial_id, c.step, c.period = trial_id, k, float(exc.period)
        c.actuator_names = list(exc.actuator_names)
        c.values = [float(v) for v in exc.values[k]]
        out.append(c)
    return out


def excitation_from_commands(commands: Sequence[Any], name: str = "") -> Excitation:
    """Rebuild the :class:`Excitation` of a trial from its commands (any order).

    A missing step holds the previous command (zero-order hold), as the rig does.

    Raises:
        ValueError: no commands, or inconsistent periods / actuator counts.
    """
    if not commands:
        raise ValueError("no excitation commands")
    cmds = sorted(commands, key=lambda c: int(c.step))
    period = float(cmds[0].period)
    A = len(cmds[0].values)
    if not period > 0:
        raise ValueError(f"command period must be > 0 s, got {period}")
    if any(abs(float(c.period) - period) > 1e-9 or len(c.values) != A for c in cmds):
        raise ValueError("commands of one trial must share the period and the number of actuators")
    T = int(cmds[-1].step) + 1
    values = np.full((T, A), np.nan)
    for c in cmds:
        values[int(c.step)] = np.asarray(c.values, dtype=float)
    for k in range(T):
        if np.isnan(values[k]).any():
            values[k] = values[k - 1] if k > 0 else 0.0
    names = tuple(cmds[0].actuator_names) or tuple(f"u{i}" for i in range(A))
    return Excitation(name or cmds[0].trial_id, 1.0 / period, values, names)


def parameter_update_msg(*, iteration: int, proposer: str, values: dict[str, float], parameters: ParameterSet,
                         rationale: str, confidence: float, error_px: float, accepted: bool,
                         stamp: Time | None = None) -> ParameterUpdate:
    """ParameterUpdate of one proposal (units from the spec)."""
    m = ParameterUpdate()
    if stamp is not None:
        m.header.stamp = stamp
    m.iteration, m.proposer = int(iteration), proposer
    m.names = list(values)
    m.values = [float(values[n]) for n in values]
    m.units = [parameters[n].unit if n in parameters else "" for n in values]
    m.rationale = rationale
    m.confidence = float(min(max(confidence, 0.0), 1.0)) if math.isfinite(confidence) else 0.0
    m.error_px = float(error_px) if math.isfinite(error_px) else float("nan")
    m.accepted = bool(accepted)
    return m


T = TypeVar("T")


class BufferQueue(Generic[T]):
    """Bounded FIFO that drops the OLDEST droppable item when full (camera_calibration's BufferQueue).

    Items put with ``droppable=False`` (control items such as "finalize trial") are never
    dropped and do not count against ``maxsize``. :attr:`dropped` counts dropped items.
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"BufferQueue maxsize must be >= 1, got {maxsize}")
        self.maxsize = int(maxsize)
        self._items: collections.deque[tuple[bool, T]] = collections.deque()
        self._cond = threading.Condition()
        self._droppable = 0
        self.dropped = 0

    def put(self, item: T, *, droppable: bool = True) -> None:
        with self._cond:
            if droppable:
                if self._droppable >= self.maxsize:
                    for i, (d, _) in enumerate(self._items):
                        if d:
                            del self._items[i]
                            self._droppable -= 1
                            self.dropped += 1
                            break
                self._droppable += 1
            self._items.append((droppable, item))
            self._cond.notify()

    def get(self, timeout: float | None = None) -> T | None:
        """Next item, or None after ``timeout`` s."""
        with self._cond:
            if not self._items and not self._cond.wait_for(lambda: bool(self._items), timeout):
                return None
            d, item = self._items.popleft()
            if d:
                self._droppable -= 1
            return item

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

