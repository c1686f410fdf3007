"""Bags that survive a crash (issue 14): small fsynced chunks, `vid2sid bag repair`, QoS and type hashes.

A recorder node (its own process) records two finger trials (commands + camera images on
the package's topics) and is killed with SIGKILL during a third; the bag is unreadable
and `vid2sid calibrate --real` says so and names the repair; `vid2sid bag repair`
recovers both completed trials, which are then calibrated from. The independent `mcap` +
`mcap-ros2-support` reader decodes every message of the repaired bag and of a bag the
recorder finished normally.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers.finger_bags import rollouts  # noqa: E402
from vid2sid_ros.benchmark.sim2sim import draw_ground_truth  # noqa: E402
from vid2sid_ros.io.bag_repair import recover_records  # noqa: E402
from vid2sid_ros.io.rosbag import BagError, check_bag_finished, load_real_trial_from_bag  # noqa: E402
from vid2sid_ros.sim.registry import make_rig  # noqa: E402


def _decode_all(bag: Path) -> dict[str, int]:
    """Every message of the bag through mcap + mcap-ros2-support (not rosbags)."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    counts: dict[str, int] = {}
    for f in sorted(bag.glob("*.mcap")):
        with f.open("rb") as fh:
            for _, channel, _, msg in make_reader(fh, decoder_factories=[DecoderFactory()]).iter_decoded_messages():
                assert msg is not None
                counts[channel.topic] = counts.get(channel.topic, 0) + 1
    return counts


def _publish_trial(ros, pubs, exc, frames, t0: float, *, stop_after: int | None = None) -> None:
    from vid2sid_ros.io.image_msg import array_to_image_fields
    from vid2sid_ros.nodes.common import ExcitationCommand, excitation_to_commands, stamp_from_s
    from sensor_msgs.msg import Image

    cmds = excitation_to_commands(exc, exc.name, t0 + exc.time)
    for k, c in enumerate(cmds):
        if stop_after is not None and k >= stop_after:
            return
        pubs["cmd"].publish(c)
        img = Image()
        for f, v in array_to_image_fields(np.ascontiguousarray(frames[k]), "rgb8").items():
            setattr(img, f, v)
        img.header.stamp = stamp_from_s(t0 + (k + 1) * exc.period)
        pubs["img"].publish(img)
        ros.executor.spin_once(timeout_sec=0.0)
        time.sleep(0.5 * exc.period)  # a camera's pace (twice real time): the recorder keeps up
    pubs["end"].publish(ExcitationCommand(trial_id=exc.name, step=exc.num_steps, period=float(exc.period)))


def _on_disk_trial_ends(bag: Path) -> int:
    files = sorted(bag.glob("*.mcap"))
    if not files:
        return 0
    _, channels, messages, _ = recover_records(files[0])
    end = [i for i, c in channels.items() if c.topic == "/vid2sid/excitation/trial_end"]
    return sum(1 for m in messages if m.channel_id in end)


@pytest.fixture(scope="module")
def finger_trials():
    rig = make_rig("finger")
    truth = draw_ground_truth(rig.parameters, 2)
    excs = rig.excitations["train"] + rig.excitations["holdout"][:1]
    return rig, truth, rollouts(rig, truth, excs)


def test_sigkilled_recorder_bag_is_repaired_and_calibrated_from(ros, ros_env, finger_trials, tmp_path, capsys):
    from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
    from vid2sid_ros.calibration.proposers import make_proposer
    from vid2sid_ros.cli import main
    from vid2sid_ros.core.parameters import relative_parameter_error
    from vid2sid_ros.nodes.common import STREAM_QOS, ExcitationCommand
    from sensor_msgs.msg import Image

    rig, truth, trials = finger_trials
    bag = tmp_path / "bag"
    proc = subprocess.Popen([sys.executable, "-m", "vid2sid_ros.nodes.recorder_node", "--ros-args",
                             "-p", f"bag_path:={bag}", "-p", "chunk_kib:=64",
                             "-p", "topics:=[excitation, trial_end, real_image]"],
                            env=ros_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        node = ros.node("crash_test_publisher")
        pubs = {"cmd": node.create_publisher(ExcitationCommand, "/vid2sid/excitation/command", STREAM_QOS),
                "end": node.create_publisher(ExcitationCommand, "/vid2sid/excitation/trial_end", STREAM_QOS),
                "img": node.create_publisher(Image, "/vid2sid/real/image_raw", STREAM_QOS)}
        assert ros.spin_until(lambda: all(p.get_subscription_count() >= 1 for p in pubs.values()), timeout=30), \
            "the recorder did not subscribe"
        t0 = time.time()
        for i, (exc, frames, _, _) in enumerate(trials[:2]):
            _publish_trial(ros, pubs, exc, frames, t0 + 10.0 * i)
        # both completed trials reach the disk (trial end -> chunk closed + fsync) while the recorder runs
        deadline = time.monotonic() + 60
        while _on_disk_trial_ends(bag) < 2 and time.monotonic() < deadline:
            ros.executor.spin_once(timeout_sec=0.05)
        assert _on_disk_trial_ends(bag) == 2
        exc3, frames3, _, _ = trials[2]
        _publish_trial(ros, pubs, exc3, frames3, t0 + 20.0, stop_after=20)  # a trial in progress...
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)  # ... when the power goes
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert not (bag / "metadata.yaml").exists()
    with pytest.raises(BagError, match=r"is unfinished .* recover its completed chunks with: vid2sid bag repair"):
        check_bag_finished(bag)
    rc = main(["calibrate", "--rig", "finger", "--real", str(bag), "--out", str(tmp_path / "run0"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and f"vid2sid bag repair {bag}" in err and "Traceback" not in err
    assert not (tmp_path / "run0").exists()  # nothing written before the checks passed

    assert main(["bag", "repair", str(bag)]) == 0
    out = capsys.readouterr().out
    assert "repaired" in out and (bag / "metadata.yaml").is_file()
    assert any(p.name.endswith(".mcap.unfinished") for p in bag.iterdir())  # the original is kept
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    topics = {t["topic_metadata"]["name"]: t for t in meta["topics_with_message_count"]}
    img = topics["/vid2sid/real/image_raw"]["topic_metadata"]
    assert img["type_description_hash"].startswith("RIHS01_")
    assert img["offered_qos_profiles"][0]["reliability"] == "reliable"   # what the publisher offered
    assert img["offered_qos_profiles"][0]["durability"] == "volatile"  # (discovery carries no depth: 0, as rosbag2)

    counts = _decode_all(bag)
    assert counts["/vid2sid/excitation/trial_end"] == 2
    assert counts["/vid2sid/real/image_raw"] >= 120 and sum(counts.values()) == meta["message_count"]

    names = [t[0].name for t in trials[:2]]
    real = load_real_trial_from_bag(bag, rig=rig, train=names)
    assert [t.trial_id for t in real.train] == names
    assert all(int(t.meta["dropped_frames"]) == 0 for t in real.train)
    res = run_calibration(rig, real, make_proposer("reasoner"), CalibrationConfig(iterations=5, rollout_budget=50))
    rel = relative_parameter_error(res.values, truth, rig.parameters.free_names)
    assert np.mean(list(rel.values())) < 0.03, rel


def test_recorder_finished_bag_decodes_with_mcap_and_carries_qos(ros, finger_trials, tmp_path):
    """A bag the recorder node closes normally: every message decodes with mcap-ros2-support."""
    from vid2sid_ros.nodes.common import STREAM_QOS, ExcitationCommand
    from vid2sid_ros.nodes.recorder_node import make_node
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Image

    _, _, trials = finger_trials
    bag = tmp_path / "done"
    rec = make_node(context=ros.context, parameter_overrides=[
        Parameter("bag_path", value=str(bag)), Parameter("topics", value=["excitation", "trial_end", "real_image"])])
    ros.executor.add_node(rec)
    ros.nodes.append(rec)
    node = ros.node("finished_publisher")
    pubs = {"cmd": node.create_publisher(ExcitationCommand, "/vid2sid/excitation/command", STREAM_QOS),
            "end": node.create_publisher(ExcitationCommand, "/vid2sid/excitation/trial_end", STREAM_QOS),
            "img": node.create_publisher(Image, "/vid2sid/real/image_raw", STREAM_QOS)}
    assert ros.spin_until(lambda: all(p.get_subscription_count() >= 1 for p in pubs.values()), timeout=20)
    exc, frames, _, _ = trials[0]
    _publish_trial(ros, pubs, exc, frames, time.time(), stop_after=None)
    want = {"/vid2sid/excitation/command": 60, "/vid2sid/real/image_raw": 60, "/vid2sid/excitation/trial_end": 1}
    assert ros.spin_until(lambda: rec.writer.counts == want, timeout=30), rec.writer.counts
    rec.close()
    check_bag_finished(bag)
    counts = _decode_all(bag)
    assert counts == want
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    for t in meta["topics_with_message_count"]:
        assert t["topic_metadata"]["offered_qos_profiles"], t
        assert t["topic_metadata"]["type_description_hash"].startswith("RIHS01_")
