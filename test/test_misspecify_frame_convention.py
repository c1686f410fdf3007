"""A ``latency`` misspecification delays the stand-in real trial by exactly that much, whatever the twin's
frame convention: the finger records the state after each command step (frame k at (k + 1) / rate), a user
MJCF/URDF model its initial state first (frame k at k / rate). The delayed frames were stamped for the
finger's convention only, so on a user model a requested latency of 0 came out one frame EARLY (−33 ms at
30 Hz), and the suite's 20 ms latency on the URDF arm was a −13 ms one the residual could hardly see."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vid2sid_ros.benchmark.misspecification import delayed_rows, first_step_of
from vid2sid_ros.benchmark.run import resolve_rig
from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial

ARM = str(Path(__file__).resolve().parents[1] / "examples/rigs/urdf_arm/rig.yaml")


def _kp(rig, mis):
    truth = rig.parameters.complete({})
    real = make_sim2sim_trial(rig, truth, seed=0, noise="keypoint", keypoint_sigma_px=0.0, misspecify=mis)
    return real.train[0]


@pytest.mark.parametrize("rig_key", [ARM, "finger"])
def test_a_latency_of_zero_and_of_one_frame_land_where_they_should(rig_key):
    rig = resolve_rig(rig_key)
    plain, zero = _kp(rig, None), _kp(rig, "latency=0.0")
    rate = 1.0 / float(np.median(np.diff(plain.time)))
    one = _kp(rig, f"latency={1.0 / rate!r}")
    np.testing.assert_allclose(zero.time, plain.time)  # stamped like the twin's own frames
    # the upsampled rollout integrates the same motion: a few hundredths of a pixel apart, not a frame (~0.4 px)
    assert np.max(np.abs(zero.keypoints - plain.keypoints)) < 0.1
    assert np.max(np.abs(one.keypoints[1:] - plain.keypoints[:-1])) < 0.1  # one frame late, not two, not none


def test_the_frame_convention_is_read_off_the_rollout():
    rate, up = 30.0, 10
    assert first_step_of(np.arange(5) / (rate * up), rate, up) == 0  # starts with the initial state
    assert first_step_of((np.arange(5) + 1) / (rate * up), rate, up) == 1  # starts after one step
    assert list(delayed_rows(3, 0.0, rate, up, first_step=0)[0]) == [0, 10, 20]
    assert list(delayed_rows(3, 0.0, rate, up, first_step=1)[0]) == [9, 19, 29]
