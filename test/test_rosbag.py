"""rosbag2 (MCAP) recording and offline loading: rclpy CDR bytes in, rosbags objects out."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
import yaml

from vid2sid_ros.io.rosbag import BagError, BagWriter, bag_topics, load_bag_trials, load_real_trial_from_bag, \
    make_typestore, read_messages

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from vid2sid_ros._interfaces import require_interfaces  # noqa: E402

require_interfaces()

from vid2sid_ros.io.image_msg import array_to_image_fields  # noqa: E402
from vid2sid_ros.nodes.common import ExcitationCommand, Keypoints, excitation_to_commands, stamp_from_s  # noqa: E402
from vid2sid_ros.nodes.common import trajectory_from_msg, trajectory_to_msg  # noqa: E402
from vid2sid_ros.core.excitation import build_excitation  # noqa: E402
from vid2sid_ros.perception.markers import MarkerTracker  # noqa: E402

TRACKER_CFG = {"kind": "markers", "roi_radius_px": 0, "markers": [
    {"name": "red", "hsv_lower": [0, 120, 120], "hsv_upper": [10, 255, 255]},
    {"name": "green", "hsv_lower": [50, 120, 120], "hsv_upper": [70, 255, 255]}]}


def _frame(k: int) -> tuple[np.ndarray, np.ndarray]:
    """A 96x128 RGB frame with a red and a green disc moving with k; their centres (2, 2) px."""
    img = np.full((96, 128, 3), 60, np.uint8)
    centres = np.array([[20.0 + 3 * k, 30.0], [90.0, 20.0 + 2 * k]])
    cv2.circle(img, (int(centres[0, 0]), int(centres[0, 1])), 6, (230, 20, 20), -1)
    cv2.circle(img, (int(centres[1, 0]), int(centres[1, 1])), 6, (20, 220, 20), -1)
    return img, centres


def _image(k: int, stamp: float, encoding: str = "rgb8") -> Image:
    img, _ = _frame(k)
    if encoding == "bgr8":
        img = img[..., ::-1]
    msg = Image()
    for f, v in array_to_image_fields(np.ascontiguousarray(img), encoding).items():
        setattr(msg, f, v)
    msg.header.stamp = stamp_from_s(stamp)
    msg.header.frame_id = "real_camera"
    return msg


def _write_trial_bag(path, *, trial="trial_0", t0=100.0, steps=12, drop=(), image_topic="/vid2sid/real/image_raw",
                     encoding="rgb8", with_commands=True, drop_commands=()):
    exc = build_excitation({"kind": "sine", "amplitude": 0.4, "frequency": 2.0, "duration": steps / 30.0,
                            "rate": 30.0}, ("motor",))
    cmds = excitation_to_commands(exc, trial, t0 + exc.time)
    with BagWriter(path) as w:
        for k, c in enumerate(cmds):
            t = t0 + k / 30.0
            if with_commands and k not in drop_commands:
                w.write("/vid2sid/excitation/command", "vid2sid_ros/msg/ExcitationCommand", serialize_message(c),
                        int(t * 1e9) + 1000)
            if k not in drop:  # frame of step k, captured at the end of its period
                w.write(image_topic, "sensor_msgs/msg/Image", serialize_message(_image(k, t + 1 / 30.0, encoding)),
                        int((t + 1 / 30.0) * 1e9) + 2000)
        if with_commands:
            end = ExcitationCommand(trial_id=trial, step=steps, period=1 / 30.0)
            w.write("/vid2sid/excitation/trial_end", "vid2sid_ros/msg/ExcitationCommand", serialize_message(end),
                    int((t0 + steps / 30.0) * 1e9) + 3000)
    return exc


def test_rclpy_bytes_round_trip_through_mcap(tmp_path):
    bag = tmp_path / "bag"
    kp = Keypoints(source="real", trial_id="t", step=3, names=["a", "b"], x=[1.5, math.nan], y=[2.5, math.nan],
                   valid=[True, False])
    kp.header.stamp = stamp_from_s(12.25)
    with BagWriter(bag, compression=True) as w:
        w.write("/vid2sid/real/keypoints", "vid2sid_ros/msg/Keypoints", serialize_message(kp), 5)
        w.write("/vid2sid/real/image_raw", "sensor_msgs/msg/Image", serialize_message(_image(1, 12.0, "bgr8")), 6)
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["storage_identifier"] == "mcap" and meta["version"] == 9 and meta["message_count"] == 2
    hashes = {t["topic_metadata"]["name"]: t["topic_metadata"]["type_description_hash"]
              for t in meta["topics_with_message_count"]}
    assert all(h.startswith("RIHS01_") for h in hashes.values())
    mcap = (bag / "bag.mcap").read_bytes()
    assert b"vid2sid_ros/msg/Keypoints" in mcap  # the schema (full msg definition) is embedded
    msgs = list(read_messages(bag))
    k = msgs[0].msg
    assert (k.source, k.trial_id, k.step, list(k.names)) == ("real", "t", 3, ["a", "b"])
    assert k.x[0] == 1.5 and math.isnan(k.x[1]) and list(k.valid) == [True, False]
    assert (k.header.stamp.sec, k.header.stamp.nanosec) == (12, 250_000_000)
    img = msgs[1].msg
    assert img.encoding == "bgr8" and img.step == img.width * 3 and img.is_bigendian == 0


def test_trajectory_message_round_trip_keeps_counts_and_nans():
    from vid2sid_ros.core.trajectory import Trajectory

    kp = np.arange(3 * 2 * 2, dtype=float).reshape(3, 2, 2)
    valid = np.array([[True, True], [False, True], [True, True]])
    tr = Trajectory(np.array([0.1, 0.2, 0.3]), kp, valid, ("a", "b"), "real", "t1",
                    meta={"dropped_frames": 1, "late_frames": 2})
    back = trajectory_from_msg(trajectory_to_msg(tr))
    assert back.names == ("a", "b") and back.meta == {"dropped_frames": 1, "late_frames": 2}
    np.testing.assert_array_equal(back.valid, valid)
    np.testing.assert_array_equal(back.keypoints[valid], kp[valid])
    assert np.isnan(back.keypoints[1, 0]).all()


def test_bag_trial_is_retracked_step_by_step(tmp_path):
    bag = tmp_path / "trial"
    exc = _write_trial_bag(bag, steps=12, drop=(5,), encoding="bgr8")
    (trial,) = load_bag_trials(bag, tracker=MarkerTracker.from_config(TRACKER_CFG))
    tr = trial.trajectory
    assert tr.num_frames == 12 and tr.meta["dropped_frames"] == 1 and not tr.valid[5].any()
    np.testing.assert_allclose(trial.excitation.values, exc.values)
    assert trial.excitation.rate == pytest.approx(30.0)
    for k in (0, 4, 6, 11):
        np.testing.assert_allclose(tr.keypoints[k], _frame(k)[1], atol=1.0)  # px
    real = load_real_trial_from_bag(bag, tracker=MarkerTracker.from_config(TRACKER_CFG))
    assert real.train[0].trial_id == "trial_0" and real.train_excitations[0].num_steps == 12


def test_trial_end_gives_the_length_when_the_last_commands_are_missing(tmp_path):
    """The package reader is a topic map over the lab reader: the trial-end marker's step (= T) still sets the
    trial's length when the recorder lost its last commands, and the lost commands are held, with a warning."""
    bag = tmp_path / "trial"
    exc = _write_trial_bag(bag, steps=12, drop_commands=(10, 11))
    (trial,) = load_bag_trials(bag, tracker=MarkerTracker.from_config(TRACKER_CFG))
    assert trial.excitation.num_steps == 12 and trial.trajectory.num_frames == 12
    np.testing.assert_allclose(trial.excitation.values[:10], exc.values[:10])
    np.testing.assert_allclose(trial.excitation.values[10:], np.repeat(exc.values[9:10], 2, axis=0))
    assert trial.trajectory.valid[:10].all() and not trial.trajectory.valid[10:].any()  # no command, no pairing
    assert any("commands of 2 of 12 steps missing from /vid2sid/excitation/command; held the previous one" in w
               for w in trial.warnings), trial.warnings


def test_bag_errors_name_topic_and_expected_type(tmp_path):
    with pytest.raises(BagError, match="not found"):
        bag_topics(tmp_path / "nope")
    no_cmd = tmp_path / "no_commands"
    _write_trial_bag(no_cmd, with_commands=False)
    with pytest.raises(BagError, match=r"topic /vid2sid/excitation/command \(vid2sid_ros/msg/ExcitationCommand\) is missing"):
        load_bag_trials(no_cmd, tracker=MarkerTracker.from_config(TRACKER_CFG))
    wrong = tmp_path / "wrong_type"
    with BagWriter(wrong) as w:
        c = ExcitationCommand(trial_id="x", step=0, period=0.1, values=[0.0])
        w.write("/vid2sid/excitation/command", "vid2sid_ros/msg/ExcitationCommand", serialize_message(c), 1)
        w.write("/vid2sid/real/image_raw", "vid2sid_ros/msg/ExcitationCommand", serialize_message(c), 2)
    with pytest.raises(BagError, match="holds vid2sid_ros/msg/ExcitationCommand, expected sensor_msgs/msg/Image"):
        load_bag_trials(wrong, tracker=MarkerTracker.from_config(TRACKER_CFG))
    with pytest.raises(BagError, match="exists already"):
        BagWriter(wrong)
    good = tmp_path / "good"
    _write_trial_bag(good)
    with pytest.raises(BagError, match=r"trial\(s\) \['zzz'\] not found; trials in the bag: trial_0"):
        load_bag_trials(good, tracker=MarkerTracker.from_config(TRACKER_CFG), trial_ids=["zzz"])


def test_typestore_registers_every_vid2sid_message():
    store = make_typestore()
    for n in ("ExcitationCommand", "Keypoints", "Trajectory", "ParameterUpdate"):
        assert f"vid2sid_ros/msg/{n}" in store.fielddefs


def test_mcap_channels_carry_the_topic_type_hash_like_rosbag2(tmp_path):
    """(was: only offered_qos_profiles in the channel metadata; rosbag2's MCAP storage plugin reads
    topic_type_hash there)"""
    from mcap.reader import make_reader

    bag = tmp_path / "bag"
    kp = Keypoints(source="real", trial_id="t", step=0, names=["a"], x=[1.0], y=[2.0], valid=[True])
    with BagWriter(bag, compression=True) as w:
        w.write("/vid2sid/real/keypoints", "vid2sid_ros/msg/Keypoints", serialize_message(kp), 5)
        w.write("/vid2sid/real/image_raw", "sensor_msgs/msg/Image", serialize_message(_image(1, 12.0, "bgr8")), 6)
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    want = {t["topic_metadata"]["name"]: t["topic_metadata"]["type_description_hash"]
            for t in meta["topics_with_message_count"]}
    with open(bag / "bag.mcap", "rb") as f:
        channels = make_reader(f).get_summary().channels.values()
        got = {c.topic: c.metadata for c in channels}
    assert set(got) == set(want)
    for topic, md in got.items():
        assert md["topic_type_hash"] == want[topic] and md["topic_type_hash"].startswith("RIHS01_"), md
        assert "reliability" in md["offered_qos_profiles"]
    assert list(read_messages(bag))[0].msg.names == ["a"]  # rosbags still reads it
