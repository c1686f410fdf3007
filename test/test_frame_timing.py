"""perception.frame_timing on fast smooth motion: no invented drops, real ones still found.

A 30 fps clip of a chirp reaching 2-2.5 Hz (the /work/nu double pendulum's command) used to be "repaired"
with 1-13 dropped frames that never happened: for a sinusoid of period P frames the second-neighbour
prediction is cos(4 pi / P) times the true step, so every fast step looked 1.6-2.5x too long.
"""

from __future__ import annotations

import numpy as np
import pytest

from vid2sid_ros.core.trajectory import Trajectory
from vid2sid_ros.perception.frame_timing import repair_frame_timing

FPS = 30.0


def _chirp(n: int, f1: float, amp: float) -> np.ndarray:
    t = np.arange(n) / FPS
    ph = 2 * np.pi * (0.2 * t + (f1 - 0.2) * t ** 2 / (2 * t[-1]))
    return np.stack([320 + amp * np.sin(ph), 240 + 0.2 * amp * np.cos(ph)], 1)[:, None]  # (n, 1, 2) px


def _seen(true: np.ndarray, frames: np.ndarray, seed: int, noise: float = 0.3) -> Trajectory:
    kp = true[frames] + np.random.default_rng(seed).normal(0.0, noise, (len(frames), 1, 2))
    return Trajectory(np.arange(len(frames)) / FPS, kp, np.ones((len(frames), 1), bool), ("tip",))


@pytest.mark.parametrize("f1,amp", [(2.0, 30.0), (2.5, 30.0), (2.5, 100.0), (3.0, 30.0)])
def test_a_fast_chirp_without_drops_is_left_alone(f1, amp):
    true = _chirp(400, f1, amp)
    for seed in range(3):
        clip = _seen(true, np.arange(400), seed)
        fixed, notes = repair_frame_timing(clip, FPS)
        assert notes == [] and fixed is clip, notes


def test_real_drops_and_a_repeat_in_the_slow_part_are_still_found():
    """The same chirp with two frames lost and one repeated where it is slow enough to judge (<= 1 Hz); nothing
    else is reported (the unpatched detector added ~10 drops in the fast part of this very clip)."""
    true = _chirp(400, 2.5, 100.0)
    frames = np.r_[0:70, 71:100, 99, 100:130, 131:400]  # slot 70 lost, frame 99 repeated, slot 130 lost
    fixed, notes = repair_frame_timing(_seen(true, frames, 0), FPS)
    dropped = [n for n in notes if "dropped" in n]
    assert [n.split(":")[0] for n in dropped] == ["frame 70", "frame 130"], notes
    assert any(n.startswith("frame 99: repeats frame 98") for n in notes) and len(notes) == 3, notes
    ok = fixed.valid[:, 0]
    assert np.allclose(fixed.keypoints[ok, 0], true[fixed.steps[ok], 0], atol=1.5)  # every valid row at its slot
