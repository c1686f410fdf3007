"""A client of a running vid2sid graph: start a trial, wait for its trajectories, ask for a
calibration, close the bag. Used by ``vid2sid bringup --calibrate`` and ``vid2sid propose``.

It is a plain rclpy node spun by its own single-threaded executor on the caller's thread
(``spin_until_future_complete``), so it works next to an in-process bringup (same
context, its own executor) and against a graph in another process (over DDS).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_srvs.srv import Trigger

from .common import LATCHED_QOS, SERVICE_QOS, TrajectoryMsg
from .graph import TOPICS

from vid2sid_ros.srv import Propose  # noqa: E402  (interfaces checked by .common)

__all__ = ["GraphClient", "GraphClientError", "PROPOSE_FIELDS", "propose_timeout"]

#: request fields of /vid2sid/propose (srv/Propose.srv), in file order
PROPOSE_FIELDS = ("proposer", "trial_id", "names", "apply", "iterations")


#: default wait for a Propose answer: a fixed part (discovery, trial set-up, the final
#: identifiability check, the answer of a busy node) plus a part per iteration asked for
PROPOSE_BASE_S = 120.0
PROPOSE_PER_ITERATION_S = 60.0


def propose_timeout(iterations: int) -> float:
    """Default longest wait for ``/vid2sid/propose`` asking ``iterations`` (0 counts as 1), s:
    :data:`PROPOSE_BASE_S` + :data:`PROPOSE_PER_ITERATION_S` per iteration. A busy calibrator
    answers at once (refused with its queue depth), so the wait is for the work asked for."""
    return PROPOSE_BASE_S + PROPOSE_PER_ITERATION_S * max(int(iterations), 1)


class GraphClientError(RuntimeError):
    """A service is unavailable or did not answer in time (the message names it)."""


class GraphClient:
    """Service calls and trajectory waits against the graph's default names (:data:`TOPICS`).

    Args:
        context: the rclpy context (initialised by the caller).
        name: node name of the client.
        namespace: the graph's namespace (``robot1`` or ``/robot1``; empty = the root): the
            client's relative names resolve into it, like the graph's own.
    """

    def __init__(self, context: Any, name: str = "vid2sid_client", namespace: str = "") -> None:
        self.node = Node(name, context=context, namespace="/" + str(namespace).strip().strip("/"))
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.real: dict[str, Any] = {}
        self.sim: dict[str, Any] = {}
        self.node.create_subscription(TrajectoryMsg, TOPICS["real_trajectory"],
                                      lambda m: self.real.__setitem__(m.trial_id, m), LATCHED_QOS)
        self.node.create_subscription(TrajectoryMsg, TOPICS["sim_trajectory"],
                                      lambda m: self.sim.__setitem__(m.trial_id, m), LATCHED_QOS)
        self._clients: dict[str, Any] = {}

    def _call(self, srv_type, name: str, request, timeout: float):
        cli = self._clients.get(name) or self._clients.setdefault(name, self.node.create_client(
            srv_type, name, qos_profile=SERVICE_QOS))  # a deep reply queue: see common.SERVICE_QOS
        deadline = time.monotonic() + min(timeout, 30.0)
        while not cli.service_is_ready():
            if time.monotonic() > deadline:
                raise GraphClientError(f"service {name} is not available (is the graph running on this "
                                       f"ROS_DOMAIN_ID?)")
            self.executor.spin_once(timeout_sec=0.1)
        fut = cli.call_async(request)
        self.executor.spin_until_future_complete(fut, timeout_sec=timeout)
        if not fut.done():
            cli.remove_pending_request(fut)
            raise GraphClientError(f"service {name} did not answer within {timeout:g} s")
        return fut.result()

    def start_trial(self, timeout: float = 60.0) -> str:
        """Start the excitation node's next trial; returns its trial id. The node answers once its
        subscribers are matched (its ``wait_for``, at most ``wait_timeout``, 30 s in the configs),
        hence the default ``timeout`` of 60 s.

        Raises:
            GraphClientError: unavailable, or the node refused (its message).
        """
        r = self._call(Trigger, TOPICS["start"], Trigger.Request(), timeout)
        if not r.success:
            raise GraphClientError(f"{TOPICS['start']}: {r.message}")
        return r.message

    def wait_trajectories(self, trial_id: str, timeout: float) -> tuple[Any, Any]:
        """Spin until the real and sim trajectories of ``trial_id`` arrived; returns both messages.

        Raises:
            GraphClientError: not both within ``timeout`` s (says which is missing).
        """
        deadline = time.monotonic() + timeout
        while trial_id not in self.real or trial_id not in self.sim:
            if time.monotonic() > deadline:
                missing = [s for s, d in (("real", self.real), ("sim", self.sim)) if trial_id not in d]
                raise GraphClientError(f"trial {trial_id}: no {' and '.join(missing)} trajectory within {timeout:g} s")
            self.executor.spin_once(timeout_sec=0.1)
        return self.real[trial_id], self.sim[trial_id]

    def propose(self, *, proposer: str = "", trial_id: str = "", names: Sequence[str] = (), apply: bool = False,
                iterations: int = 0, timeout: float | None = None):
        """Call ``/vid2sid/propose`` with the fields of ``srv/Propose.srv``; returns the response.

        ``timeout`` (s): None = :func:`propose_timeout` of ``iterations``.
        """
        if timeout is None:
            timeout = propose_timeout(iterations)
        req = Propose.Request(proposer=proposer, trial_id=trial_id, names=list(names), apply=bool(apply),
                              iterations=int(iterations))
        return self._call(Propose, TOPICS["propose"], req, timeout)

    def set_parameter(self, node: str, name: str, value: Any, timeout: float = 10.0) -> None:
        """Set one ROS parameter of a graph node (``<node>/set_parameters``, like ``ros2 param set``).

        Raises:
            GraphClientError: unavailable, or the node refused the value (its reason).
        """
        from rclpy.parameter import Parameter
        from rcl_interfaces.srv import SetParameters

        req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        r = self._call(SetParameters, f"{node}/set_parameters", req, timeout)
        bad = [x.reason for x in r.results if not x.successful]
        if bad:
            raise GraphClientError(f"{node}: parameter {name} = {value!r} refused: {'; '.join(bad)}")

    def stop_recorder(self, timeout: float = 10.0) -> str:
        """Close the bag (``/vid2sid/recorder/stop``); returns the recorder's message."""
        r = self._call(Trigger, TOPICS["recorder_stop"], Trigger.Request(), timeout)
        return r.message

    def close(self) -> None:
        self.executor.remove_node(self.node)
        self.executor.shutdown(timeout_sec=0)
        self.node.destroy_node()
