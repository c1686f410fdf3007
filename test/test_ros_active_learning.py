"""Active learning on the live ROS graph (real rclpy + DDS, localhost only, domain from conftest).

The finger graph runs in-process with the stand-in rig; a client node in ANOTHER rclpy context
starts the recorded trial, then calls /vid2sid/propose with the calibrator's ``active_learning``
switch on (``trigger: always`` after one iteration, so the design does not depend on whether the
identifiability check fires on this data):

1. the excitation node's command limit (``limit_upper`` 0.55) is tighter than the finger's
   actuator range [0, 1] the calibrator designs within: the designed trial is refused by the
   excitation node before its first command, the reason is in the response and the session's
   record, and no command beyond the limit ever appears on the robot's command topic;
2. with ``max_amplitude: 0.5`` (the rig's designs clipped into the robot's limit) the next request
   designs a trial, the stand-in rig runs it, the tracker tracks it, the recorder puts it in the
   bag, the session saves it, and the next request fits both trials (``phase_1``);
3. a session rebuilt on the same directory (a restarted node) keeps the designed trial.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.parameter_client import AsyncParameterClient  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from vid2sid_ros._interfaces import require_interfaces  # noqa: E402

require_interfaces()

from vid2sid_ros.calibration.active import SESSION_LOG, ActiveLearningConfig, ActiveSession  # noqa: E402
from vid2sid_ros.calibration.design import ExcitationLimits  # noqa: E402
from vid2sid_ros.core.trial import RealTrial  # noqa: E402
from vid2sid_ros.io.rosbag import bag_topics  # noqa: E402
from vid2sid_ros.nodes.bringup import Bringup  # noqa: E402
from vid2sid_ros.nodes.common import LATCHED_QOS, ExcitationCommand, TrajectoryMsg  # noqa: E402
from vid2sid_ros.nodes.graph import TOPICS  # noqa: E402
from vid2sid_ros.srv import Propose  # noqa: E402

LIMIT = 0.55  # excitation_node limit_upper, command units (the finger's tendon motor: ctrlrange [0, 1])


def _topic(key: str) -> str:
    return "/" + TOPICS[key]


def test_propose_with_active_learning_runs_a_designed_trial_within_the_robots_limits(ros, tmp_path):
    t_start = time.monotonic()
    bag, runs = tmp_path / "bag", tmp_path / "runs"
    live = Bringup("finger_stand_in", arguments={"bag_path": str(bag), "run_dir": str(runs)},
                   overrides={"tracker_node": {"trial_grace": 20.0},
                              "excitation_node": {"limit_lower": [0.0], "limit_upper": [LIMIT]},
                              "calibrator_node": {"active_learning": True, "final_identifiability": False,
                                                  "active_learning_options": "{trigger: always, after_iteration: 1}"}
                              }).start()
    node = ros.node("al_client")
    real: dict[str, object] = {}
    robot: list[ExcitationCommand] = []
    node.create_subscription(TrajectoryMsg, _topic("real_trajectory"), lambda m: real.__setitem__(m.trial_id, m),
                             LATCHED_QOS)
    node.create_subscription(ExcitationCommand, _topic("rig_command"), robot.append, 100)

    def call(srv_type, name, request, timeout=60.0):
        cli = node.create_client(srv_type, name)
        assert ros.spin_until(cli.service_is_ready, timeout=20.0), f"service {name} not available"
        return ros.spin_future(cli.call_async(request), timeout=timeout)

    def propose(**kw):
        return call(Propose, _topic("propose"), Propose.Request(**kw), timeout=90.0)

    try:
        ok = call(Trigger, _topic("start"), Trigger.Request())
        assert ok.success and ok.message == "finger_0", ok.message
        assert ros.spin_until(lambda: "finger_0" in real, timeout=40.0)

        # 1. designed within the actuator's range [0, 1], beyond the robot's limit: refused, never sent
        r = propose(apply=True, iterations=1)
        assert r.accepted, r.message
        assert "designed trial NOT run: excitation_node refused the trial" in r.message, r.message
        assert "limit_lower/limit_upper" in r.message, r.message
        ros.spin_until(lambda: False, timeout=1.0)  # anything published would have arrived by now
        assert len(robot) == 60 and max(v for m in robot for v in m.values) <= LIMIT  # only finger_0's commands
        session = next(runs.glob("*__active"))
        refused = [json.loads(x) for x in (session / SESSION_LOG).read_text().splitlines()]
        assert len(refused) == 1 and refused[0]["applied"] is False and "limit_upper" in refused[0]["reason"]
        assert max(abs(v) for v in refused[0]["candidates"][0]["profile"].values()
                   if isinstance(v, float)) > LIMIT or refused[0]["profile"]

        # 2. the rig's designs clipped into the robot's limit: the trial runs, is tracked, recorded, added
        pc = AsyncParameterClient(node, "calibrator_node")
        assert ros.spin_until(pc.services_are_ready, timeout=10.0)
        res = ros.spin_future(pc.set_parameters([Parameter(
            "active_learning_options", value="{trigger: always, after_iteration: 1, max_amplitude: 0.5}")]))
        assert res.results[0].successful, res.results[0].reason
        r = propose(apply=True, iterations=1)
        assert r.accepted, r.message
        assert "active learning: designed trial finger_1 run on the rig" in r.message, r.message
        assert "the next request fits 2 trials" in r.message, r.message
        assert ros.spin_until(lambda: "finger_1" in real, timeout=10.0)
        assert real["finger_1"].num_steps == 60 and real["finger_1"].dropped_frames == 0
        assert len(robot) == 120, len(robot)
        assert max(v for m in robot for v in m.values) <= LIMIT
        assert min(v for m in robot for v in m.values) >= 0.0
        designed = [m for m in robot if m.trial_id == "finger_1"]
        assert max(v for m in designed for v in m.values) > 0.4  # it used the range it was given
        records = [json.loads(x) for x in (session / SESSION_LOG).read_text().splitlines()]
        assert [rec["applied"] for rec in records] == [False, True]
        assert records[1]["trial"] == "finger_1" and (session / records[1]["trial_file"]).is_file()

        # the next request fits the extended data, from the values the trial was designed at
        r = propose(apply=True, iterations=1)
        assert r.accepted, r.message
        assert "no trial designed: 1 designed trial(s) already run (max_trials 1)" in r.message, r.message
        run = json.loads((session / "phase_1" / "run.json").read_text())
        assert run["signature"]["train_trials"] == ["finger_0", "finger_1"]
        assert run["signature"]["start"] == pytest.approx(
            {k: v for k, v in records[1]["at"].items() if k in run["signature"]["start"]})

        stop = call(Trigger, _topic("recorder_stop"), Trigger.Request())
        assert stop.success, stop.message
    finally:
        live.shutdown()

    topics = bag_topics(bag)
    assert topics[_topic("excitation")] == ("vid2sid_ros/msg/ExcitationCommand", 120)
    assert topics[_topic("real_image")][1] == 120 and topics[_topic("real_trajectory")][1] == 2

    # 3. a session rebuilt on the directory keeps the trial: two training trials, phase_1, the same start
    base = RealTrial.load(session / records[1]["trial_file"])
    again = ActiveSession(session, RealTrial(base.train[:1], base.train_excitations[:1]),
                          ActiveLearningConfig(enabled=True), ExcitationLimits((1.0,), ("flexor_motor",),
                                                                                (0.05, 6.0), 2.0, 30.0), 400)
    assert again.trials_run == 1 and again.phase_dir == session / "phase_1"
    assert [t.trial_id for t in again.real.train] == ["finger_0", "finger_1"]
    np.testing.assert_allclose(again.real.train_excitations[1].values[:, 0],
                               [m.values[0] for m in designed], atol=1e-12)
    assert time.monotonic() - t_start < 90.0
