"""A calibrator node destroyed while it calibrates stops that calibration within a rollout.

(was: the worker thread went on with the session, its residual diagnosis included, after the node was
gone: the interpreter joins that thread at exit, so a test that had timed out while a propose ran kept its
pytest worker alive until the CI run's own time limit)
"""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")


def test_destroying_the_node_stops_its_running_calibration_at_the_next_rollout(ros, tmp_path):
    from rclpy.parameter import Parameter

    from vid2sid_ros.calibration.cancel import Cancelled, cancellable, check_cancelled
    from vid2sid_ros.nodes.calibrator_node import CalibratorNode
    from vid2sid_ros.srv import Propose

    rig_config = tmp_path / "toy.yaml"
    rig_config.write_text("rig: toy\n")
    node = CalibratorNode(context=ros.context, parameter_overrides=[
        Parameter("rig_config", value=str(rig_config)), Parameter("run_dir", value=str(tmp_path / "runs")),
        Parameter("final_identifiability", value=False)])
    exc = node._rig.excitations["train"][0]
    hidden = {n: v * 1.3 for n, v in node.parameters.nominal().items()}
    truth = node._rig.make_twin()
    truth.set_parameters(hidden)
    node.real["trial_0"], node.excitations["trial_0"] = truth.rollout(exc, render=False).trajectory, exc
    node._trial_order.append("trial_0")

    real_rollout, calls, after = node._twin.rollout, [0], []

    def slow_rollout(*args, **kwargs):
        calls[0] += 1
        if node._cancel.is_set():
            after.append(calls[0])
        time.sleep(0.05)
        return real_rollout(*args, **kwargs)

    node._twin.rollout = slow_rollout
    answer: list = []
    worker = threading.Thread(target=lambda: answer.append(
        node.serve(Propose.Request(iterations=50, proposer="random"), Propose.Response())))
    worker.start()
    records = tmp_path / "runs" / "trial_0__random" / "iterations.jsonl"
    deadline = time.monotonic() + 60.0
    while not (records.is_file() and records.read_text().count("\n") >= 2) and time.monotonic() < deadline:
        time.sleep(0.01)
    done = records.read_text().count("\n")
    assert done >= 2, "the calibration never completed an iteration"  # random search: never converged
    t0 = time.monotonic()
    node.destroy_node()
    worker.join(timeout=20.0)
    assert not worker.is_alive(), "the calibration went on after its node was destroyed"
    assert time.monotonic() - t0 < 5.0
    assert len(after) <= 1  # the rollout in flight at most
    assert not answer[0].accepted and "shutting down" in answer[0].message
    # the run directory kept what completed, and the stop came long before the 50 iterations asked for
    assert done <= records.read_text().count("\n") < 20

    # the token is per thread and per block: no block, or another thread's event, never cancels
    check_cancelled()
    ev = threading.Event()
    ev.set()
    with cancellable(ev):
        with pytest.raises(Cancelled):
            check_cancelled()
        other: list = []
        t = threading.Thread(target=lambda: other.append(check_cancelled()))
        t.start()
        t.join()
        assert other == [None]
    check_cancelled()
