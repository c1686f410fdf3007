"""Active learning on the live ROS graph (real rclpy + DDS, localhost only, domain from conftest).

The finger graph runs in-process with the stand-in rig; a client node in ANOTHER rclpy context
starts the recorded trial, then calls /vid2sid/propose with the calibrator's ``active_learning``
switch on (``trigger: always`` after one iteration, so the design does not depend on whether the
identifiability check fires on this data).

* The excitation node's command limit (``limit_upper`` 0.55) is tighter than the finger's
  actuator range [0, 1]: the calibrator designs within both, the stand-in rig runs the trial, the
  tracker tracks it, the recorder puts it in the bag, the session saves it, the next request fits
  both trials, and a session rebuilt on the directory (a restarted node) keeps it. No command
  beyond the limit appears on the robot's command topic.
* The robot's rate limit (``max_rate`` 0.5 /s, read from the excitation node like its range): the
  design's candidates are rate-limited or refused (a step, its reason in the design's notes), the
  designed trial starts with a ramp from the command the robot holds, and the excitation node
  plays it: no command on the robot's topic changes faster than the limit.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

from std_srvs.srv import Trigger  # noqa: E402

from vid2sid_ros._interfaces import require_interfaces  # noqa: E402

require_interfaces()

from vid2sid_ros.calibration.active import SESSION_LOG, ActiveLearningConfig, ActiveSession  # noqa: E402
from vid2sid_ros.calibration.design import ExcitationLimits  # noqa: E402
from vid2sid_ros.core.excitation import build_excitation  # noqa: E402
from vid2sid_ros.core.trial import RealTrial  # noqa: E402
from vid2sid_ros.io.rosbag import bag_topics  # noqa: E402
from vid2sid_ros.nodes.bringup import Bringup  # noqa: E402
from vid2sid_ros.nodes.common import LATCHED_QOS, ExcitationCommand, TrajectoryMsg  # noqa: E402
from vid2sid_ros.nodes.graph import TOPICS  # noqa: E402
from vid2sid_ros.srv import Propose  # noqa: E402

LIMIT = 0.55  # excitation_node limit_upper, command units (the finger's tendon motor: ctrlrange [0, 1])
OPTIONS = "{trigger: always, after_iteration: 1}"


def _topic(key: str) -> str:
    return "/" + TOPICS[key]


class _Client:
    """A client node in the test's own context: the real trajectories and the robot's commands it saw."""

    def __init__(self, ros) -> None:
        self.ros, self.node = ros, ros.node("al_client")
        self.real: dict[str, object] = {}
        self.robot: list[ExcitationCommand] = []
        self.node.create_subscription(TrajectoryMsg, _topic("real_trajectory"),
                                      lambda m: self.real.__setitem__(m.trial_id, m), LATCHED_QOS)
        self.node.create_subscription(ExcitationCommand, _topic("rig_command"), self.robot.append, 100)

    def call(self, srv_type, name, request, timeout=60.0):
        cli = self.node.create_client(srv_type, name)
        assert self.ros.spin_until(cli.service_is_ready, timeout=20.0), f"service {name} not available"
        return self.ros.spin_future(cli.call_async(request), timeout=timeout)

    def propose(self, **kw):
        return self.call(Propose, _topic("propose"), Propose.Request(**kw), timeout=90.0)

    def recorded_trial(self) -> None:
        # the robot's command topic is matched before the first command (wait_for covers the graph's nodes only)
        assert self.ros.spin_until(lambda: self.node.count_publishers(_topic("rig_command")) >= 1, timeout=20.0)
        self.ros.spin_until(lambda: False, timeout=0.5)
        ok = self.call(Trigger, _topic("start"), Trigger.Request())
        assert ok.success and ok.message == "finger_0", ok.message
        assert self.ros.spin_until(lambda: "finger_0" in self.real, timeout=40.0)

    def commands(self) -> list[float]:
        return [v for m in self.robot for v in m.values]


def test_propose_with_active_learning_runs_a_designed_trial_within_the_robots_limits(ros, tmp_path):
    bag, runs = tmp_path / "bag", tmp_path / "runs"
    live = Bringup("finger_stand_in", arguments={"bag_path": str(bag), "run_dir": str(runs)},
                   overrides={"tracker_node": {"trial_grace": 20.0},
                              "excitation_node": {"limit_lower": [0.0], "limit_upper": [LIMIT]},
                              "calibrator_node": {"active_learning": True, "final_identifiability": False,
                                                  "active_learning_options": OPTIONS}}).start()
    client = _Client(ros)
    try:
        client.recorded_trial()
        r = client.propose(apply=True, iterations=1)
        assert r.accepted, r.message
        assert "active learning: designed trial finger_1 run on the rig (60 steps tracked" in r.message, r.message
        assert "the next request fits 2 trials" in r.message, r.message
        assert ros.spin_until(lambda: "finger_1" in client.real, timeout=10.0)
        assert client.real["finger_1"].num_steps == 60 and client.real["finger_1"].dropped_frames == 0
        assert len(client.robot) == 120, len(client.robot)
        assert 0.0 <= min(client.commands()) and max(client.commands()) <= LIMIT  # nothing beyond the robot's limits
        published = np.concatenate(live["excitation_node"].robot_commands)
        assert published.size == 120 and 0.0 <= published.min() and published.max() <= LIMIT
        designed = [m.values[0] for m in client.robot if m.trial_id == "finger_1"]
        assert max(designed) > 0.4  # it used the range it was given: the robot's, not the rig's [0, 1]
        session = next(runs.glob("*__active"))
        records = [json.loads(x) for x in (session / SESSION_LOG).read_text().splitlines()]
        assert len(records) == 1 and records[0]["applied"] and records[0]["trial"] == "finger_1"
        assert records[0]["limits"]["command_range"] == [[0.0, LIMIT]]
        assert records[0]["limits"]["source"]["range[flexor_motor]"] == "excitation_node limits"
        assert (session / records[0]["trial_file"]).is_file()

        # the next request fits the extended data, from the values the trial was designed at
        r = client.propose(apply=True, iterations=1)
        assert r.accepted, r.message
        assert "no trial designed: 1 designed trial(s) already run (max_trials 1)" in r.message, r.message
        run = json.loads((session / "phase_1" / "run.json").read_text())
        assert run["signature"]["train_trials"] == ["finger_0", "finger_1"]
        assert run["signature"]["start"] == pytest.approx(
            {k: v for k, v in records[0]["at"].items() if k in run["signature"]["start"]})
        stop = client.call(Trigger, _topic("recorder_stop"), Trigger.Request())
        assert stop.success, stop.message
    finally:
        live.shutdown()

    topics = bag_topics(bag)
    assert topics[_topic("excitation")] == ("vid2sid_ros/msg/ExcitationCommand", 120)
    assert topics[_topic("real_image")][1] == 120 and topics[_topic("real_trajectory")][1] == 2

    # a session rebuilt on the directory (a restarted node) keeps the trial: phase_1, two training trials
    saved = RealTrial.load(session / records[0]["trial_file"])
    again = ActiveSession(session, RealTrial(saved.train[:1], saved.train_excitations[:1]),
                          ActiveLearningConfig(enabled=True),
                          ExcitationLimits((1.0,), ("flexor_motor",), (0.05, 6.0), 2.0, 30.0), 400)
    assert again.trials_run == 1 and again.phase_dir == session / "phase_1"
    assert [t.trial_id for t in again.real.train] == ["finger_0", "finger_1"]
    np.testing.assert_allclose(again.real.train_excitations[1].values[:, 0], designed, atol=1e-12)


def test_a_designed_trial_within_the_robots_rate_limit_is_ramped_and_played(ros, tmp_path, capsys):
    """Also the per-call switch: the calibrator starts with active learning off; ``vid2sid propose
    --active-learning`` switches it on for that call (its parameter, read when the request is served)."""
    from vid2sid_ros.cli import main as vid2sid_main

    gentle = "{kind: sine, frequency: 0.5, amplitude: 0.1, offset: 0.2, duration: 2.0, rate: 30.0}"  # <= 0.32 /s
    live = Bringup("finger_stand_in", arguments={"run_dir": str(tmp_path / "runs")},
                   overrides={"tracker_node": {"trial_grace": 20.0}, "recorder_node": {"enabled": False},
                              "excitation_node": {"excitation_config": gentle, "max_rate": [0.5]},
                              "calibrator_node": {"final_identifiability": False,
                                                  "active_learning_options": OPTIONS}}).start()
    client = _Client(ros)
    try:
        client.recorded_trial()
        assert live["calibrator_node"].get_parameter("active_learning").value is False
        assert vid2sid_main(["propose", "--apply", "--iterations", "1", "--active-learning"]) == 0
        out = capsys.readouterr().out
        assert "accepted: true" in out  # the calibration itself is served
        assert "active learning: designed trial finger_1 run on the rig" in out, out
        assert ros.spin_until(lambda: "finger_1" in client.real, timeout=40.0)
        session = next((tmp_path / "runs").glob("*__active"))
        records = [json.loads(x) for x in (session / SESSION_LOG).read_text().splitlines()]
        assert len(records) == 1 and records[0]["applied"] is True, records
        assert records[0]["limits"]["max_rate"] == [0.5] and records[0]["limits"]["source"]["max_rate"] == \
            "excitation_node limits"
        # the robot held the recorded trial's last command (on_stop: hold); the designed trial ramps from it
        held = [m.values[0] for m in client.robot if m.trial_id == "finger_0"][-1]
        assert records[0]["limits"]["held"] == pytest.approx([held])
        prof = records[0]["profile"]
        assert prof["ramp_from"] == pytest.approx([held]) and prof["ramp_duration"] > 0
        assert any("step" in n and "faster than max_rate 0.5" in n for n in records[0]["notes"]), records[0]["notes"]
        published = np.concatenate(live["excitation_node"].robot_commands)
        assert published.size > 60 and np.max(np.abs(np.diff(published))) * 30.0 <= 0.5 * (1 + 1e-9)
        # the excitation node's own profile was put back
        assert live["excitation_node"].get_parameter("excitation_config").value == gentle
    finally:
        live.shutdown()
