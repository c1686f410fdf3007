"""A twin driven by the command stream on its own worker thread (shared by sim_twin_node and
stand_in_rig_node).

Each ``ExcitationCommand`` advances the twin by exactly one command period; a new
``trial_id`` resets it first (and applies pending parameter changes); a gap in the step
numbers is made up by holding the previous command for the missing periods without
frames (logged, counted in :attr:`LockstepTwin.step_gaps`). The frame of step k is
handed to ``on_frame(frame, stamp_s, command)`` with ``stamp_s = command stamp + period``
(the end of the period: the lockstep convention of :mod:`vid2sid_ros.core.lockstep`).

The worker thread creates the twin and is the only thread touching it, because an
OpenGL context (MuJoCo rendering) belongs to the thread that made it current.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any, Callable, Mapping

import numpy as np

from ..sim.stepping import make_stepper
from .common import s_from_stamp

__all__ = ["LockstepTwin"]


class LockstepTwin:
    """Command-driven stepping twin on a dedicated thread.

    Args:
        make_twin: twin factory, called on the worker thread.
        on_frame: ``on_frame(frame (H, W, 3) uint8, stamp_s, command_msg)``; called on the
            worker thread for every rendered step.
        logger: rclpy logger (``info``/``warning``/``error``).
        render: callable returning whether to render this step (e.g. a ROS parameter).
        postprocess: optional ``(frame, command_msg) -> frame | None`` (sensor noise; None
            drops the frame, counted in :attr:`frames_suppressed`). It runs on a second worker
            thread, pipelined with the stepping (frames stay in order), so rendering step k+1
            overlaps the sensor model of step k (MuJoCo, OpenCV and numpy release the GIL).
        name: prefix of the worker threads' names (``<name>_step``, ``<name>_post``), so CPU
            profiles tell the twins apart.
    """

    def __init__(self, make_twin: Callable[[], Any], on_frame: Callable[[np.ndarray, float, Any], None], logger: Any,
                 render: Callable[[], bool] = lambda: True,
                 postprocess: Callable[[np.ndarray, Any], np.ndarray | None] | None = None,
                 name: str = "lockstep_twin") -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"{name}_step")
        self.stepper = self._pool.submit(self._build, make_twin, render()).result()
        self.twin = self.stepper.twin
        self._on_frame, self._log, self._render, self._post = on_frame, logger, render, postprocess
        self._post_pool = (concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"{name}_post")
                           if postprocess is not None else None)
        self._lock = threading.Lock()
        self._pending: dict[str, float] = {}
        self.applied: dict[str, float] = {}
        self.trial_id = ""
        self._expected = 0
        self._last: np.ndarray | None = None
        self._diverged = False
        self.steps_done = 0
        self.step_gaps = 0
        self.frames_out = 0
        self.frames_suppressed = 0

    @staticmethod
    def _build(make_twin: Callable[[], Any], warm_up: bool):
        """Create the twin and its stepper on the worker thread; render once so the GL context
        and buffers exist before the first trial (the first render costs ~0.3 s)."""
        stepper = make_stepper(make_twin())
        if warm_up:
            stepper.reset()
            stepper.step(np.zeros(len(stepper.twin.actuator_names)), 1.0 / 30.0, render=True)
            stepper.reset()
        return stepper

    # -- parameters ------------------------------------------------------------------------
    def set_parameters(self, values: Mapping[str, float], *, immediately: bool = False) -> None:
        """Queue parameter values; applied at the next trial, or now if idle / ``immediately``."""
        with self._lock:
            self._pending.update({k: float(v) for k, v in values.items()})
            idle = not self.trial_id
        if idle or immediately:
            self._pool.submit(self._apply_pending).result()

    def _apply_pending(self) -> None:
        with self._lock:
            upd = dict(self._pending)
            self._pending.clear()
        if upd:
            self.twin.set_parameters(upd)
            self.applied.update(upd)

    def end_trial(self) -> None:
        """Mark the trial over so parameter changes apply at once until the next one."""
        def _end():
            with self._lock:
                self.trial_id = ""
            self._apply_pending()
        self._pool.submit(_end)

    # -- commands -----------------------------------------------------------------------------
    def submit(self, msg: Any) -> concurrent.futures.Future:
        """Queue one command (spin thread); returns the future of its step."""
        return self._pool.submit(self._step_safe, msg)

    def _step_safe(self, msg: Any) -> None:
        try:
            self._step(msg)
        except Exception as err:  # noqa: BLE001 - a bad command is logged, the node goes on
            self._log.error(f"trial {msg.trial_id} step {msg.step}: {type(err).__name__}: {err}")

    def _step(self, msg: Any) -> None:
        period = float(msg.period)
        if msg.trial_id != self.trial_id:
            with self._lock:
                self.trial_id = msg.trial_id
            self._apply_pending()
            self.stepper.reset()
            self._expected, self._last, self._diverged = 0, None, False
        if self._diverged:
            return
        k = int(msg.step)
        if k < self._expected:
            self._log.warning(f"trial {msg.trial_id}: command step {k} arrived after step {self._expected - 1}; "
                              "ignored (commands must come in order)")
            return
        if k > self._expected:
            gap = k - self._expected
            self.step_gaps += gap
            self._log.warning(f"trial {msg.trial_id}: {gap} command(s) missing before step {k}; holding the previous "
                              "command for them (no frames)")
            hold = self._last if self._last is not None else np.zeros(len(msg.values))
            for _ in range(gap):
                self.stepper.step(hold, period, render=False)
        res = self.stepper.step(msg.values, period, render=bool(self._render()))
        self._last = np.asarray(msg.values, dtype=float)
        self._expected = k + 1
        self.steps_done += 1
        if res.diverged:
            self._diverged = True
            self._log.error(f"trial {msg.trial_id}: twin diverged at step {k} ({res.message}); no more frames until "
                            "the next trial")
            return
        if res.frame is None:
            return
        stamp = s_from_stamp(msg.header.stamp) + period
        if self._post_pool is None:
            self._deliver(res.frame, stamp, msg)
        else:
            self._post_pool.submit(self._post_and_deliver, res.frame, stamp, msg)

    def _post_and_deliver(self, frame: np.ndarray, stamp: float, msg: Any) -> None:
        try:
            out = self._post(frame, msg)
        except Exception as err:  # noqa: BLE001 - a failing sensor model loses one frame, not the node
            self._log.error(f"trial {msg.trial_id} step {msg.step}: post-processing failed: {type(err).__name__}: {err}")
            out = None
        if out is None:
            self.frames_suppressed += 1
            return
        self._deliver(out, stamp, msg)

    def _deliver(self, frame: np.ndarray, stamp: float, msg: Any) -> None:
        self._on_frame(frame, stamp, msg)
        self.frames_out += 1

    def call(self, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(twin)`` on the worker thread and return its result."""
        return self._pool.submit(fn, self.twin).result()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._post_pool is not None:
            self._post_pool.shutdown(wait=True, cancel_futures=True)
