"""excitation_node: replays the commanded excitation, one trial at a time, at the command rate.

Publishes one ``ExcitationCommand`` per command period from a timer (no sleep loop) on
``/vid2sid/excitation/command`` (twin, tracker, calibrator, recorder) and the robot's command in
the robot's own interface (``command_interface``):

==================== =================================== ===========================================
command_interface    message on ``command_topic``          for
==================== =================================== ===========================================
``excitation_command`` ``vid2sid_ros/ExcitationCommand``  this package's stand-in rig (default topic
                                                            ``/vid2sid/real/command``)
``forward``          ``std_msgs/Float64MultiArray``        ros2_control ``forward_command_controller``
                     (``data`` in ``command_joints`` order) (position, velocity or effort), default
                                                            ``/forward_position_controller/commands``
``joint_trajectory`` ``trajectory_msgs/JointTrajectory``   ``joint_trajectory_controller``: one point
                     (``joint_names`` = ``command_joints``) per period, ``time_from_start`` = one period,
                                                            default ``/joint_trajectory_controller/joint_trajectory``
==================== =================================== ===========================================

``command_joints`` are the controller's joint names in its order (default: the rig's
actuator names); ``actuator_map`` (``["flexor_motor=flexor"]``) maps each twin actuator to
a command joint by name. After the last step the trial-end notice goes on
``/vid2sid/excitation/trial_end``: an ``ExcitationCommand`` with ``step`` = number of steps T
and no values.

Safety (checked in the robot's command space, per command joint; one value = all joints):

* no command before an explicit start (``/vid2sid/excitation/start`` or ``autostart``);
* ``limit_lower`` / ``limit_upper`` (amplitude), ``max_rate`` (|change| per second, also
  from the command held before the trial) and ``max_duration`` (s): a trial whose profile
  breaks one is refused before its first command (the start service answers why, naming
  step, joint, value and limit), and every command is checked again before it is
  published — a command outside the limits is never published;
* ``on_stop``: when a trial ends or is stopped: ``hold`` (publish nothing more: forward and
  trajectory controllers hold the last command), ``zero`` or ``home`` (``home`` values),
  reached in steps of at most ``max_rate`` per period. When the node dies (SIGINT/SIGTERM,
  destroy) mid-trial it sends ``zero``/``home`` only if that needs no ramp and the context
  still allows publishing; otherwise the controller holds the last (valid) command.

Command stamps follow the trial's schedule: step k is stamped ``t0 + k * period`` (t0 =
trial start), the time the command is meant for, so timer jitter never bunches the steps
of the lockstep pairing; a command the timer published more than one period after its
scheduled time is counted as late and reported at the end of the trial.

Trials start with the ``/vid2sid/excitation/start`` service (std_srvs/Trigger), or at
start-up with ``autostart``; ``/vid2sid/excitation/stop`` ends the running trial early
(the trial-end notice then carries the steps actually sent). Each trial gets the id
``<trial_prefix>_<n>`` (n from 0).

Parameters (config ``excitation_node: ros__parameters:``) are listed in :data:`PARAMS`.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from ..core.yamlio import YAMLInputError, loads_yaml
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from ..core.excitation import Excitation, ExcitationError, build_excitation
from .common import ExcitationCommand, qos_params, qos_profile, wait_for_subscribers, create_stream_publisher, resolve_rig, run_node
from .graph import TOPICS
from .params import RIG_CONFIG, Param, declare, values

__all__ = ["ExcitationNode", "PARAMS", "make_node", "main", "resolve_excitation", "CommandLimits",
           "COMMAND_INTERFACES", "command_columns", "actuator_command_ranges"]

#: command_interface -> default command topic
COMMAND_INTERFACES = {"excitation_command": TOPICS["rig_command"], "forward": "forward_position_controller/commands",
                      "joint_trajectory": "joint_trajectory_controller/joint_trajectory"}
_INF = float("inf")

PARAMS = [
    Param("rig", "finger", "built-in rig name whose excitation profiles and actuators are used (or set rig_config)", read_only=True),
    RIG_CONFIG,
    Param("excitation", "train:0",
          "profile to replay: '<set>:<index>' of the rig's excitation sets (train, holdout) or a profile name"),
    Param("excitation_config", "",
          "YAML/JSON mapping of an explicit profile overriding 'excitation', e.g. "
          "'{kind: chirp, f0: 0.3, f1: 3.0, amplitude: 0.5, duration: 4.0, rate: 30.0}'"),
    Param("rate", 0.0, "command rate overriding the profile's (profile re-sampled); 0 = the profile's rate",
          "Hz", 0.0, 1000.0),
    Param("trial_prefix", "trial", "trial ids are '<trial_prefix>_<n>'"),
    Param("autostart", False, "start a trial as soon as the node is up (after start_delay)"),
    Param("start_delay", 1.0, "delay before an autostarted trial, for subscribers to connect", "s", 0.0, 60.0),
    Param("num_trials", 1, "trials run back to back when autostarted", "", 1, 1000),
    Param("wait_for", [""], "nodes (in this namespace) whose subscription of the command stream or of the "
          "robot's command topic must be matched before a trial's first command, e.g. [sim_twin_node, "
          "tracker_node, calibrator_node, recorder_node, stand_in_rig_node]; empty = none", read_only=True),
    Param("wait_timeout", 30.0, "longest wait for 'wait_for' before a trial is refused naming the missing nodes",
          "s", 0.0, 3600.0),
    Param("command_interface", "excitation_command", "how the robot is commanded: excitation_command, forward "
          "(std_msgs/Float64MultiArray) or joint_trajectory (trajectory_msgs/JointTrajectory)",
          choices=tuple(COMMAND_INTERFACES), read_only=True),
    Param("command_topic", "", "robot command topic; empty = the interface's default", read_only=True),
    Param("command_joints", [""], "controller joint names in its order (Float64MultiArray order, JointTrajectory "
          "joint_names); empty = the rig's actuator names", read_only=True),
    Param("actuator_map", [""], "twin actuator -> command joint by name, entries 'actuator=joint'; unmapped "
          "actuators keep their name", read_only=True),
    Param("limit_lower", [-1.0e9], "lowest command per command joint (one value: all joints; default: none)",
          "command units", read_only=True),
    Param("limit_upper", [1.0e9], "highest command per command joint (one value: all joints; default: none)",
          "command units", read_only=True),
    Param("max_rate", [0.0], "largest |change| of a command per second, per command joint (one value: all; "
          "0 = no limit)", "command units/s", read_only=True),
    Param("max_duration", 0.0, "longest trial (0 = no limit)", "s", 0.0, 1.0e6, read_only=True),
    Param("on_stop", "hold", "what the robot is sent when a trial ends or stops: hold, zero or home",
          choices=("hold", "zero", "home"), read_only=True),
    Param("home", [0.0], "home command per command joint (one value: all) for on_stop: home", "command units",
          read_only=True),
] + qos_params(("streams",))


class CommandLimits:
    """Amplitude, rate and duration limits of the robot's commands (see module docstring).

    Args:
        joints: J command joint names.
        lower, upper, max_rate: one value (all joints) or J values, command units (per s);
            a rate of 0 (or inf) = no rate limit.
        max_duration: s; 0 (or inf) = no limit.

    Raises:
        ValueError: a list whose length is neither 1 nor J, lower > upper, a negative rate.
    """

    def __init__(self, joints, lower, upper, max_rate, max_duration: float) -> None:
        self.joints = tuple(joints)
        J = len(self.joints)

        def per_joint(name, v):
            a = np.asarray(list(v), float).ravel()
            if a.size == 1:
                a = np.full(J, a[0])
            if a.size != J:
                raise ValueError(f"parameter {name}: {a.size} values for {J} command joints {list(self.joints)}")
            return a

        self.lower, self.upper = per_joint("limit_lower", lower), per_joint("limit_upper", upper)
        rate = per_joint("max_rate", max_rate)
        if np.any(self.lower > self.upper):
            raise ValueError(f"parameter limit_lower {self.lower.tolist()} exceeds limit_upper {self.upper.tolist()}")
        if np.any(rate < 0):
            raise ValueError(f"parameter max_rate must be >= 0 per joint (0 = no limit), got {rate.tolist()}")
        self.max_rate = np.where(rate > 0, rate, _INF)
        self.max_duration = float(max_duration) if max_duration and max_duration > 0 else _INF

    def violation(self, values: np.ndarray, period: float, previous: np.ndarray | None = None,
                  step0: int = 0) -> str | None:
        """First limit ``values`` (T, J) break, as one line, or None.

        ``previous``: the command held before row 0 (rate-checked against it).
        """
        v = np.atleast_2d(np.asarray(values, float))
        T = v.shape[0]
        if T * period > self.max_duration + 1e-9:
            return f"the trial lasts {T * period:.3g} s, longer than max_duration {self.max_duration:g} s"
        bad = np.argwhere((v < self.lower) | (v > self.upper))
        if bad.size:
            k, j = bad[0]
            return (f"step {step0 + k}: {self.joints[j]} = {v[k, j]:.6g} outside [{self.lower[j]:.6g}, "
                    f"{self.upper[j]:.6g}] (limit_lower/limit_upper)")
        prev = v[:-1] if previous is None else np.vstack([np.asarray(previous, float)[None, :], v[:-1]])
        cur = v[1:] if previous is None else v
        if cur.size:
            rate = np.abs(cur - prev) / period
            bad = np.argwhere(rate > self.max_rate * (1 + 1e-9))
            if bad.size:
                k, j = bad[0]
                k = k + (1 if previous is None else 0)
                return (f"step {step0 + k}: {self.joints[j]} changes at {rate[bad[0][0], j]:.6g} per s, faster "
                        f"than max_rate {self.max_rate[j]:.6g}")
        return None

    def ramp(self, start: np.ndarray, target: np.ndarray, period: float) -> list[np.ndarray]:
        """Commands from ``start`` to ``target`` changing at most ``max_rate * period`` per step (target last)."""
        start, target = np.asarray(start, float), np.asarray(target, float)
        step = self.max_rate * period
        with np.errstate(invalid="ignore", divide="ignore"):
            n = int(np.max(np.where(np.isfinite(step), np.ceil(np.abs(target - start) / step - 1e-12), 1)))
        n = max(n, 1)
        return [start + (target - start) * (i / n) for i in range(1, n + 1)]


def command_columns(actuators, command_joints, actuator_map) -> tuple[tuple[str, ...], list[int]]:
    """The robot's command joints and, per joint, the excitation column (actuator index) driving it.

    Args:
        actuators: A twin actuator names (excitation column order).
        command_joints: parameter ``command_joints`` (empty entries ignored; none = the mapped actuators).
        actuator_map: parameter ``actuator_map``, entries ``'actuator=joint'``.

    Raises:
        ValueError: a malformed map entry, or a command joint no actuator drives (one line naming the parameter).
    """
    actuators = tuple(actuators)
    amap = {}
    for entry in [e for e in actuator_map if e]:
        a, sep, j = entry.partition("=")
        if not sep or a.strip() not in actuators or not j.strip():
            raise ValueError(f"parameter actuator_map: entry {entry!r}; expected 'actuator=joint' with actuator "
                             f"one of {', '.join(actuators)}")
        amap[a.strip()] = j.strip()
    mapped = [amap.get(a, a) for a in actuators]
    joints = tuple(j for j in command_joints if j) or tuple(mapped)
    missing = [j for j in joints if j not in mapped]
    if missing:
        raise ValueError(f"parameter command_joints: {missing} driven by no actuator (actuators map to "
                         f"{mapped}; set actuator_map 'actuator=joint')")
    return joints, [mapped.index(j) for j in joints]


def actuator_command_ranges(actuators, command_joints, actuator_map, limit_lower, limit_upper
                            ) -> list[tuple[float, float]]:
    """Each twin actuator's ``(lower, upper)`` command limit on the robot (the excitation node's
    ``limit_lower`` / ``limit_upper`` through its joint mapping; an actuator driving no command
    joint: unlimited). Used to design excitations the node will play (calibrator's active learning).

    Raises:
        ValueError: as :func:`command_columns` and :class:`CommandLimits`.
    """
    joints, columns = command_columns(actuators, command_joints, actuator_map)
    lim = CommandLimits(joints, limit_lower, limit_upper, [0.0], 0.0)
    out = []
    for i in range(len(tuple(actuators))):
        js = [j for j, c in enumerate(columns) if c == i]
        out.append((max([float(lim.lower[j]) for j in js], default=-_INF),
                    min([float(lim.upper[j]) for j in js], default=_INF)))
    return out


def actuator_rate_limits(actuators, command_joints, actuator_map, max_rate) -> list[float]:
    """Each twin actuator's largest |change| per second on the robot (the excitation node's ``max_rate``
    through its joint mapping, the smallest over the joints it drives; inf: none). Used to design
    excitations the node will play (calibrator's active learning).

    Raises:
        ValueError: as :func:`command_columns` and :class:`CommandLimits`.
    """
    joints, columns = command_columns(actuators, command_joints, actuator_map)
    lim = CommandLimits(joints, [-_INF], [_INF], max_rate, 0.0)
    return [min([float(lim.max_rate[j]) for j, c in enumerate(columns) if c == i], default=_INF)
            for i in range(len(tuple(actuators)))]


def actuator_held_command(actuators, command_joints, actuator_map, on_stop, home, last) -> list[float] | None:
    """The command (per twin actuator) the robot holds before the next trial: the last command sent
    (``last``, A values, None when none was seen) with ``on_stop: hold``, zero with ``zero``, ``home``
    (per command joint, through the joint mapping) with ``home``; None when not known.

    Raises:
        ValueError: as :func:`command_columns`, or ``home`` not one value or one per command joint.
    """
    if on_stop == "zero":
        return [0.0] * len(tuple(actuators))
    if on_stop == "home":
        joints, columns = command_columns(actuators, command_joints, actuator_map)
        h = np.asarray(list(home), float).ravel()
        h = np.full(len(joints), h[0]) if h.size == 1 else h
        if h.size != len(joints):
            raise ValueError(f"parameter home: {h.size} values for {len(joints)} command joints")
        out = [float(last[i]) if last is not None else 0.0 for i in range(len(tuple(actuators)))]
        for j, c in enumerate(columns):
            out[c] = float(h[j])
        return out
    return None if last is None else [float(v) for v in last]


def resolve_excitation(rig_name: str, spec: str, config: str, rate: float, *, rig=None) -> Excitation:
    """The :class:`Excitation` a node configuration asks for.

    Args:
        rig_name: registry rig name (actuator names, excitation sets).
        spec: ``"<set>:<index>"`` or a profile name.
        config: explicit profile as YAML text (overrides ``spec`` when non-empty).
        rate: command rate in Hz overriding the profile's, 0 = keep.
        rig: the already built Rig (skips building it from ``rig_name``).

    Raises:
        ExcitationError: unknown profile, bad YAML, or a profile that does not fit the rig.
    """
    rig = rig if rig is not None else resolve_rig(rig_name)
    sets = rig.excitations
    profiles = [e for es in sets.values() for e in es]
    if not profiles:
        raise ExcitationError(f"rig {rig_name!r} defines no excitation profiles")
    actuators = profiles[0].actuator_names  # built with the rig's actuator names
    if config.strip():
        try:
            cfg = loads_yaml(config, source="parameter excitation_config")
        except YAMLInputError as err:
            raise ExcitationError(str(err)) from None
        if not isinstance(cfg, dict):
            raise ExcitationError(f"parameter excitation_config must be a mapping, got {config!r}")
        if rate > 0:
            cfg = {**cfg, "rate": rate}
        return build_excitation(cfg, actuators)
    exc = None
    if ":" in spec:
        set_name, _, idx = spec.partition(":")
        if set_name not in sets:
            raise ExcitationError(f"excitation '{spec}': rig {rig_name!r} has sets {', '.join(sets)}")
        try:
            exc = sets[set_name][int(idx)]
        except (ValueError, IndexError):
            raise ExcitationError(f"excitation '{spec}': set '{set_name}' has {len(sets[set_name])} profiles "
                                  f"(indices 0..{len(sets[set_name]) - 1})") from None
    else:
        named = {e.name: e for es in sets.values() for e in es}
        if spec not in named:
            raise ExcitationError(f"unknown excitation {spec!r}; rig {rig_name!r} has: {', '.join(named)} "
                                  "(or use '<set>:<index>')")
        exc = named[spec]
    if rate > 0 and abs(rate - exc.rate) > 1e-9:
        if exc.meta.get("kind") and exc.meta.get("kind") != "csv":
            return build_excitation({**dict(exc.meta), "rate": rate}, exc.actuator_names)
        raise ExcitationError(f"excitation '{exc.name}' comes from a file and cannot be re-sampled to {rate} Hz")
    return exc


class ExcitationNode(Node):
    """Timer-driven command publisher (see module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__("excitation_node", **kwargs)
        declare(self, PARAMS)
        p = values(self, PARAMS)
        self._exc = resolve_excitation(p["rig_config"] or p["rig"], p["excitation"], p["excitation_config"],
                                       p["rate"])
        self.add_on_set_parameters_callback(self._on_params)
        self._pub = create_stream_publisher(self, ExcitationCommand, TOPICS["excitation"], qos_profile(self, "streams"))
        self._setup_robot_interface(p)
        self._pub_end = create_stream_publisher(self, ExcitationCommand, TOPICS["trial_end"], qos_profile(self, "streams"))
        self.create_service(Trigger, TOPICS["start"], self._srv_start)
        self.create_service(Trigger, TOPICS["stop"], self._srv_stop)
        self._lock = threading.Lock()
        self._timer = None
        self._trial_id = ""
        self._step = 0
        self._trial_count = 0
        self._late_commands = 0
        #: publish time minus scheduled time of each command of the current / last trial, s
        self.command_delays: list[float] = []
        self._t0_ns = 0
        self._ramp: list[np.ndarray] = []
        self._ramp_timer = None
        #: commands published on the robot's topic (robot space, (J,) each), for tests and logs
        self.robot_commands: list[np.ndarray] = []
        self.refused: list[str] = []
        self._pending_autostart = p["num_trials"] if p["autostart"] else 0
        self.completed_trials: list[str] = []
        if self._pending_autostart:
            self._delay_timer = self.create_timer(max(p["start_delay"], 1e-3), self._autostart)
        self.get_logger().info(f"excitation '{self._exc.name}': {self._exc.num_steps} steps at {self._exc.rate:g} Hz, "
                               f"actuators {list(self._exc.actuator_names)}")

    # -- the robot's interface ---------------------------------------------------------
    def _setup_robot_interface(self, p: dict) -> None:
        self.interface = p["command_interface"]
        topic = p["command_topic"] or COMMAND_INTERFACES[self.interface]
        actuators = tuple(self._exc.actuator_names)
        joints, columns = command_columns(actuators, p["command_joints"], p["actuator_map"])
        self.command_joints = joints
        self._columns = columns  # robot joint j <- excitation column
        self.limits = CommandLimits(joints, p["limit_lower"], p["limit_upper"], p["max_rate"], p["max_duration"])
        self._on_stop = p["on_stop"]
        home = np.asarray(p["home"], float).ravel()
        self._home = np.full(len(joints), home[0]) if home.size == 1 else home
        if self._home.size != len(joints):
            raise ValueError(f"parameter home: {self._home.size} values for {len(joints)} command joints")
        bad = self.limits.violation(self._home[None, :], self._exc.period)
        if self._on_stop == "home" and bad:
            raise ValueError(f"parameter home: {bad.replace('step 0: ', '')}")
        self._held: np.ndarray | None = None  # the last command the robot got
        if self.interface == "excitation_command":
            self._pub_rig = create_stream_publisher(self, ExcitationCommand, topic, qos_profile(self, "streams"))
        elif self.interface == "forward":
            self._pub_rig = create_stream_publisher(self, Float64MultiArray, topic, qos_profile(self, "streams"))
        else:
            from trajectory_msgs.msg import JointTrajectory

            self._pub_rig = create_stream_publisher(self, JointTrajectory, topic, qos_profile(self, "streams"))
        self.command_topic = topic

    def robot_values(self, exc: Excitation | None = None) -> np.ndarray:
        """The trial's commands in the robot's joint order, (T, J)."""
        exc = exc or self._exc
        return np.asarray(exc.values, float)[:, self._columns]

    def _send_robot(self, values: np.ndarray, command: ExcitationCommand | None = None) -> bool:
        """Publish one robot command after checking it; False (and nothing published) when outside the limits."""
        bad = self.limits.violation(values[None, :], self._exc.period, self._held)
        if bad:
            self.get_logger().error(f"command refused, not published: {bad}")
            self.refused.append(bad)
            return False
        if self.interface == "excitation_command":
            self._pub_rig.publish(command)
        elif self.interface == "forward":
            msg = Float64MultiArray()
            msg.data = [float(v) for v in values]
            self._pub_rig.publish(msg)
        else:
            from builtin_interfaces.msg import Duration
            from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

            msg = JointTrajectory()
            msg.joint_names = list(self.command_joints)
            pt = JointTrajectoryPoint()
            pt.positions = [float(v) for v in values]
            sec, nsec = divmod(int(round(self._exc.period * 1e9)), 1_000_000_000)
            pt.time_from_start = Duration(sec=sec, nanosec=nsec)
            msg.points = [pt]
            self._pub_rig.publish(msg)
        self._held = np.asarray(values, float).copy()
        self.robot_commands.append(self._held)
        return True

    def _safe_stop(self, *, can_spin: bool = True) -> str:
        """Send the on_stop command (ramped at max_rate when the node keeps spinning).

        Returns:
            the robot's commanded state after the stop, in words (logged with the stop).
        """
        held = "none sent yet" if self._held is None else \
            "[" + ", ".join(f"{j}={v:.6g}" for j, v in zip(self.command_joints, self._held)) + "]"
        if self._on_stop == "hold" or self._held is None:
            return f"on_stop hold: the robot holds the last command {held}"
        if self.interface == "excitation_command":
            return (f"on_stop {self._on_stop} does not apply to the excitation_command interface (the stand-in "
                    f"rig): it holds the last command {held}")
        target = np.zeros_like(self._held) if self._on_stop == "zero" else self._home.copy()
        ramp = self.limits.ramp(self._held, target, self._exc.period)
        if not can_spin:
            if len(ramp) == 1:
                try:
                    self._send_robot(ramp[0])
                    return f"on_stop {self._on_stop}: sent {target.tolist()} (no ramp needed)"
                except Exception:  # noqa: BLE001 - the context may be gone at node death
                    return f"on_stop {self._on_stop}: could not be sent at shutdown; the robot holds {held}"
            return (f"node stopping: on_stop {self._on_stop} needs a {len(ramp)}-step ramp at max_rate; the "
                    f"controller holds the last command {held}")
        self._ramp = ramp
        if self._ramp_timer is None:
            self._ramp_timer = self.create_timer(self._exc.period, self._ramp_tick)
        self._ramp_tick()
        return f"on_stop {self._on_stop}: ramping from {held} to {target.tolist()} in {len(ramp)} step(s) at max_rate"

    def _ramp_tick(self) -> None:
        if self._ramp and self._timer is None:
            self._send_robot(self._ramp.pop(0))
        if not self._ramp and self._ramp_timer is not None:
            self._ramp_timer.cancel()
            self.destroy_timer(self._ramp_timer)
            self._ramp_timer = None

    # -- parameters ------------------------------------------------------------------
    def _on_params(self, changes):
        from rcl_interfaces.msg import SetParametersResult

        p = values(self, PARAMS)
        p.update({c.name: c.value for c in changes if c.name in p})
        if any(c.name in ("excitation", "excitation_config", "rate") for c in changes):
            if self._timer is not None:
                return SetParametersResult(successful=False, reason="a trial is running; stop it first")
            try:
                self._exc = resolve_excitation(p["rig_config"] or p["rig"], p["excitation"], p["excitation_config"],
                                               p["rate"])
            except ExcitationError as err:
                return SetParametersResult(successful=False, reason=str(err))
        return SetParametersResult(successful=True)

    @property
    def excitation(self) -> Excitation:
        return self._exc

    @property
    def running(self) -> bool:
        return self._timer is not None

    # -- trials ----------------------------------------------------------------------
    def _autostart(self) -> None:
        if self._timer is None and self._pending_autostart > 0:
            self._pending_autostart -= 1
            try:
                self.start_trial()
            except RuntimeError:  # refused (limits, subscribers): logged by start_trial
                self._pending_autostart = 0
        if self._pending_autostart <= 0:
            self._delay_timer.cancel()

    def start_trial(self) -> str:
        """Start a new trial; returns its id.

        Raises:
            RuntimeError: a trial is running, or the profile breaks a command limit (the
                message names step, joint, value and limit; nothing is published).
        """
        if self._timer is not None:
            raise RuntimeError(f"trial {self._trial_id} is still running")
        pubs = [self._pub] + ([self._pub_rig] if self._pub_rig.topic_name != self._pub.topic_name else [])
        missing = wait_for_subscribers(self, pubs, self.get_parameter("wait_for").value,
                                       self.get_parameter("wait_timeout").value)
        if missing:
            why = (f"trial refused (nothing published): no command subscription of {', '.join(missing)} on "
                   f"{' or '.join(p.topic_name for p in pubs)} after {self.get_parameter('wait_timeout').value:g} s "
                   "(wait_for); is that node running in this namespace?")
            self.refused.append(why)
            self.get_logger().error(why)
            raise RuntimeError(why)
        with self._lock:
            if self._timer is not None:
                raise RuntimeError(f"trial {self._trial_id} is still running")
            bad = self.limits.violation(self.robot_values(), self._exc.period, self._held)
            if bad:
                self.refused.append(bad)
                self.get_logger().error(f"trial refused, nothing published: {bad}")
                raise RuntimeError(f"trial refused (nothing published): {bad}")
            self._ramp = []
            self._trial_id = f"{self.get_parameter('trial_prefix').value}_{self._trial_count}"
            self._trial_count += 1
            self._step = 0
            self._late_commands = 0
            self.command_delays = []
            self._t0_ns = self.get_clock().now().nanoseconds
            self._timer = self.create_timer(self._exc.period, self._tick)
        self.get_logger().info(f"trial {self._trial_id} started ({self._exc.num_steps} steps)")
        self._tick()  # step 0 now, the others on the timer
        return self._trial_id

    def stop_trial(self, reason: str = "stopped") -> None:
        with self._lock:
            if self._timer is None:
                return
            self._timer.cancel()
            self.destroy_timer(self._timer)
            self._timer = None
            end = ExcitationCommand()
            end.header.stamp = self.get_clock().now().to_msg()
            end.trial_id, end.step, end.period = self._trial_id, self._step, float(self._exc.period)
            end.actuator_names = list(self._exc.actuator_names)
            self._pub_end.publish(end)
            if reason == "node shutting down":  # the process ends next: let the notice reach its readers
                try:
                    from rclpy.duration import Duration

                    self._pub_end.wait_for_all_acked(Duration(seconds=0.5))
                except Exception:  # noqa: BLE001 - best effort at node death
                    pass
            self.completed_trials.append(self._trial_id)
        state = self._safe_stop(can_spin=reason != "node shutting down")
        late = (f"; {self._late_commands} command(s) published more than one period after their scheduled time "
                "(timer jitter; the stamps keep the schedule)") if self._late_commands else ""
        #: the last stop's robot state, in words
        self.stop_state = state
        log = self.get_logger().info if reason == "completed" else self.get_logger().warning
        log(f"trial {self._trial_id} {reason} after {self._step} steps (trial-end notice sent); {state}{late}")
        if self._pending_autostart > 0 and reason == "completed":
            self._delay_timer.reset()

    def _tick(self) -> None:
        with self._lock:
            if self._timer is None:
                return
            k = self._step
            if k >= self._exc.num_steps:
                done = True
            else:
                done = False
                c = ExcitationCommand()
                due_ns = self._t0_ns + int(round(k * self._exc.period * 1e9))
                lag_ns = self.get_clock().now().nanoseconds - due_ns
                self.command_delays.append(1e-9 * lag_ns)
                if lag_ns > self._exc.period * 1e9:
                    self._late_commands += 1
                c.header.stamp.sec, c.header.stamp.nanosec = divmod(due_ns, 1_000_000_000)
                c.trial_id, c.step, c.period = self._trial_id, k, float(self._exc.period)
                c.actuator_names = list(self._exc.actuator_names)
                c.values = [float(v) for v in self._exc.values[k]]
                robot = np.asarray(self._exc.values[k], float)[self._columns]
                if self._send_robot(robot, c):
                    self._pub.publish(c)
                    self._step = k + 1
                else:
                    done = True  # never published; the robot holds the last valid command
        if done:
            self.stop_trial("completed" if self._step >= self._exc.num_steps else "stopped: command outside limits")

    def _srv_start(self, request, response):
        try:
            response.message = self.start_trial()
            response.success = True
        except RuntimeError as err:
            response.success, response.message = False, str(err)
        return response

    def _srv_stop(self, request, response):
        if self._timer is None:
            response.success, response.message = False, "no trial is running"
        else:
            tid = self._trial_id
            self.stop_trial("stopped on request")
            response.success, response.message = True, tid
        return response


    def destroy_node(self) -> None:
        if getattr(self, "_timer", None) is not None:  # dying mid-trial: end it and make the robot safe
            try:
                self.stop_trial("node shutting down")
            except Exception:  # noqa: BLE001 - the context may be shut down already
                pass
        super().destroy_node()


def make_node(**kwargs) -> ExcitationNode:
    return ExcitationNode(**kwargs)


def main(args=None) -> None:
    """``ros2 run vid2sid_ros <this node>``: init, build, spin until Ctrl-C/SIGTERM, destroy."""
    run_node(make_node, args)


if __name__ == "__main__":
    main()
