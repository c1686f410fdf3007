"""calibrator_node's ``executor`` parameter: a session on threads gives the serial session's result."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("rclpy")

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial  # noqa: E402
from vid2sid_ros.sim.toy import make_rig  # noqa: E402

TRUTH = {"stiffness": 0.8, "damping": 0.05, "gain": 0.5}


def _session(ros, tmp_path, executor: str) -> dict:
    from rclpy.parameter import Parameter

    from vid2sid_ros.nodes.calibrator_node import CalibratorNode
    from vid2sid_ros.srv import Propose

    node = CalibratorNode(context=ros.context, parameter_overrides=[
        Parameter("rig", value="toy"), Parameter("run_dir", value=str(tmp_path / executor)),
        Parameter("identifiability", value=True), Parameter("executor", value=executor),
        Parameter("workers", value=2)])
    ros.nodes.append(node)
    assert node._executor.backend == executor and node._executor.workers == (2 if executor != "serial" else 1)
    real = make_sim2sim_trial(make_rig(), TRUTH, noise="none")
    node.real["t1"], node.excitations["t1"] = real.train[0], real.train_excitations[0]
    node._trial_order.append("t1")
    resp = node._propose(Propose.Request(iterations=2, apply=False), Propose.Response())
    assert resp.accepted, resp.message
    (session,) = (tmp_path / executor).iterdir()
    res = json.loads((session / "result.json").read_text())
    lines = [json.loads(x) for x in (session / "iterations.jsonl").read_text().splitlines()]
    return {"values": res["values"], "rollouts": res["rollouts"], "diagnostic": res["diagnostic_rollouts"],
            "error": resp.error_px, "iterations": [{k: v for k, v in r.items() if k != "wall_s"} for r in lines]}


@pytest.mark.timeout(120)
def test_a_session_on_threads_gives_the_serial_result(ros, tmp_path):
    assert _session(ros, tmp_path, "threads") == _session(ros, tmp_path, "serial")
