"""A variable-frame-rate clip is fitted against its frames' own times: each frame gets the time slot
of its presentation timestamp at the clip's nominal rate (the median interval's), the twin is
simulated at that rate, and the twin's sample paired with a frame at t is the one at t (not the
frame's index at the container's average rate)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.core.trajectory import Trajectory, align
from vid2sid_ros.io.clip import track_clip
from vid2sid_ros.io.sources import Recording, recording_from_clip
from vid2sid_ros.io.video import write_video
from vid2sid_ros.perception.frame_timing import slots_from_times

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers.mp4_timing import set_sample_durations  # noqa: E402

#: stts runs (frames, interval in nominal frames): 20 at 1/30 s, one 5/30 s gap, then 2/30 s spacing
RUNS = ((20, 1), (1, 5), (19, 2))
SPEED_PX_S, X0_PX = 60.0, 12.0


def _set_stts(path, runs) -> None:
    """Rewrite an OpenCV mp4's sample durations to ``runs`` of (count, multiple of the original delta),
    without re-encoding (:func:`helpers.mp4_timing.set_sample_durations`)."""
    set_sample_durations(path, lambda count, delta, scale: [(c, m * delta) for c, m in runs])


def _pts() -> np.ndarray:
    d = np.concatenate([np.full(c, m, float) for c, m in RUNS]) / 30.0
    return np.r_[0.0, np.cumsum(d)[:-1]]


@pytest.fixture(scope="module")
def vfr_clip(tmp_path_factory):
    """A red disc moving at SPEED_PX_S px/s to the right, filmed with uneven frame times."""
    import cv2

    t = _pts()
    frames = np.full((t.size, 48, 160, 3), 255, np.uint8)
    for k, tk in enumerate(t):
        x = X0_PX + SPEED_PX_S * tk
        cv2.circle(frames[k], (int(round(x * 16)), 24 * 16), 6 * 16, (220, 0, 0), -1, cv2.LINE_AA, shift=4)
    path = write_video(tmp_path_factory.mktemp("vfr") / "vfr.mp4", frames, 30.0)
    _set_stts(path, RUNS)
    cfg = {"kind": "markers", "roi_radius_px": 30,
           "markers": [{"name": "dot", "hsv_lower": [165, 80, 50], "hsv_upper": [12, 255, 255], "min_area_px": 20}]}
    return track_clip(path, cfg, thumb_scale=None)


def test_slots_from_times_use_the_median_interval():
    steps, keep, rate, worst = slots_from_times(_pts())
    assert rate == pytest.approx(30.0)
    assert keep.all() and worst == pytest.approx(0.0, abs=1e-9)
    assert list(steps[18:24]) == [18, 19, 20, 25, 27, 29]
    steps, keep, rate, _ = slots_from_times(np.array([0.0, 0.1, 0.2, 0.21, 0.3, 0.4]))
    assert rate == pytest.approx(10.0) and list(keep) == [True, True, True, False, True, True]
    with pytest.raises(ValueError):
        slots_from_times(np.array([0.0, 0.0, 0.1]))


def test_vfr_clip_frames_are_paired_with_the_twin_at_their_own_times(vfr_clip):
    t = _pts()
    real = vfr_clip.trajectory
    assert vfr_clip.fps == pytest.approx(30.0, rel=1e-6)  # was the container's average, 40 / 2.07 s
    assert real.time == pytest.approx(t, abs=1e-3)
    assert np.array_equal(real.steps, np.rint(t * 30).astype(int))  # was 0..39 (paired by frame index)
    assert any("not evenly spaced" in w and "30.000 Hz" in w for w in vfr_clip.warnings)

    rec = recording_from_clip(vfr_clip, name="vfr", retime=True)  # the slots stay the timestamps'
    assert rec.rate == pytest.approx(30.0, rel=1e-6) and np.array_equal(rec.trajectory.steps, real.steps)

    # a twin simulated at the clip's rate: sample k at k / rate, showing the known motion
    n = int(rec.trajectory.steps[-1]) + 1
    tk = np.arange(n) / rec.rate
    twin = Trajectory(tk, np.stack([X0_PX + SPEED_PX_S * tk, np.full(n, 24.0)], axis=1)[:, None, :],
                      np.ones((n, 1), bool), real.names, "sim", "vfr")
    r, s = align(rec.trajectory, twin)
    assert r.num_frames == t.size
    assert np.abs(r.time - s.time).max() < 1e-3  # the twin sample for the frame at t is at t
    assert np.abs(r.keypoints[:, 0, 0] - s.keypoints[:, 0, 0]).max() < 1.0  # px, the same motion


def test_free_motion_excitation_takes_the_recordings_rate(vfr_clip):
    from vid2sid_ros.core.rig import TrialSpec
    from vid2sid_ros.rigs.trials import _fit_excitation

    rec = recording_from_clip(vfr_clip, name="vfr")
    probed = Excitation("free_decay", 19.67, np.zeros((40, 1)), ("u0",), meta={"kind": "free_decay"})
    spec = TrialSpec.__new__(TrialSpec)
    e = _fit_excitation(probed, 62, rec, spec)
    assert e.rate == pytest.approx(30.0, rel=1e-6) and e.num_steps == 62
    assert isinstance(rec, Recording)
