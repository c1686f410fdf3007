"""The ROS ParameterUpdate names the proposer that actually proposed (issue 12 item 2).

The calibrator node runs a session with ``gemini`` and no API key: every proposal is made
by its ``reasoner`` fallback, and every ParameterUpdate (per iteration and the final one)
must say ``reasoner``, not ``gemini``. In-process, one rclpy context of the test's own.
"""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial  # noqa: E402
from vid2sid_ros.sim.toy import make_rig  # noqa: E402


@pytest.mark.timeout(120)
def test_parameter_updates_name_the_fallback_that_proposed(ros, tmp_path, monkeypatch):
    for v in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(v, raising=False)
    from rclpy.parameter import Parameter

    from vid2sid_ros.nodes.calibrator_node import CalibratorNode
    from vid2sid_ros.nodes.common import LATCHED_QOS, ParameterUpdate
    from vid2sid_ros.nodes.graph import TOPICS
    from vid2sid_ros.srv import Propose

    node = CalibratorNode(context=ros.context, parameter_overrides=[
        Parameter("rig", value="toy"), Parameter("run_dir", value=str(tmp_path)),
        Parameter("proposer", value="gemini"),
        Parameter("proposer_options", value="{fallback: reasoner, overlay_plot: false, video: false}")])
    ros.nodes.append(node)
    ros.executor.add_node(node)
    rig = make_rig()
    real = make_sim2sim_trial(rig, {"stiffness": 0.8, "damping": 0.05, "gain": 0.5}, noise="none")
    node.real["t1"], node.excitations["t1"] = real.train[0], real.train_excitations[0]
    node._trial_order.append("t1")
    got = []
    ros.node("listener").create_subscription(ParameterUpdate, TOPICS["parameter_update"], got.append, LATCHED_QOS)
    assert ros.spin_until(lambda: node._pub.get_subscription_count() >= 1, timeout=30.0)  # matched before publishing

    resp = node._propose(Propose.Request(iterations=2, apply=False), Propose.Response())
    assert resp.accepted, resp.message
    n = 1 + len(node.results[-1].history)  # every iteration record (0 included) and the final update
    assert n >= 3 and ros.spin_until(lambda: len(got) >= n, timeout=30.0)
    assert got[0].proposer == "initial"
    assert [m.proposer for m in got[1:]] == ["reasoner"] * (n - 1)  # was: "gemini" on every one
    assert "best values proposed by 'reasoner'" in resp.message
