"""calibrator_node: serves /vid2sid/propose, runs the calibration loop, applies proposals to the twin.

Inputs: the command stream (``/vid2sid/excitation/command``; the excitation of every trial is
rebuilt from its commands) and the tracker's real trajectories
(``/vid2sid/real/trajectory``). Each real trial (its excitation + real trajectory) is a
training trial of :class:`~vid2sid_ros.core.trial.RealTrial`.

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

Active learning (parameter ``active_learning``, read when a request is served, so setting it
before a call switches that call; ``vid2sid propose --active-learning`` does so): the session
(``<session>__active/``) is an :class:`~vid2sid_ros.calibration.active.ActiveSession`, which
holds the logic and the files; this node only wires it. After a request's iterations, when the
session says so (the identifiability check, the residual diagnosis, a proposer's request, or
``trigger: always``; settings: the rig config's ``calibration.active_learning`` block under
``active_learning_options``), the next trial is designed within the rig's limits *and* the
excitation node's command limits (range, duration and ``max_rate``, with a ramp from the command
the robot holds, read through its parameter service), sent to
``excitation_node`` as its ``excitation_config`` and started with its start service; the node
waits for the tracker's real trajectory of that trial (``trial_timeout``), the session adds it
and saves it at once, and the excitation node's previous profile is put back. A design the
excitation node refuses anyway is recorded with the reason, charged, and never published; the
next request starts a new phase with the budget left.
The response's ``message`` says what happened ("designed trial finger_1 run on the rig ..." or
"designed trial NOT run: ..."); the next request fits the extended data (the next ``phase_K``). Designed
trials are never picked as the "latest" trial of a new session.
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
from rcl_interfaces.srv import GetParameters, SetParameters
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_srvs.srv import Trigger

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
    Param("proposer", "reasoner", "default proposer (reasoner, gemini, openai-compatible, random, nelder-mead, "
          "golden-cd, bo, bo-tpe, cmaes, least-squares, mujoco-sysid)"),
    Param("proposer_options", "", "YAML mapping of keyword arguments for the proposer, e.g. '{model: gemini-2.5-pro}'"),
    Param("run_dir", "runs/calibrator", "directory of the calibration sessions (one subdirectory each)"),
    Param("rollout_budget", 400, "twin rollouts one session may spend over all its iterations", "rollouts", 1, 10**7),
    Param("seed", 0, "seed handed to stochastic proposers", "", 0, 2**31 - 1),
    Param("identifiability", False, "run the identifiability check at the start of a session (diagnostic rollouts)"),
    Param("twin_node", "sim_twin_node", "node whose physics.<name> parameters receive accepted proposals"),
    Param("apply_timeout", 5.0, "wait for the twin's parameter service", "s", 0.1, 120.0),
    Param("final_identifiability", True, "check identifiability at the result: Gauss–Newton intervals and the "
          "correlation matrix for the report (diagnostic rollouts, not charged to the budget)"),
    Param("far_refit", "never", "when the residual diagnosis at the end of each answer may refit from afar "
          "(hundreds to thousands of diagnostic rollouts: minutes on the finger, on every call): never (a propose "
          "answers in seconds; the diagnosis says they were not run), converged (after a converged stop), always",
          choices=("never", "converged", "always")),
    Param("trials", "latest", "real trials fitted when the request names none", choices=("latest", "all")),
    Param("executor", "serial", "where a session's finite-difference rollouts run (same results on each): serial, "
          "threads (MuJoCo twins), pool (worker processes), ray", choices=("serial", "threads", "pool", "ray"),
          read_only=True),
    Param("workers", 0, "concurrent workers of the executor (0: this machine's CPUs)", "", 0, 1024, read_only=True),
    Param("ray_address", "", "executor ray: the cluster to join (auto or HOST:PORT; empty: a private local Ray on "
          "127.0.0.1)", read_only=True),
    Param("max_queued_requests", 4, "Propose requests that may wait while one is served; one more is "
          "answered at once 'busy' with the queue's depth", "requests", 0, 1000),
    Param("active_learning", False, "design the next trial when the data cannot separate parameters or causes, "
          "have excitation_node play it on the rig and fit it from the next request on (read when a request is "
          "served: set it before a call to switch that call; docs/active_learning.md)"),
    Param("active_learning_options", "", "YAML mapping over the rig config's calibration.active_learning block, "
          "e.g. '{trigger: always, after_iteration: 2, max_amplitude: 0.5}'"),
    Param("excitation_node", "excitation_node", "node that plays designed trials (its excitation_config parameter "
          "and the excitation start service)", read_only=True),
    Param("trial_timeout", 60.0, "longest wait for a designed trial: its start (the excitation node's wait_for) "
          "and its real trajectory", "s", 1.0, 3600.0),
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
        self._cancel = threading.Event()  # set by destroy_node: the running calibration stops within a rollout
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
        # active learning: the excitation node's profile parameter and start service play a designed trial
        self._real_cv = threading.Condition(self._lock)
        #: trials this node had the rig run for active learning (never picked as a session's 'latest' trial)
        self.designed_trials: set[str] = set()
        self._exc_get = self.create_client(GetParameters, f"{p['excitation_node']}/get_parameters",
                                           callback_group=self._reentrant)
        self._exc_set = self.create_client(SetParameters, f"{p['excitation_node']}/set_parameters",
                                           callback_group=self._reentrant)
        self._start_client = self.create_client(Trigger, TOPICS["start"], callback_group=self._reentrant)

    @staticmethod
    def _check(name, value):
        if name == "proposer_options" and value.strip():
            try:
                opts = loads_yaml(value, source="parameter 'proposer_options'")
            except YAMLInputError as err:
                return str(err)
            if not isinstance(opts, dict):
                return f"parameter 'proposer_options' must be a YAML mapping, got {value!r}"
        if name == "active_learning_options" and value.strip():
            from ..calibration.active import parse_active_learning
            from ..calibration.loop import CalibrationError

            try:
                opts = loads_yaml(value, source="parameter 'active_learning_options'")
                if not isinstance(opts, dict):
                    return f"parameter 'active_learning_options' must be a YAML mapping, got {value!r}"
                parse_active_learning(opts, source="parameter active_learning_options")
            except (YAMLInputError, CalibrationError) as err:
                return str(err)
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
            self._real_cv.notify_all()
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
            try:
                done.set_result(answer, self.executor)
            except Exception as err:  # noqa: BLE001 - the service went with the node: nobody to answer
                if not self._stopping:
                    raise
                self.get_logger().warning(f"/vid2sid/propose: answer not sent, the node is shutting down "
                                          f"({type(err).__name__})")

    def serve(self, request, response):
        """Answer one Propose request here and now (the worker's step; tests call it directly):
        the response, with ``accepted: false`` and the reason when the calibration failed."""
        from ..calibration.cancel import Cancelled

        try:
            return self._propose(request, response)
        except Cancelled:  # destroy_node: completed iterations are in the session's directory
            return self._fail(response, "the calibrator is shutting down; the calibration stopped "
                              "(its completed iterations are saved in its session directory)")
        except Exception as err:  # noqa: BLE001 - always answer, never kill the node
            return self._fail(response, f"calibration failed: {type(err).__name__}: {err}")

    def _propose(self, request, response):
        from ..calibration.cancel import cancellable, check_cancelled
        from ..calibration.loop import CalibrationConfig, run_calibration
        from ..calibration.session import session_start
        from ..core.trial import RealTrial

        p = values(self, PARAMS)
        got = self._request_setup(request, p)
        if isinstance(got, str):
            return self._fail(response, got)
        proposer_name, names, trial_ids, params, proposer = got
        real = RealTrial([self.real[t] for t in trial_ids], [self.excitations[t] for t in trial_ids],
                         source="ros:" + ",".join(trial_ids))
        session_dir = Path(p["run_dir"]) / _session_name(trial_ids, proposer_name, names)
        session, budget, begin = None, p["rollout_budget"], dict(self.applied)
        if p["active_learning"]:  # a session of its own: phase_K directories, designed trials beside them
            session, why = self._active_session(p, session_dir.with_name(session_dir.name + "__active"), real)
            if session is None:
                return self._fail(response, why)
            real, run_dir, budget, begin = session.real, session.phase_dir, session.phase_budget(), \
                {**begin, **(session.start or {})}
        else:
            run_dir = session_dir
        at = session_start(run_dir, begin, params)
        n_new = max(int(request.iterations), 1)
        cfg = CalibrationConfig(iterations=at.done + n_new, rollout_budget=budget, seed=p["seed"],
                                identifiability=p["identifiability"], final_identifiability=p["final_identifiability"],
                                far_refit=p["far_refit"],
                                resume=at.resume, start=at.start, video=None, nuisance=self._nuisance)
        self.get_logger().info(f"/vid2sid/propose: {proposer_name}, {n_new} iteration(s) on trial(s) "
                               f"{', '.join(trial_ids)} (session {run_dir.name}, {at.done} done)")

        def progress(rec) -> None:
            check_cancelled()  # the node's publisher is gone once it is destroyed: stop, don't publish
            if rec.iteration == 0 and at.fresh:  # the run's checks passed and run.json is written: keep its start
                at.start_file.write_text(json.dumps(at.start))
            self._pub.publish(parameter_update_msg(
                iteration=rec.iteration, proposer=rec.proposer, values={n: rec.values[n] for n in params.free_names
                                                                        if n in rec.values},
                parameters=params, rationale=rec.rationale, confidence=rec.confidence, error_px=rec.error_px,
                accepted=False, stamp=self.get_clock().now().to_msg()))
            self.get_logger().info(f"iteration {rec.iteration} ({rec.proposer}): error {rec.error_px:.3f} px")

        def run():
            with cancellable(self._cancel):
                return run_calibration(self._twin, real, proposer, cfg, run_dir, parameters=params,
                                       on_iteration=progress, executor=self._executor)

        result = self._pool.submit(run).result()
        self.results.append(result)
        return self._answer(request, response, result, proposer_name, params, p, session, cfg)

    def _request_setup(self, request, p: dict) -> tuple[str, list[str], list[str], Any, Any] | str:
        """A Propose request's (proposer name, names, trial ids, parameter set, proposer), or why it is refused."""
        from ..calibration.proposers import make_proposer
        from ..calibration.session import SessionRequestError, choose_trials

        too_long = request_too_long(request)
        if too_long:  # refused before anything echoes the field (logs, the response, a session name)
            return too_long
        proposer_name = request.proposer or p["proposer"]
        names = list(request.names)
        unknown = [n for n in names if n not in self.parameters]
        if unknown:
            return f"unknown parameter(s) {unknown}; valid: {', '.join(self.parameters.names)}"
        with self._lock:
            available = [t for t in self._trial_order if t not in self.designed_trials]
        try:
            trial_ids = choose_trials(request.trial_id, available, self.real, p["trials"])
        except SessionRequestError as err:
            return str(err)
        params = self.parameters.with_frozen(free=names) if names else self.parameters
        if not params.free:
            return "nothing to calibrate: every requested parameter is frozen"
        opts = loads_yaml(p["proposer_options"], source="parameter proposer_options") \
            if p["proposer_options"].strip() else {}
        try:
            proposer = make_proposer(proposer_name, **(opts or {}))
        except Exception as err:  # noqa: BLE001 - unknown name, missing API key...: a clear answer
            return f"proposer {proposer_name!r}: {err}"
        return proposer_name, names, trial_ids, params, proposer

    def _answer(self, request, response, result, proposer_name: str, params, p: dict, session, cfg):
        """Fill the Propose response from a session's result (applied to the twin when asked) and publish it."""
        from ..calibration.session import result_notes

        best = {n: float(result.values[n]) for n in params.free_names}
        last = result.history[-1]
        response.names = list(best)
        response.values = [best[n] for n in best]
        response.units = [params[n].unit for n in best]
        response.rationale = last.rationale
        response.confidence = float(last.confidence)
        response.error_px = float(result.error_px) if math.isfinite(result.error_px) else float("nan")
        response.iteration = int(last.iteration)
        notes = result_notes(result, proposer_name)
        applied = False
        if request.apply and result.status != "ok":
            notes.append("NOT applied: no proposal was made")
        elif request.apply:
            ok, why = self.apply_to_twin(best, p["apply_timeout"])
            applied = ok
            notes.append("applied to " + p["twin_node"] if ok else f"NOT applied: {why}")
        if session is not None and result.status == "ok":
            notes.append(self._active_learning_step(session, result, cfg, params, p))
        response.accepted = bool(applied or (not request.apply and result.status == "ok"))
        response.message = " | ".join(notes)
        self._pub.publish(parameter_update_msg(
            iteration=last.iteration, proposer=result.best_proposer, values=best, parameters=params,
            rationale=last.rationale, confidence=last.confidence, error_px=result.error_px, accepted=applied,
            stamp=self.get_clock().now().to_msg()))
        return response

    # -- active learning: the session's logic is calibration.active.ActiveSession; here only the wiring --
    def _active_session(self, p: dict, session_dir: Path, real) -> tuple[Any, str]:
        """The request's :class:`~vid2sid_ros.calibration.active.ActiveSession`, or ``(None, why)``."""
        from ..calibration.active import ActiveSession, parse_active_learning
        from ..calibration.design import ExcitationLimits, ExcitationRefused
        from ..calibration.loop import CalibrationError
        from ..core.trial import ObservationError

        block = dict(self._rig.config.get("calibration") or {}).get("active_learning")
        settings = dict(block) if isinstance(block, dict) else {}
        try:
            if p["active_learning_options"].strip():
                settings.update(loads_yaml(p["active_learning_options"], source="parameter active_learning_options"))
            active = parse_active_learning({**settings, "enabled": True},
                                           source="calibration.active_learning + parameter active_learning_options")
            limits = ExcitationLimits.from_rig(self._twin, real.train_excitations, active.limits)
            session = ActiveSession(session_dir, real, active, limits, p["rollout_budget"])
        except (YAMLInputError, CalibrationError, ExcitationRefused, ObservationError) as err:
            return None, f"active learning: {err}"
        if session.phase_budget() < len(session.real.train):
            return None, (f"active learning: session {session_dir.name} has spent its rollout budget "
                          f"({p['rollout_budget']} rollouts, designs included)")
        return session, ""

    def _active_learning_step(self, session, result, cfg, params, p: dict) -> str:
        """After a request's iterations: design the next trial, have the rig run it, add it (one note)."""
        from ..calibration.design import ExcitationRefused

        if session.not_yet(result):  # before asking the excitation node anything
            return f"active learning: no trial designed: {session.not_yet(result)}"
        robot, why = self.robot_limits(session.limits.actuator_names, p["apply_timeout"])
        if robot is None:
            return f"active learning: no trial designed: {why}"
        try:  # design within the robot's own command limits too: clipped to them, not refused by them
            session.limits = session.limits.narrowed(robot[0], robot[1], f"{p['excitation_node']} limits",
                                                     max_rate=robot[2], held=robot[3])
        except ExcitationRefused as err:
            return f"active learning: no trial designed: {err}"
        design, why = self._pool.submit(session.next_design, self._twin, result, cfg, params).result()
        if design is None:
            return f"active learning: no trial designed: {why}"
        try:
            profile = session.command_profile(design)
        except ExcitationRefused as err:
            session.refuse(design, result, str(err))
            return f"active learning: designed trial NOT run: {err}"
        ok, got = self.play_trial(profile, p["trial_timeout"], p["apply_timeout"])
        if not ok:
            session.refuse(design, result, got)
            return f"active learning: designed trial NOT run: {got} (design: {design.rationale})"
        trial_id, trajectory, excitation = got
        rec = session.complete(design, result, trial_id, trajectory, excitation)
        if not rec.get("applied"):
            return f"active learning: designed trial NOT added: {rec['reason']}"
        return (f"active learning: designed trial {trial_id} run on the rig ({rec['tracked_steps']} steps tracked, "
                f"saved as {rec['trial_file']}); the next request fits {rec['training_trials']} trials. "
                f"{design.rationale}")

    def robot_limits(self, actuators, timeout: float) -> tuple[Any, str]:
        """The excitation node's command limits per twin actuator, read through its parameter service:
        ``(([(lower, upper)] per actuator, max_duration s, [max_rate per s] per actuator, held command per
        actuator or None), "")``, or ``(None, why)``. The held command is the last command seen on the
        command stream (``on_stop: hold``), zero or ``home`` (:func:`actuator_held_command`)."""
        from rclpy.parameter import parameter_value_to_python

        from .excitation_node import actuator_command_ranges, actuator_held_command, actuator_rate_limits

        names = ["limit_lower", "limit_upper", "max_duration", "command_joints", "actuator_map", "max_rate",
                 "on_stop", "home"]
        got = self._call(self._exc_get, GetParameters.Request(names=names), timeout)
        if isinstance(got, str):
            return None, f"cannot read the command limits of the node that plays trials: {got}"
        v = dict(zip(names, (parameter_value_to_python(x) for x in got.values)))
        with self._lock:
            last = next((list(m.values) for cmds in reversed(list(self._commands.values())) for m in reversed(cmds)
                         if list(m.actuator_names) == list(actuators)), None)
        try:
            joints, amap = list(v["command_joints"] or []), list(v["actuator_map"] or [])
            ranges = actuator_command_ranges(actuators, joints, amap, list(v["limit_lower"]), list(v["limit_upper"]))
            rates = actuator_rate_limits(actuators, joints, amap, list(v["max_rate"] or [0.0]))
            held = actuator_held_command(actuators, joints, amap, v["on_stop"], list(v["home"] or [0.0]), last)
        except (ValueError, TypeError, KeyError) as err:
            return None, f"the command limits of {self._exc_get.srv_name}: {err}"
        return (ranges, float(v["max_duration"] or 0.0), rates, held), ""

    def play_trial(self, profile: dict, timeout: float, service_timeout: float) -> tuple[bool, Any]:
        """Have the excitation node play ``profile`` as a new trial and wait for its real trajectory.

        Sets the node's ``excitation_config`` (it refuses a profile it cannot build), calls the
        start service (the node refuses a trial breaking its command limits before its first
        command, and checks every command again), waits up to ``timeout`` s for the tracker's
        real trajectory of the trial, and puts the node's previous ``excitation_config`` back.

        Returns:
            ``(True, (trial_id, trajectory, excitation))`` with the excitation rebuilt from the
            commands sent, or ``(False, reason)``.
        """
        node = self.get_parameter("excitation_node").value
        got = self._call(self._exc_get, GetParameters.Request(names=["excitation_config"]), service_timeout)
        if isinstance(got, str):
            return False, got
        previous = got.values[0].string_value if got.values else ""
        ok, why = self._set_string(self._exc_set, "excitation_config", json.dumps(profile), service_timeout)
        if not ok:
            return False, f"{node} refused the designed profile, nothing sent: {why}"
        trial_id = ""
        try:
            res = self._call(self._start_client, Trigger.Request(), timeout)
            if isinstance(res, str):
                return False, res
            if not res.success:
                return False, f"{node} refused the trial: {res.message}"
            trial_id = res.message
            with self._lock:
                self.designed_trials.add(trial_id)
                arrived = self._real_cv.wait_for(lambda: trial_id in self.real, timeout)
                if not arrived:
                    return False, f"no real trajectory of trial {trial_id} within trial_timeout {timeout:g} s"
                return True, (trial_id, self.real[trial_id], self.excitations[trial_id])
        finally:
            ok, why = self._set_string(self._exc_set, "excitation_config", previous, service_timeout)
            if not ok:
                self.get_logger().warning(f"{node}'s excitation_config not restored after trial {trial_id}: {why}")

    def _call(self, client, request, timeout: float):
        """Call a service from the request worker while this node's executor takes the reply: the
        response, or one line saying why there is none."""
        if not client.wait_for_service(timeout_sec=timeout):
            return f"service {client.srv_name} not available after {timeout:g} s"
        fut = client.call_async(request)
        replied = threading.Event()
        fut.add_done_callback(lambda _f: replied.set())  # this node's executor takes the reply
        replied.wait(timeout)
        if not fut.done():
            client.remove_pending_request(fut)
            return f"{client.srv_name} did not answer within {timeout:g} s"
        return fut.result()

    def _set_string(self, client, name: str, value: str, timeout: float) -> tuple[bool, str]:
        req = SetParameters.Request()
        req.parameters.append(ParameterMsg(name=name, value=ParameterValue(type=ParameterType.PARAMETER_STRING,
                                                                           string_value=value)))
        res = self._call(client, req, timeout)
        if isinstance(res, str):
            return False, res
        failed = [r.reason for r in res.results if not r.successful]
        return (False, "; ".join(failed)) if failed else (True, "")

    def apply_to_twin(self, values_: dict[str, float], timeout: float) -> tuple[bool, str]:
        """Set ``physics.<name>`` on the twin node through its parameter service.

        Returns:
            ``(ok, reason)``; :attr:`applied` is updated when ``ok``.
        """
        req = SetParameters.Request()
        for n, v in values_.items():
            req.parameters.append(ParameterMsg(name=ros_param_name(n, self.parameters[n].kind),
                                               value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE,
                                                                    double_value=float(v))))
        res = self._call(self._set_client, req, timeout)
        if isinstance(res, str):
            return False, res
        failed = [f"{r.reason}" for r in res.results if not r.successful]
        if failed:
            return False, "; ".join(failed)
        self.applied.update(values_)
        return True, ""

    def destroy_node(self) -> None:
        """Refuse what waits, stop the running calibration at its next rollout (:mod:`~vid2sid_ros.calibration.
        cancel`: a thread still rolling out would keep the process alive after the node), close the executor."""
        if getattr(self, "_cancel", None) is not None:
            self._cancel.set()
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
