"""calibrator_node: serves /vid2sid/propose, runs the calibration loop, applies proposals to the twin.

Inputs: the command stream (``/vid2sid/excitation/command``; the excitation of every trial is
rebuilt from its commands) and the tracker's real trajectories
(``/vid2sid/real/trajectory``). Each real trial (its excitation + real trajectory) is a
training trial of :class:`~vid2sid_ros.calibration.observation.RealTrial`.

``/vid2sid/propose`` (Propose.srv) runs :func:`~vid2sid_ros.calibration.loop.run_calibration`
with the requested proposer (``make_proposer``: reasoner by default, gemini, baselines)
for ``max(iterations, 1)`` more iterations of a *session*. A session — one per
(trial, proposer, free parameters) — keeps its history in ``run_dir/<session>/``
(``run.json``, ``iterations.jsonl``): the next request resumes it, so ten requests of
one iteration make the same ten-iteration calibration as one request of ten. Every
completed iteration is published on ``/vid2sid/parameter_update`` (progress; ``accepted``
false), then the best parameters of the session are applied (``apply``) and published
once more with ``accepted`` true.

Applying: the twin is ``sim_twin_node``, a separate node (in-process in the bringup, a
process of its own under ``ros2 launch``); the calibrator sets its ROS parameters
``physics.<name>`` through the standard parameter service
(``/<twin_node>/set_parameters``), exactly like ``ros2 param set``. Candidate
evaluations run on the calibrator's own headless twin instance (same rig, no
rendering), so searching never disturbs the live lockstep twin.

Threading and load: the node spins a single-threaded executor (a multi-threaded one costs
several times the CPU per callback of the command stream:
:func:`~vid2sid_ros.nodes.common.make_executor`). The ``/vid2sid/propose`` callback
puts the request in a bounded queue and returns; the answer is sent when the worker has it
(:class:`_DeferredResponse`), so the executor stays free meanwhile (commands, trajectories,
the twin's parameter-service replies, more requests). A worker thread serves the queue one
request at a time, in arrival order, running the calibration on the evaluation twin's own thread. Every request is answered: served, queued
(at most ``max_queued_requests`` wait), or refused at once with ``accepted: false`` and a
message "busy: ... (queue depth N of max_queued_requests M)". The service's request reader
is deep (:data:`SERVICE_QOS`), so a burst of calls all reach that queue. Accepted
proposals are applied through the twin node's parameter service, called from the worker
while this node's executor takes the reply (no helper node).

Bad requests (unknown proposer, unknown or frozen parameter, no real trajectory yet)
get ``accepted: false`` and a message naming the problem and the valid choices.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import math
import re
import threading
from pathlib import Path
from typing import Any

from ..core.yamlio import YAMLInputError, loads_yaml
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

from ..core.excitation import Excitation
from ..core.trajectory import Trajectory
from .common import SERVICE_QOS as _SERVICE_QOS, ExcitationCommand, create_qos_subscription, qos_params, qos_profile, ParameterUpdate, TrajectoryMsg, run_node, \
    create_stream_publisher, excitation_from_commands, parameter_update_msg, resolve_rig, \
    ros_param_name, trajectory_from_msg
from .graph import TOPICS
from .params import RIG_CONFIG, Param, declare, values

from vid2sid_ros.srv import Propose  # noqa: E402  (interfaces checked by .common)

__all__ = ["CalibratorNode", "PARAMS", "SERVICE_QOS", "make_node", "main"]

#: QoS of /vid2sid/propose: a deep request queue, so a burst of calls all reach the node's
#: own bounded queue (served or refused "busy") instead of being lost in the DDS reader
#: (the services default, depth 10, dropped all but 10 of a burst of 26)
SERVICE_QOS = _SERVICE_QOS

PARAMS = [
    Param("rig", "finger", "built-in rig name of the rig being calibrated (or set rig_config)", read_only=True),
    RIG_CONFIG,
    Param("proposer", "reasoner", "default proposer (reasoner, gemini, random, nelder-mead, golden-cd, bo, cmaes, "
          "openai-compatible)"),
    Param("proposer_options", "", "YAML mapping of keyword arguments for the proposer, e.g. '{model: gemini-2.5-pro}'"),
    Param("run_dir", "runs/calibrator", "directory of the calibration sessions (one subdirectory each)"),
    Param("rollout_budget", 400, "twin rollouts one session may spend over all its iterations", "rollouts", 1, 10**7),
    Param("seed", 0, "seed handed to stochastic proposers", "", 0, 2**31 - 1),
    Param("identifiability", False, "run the identifiability check at the start of a session (diagnostic rollouts)"),
    Param("twin_node", "sim_twin_node", "node whose physics.<name> parameters receive accepted proposals"),
    Param("apply_timeout", 5.0, "wait for the twin's parameter service", "s", 0.1, 120.0),
    Param("final_identifiability", True, "check identifiability at the result: Gauss–Newton intervals and the "
          "correlation matrix for the report (diagnostic rollouts, not charged to the budget)"),
    Param("trials", "latest", "real trials fitted when the request names none", choices=("latest", "all")),
    Param("executor", "serial", "where a session's finite-difference rollouts run (same results on each): serial, "
          "threads (MuJoCo twins), pool (worker processes), ray", choices=("serial", "threads", "pool", "ray"),
          read_only=True),
    Param("workers", 0, "concurrent workers of the executor (0: this machine's CPUs)", "", 0, 1024, read_only=True),
    Param("ray_address", "", "executor ray: the cluster to join (auto or HOST:PORT; empty: a private local Ray on "
          "127.0.0.1)", read_only=True),
    Param("max_queued_requests", 4, "Propose requests that may wait while one is served; one more is "
          "answered at once 'busy' with the queue's depth", "requests", 0, 1000),
] + qos_params(("commands", "results"))


#: longest Propose request fields served (characters; entries of ``names``)
MAX_FIELD_CHARS = {"proposer": 64, "trial_id": 256}
MAX_NAMES = 1000


def request_too_long(request) -> str | None:
    """One line refusing a Propose request whose text fields are longer than any real one (a
    proposer name, a trial id, a parameter name), showing at most 40 characters of it; None when
    every field fits. Capped before it reaches a log line, a session directory or the response."""
    for field, cap in MAX_FIELD_CHARS.items():
        text = str(getattr(request, field, "") or "")
        if len(text) > cap:
            return f"request field '{field}' is {len(text)} characters long (at most {cap}): {text[:40]!r}..."
    names = list(getattr(request, "names", []) or [])
    if len(names) > MAX_NAMES:
        return f"request field 'names' lists {len(names)} parameters (at most {MAX_NAMES})"
    long = next((n for n in names if len(str(n)) > MAX_FIELD_CHARS["trial_id"]), None)
    if long is not None:
        return (f"request field 'names' holds a {len(str(long))}-character name (at most "
                f"{MAX_FIELD_CHARS['trial_id']}): {str(long)[:40]!r}...")
    return None


def _session_name(trial_ids: list[str], proposer: str, names: list[str]) -> str:
    raw = "+".join(trial_ids) + f"__{proposer}" + (("__" + "-".join(sorted(names))) if names else "")
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", raw)[:180]


class _DeferredResponse:
    """The answer of a queued service request, sent when the worker has it.

    The service callback returns this marker instead of a response; the service's
    ``send_response`` (wrapped by :meth:`enable`) then keeps the request's header, and
    :meth:`set_result` -- called by the worker thread -- sends the real response with it
    through rclpy's public ``Service.send_response``, on the node's executor thread (answers
    sent from the worker thread while the executor sent "busy" ones were lost: 8 of 50 in a
    burst). Whichever comes second sends. (An
    ``async`` callback awaiting a future would do the same, but rclpy's executor resumes a
    waiting coroutine on every turn: a busy loop of the spin thread while a request waits.)
    """

    def __init__(self, service) -> None:
        self._service = service
        self._lock = threading.Lock()
        self._header = None
        self._response = None

    @staticmethod
    def enable(service) -> None:
        """Let ``service``'s callback return a :class:`_DeferredResponse`."""
        original = service.send_response
        service.vid2sid_answers_sent = 0  # responses handed to the RMW (tests, diagnostics)

        def send(response, header):
            original(response, header)
            service.vid2sid_answers_sent += 1

        def send_response(response, header):
            if isinstance(response, _DeferredResponse):
                response._set_header(header)
            else:
                send(response, header)

        service.send_response = send_response
        service._vid2sid_send = send

    def _set_header(self, header) -> None:
        with self._lock:
            self._header = header
            response = self._response
        if response is not None:
            self._service._vid2sid_send(response, header)

    def set_result(self, response, executor=None) -> None:
        """Send ``response`` (from the worker thread): on ``executor``'s thread when given, where the
        service's other answers are sent, else here."""
        with self._lock:
            self._response = response
            header = self._header
        if header is None:
            return
        if executor is not None:
            executor.create_task(self._service._vid2sid_send, response, header)
        else:
            self._service._vid2sid_send(response, header)


class CalibratorNode(Node):
    """Proposal service and calibration sessions (see module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__("calibrator_node", **kwargs)
        declare(self, PARAMS, extra_check=self._check)
        p = values(self, PARAMS)
        self._rig = resolve_rig(p["rig_config"] or p["rig"])
        from ..calibration.nuisance import rig_nuisance

        # the rig config's nuisance: block (latency, marker offsets), read as `vid2sid calibrate` reads it;
        # a bad block stops the node here (NuisanceConfigError naming the file and key)
        self._nuisance = rig_nuisance(self._rig, source=self._rig.where)
        self.parameters = self._rig.parameters
        self._lock = threading.Lock()
        self._busy = False
        self._commands: dict[str, list[Any]] = {}
        self._trial_order: list[str] = []
        self.real: dict[str, Trajectory] = {}
        self.excitations: dict[str, Excitation] = {}
        self.results: list[Any] = []
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="calibrator")
        self._twin = self._pool.submit(self._rig.make_twin).result()
        from ..calibration.executor import make_executor

        # a bad combination or Ray missing stops the node here, in one line (ExecutorError)
        self._executor = make_executor(p["executor"], p["workers"] or None, ray_address=p["ray_address"] or None)
        #: values last applied to the twin node by this calibrator (start of new sessions)
        self.applied: dict[str, float] = self.parameters.nominal()
        group = MutuallyExclusiveCallbackGroup()
        create_qos_subscription(self, ExcitationCommand, TOPICS["excitation"], self._on_command, "commands",
                                 callback_group=group)
        create_qos_subscription(self, TrajectoryMsg, TOPICS["real_trajectory"], self._on_real, "results",
                                 callback_group=group)
        self._pub = create_stream_publisher(self, ParameterUpdate, TOPICS["parameter_update"], qos_profile(self, "results"))
        self._reentrant = ReentrantCallbackGroup()
        #: waiting Propose requests: (request, response, future answered by the worker), at most max_queued_requests
        self._queue: collections.deque = collections.deque()
        self._queue_cv = threading.Condition(self._lock)
        self._stopping = False
        self._worker = threading.Thread(target=self._serve_requests, name=f"{self.get_name()}_propose", daemon=True)
        self._worker.start()
        self._propose_service = self.create_service(Propose, TOPICS["propose"], self._srv_propose,
                                                    qos_profile=SERVICE_QOS, callback_group=self._reentrant)
        _DeferredResponse.enable(self._propose_service)
        # the twin's parameter service, called from the request worker while this node's executor
        # stays free to take the reply (no helper node of its own)
        self._set_client = self.create_client(SetParameters, f"{p['twin_node']}/set_parameters",
                                              callback_group=self._reentrant)

    @staticmethod
    def _check(name, value):
        if name == "proposer_options" and value.strip():
            try:
                opts = loads_yaml(value, source="parameter 'proposer_options'")
            except YAMLInputError as err:
                return str(err)
            if not isinstance(opts, dict):
                return f"parameter 'proposer_options' must be a YAML mapping, got {value!r}"
        return None

    # -- inputs -------------------------------------------------------------------------------
    def _on_command(self, msg) -> None:
        with self._lock:
            if msg.trial_id not in self._commands:
                self._commands[msg.trial_id] = []
            self._commands[msg.trial_id].append(msg)

    def _on_real(self, msg) -> None:
        try:
            traj = trajectory_from_msg(msg)
        except ValueError as err:
            self.get_logger().error(f"real trajectory ignored: {err}")
            return
        with self._lock:
            cmds = list(self._commands.get(msg.trial_id, []))
        if not cmds:
            self.get_logger().warning(f"real trajectory of trial {msg.trial_id!r} has no commands; ignored")
            return
        try:
            exc = excitation_from_commands(cmds, msg.trial_id)
        except ValueError as err:
            self.get_logger().error(f"trial {msg.trial_id}: {err}")
            return
        with self._lock:
            self.real[msg.trial_id] = traj
            self.excitations[msg.trial_id] = exc
            if msg.trial_id not in self._trial_order:
                self._trial_order.append(msg.trial_id)
        self.get_logger().info(f"real trial {msg.trial_id}: {traj.num_frames} steps, "
                               f"{int(traj.valid.any(axis=1).sum())} tracked, dropped {msg.dropped_frames}, "
                               f"late {msg.late_frames}")

    # -- the service --------------------------------------------------------------------------
    def _fail(self, response, message: str):
        response.accepted = False
        response.message = message
        response.error_px = float("nan")
        self.get_logger().warning(f"/vid2sid/propose: {message}")
        return response

    def _srv_propose(self, request, response):
        """Queue the request for the worker and return at once (the answer is sent later, see
        :class:`_DeferredResponse`); refuse it at once, "busy" with the queue's depth, when
        ``max_queued_requests`` already wait."""
        bound = int(self.get_parameter("max_queued_requests").value)
        deferred = _DeferredResponse(self._propose_service)
        with self._lock:
            waiting = len(self._queue)
            refused = waiting >= bound and (self._busy or waiting > 0)
            if not refused:
                self._queue.append((request, response, deferred))
                self._queue_cv.notify()
        if refused:
            return self._fail(response, f"busy: a calibration is running and {waiting} request(s) wait "
                              f"(queue depth {waiting} of max_queued_requests {bound}); try again later")
        return deferred

    def _serve_requests(self) -> None:
        """Worker thread: answer the queued requests one at a time, in arrival order."""
        while True:
            with self._lock:
                while not self._queue and not self._stopping:
                    self._queue_cv.wait()
                if self._stopping:
                    pending, self._queue = list(self._queue), collections.deque()
                else:
                    pending = []
                    request, response, done = self._queue.popleft()
                    self._busy = True
            if pending or self._stopping:
                for _req, resp, fut in pending:
                    fut.set_result(self._fail(resp, "the calibrator is shutting down; request not served"))
                return
            try:
                answer = self.serve(request, response)
            finally:
                with self._lock:
                    self._busy = False
            done.set_result(answer, self.executor)

    def serve(self, request, response):
        """Answer one Propose request here and now (the worker's step; tests call it directly):
        the response, with ``accepted: false`` and the reason when the calibration failed."""
        try:
            return self._propose(request, response)
        except Exception as err:  # noqa: BLE001 - always answer, never kill the node
            return self._fail(response, f"calibration failed: {type(err).__name__}: {err}")

    def _propose(self, request, response):
        from ..calibration.loop import CalibrationConfig, load_history, run_calibration
        from ..core.trial import RealTrial
        from ..calibration.proposers import make_proposer

        p = values(self, PARAMS)
        too_long = request_too_long(request)
        if too_long:  # refused before anything echoes the field (logs, the response, a session name)
            return self._fail(response, too_long)
        proposer_name = request.proposer or p["proposer"]
        names = list(request.names)
        unknown = [n for n in names if n not in self.parameters]
        if unknown:
            return self._fail(response, f"unknown parameter(s) {unknown}; valid: {', '.join(self.parameters.names)}")
        with self._lock:
            available = list(self._trial_order)
        if request.trial_id:
            if request.trial_id not in self.real:
                return self._fail(response, f"no real trajectory for trial {request.trial_id!r}; trials with one: "
                                  + (", ".join(available) or "none yet (run a trial first)"))
            trial_ids = [request.trial_id]
        elif not available:
            return self._fail(response, "no real trajectory yet: run a trial (/vid2sid/excitation/start) or replay "
                              "a bag first")
        else:
            trial_ids = available[-1:] if p["trials"] == "latest" else available
        params = self.parameters.with_frozen(free=names) if names else self.parameters
        if not params.free:
            return self._fail(response, "nothing to calibrate: every requested parameter is frozen")
        opts = loads_yaml(p["proposer_options"], source="parameter proposer_options") \
            if p["proposer_options"].strip() else {}
        try:
            proposer = make_proposer(proposer_name, **(opts or {}))
        except Exception as err:  # noqa: BLE001 - unknown name, missing API key...: a clear answer
            return self._fail(response, f"proposer {proposer_name!r}: {err}")
        real = RealTrial([self.real[t] for t in trial_ids], [self.excitations[t] for t in trial_ids],
                         source="ros:" + ",".join(trial_ids))
        run_dir = Path(p["run_dir"]) / _session_name(trial_ids, proposer_name, names)
        start_file = run_dir / "session_start.json"
        resume = (run_dir / "run.json").is_file()
        done = len(load_history(run_dir)) - 1 if resume else 0
        fresh = not (resume and start_file.is_file())
        start = ({n: float(v) for n, v in self.applied.items() if n in params} if fresh
                 else json.loads(start_file.read_text()))
        n_new = max(int(request.iterations), 1)
        cfg = CalibrationConfig(iterations=done + n_new, rollout_budget=p["rollout_budget"], seed=p["seed"],
                                identifiability=p["identifiability"], final_identifiability=p["final_identifiability"],
                                resume=resume, start=start, video=None, nuisance=self._nuisance)
        self.get_logger().info(f"/vid2sid/propose: {proposer_name}, {n_new} iteration(s) on trial(s) "
                               f"{', '.join(trial_ids)} (session {run_dir.name}, {done} done)")

        def progress(rec) -> None:
            if rec.iteration == 0 and fresh:  # the run's checks passed and run.json is written: keep its start
                start_file.write_text(json.dumps(start))
            self._pub.publish(parameter_update_msg(
                iteration=rec.iteration, proposer=rec.proposer, values={n: rec.values[n] for n in params.free_names
                                                                        if n in rec.values},
                parameters=params, rationale=rec.rationale, confidence=rec.confidence, error_px=rec.error_px,
                accepted=False, stamp=self.get_clock().now().to_msg()))
            self.get_logger().info(f"iteration {rec.iteration} ({rec.proposer}): error {rec.error_px:.3f} px")

        def run():
            return run_calibration(self._twin, real, proposer, cfg, run_dir, parameters=params, on_iteration=progress,
                                   executor=self._executor)

        result = self._pool.submit(run).result()
        self.results.append(result)
        best = {n: float(result.values[n]) for n in params.free_names}
        last = result.history[-1]
        response.names = list(best)
        response.values = [best[n] for n in best]
        response.units = [params[n].unit for n in best]
        response.rationale = last.rationale
        response.confidence = float(last.confidence)
        response.error_px = float(result.error_px) if math.isfinite(result.error_px) else float("nan")
        response.iteration = int(last.iteration)
        notes = [f"best of {len(result.history) - 1} iteration(s): {result.error_px:.3f} px (start "
                 f"{result.initial_error_px:.3f} px), stopped: {result.stopped}"]
        if result.status != "ok":
            notes.insert(0, f"status {result.status}: no proposal was made, nothing was calibrated")
        elif result.best_proposer != proposer_name:
            notes.append(f"best values proposed by '{result.best_proposer}' (iteration {result.best_iteration})")
        if last.notes:
            notes.append("; ".join(str(n) for n in last.notes))
        diag = result.diagnosis or {}
        if diag.get("text"):  # the residual diagnosis comes before anything else the caller reads
            notes.insert(0, str(diag["text"]))
        applied = False
        if request.apply and result.status != "ok":
            notes.append("NOT applied: no proposal was made")
        elif request.apply:
            ok, why = self.apply_to_twin(best, p["apply_timeout"])
            applied = ok
            notes.append("applied to " + p["twin_node"] if ok else f"NOT applied: {why}")
        response.accepted = bool(applied or (not request.apply and result.status == "ok"))
        response.message = " | ".join(notes)
        self._pub.publish(parameter_update_msg(
            iteration=last.iteration, proposer=result.best_proposer, values=best, parameters=params,
            rationale=last.rationale, confidence=last.confidence, error_px=result.error_px, accepted=applied,
            stamp=self.get_clock().now().to_msg()))
        return response

    def apply_to_twin(self, values_: dict[str, float], timeout: float) -> tuple[bool, str]:
        """Set ``physics.<name>`` on the twin node through its parameter service.

        Returns:
            ``(ok, reason)``; :attr:`applied` is updated when ``ok``.
        """
        if not self._set_client.wait_for_service(timeout_sec=timeout):
            return False, f"parameter service {self._set_client.srv_name} not available after {timeout:g} s"
        req = SetParameters.Request()
        for n, v in values_.items():
            req.parameters.append(ParameterMsg(name=ros_param_name(n, self.parameters[n].kind),
                                               value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE,
                                                                    double_value=float(v))))
        fut = self._set_client.call_async(req)
        replied = threading.Event()
        fut.add_done_callback(lambda _f: replied.set())  # this node's executor takes the reply
        replied.wait(timeout)
        if not fut.done():
            self._set_client.remove_pending_request(fut)
            return False, f"{self._set_client.srv_name} did not answer within {timeout:g} s"
        res = fut.result()
        failed = [f"{r.reason}" for r in res.results if not r.successful]
        if failed:
            return False, "; ".join(failed)
        self.applied.update(values_)
        return True, ""

    def destroy_node(self) -> None:
        if getattr(self, "_worker", None) is not None:  # absent when __init__ failed
            with self._lock:
                self._stopping = True
                self._queue_cv.notify_all()
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if getattr(self, "_executor", None) is not None:
            self._executor.close()
        super().destroy_node()


def make_node(**kwargs) -> CalibratorNode:
    return CalibratorNode(**kwargs)


def main(args=None) -> None:
    """``ros2 run vid2sid_ros <this node>``: init, build, spin until Ctrl-C/SIGTERM, destroy."""
    run_node(make_node, args)


if __name__ == "__main__":
    main()
