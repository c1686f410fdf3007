"""Lockstep pieces without DDS: Image <-> array (cv_bridge rules), frame-to-step pairing, stepping twins."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from vid2sid_ros.core.lockstep import LockstepError, LockstepStream, assign_steps
from vid2sid_ros.io.image_msg import ImageEncodingError, array_to_image_fields, image_to_array


class _Msg:
    """Duck-typed sensor_msgs/Image."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


# -- image conversion ------------------------------------------------------------------------
def test_rgb8_layout_matches_cv_bridge():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    f = array_to_image_fields(img, "rgb8")
    assert (f["height"], f["width"], f["step"], f["is_bigendian"]) == (5, 7, 21, 0)
    assert f["data"] == img.tobytes()
    back = image_to_array(_Msg(**f))
    assert back.dtype == np.uint8 and np.array_equal(back, img)
    bgr = image_to_array(_Msg(**f), "bgr8")
    assert np.array_equal(bgr, img[..., ::-1])


def test_padded_rows_bigendian_and_mono16():
    img = np.arange(4 * 3, dtype=np.uint16).reshape(4, 3) * 1000
    row = img.astype(">u2").tobytes()
    step = 3 * 2 + 4  # 4 padding bytes per row
    data = b"".join(row[r * 6:(r + 1) * 6] + b"\xff" * 4 for r in range(4))
    back = image_to_array(_Msg(height=4, width=3, encoding="mono16", is_bigendian=1, step=step, data=data))
    assert back.shape == (4, 3) and back.dtype == np.uint16
    assert np.array_equal(back, img)


def test_float_and_passthrough_encodings():
    a = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
    f = array_to_image_fields(a)  # passthrough -> 32FC1
    assert f["encoding"] == "32FC1" and f["step"] == 16
    assert np.array_equal(image_to_array(_Msg(**f)), a)


@pytest.mark.parametrize("fields, match", [
    (dict(height=2, width=2, encoding="rgb8", is_bigendian=0, step=5, data=b"\0" * 12), "smaller than one row"),
    (dict(height=2, width=2, encoding="rgb8", is_bigendian=0, step=6, data=b"\0" * 11), "expected height"),
    (dict(height=1, width=1, encoding="yuv422_weird", is_bigendian=0, step=2, data=b"\0\0"), "unsupported image"),
])
def test_malformed_image_messages_raise_clear_errors(fields, match):
    with pytest.raises(ImageEncodingError, match=match):
        image_to_array(_Msg(**fields))


def test_array_encoding_mismatch_raises():
    with pytest.raises(ImageEncodingError, match="expects 3 channel"):
        array_to_image_fields(np.zeros((2, 2), np.uint8), "rgb8")
    with pytest.raises(ImageEncodingError, match="cannot convert"):
        image_to_array(_Msg(**array_to_image_fields(np.zeros((2, 2), np.uint16), "mono16")), "rgb8")


def test_image_message_round_trip_copies_the_pixels_once_or_not_at_all():
    import array

    from sensor_msgs.msg import Image

    from vid2sid_ros.io.image_msg import array_to_image

    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    msg = array_to_image(img, "rgb8", Image)
    assert isinstance(msg.data, array.array) and msg.data.typecode == "B"  # taken as is by the rclpy setter
    assert (msg.height, msg.width, msg.step, msg.encoding) == (6, 5, 15, "rgb8")
    assert msg.data.tobytes() == img.tobytes()
    img[0, 0, 0] ^= 0xFF
    assert msg.data[0] != img[0, 0, 0]  # the message owns its pixels
    view = image_to_array(msg, "rgb8", copy=False)
    assert np.shares_memory(view, np.frombuffer(msg.data, np.uint8)) and not view.flags.writeable
    copied = image_to_array(msg, "rgb8")
    assert not np.shares_memory(copied, np.frombuffer(msg.data, np.uint8)) and np.array_equal(copied, view)
    bgr = image_to_array(msg, "bgr8", copy=False)  # a conversion always makes a new array
    assert np.array_equal(bgr, view[..., ::-1]) and bgr.flags.writeable
    with pytest.raises(ImageEncodingError, match="expects 3 channel"):
        array_to_image(np.zeros((2, 2), np.uint8), "rgb8", Image)


# -- frame/step pairing ----------------------------------------------------------------------
def test_assign_steps_pairs_by_end_of_period_and_never_shifts():
    period = 0.1
    cmds = 10.0 + period * np.arange(5)
    frames = np.array([10.1, 10.21, 10.24, 10.5, 10.9, 9.0])  # steps 0, 1, 1(second), 4, unmatched, unmatched
    assert assign_steps(frames, cmds, period).tolist() == [0, 1, 1, 4, -1, -1]
    with pytest.raises(LockstepError):
        assign_steps(frames, cmds, 0.0)


def test_stream_counts_dropped_late_duplicate_frames():
    s = LockstepStream("t", "real", ("a",), 0.1)
    for k in range(5):
        s.add_command(k, 1.0 + 0.1 * k)
    s.add_frame(1.10, [[0, 0]], [True], received=1.11)
    s.add_frame(1.23, [[1, 1]], [True], received=1.24)
    s.add_frame(1.19, [[9, 9]], [True], received=1.30)  # duplicate of step 1, nearer its target -> kept
    s.add_frame(1.50, [[4, 4]], [True], received=1.75)  # step 4, received 0.25 s late (> one period)
    traj = s.trajectory(5)
    assert traj.meta["dropped_frames"] == 2 and traj.meta["late_frames"] == 1
    assert traj.meta["duplicate_frames"] == 1
    assert traj.keypoints[1, 0, 0] == 9.0 and traj.keypoints[4, 0, 0] == 4.0
    assert not traj.valid[2, 0] and not traj.valid[3, 0] and np.isnan(traj.keypoints[2]).all()
    assert traj.steps.tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(traj.time, 0.1 * np.arange(1, 6))


def test_stream_labels_frames_before_their_command_arrives():
    s = LockstepStream("t", "sim", ("a",), 0.05)
    s.add_command(0, 2.0)
    assert s.add_frame(2.05, [[0, 0]], [True]) == 0
    assert s.add_frame(2.15, [[0, 0]], [True]) == 2  # command 2 still in flight: extrapolated
    with pytest.raises(LockstepError, match="expected keypoints"):
        s.add_frame(2.2, [[0, 0], [1, 1]], [True, True])


def test_indexed_stream_labels_frames_exactly_like_the_core_stream():
    """The tracker's O(log T) step_of applies the core rule: same step for every frame."""
    from vid2sid_ros.nodes.tracker_node import IndexedLockstepStream

    rng = np.random.default_rng(5)
    p = 0.05
    for trial in range(4):
        core = LockstepStream("t", "sim", ("a",), p)
        fast = IndexedLockstepStream("t", "sim", ("a",), p)
        steps = rng.permutation(120) if trial % 2 else np.arange(120)  # in order, or shuffled
        stamps = 3.0 + np.arange(120) * p + rng.normal(0, 0.3 * p, 120)  # an irregular schedule
        stamps[7] = stamps[8]  # two commands at one stamp (tie)
        frames = 3.0 + rng.uniform(-3 * p, 125 * p, 400)
        for i, k in enumerate(steps):
            core.add_command(int(k), float(stamps[k]))
            fast.add_command(int(k), float(stamps[k]))
            if i == 60:  # a command re-sent with a new stamp
                core.add_command(int(k), float(stamps[k]) + 0.2 * p)
                fast.add_command(int(k), float(stamps[k]) + 0.2 * p)
            for f in frames[i * 3:i * 3 + 3]:
                assert fast.step_of(f) == core.step_of(f), (trial, i, f)
        assert [fast.step_of(f) for f in frames] == [core.step_of(f) for f in frames]
    assert IndexedLockstepStream("t", "sim", ("a",), p).step_of(1.0) == -1


# -- stepping == rollout -------------------------------------------------------------------------
def test_finger_stepper_reproduces_the_rollout_exactly():
    from vid2sid_ros.sim.mujoco_finger import FingerTwin
    from vid2sid_ros.sim.registry import make_rig
    from vid2sid_ros.sim.stepping import NativeStepper, SteppableTwin, make_stepper

    rig = make_rig("finger")
    exc = rig.excitations["train"][1]
    exc = type(exc)(exc.name, exc.rate, exc.values[:24], exc.actuator_names)
    twin = rig.make_twin()
    twin.set_parameters({"joint_stiffness": 0.45, "actuator_gain": 13.0})
    ref = twin.rollout(exc, render=True)
    stepper = make_stepper(rig.make_twin())
    # the finger steps natively (constant cost per command), not by replaying the history
    assert isinstance(stepper.twin, FingerTwin) and isinstance(stepper.twin, SteppableTwin)
    assert isinstance(stepper, NativeStepper)
    stepper.twin.set_parameters({"joint_stiffness": 0.45, "actuator_gain": 13.0})
    for _trial in range(2):  # a reset gives the same trial again
        stepper.reset()
        for k in range(exc.num_steps):
            r = stepper.step(exc.values[k], exc.period, render=k in (0, 23))
            np.testing.assert_array_equal(r.keypoints, ref.trajectory.keypoints[k])
            assert r.valid.tolist() == ref.trajectory.valid[k].tolist()
            if k in (0, 23):
                assert np.array_equal(r.frame, ref.frames[k])
        assert stepper.twin.steps_done == exc.num_steps  # one command period per step
    assert np.ptp(ref.trajectory.keypoints[:, -1, 1]) > 5.0  # the tip really moves (px)


def test_finger_step_api_reports_divergence_and_bad_commands():
    from vid2sid_ros.sim.base import TwinError
    from vid2sid_ros.sim.registry import make_rig
    from vid2sid_ros.sim.stepping import make_stepper

    twin = make_rig("finger").make_twin()
    with pytest.raises(TwinError, match="before reset"):
        twin.observe()
    twin.reset(1 / 30)
    with pytest.raises(TwinError, match="1 finite value"):
        twin.step([0.1, 0.2])
    with pytest.raises(TwinError, match="1 finite value"):
        twin.step([float("nan")])
    twin.set_parameters({"joint_stiffness": 5e4})  # far outside the bounds: the explicit spring blows up
    stepper = make_stepper(twin)
    stepper.reset()
    results = [stepper.step([0.3], 1 / 30) for _ in range(30)]
    bad = [r for r in results if r.diverged]
    assert bad and "diverged" in bad[0].message and "joint_stiffness" in bad[0].message
    assert twin.diverged and np.isnan(twin.observe()[0]).all() and not twin.observe()[1].any()
    with pytest.raises(TwinError, match="call reset"):
        twin.step([0.3])
    twin.set_parameters(twin.parameters.nominal())
    twin.reset()
    twin.step([0.3])
    assert not twin.diverged and twin.observe()[1].all()


class _Log:
    def __init__(self):
        self.lines = []

    def info(self, m):
        self.lines.append(("info", m))

    warning = error = info


def _command(trial, k, period, value):
    from vid2sid_ros.nodes.common import ExcitationCommand, stamp_from_s

    c = ExcitationCommand(trial_id=trial, step=k, period=period, values=[value])
    c.header.stamp = stamp_from_s(100.0 + k * period)
    return c


def test_lockstep_twin_yields_one_frame_per_command_in_order_with_seeded_sensor_noise():
    """The stand-in rig's pipeline without DDS: step + render on one worker, noise on a second,
    one frame per command, in order, stamped at the end of its period; same seed -> same frames."""
    from vid2sid_ros.nodes.lockstep_twin import LockstepTwin
    from vid2sid_ros.sim.camera_model import SensorNoiseModel
    from vid2sid_ros.sim.registry import make_rig

    rig = make_rig("finger")
    period, n = 1 / 30, 12
    runs = []
    for _ in range(2):
        stream = SensorNoiseModel.default(seed=4).stream()
        got = []
        lt = LockstepTwin(rig.make_twin, lambda f, t, c: got.append((c.step, t, f.copy())), _Log(),
                          postprocess=lambda f, c: stream.apply(f, out=f)[0])
        try:
            futures = [lt.submit(_command("a", k, period, 0.1 + 0.02 * k)) for k in range(n)]
            for fut in futures:
                fut.result(timeout=30)
            lt.end_trial()
            lt.call(lambda tw: None)  # the worker is idle: the post-processing queue holds the rest
            deadline = time.monotonic() + 30
            while len(got) < n and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            lt.shutdown()
        assert [k for k, _, _ in got] == list(range(n)) and lt.frames_out == n and lt.step_gaps == 0
        assert [t for _, t, _ in got] == pytest.approx([100.0 + (k + 1) * period for k in range(n)], abs=1e-6)
        runs.append(got)
    assert all(np.array_equal(a[2], b[2]) for a, b in zip(*runs))  # seeded: the same frames again
    clean = rig.make_twin().rollout(type(rig.excitations["train"][0])(
        "a", 30.0, np.array([[0.1 + 0.02 * k] for k in range(n)]), ("flexor_motor",)), render=True).frames
    diff = runs[0][-1][2].astype(float) - clean[-1].astype(float)
    assert 1.0 < diff.std() < 8.0  # noisy, but the same scene


def test_replay_stepper_is_exact_for_any_twin():
    from vid2sid_ros.sim.stepping import ReplayStepper
    from vid2sid_ros.sim.toy import make_rig as make_toy

    rig = make_toy()
    exc = rig.excitations["train"][0]
    exc = type(exc)(exc.name, exc.rate, exc.values[:20], exc.actuator_names)
    ref = rig.make_twin().rollout(exc)
    st = ReplayStepper(rig.make_twin())
    st.reset()
    rows = [st.step(exc.values[k], exc.period).keypoints for k in range(exc.num_steps)]
    np.testing.assert_allclose(np.stack(rows), ref.trajectory.keypoints, rtol=0, atol=1e-12)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
