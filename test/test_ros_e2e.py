"""End to end over real rclpy + DDS (localhost only, domain from conftest).

The finger graph runs in-process with the stand-in rig (a second twin at hidden
parameters behind the camera topic); a client node in ANOTHER rclpy context (so every
message crosses DDS) starts a trial, calls /vid2sid/propose ten times, checks that the
twin's ROS parameters changed and the error fell, closes the bag, then replays the bag
into a fresh graph and checks that the real trajectory is reproduced exactly.
Bad requests on the way (before any trial, unknown parameter, unknown proposer) must be
answered with a clear message while the graph and the recording carry on.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

from rclpy.parameter_client import AsyncParameterClient  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from vid2sid_ros._interfaces import require_interfaces  # noqa: E402

require_interfaces()

from vid2sid_ros.io.rosbag import bag_topics, load_real_trial_from_bag  # noqa: E402
from vid2sid_ros.nodes.bringup import Bringup  # noqa: E402
from vid2sid_ros.nodes.common import LATCHED_QOS, ParameterUpdate, TrajectoryMsg, trajectory_from_msg  # noqa: E402
from vid2sid_ros.srv import Propose  # noqa: E402

HIDDEN = {"joint_stiffness": 0.42, "joint_damping": 0.0065, "joint_friction": 0.0035, "actuator_gain": 12.5}


class Client:
    """A client node in its own context (the test's ``ros`` harness)."""

    def __init__(self, ros):
        self.ros = ros
        self.node = ros.node("e2e_client")
        self.real: dict[str, object] = {}
        self.sim: dict[str, object] = {}
        self.updates: list = []
        self.node.create_subscription(TrajectoryMsg, "/vid2sid/real/trajectory",
                                      lambda m: self.real.__setitem__(m.trial_id, m), LATCHED_QOS)
        self.node.create_subscription(TrajectoryMsg, "/vid2sid/sim/trajectory",
                                      lambda m: self.sim.__setitem__(m.trial_id, m), LATCHED_QOS)
        self.node.create_subscription(ParameterUpdate, "/vid2sid/parameter_update", self.updates.append, LATCHED_QOS)
        self.propose_cli = self.node.create_client(Propose, "/vid2sid/propose")

    def call(self, srv_type, name, request, timeout=60.0):
        cli = self.propose_cli if name == "/vid2sid/propose" else self.node.create_client(srv_type, name)
        assert self.ros.spin_until(cli.service_is_ready, timeout=20.0), f"service {name} not available"
        return self.ros.spin_future(cli.call_async(request), timeout=timeout)

    def propose(self, **kw):
        return self.call(Propose, "/vid2sid/propose", Propose.Request(**kw), timeout=60.0)


def test_calibrate_record_and_replay(ros, tmp_path):
    bag = tmp_path / "bag"
    live = Bringup("finger_stand_in", arguments={"bag_path": str(bag), "run_dir": str(tmp_path / "runs")},
                   overrides={"tracker_node": {"trial_grace": 20.0}}).start()
    client = Client(ros)
    try:
        # bad input before any trial: a clear refusal, nothing breaks
        r = client.propose(apply=True)
        assert not r.accepted and "no real trajectory yet" in r.message

        ok = client.call(Trigger, "/vid2sid/excitation/start", Trigger.Request())
        assert ok.success and ok.message == "finger_0"
        assert ros.spin_until(lambda: "finger_0" in client.real and "finger_0" in client.sim, timeout=40.0)
        real_msg, sim_msg = client.real["finger_0"], client.sim["finger_0"]
        # lockstep: one real and one sim frame per command step, paired by step
        assert real_msg.num_steps == sim_msg.num_steps == 60
        assert real_msg.dropped_frames == 0 and sim_msg.dropped_frames == 0
        live_real = trajectory_from_msg(real_msg)
        assert live_real.valid.all()

        r = client.propose(names=["bogus"], apply=True)
        assert not r.accepted and "unknown parameter(s) ['bogus']" in r.message and "joint_stiffness" in r.message
        r = client.propose(proposer="no_such_proposer", apply=True)
        assert not r.accepted and "unknown proposer" in r.message

        errors = []
        for _ in range(10):
            r = client.propose(apply=True, iterations=1)
            assert r.accepted, r.message
            errors.append(r.error_px)
        assert ros.spin_until(lambda: any(u.iteration == 0 for u in client.updates), timeout=5.0)
        start_error = next(u.error_px for u in client.updates if u.iteration == 0)
        assert all(b <= a + 1e-9 for a, b in zip(errors, errors[1:])), errors  # best-so-far never rises
        assert errors[-1] < 0.5 * start_error, (start_error, errors)
        applied = [u for u in client.updates if u.accepted]
        assert len(applied) == 10 and applied[-1].rationale and 0.0 <= applied[-1].confidence <= 1.0

        # the twin's ROS parameters changed to the applied proposal (read through the parameter service)
        pc = AsyncParameterClient(client.node, "sim_twin_node")
        assert ros.spin_until(lambda: pc.services_are_ready(), timeout=10.0)
        got = ros.spin_future(pc.get_parameters([f"physics.{n}" for n in r.names]), timeout=10.0)
        twin_values = dict(zip(r.names, (v.double_value for v in got.values)))
        assert twin_values == pytest.approx(dict(zip(r.names, r.values)))
        assert twin_values["joint_stiffness"] != pytest.approx(0.3)  # moved away from the nominal start
        start_dist = sum(abs(math.log(v0 / HIDDEN[n])) for n, v0 in
                         {"joint_stiffness": 0.3, "joint_damping": 0.004, "joint_friction": 0.005,
                          "actuator_gain": 10.0}.items())
        end_dist = sum(abs(math.log(twin_values[n] / HIDDEN[n])) for n in HIDDEN)
        assert end_dist < start_dist, (twin_values, HIDDEN)
        # and it arrived: every parameter within 5 % of the hidden value (measured: at most 1.3 %, damping),
        # not merely closer than the start (which a single lucky step satisfies)
        rel = {n: abs(twin_values[n] / HIDDEN[n] - 1.0) for n in HIDDEN}
        assert max(rel.values()) < 0.05, rel
        assert errors[-1] < 0.5, errors  # px, on 320x240 frames

        stop = client.call(Trigger, "/vid2sid/recorder/stop", Trigger.Request())
        assert stop.success and "closed" in stop.message
    finally:
        live.shutdown()

    topics = bag_topics(bag)
    assert topics["/vid2sid/real/image_raw"] == ("sensor_msgs/msg/Image", 60)
    assert topics["/vid2sid/sim/image_raw"] == ("sensor_msgs/msg/Image", 60)
    assert topics["/vid2sid/excitation/command"] == ("vid2sid_ros/msg/ExcitationCommand", 60)
    # one accepted update per call and the start point's; a converged session runs no more iterations
    # (a later call answers with its result), so not always one progress update per call
    assert topics["/vid2sid/real/trajectory"][1] == 1 and topics["/vid2sid/parameter_update"][1] >= 11

    # offline: the bag re-tracks into the live real trajectory
    from vid2sid_ros.rigs import load_rig

    offline = load_real_trial_from_bag(bag, rig=load_rig("finger"))
    np.testing.assert_array_equal(offline.train[0].valid, live_real.valid)
    np.testing.assert_allclose(offline.train[0].keypoints, live_real.keypoints, atol=1e-9)

    # replay: the bag replaces the camera and the rig in a fresh graph
    client.real.clear()
    replay = Bringup("replay_finger", arguments={"replay_bag": str(bag), "run_dir": str(tmp_path / "runs_replay")},
                     overrides={"recorder_node": {"enabled": False}, "tracker_node": {"trial_grace": 20.0},
                                "bag_replay_node": {"start_delay": 1.0}}).start()
    try:
        assert ros.spin_until(lambda: "finger_0" in client.real, timeout=40.0)
        replayed = trajectory_from_msg(client.real["finger_0"])
        np.testing.assert_array_equal(replayed.valid, live_real.valid)
        np.testing.assert_allclose(replayed.keypoints, live_real.keypoints, atol=1e-9)
        client.updates.clear()
        r = client.propose(apply=True, iterations=3)  # a 3-iteration calibration re-run without hardware
        # all three iterations, or fewer when the proposer says it has converged (the loop then stops)
        assert r.accepted and r.error_px < start_error, r.message
        # the replay's calibration matches the live graph's on the same trial after as many iterations
        # (sessions resume: the live graph's first 3 one-iteration calls are one 3-iteration session);
        # was 10.97 -> 5.19 px on the replay against 0.08 px live when the replay outran the twin
        assert r.error_px == pytest.approx(errors[2], rel=0.10), (r.error_px, errors)
        assert r.iteration == 3 or (1 <= r.iteration < 3 and "stopped: converged" in r.message), r.message
        # progress: the start point and each iteration were published as they completed, then the applied best
        n = r.iteration
        assert ros.spin_until(lambda: len(client.updates) >= n + 2, timeout=5.0)
        assert [u.iteration for u in client.updates[:n + 1]] == list(range(n + 1))
        assert [u.accepted for u in client.updates[:n + 2]] == [False] * (n + 1) + [True]
    finally:
        replay.shutdown()

    # the same bag drives the offline CLI: `vid2sid calibrate --rig finger --real BAG`
    from vid2sid_ros.cli import main as vid2sid_main

    run_dir = tmp_path / "cli_from_bag"
    assert vid2sid_main(["calibrate", "--rig", "finger", "--real", str(bag), "--iterations", "2", "--budget", "12",
                         "--out", str(run_dir), "--quiet"]) == 0
    records = [json.loads(line) for line in (run_dir / "iterations.jsonl").read_text().splitlines()]
    assert len(records) == 2
    assert min(r["error_px"] for r in records) < start_error
    assert (run_dir / "calibrated_model.xml").is_file()  # regression: the finger's model copy was never written
