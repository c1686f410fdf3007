"""The calibrate path of a video trial holds a constant number of frames, whatever the clip's length.

Regression: a video trial kept a half-size thumbnail of EVERY frame for the report (a 20 s 4K clip:
600 x 1920 x 1080 x 3 bytes = 3.7 GB), and the report's twin renders held every rendered frame of
a trial at the camera's size (a 4K camera: 600 x 25 MB = 15 GB per rollout); calibrating a 3 s 4K
clip peaked at 5.7 GB. Here the clip is a fake decoder that counts the frames alive, and the twin's
rollout is watched: frames are decoded one at a time, thumbnails are bounded in number and width,
and the twin renders only the rows the report shows, each handed over and shrunk as it is made.
"""

from __future__ import annotations

import os
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from vid2sid_ros.io.clip import MAX_THUMBS, THUMB_MAX_WIDTH  # noqa: E402
from vid2sid_ros.rigs import build_real_trial, load_rig  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import one_link_arm  # noqa: E402

N, W, H, FPS = 450, 1280, 720, 30.0  # 15 s of 720p: 450 frames, more than MAX_THUMBS


def _rig(tmp_path, source: str, duration: float, excitation: str = "none", **size):
    return one_link_arm.write_rig(tmp_path, one_link_arm.rig_text(
        source=source, excitation=f"kind: sine, amplitude: 0.6, frequency: 1, duration: {duration:g}, rate: 30",
        trial_excitation=excitation, **size))


def test_a_long_video_trial_is_decoded_one_frame_at_a_time_with_bounded_thumbnails(tmp_path, monkeypatch):
    import cv2

    import vid2sid_ros.io.video as video

    refs: list[weakref.ref] = []
    most_alive = [0]

    def fake_iter_video(path, *, check_length=True, timestamps=None):  # a 720p clip of a red disc moving right
        for k in range(N):
            f = np.full((H, W, 3), 30, np.uint8)
            cv2.circle(f, (100 + 2 * k, H // 2), 12, (230, 25, 25), -1)
            refs.append(weakref.ref(f))
            most_alive[0] = max(most_alive[0], sum(r() is not None for r in refs))
            if timestamps is not None:
                timestamps.append(k / FPS)
            yield f
            del f

    monkeypatch.setattr(video, "iter_video", fake_iter_video)
    monkeypatch.setattr(video, "video_info", lambda path: {"frames": N, "fps": FPS, "width": W, "height": H})
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"not decoded: the fake decoder stands in")
    rig = load_rig(_rig(tmp_path, f"{{video: {{path: {clip}, repair_frame_timing: false}}}}", N / FPS,
                        width=W, height=H))  # the camera that filmed the 720p clip
    real = build_real_trial(rig, keep_frames=True)  # what calibrate does for a video trial (the report's footage)
    assert len(refs) == N and real.train[0].num_frames + sum(t.num_frames for t in real.holdout) == N
    assert most_alive[0] <= 2, f"{most_alive[0]} decoded frames alive at once"
    (thumbs,) = real.frames.values()
    info = real.meta["trials"]["run1"]
    every = info["frame_every"]
    assert len(thumbs) <= MAX_THUMBS and thumbs.shape[2] <= THUMB_MAX_WIDTH, thumbs.shape
    assert every == 3 and len(thumbs) == N // 3 and thumbs.shape[1:] == (180, 320, 3)
    assert info["frame_scale"] == pytest.approx(THUMB_MAX_WIDTH / W)
    # thumbnail i is frame i * every: the disc's centre, scaled
    i = 100
    ys, xs = np.nonzero(thumbs[i][..., 0] > 150)
    assert xs.mean() == pytest.approx((100 + 2 * i * every) * THUMB_MAX_WIDTH / W, abs=1.0)


def test_the_reports_twin_renders_only_the_rows_shown_at_thumbnail_size(tmp_path):
    """render_trials renders a 600-row trial's 100 shown rows only (``render_steps``), at the thumbnails'
    width (``render_width``): the frames it holds are those 100, never the whole rollout; the thumbnails
    equal those of the whole rendered rollout (the old way, which held all 600 frames)."""
    from vid2sid_ros.calibration.objective import TrialObjective
    from vid2sid_ros.calibration.trial_curves import _thumbs, render_trials

    rig = load_rig(_rig(tmp_path, "{sim2sim: {seed: 1}}", 20.0, "swing"))
    real = build_real_trial(rig)
    twin = rig.make_twin()
    calls: list[dict] = []
    inner = twin.rollout

    def watched(exc, *, render=False, render_steps=None, render_width=None, frame_sink=None, render_rows=None):
        res = inner(exc, render=render, render_steps=render_steps, render_width=render_width,
                    frame_sink=frame_sink, render_rows=render_rows)
        calls.append({"render": render, "steps": None if render_steps is None else len(render_steps),
                      "width": render_width, "held": None if res.frames is None else len(res.frames)})
        return res

    twin.rollout = watched
    try:
        obj = TrialObjective(twin, real.train_excitations, real.train, rig.parameters)
        T = real.train[0].num_frames
        assert T > 400
        path, spent, why = render_trials([("train", obj)], rig.parameters.nominal(), rig.parameters.nominal(),
                                         tmp_path / "r.npz", max_frames=100)
        assert path is not None, why
        assert spent == 2 and len(calls) == 2
        assert all(c["render"] and c["steps"] == 100 and c["held"] == 100 and c["width"] for c in calls), calls
        got = np.load(path)
        steps = got["0_steps"]
        assert len(steps) == 100
        twin.rollout = inner
        twin.set_parameters(rig.parameters.nominal())
        whole = inner(real.train_excitations[0], render=True).frames  # the old way: every row held
        np.testing.assert_array_equal(got["0_initial"], _thumbs(whole, steps, 200))
        assert tuple(got["0_size"]) == (96, 72)
    finally:
        twin.close()


def test_the_tracker_bias_of_clean_renders_tracks_frames_as_they_are_made(tmp_path):
    """``calibration.tracker_bias: true`` on a real video films the twin with clean renders: the frames go
    to the tracker one by one (never a (T, H, W, 3) array), and the bias equals tracking the whole render."""
    from vid2sid_ros.calibration.tracker_bias import TwinCamera, twin_tracker_bias
    from vid2sid_ros.perception import rig_tracker

    rig = load_rig(_rig(tmp_path, "{sim2sim: {seed: 1}}", 4.0, "swing"))
    twin = rig.make_twin()
    inner, whole_arrays = twin.rollout, []

    def watched(exc, *, render=False, frame_sink=None, render_rows=None):
        res = inner(exc, render=render, frame_sink=frame_sink, render_rows=render_rows)
        whole_arrays.append(res.frames is not None)
        return res

    try:
        exc = rig.excitations["train"][0]
        physics = rig.parameters.nominal()
        twin.rollout = watched
        (bias,), spent = twin_tracker_bias(twin, [exc], physics, TwinCamera(lambda: rig_tracker(rig)[0]))
        assert spent == 1 and whole_arrays == [False]
        twin.rollout = inner
        twin.set_parameters(physics)
        res = inner(exc, render=True)
        tracked = rig_tracker(rig)[0].track(res.frames, time=res.trajectory.time)
        valid = tracked.valid & res.trajectory.valid
        np.testing.assert_array_equal(bias.valid, valid)
        np.testing.assert_allclose(bias.keypoints[valid], (tracked.keypoints - res.trajectory.keypoints)[valid])
        np.testing.assert_array_equal(bias.time, res.trajectory.time)
        assert valid.mean() > 0.5
    finally:
        twin.close()


def test_the_videos_a_watching_proposer_gets_are_streamed(tmp_path, monkeypatch):
    """With a proposer that watches video, the sim clip is encoded as the twin renders it (never a whole
    rendered array), the side-by-side is composed frame by frame, and the real footage comes from the
    bounded thumbnails at their own stride."""
    from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
    from vid2sid_ros.calibration.proposers.proposer import Proposal
    from vid2sid_ros.io.video import read_video, video_info, write_video
    from vid2sid_ros.sim.user_model import UserModelTwin

    maker = load_rig(_rig(tmp_path, "{sim2sim: {seed: 1}}", 4.0, "swing"))
    twin = maker.make_twin()
    try:
        frames = twin.rollout(maker.named_excitations["swing"], render=True).frames
    finally:
        twin.close()
    clip = write_video(tmp_path / "clip.mp4", frames, 30.0)
    rig = load_rig(_rig(tmp_path, f"{{video: {clip}}}", 4.0, "swing"))
    real = build_real_trial(rig, keep_frames=True)
    renders = []
    inner = UserModelTwin.rollout

    def watched(self, exc, *, render=False, render_steps=None, render_width=None, frame_sink=None, render_rows=None):
        # streamed, or only some rows at a thumbnail's width (the report's renders)
        renders.append((render, frame_sink is not None or (render_steps is not None and render_width is not None))
                       ) if render else None
        return inner(self, exc, render=render, render_steps=render_steps, render_width=render_width,
                     frame_sink=frame_sink, render_rows=render_rows)

    monkeypatch.setattr(UserModelTwin, "rollout", watched)
    got = {}

    class Watcher:
        name = "watcher"
        wants_video = True

        def propose(self, ctx):
            got[ctx.iteration] = dict(ctx.videos)
            return Proposal(values={"damping": 0.06}, rationale="watched")

    run_calibration(rig, real, Watcher(), CalibrationConfig(iterations=1, rollout_budget=None, identifiability=False,
                                                            final_identifiability=False, diagnosis=False), tmp_path)
    videos = got[1]
    assert renders and all(ok for _, ok in renders), renders  # every render streamed or thinned and small
    T = real.train[0].num_frames
    assert read_video(videos["side_by_side"]).num_frames == T
    assert video_info(videos["sim"])["frames"] == T
    assert video_info(videos["real"])["frames"] == len(real.first_frames())
