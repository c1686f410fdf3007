"""excitation_node: replays the commanded excitation, one trial at a time, at the command rate.

Publishes one ``ExcitationCommand`` per command period from a timer (no sleep loop) on
``/vid2sid/excitation`` (twin, tracker, calibrator) and the SAME message on the rig
driver's topic ``/vid2sid/real/command`` (remap it to your driver's topic). After the
last step it publishes the trial-end notice on ``/vid2sid/excitation/trial_end``: an
``ExcitationCommand`` with ``step`` = number of steps T and no values.

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

import threading

from ..core.yamlio import YAMLInputError, loads_yaml
from rclpy.node import Node
from std_srvs.srv import Trigger

from ..core.excitation import Excitation, ExcitationError, build_excitation
from .common import STREAM_QOS, ExcitationCommand, create_stream_publisher, resolve_rig, run_node
from .graph import TOPICS
from .params import RIG_CONFIG, Param, declare, values

__all__ = ["ExcitationNode", "PARAMS", "make_node", "main", "resolve_excitation"]

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
]


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
        self._pub = create_stream_publisher(self, ExcitationCommand, TOPICS["excitation"], STREAM_QOS)
        self._pub_rig = create_stream_publisher(self, ExcitationCommand, TOPICS["rig_command"], STREAM_QOS)
        self._pub_end = create_stream_publisher(self, ExcitationCommand, TOPICS["trial_end"], STREAM_QOS)
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
        self._pending_autostart = p["num_trials"] if p["autostart"] else 0
        self.completed_trials: list[str] = []
        if self._pending_autostart:
            self._delay_timer = self.create_timer(max(p["start_delay"], 1e-3), self._autostart)
        self.get_logger().info(f"excitation '{self._exc.name}': {self._exc.num_steps} steps at {self._exc.rate:g} Hz, "
                               f"actuators {list(self._exc.actuator_names)}")

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
            self.start_trial()
        if self._pending_autostart <= 0:
            self._delay_timer.cancel()

    def start_trial(self) -> str:
        """Start a new trial; returns its id. Raises RuntimeError if one is running."""
        with self._lock:
            if self._timer is not None:
                raise RuntimeError(f"trial {self._trial_id} is still running")
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
            self.completed_trials.append(self._trial_id)
        late = (f"; {self._late_commands} command(s) published more than one period after their scheduled time "
                "(timer jitter; the stamps keep the schedule)") if self._late_commands else ""
        self.get_logger().info(f"trial {self._trial_id} {reason} after {self._step} steps{late}")
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
                self._pub.publish(c)
                self._pub_rig.publish(c)
                self._step = k + 1
        if done:
            self.stop_trial("completed")

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


def make_node(**kwargs) -> ExcitationNode:
    return ExcitationNode(**kwargs)


def main(args=None) -> None:
    """``ros2 run vid2sid_ros <this node>``: init, build, spin until Ctrl-C/SIGTERM, destroy."""
    run_node(make_node, args)


if __name__ == "__main__":
    main()
