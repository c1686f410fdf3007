"""Sensor / camera degradation model applied to rendered frames."""

import math

import numpy as np
import pytest

from vid2sid_ros.sim.camera_model import SensorModelError, SensorNoiseModel


def _clip(T=6, H=24, W=32, value=120):
    frames = np.full((T, H, W, 3), value, np.uint8)
    for k in range(T):  # a bright square moving right by 3 px per frame
        frames[k, 8:14, 3 * k + 2:3 * k + 8] = 250
    return frames


def test_identity_model_returns_frames_unchanged():
    frames = _clip()
    m = SensorNoiseModel()
    assert m.is_identity
    out, dropped = m.apply(frames)
    assert np.array_equal(out, frames) and not dropped.any()
    assert out is not frames


def test_seeded_and_deterministic():
    frames = _clip()
    m = SensorNoiseModel.default(seed=4)
    a, da = m.apply(frames)
    b, db = m.apply(frames)
    c, _ = m.apply(frames, seed=5)
    assert np.array_equal(a, b) and np.array_equal(da, db)
    assert not np.array_equal(a, c)


def test_gaussian_and_shot_noise_statistics():
    flat_dark = np.full((4, 64, 64, 3), 20, np.uint8)
    flat_bright = np.full((4, 64, 64, 3), 230, np.uint8)
    read = SensorNoiseModel(gaussian_sigma=4.0, seed=1)
    out, _ = read.apply(flat_dark)
    assert out.astype(float).std() == pytest.approx(4.0, rel=0.08)
    assert out.astype(float).mean() == pytest.approx(20.0, abs=0.2)
    shot = SensorNoiseModel(poisson=1000.0, seed=1)  # std = 255 * sqrt(x / 1000)
    sd_dark = shot.apply(flat_dark)[0].astype(float).std()
    sd_bright = shot.apply(flat_bright)[0].astype(float).std()
    assert sd_bright == pytest.approx(255 * np.sqrt(230 / 255 / 1000), rel=0.08)
    assert sd_bright > 2.5 * sd_dark  # shot noise grows with the signal


def test_exposure_gamma_and_clipping():
    frames = np.full((1, 4, 4, 3), 64, np.uint8)
    assert SensorNoiseModel(exposure=2.0).apply(frames)[0][0, 0, 0, 0] == 128
    assert SensorNoiseModel(exposure=8.0).apply(frames)[0][0, 0, 0, 0] == 255
    assert SensorNoiseModel(gamma=2.0).apply(frames)[0][0, 0, 0, 0] == round(255 * (64 / 255) ** 0.5)


def test_optical_blur_spreads_an_edge_and_motion_blur_leaves_a_trail():
    frames = _clip()
    blurred = SensorNoiseModel(blur_px=1.5).apply(frames)[0]
    assert 120 < blurred[3, 11, 3 * 3 + 1, 0] < 250  # the pixel next to the square's edge is lit
    assert blurred[3].astype(float).sum() == pytest.approx(frames[3].astype(float).sum(), rel=0.01)
    trail = SensorNoiseModel(motion_blur=1.0).apply(frames)[0]
    # frame 3 keeps half of frame 2's square where only frame 2 had it
    assert trail[3, 10, 3 * 2 + 2, 0] == round(0.5 * 250 + 0.5 * 120)
    assert trail[0, 10, 2, 0] == 250  # first frame has no predecessor


def test_frame_drops_repeat_the_last_delivered_frame():
    frames = _clip(T=200, H=4, W=700)
    out, dropped = SensorNoiseModel(drop_prob=0.2, seed=2).apply(frames)
    assert 20 < dropped.sum() < 60
    for k in np.flatnonzero(dropped):
        prev = k - 1
        while prev >= 0 and dropped[prev]:
            prev -= 1
        expect = frames[prev] if prev >= 0 else np.zeros_like(frames[0])
        assert np.array_equal(out[k], expect)


def test_bad_fields_and_frames_raise():
    for kw in ({"gaussian_sigma": -1}, {"motion_blur": 1.5}, {"gamma": 0}, {"drop_prob": 1.0},
               {"exposure": float("nan")}):
        with pytest.raises(SensorModelError, match=list(kw)[0]):
            SensorNoiseModel(**kw)
    with pytest.raises(SensorModelError, match="unknown key.*sigma"):
        SensorNoiseModel.from_config({"sigma": 2})
    with pytest.raises(SensorModelError, match="uint8"):
        SensorNoiseModel().apply(np.zeros((2, 4, 4, 3), np.float32))
    with pytest.raises(SensorModelError, match="non-empty"):
        SensorNoiseModel().apply(np.zeros((0, 4, 4, 3), np.uint8))
    assert SensorNoiseModel.from_config(None).is_identity
    assert SensorNoiseModel.from_config(SensorNoiseModel.default().to_dict()) == SensorNoiseModel.default()


# -- live streams: one generator per stream, seeded once ---------------------------------------
def test_stream_is_deterministic_per_seed_and_call_sequence():
    frames = _clip(T=8)
    model = SensorNoiseModel(**{**SensorNoiseModel.default().to_dict(), "drop_prob": 0.3})
    a, b, c = model.stream(seed=7), model.stream(seed=7), model.stream(seed=8)
    outs = {}
    for name, st in (("a", a), ("b", b), ("c", c)):
        outs[name] = [st.apply(f) for f in frames]
    for (fa, da), (fb, db) in zip(outs["a"], outs["b"]):
        assert np.array_equal(fa, fb) and da == db
    assert any(not np.array_equal(fa, fc) for (fa, _), (fc, _) in zip(outs["a"], outs["c"]))
    # the clip API is the same stream: apply(clip, seed) == frame-by-frame stream(seed)
    clip, dropped = model.apply(frames, seed=7)
    assert np.array_equal(clip, np.stack([f for f, _ in outs["a"]]))
    assert dropped.tolist() == [d for _, d in outs["a"]]
    assert 0 < dropped.sum() < len(frames)


def test_stream_generator_runs_on_between_calls_and_reset_keeps_it():
    flat = np.full((16, 16, 3), 100, np.uint8)
    st = SensorNoiseModel(gaussian_sigma=3.0).stream(seed=1)
    first, _ = st.apply(flat)
    second, _ = st.apply(flat)
    assert not np.array_equal(first, second)  # fresh noise per frame, not a reseed per call
    st.reset()
    third, _ = st.apply(flat)
    assert not np.array_equal(third, first)  # reset forgets frames, not the generator position
    again = SensorNoiseModel(gaussian_sigma=3.0).stream(seed=1)
    assert np.array_equal(again.apply(flat)[0], first)


def test_stream_noise_is_gaussian_with_the_photon_transfer_variance():
    flat = np.full((256, 256, 3), 180, np.uint8)
    st = SensorNoiseModel(gaussian_sigma=2.0, poisson=2000.0).stream(seed=3)
    d = st.apply(flat)[0].astype(float) - 180.0
    sd = np.sqrt(4.0 + 255.0 * 180.0 / 2000.0)  # EMVA 1288: read variance + signal / gain, DN
    assert d.std() == pytest.approx(sd, rel=0.02)
    assert abs(d.mean()) < 0.05
    for n_sd in (1, 2, 3):  # normal, not uniform or heavy-tailed (integers <= n sd: |x| < floor(n sd) + 1/2)
        expected = math.erf((math.floor(n_sd * sd) + 0.5) / sd / math.sqrt(2))
        assert np.mean(np.abs(d) <= n_sd * sd) == pytest.approx(expected, abs=0.006), n_sd


def test_stream_motion_blur_uses_the_previous_frame_of_the_stream():
    frames = _clip()
    st = SensorNoiseModel(motion_blur=1.0).stream()
    outs = [st.apply(f)[0] for f in frames]
    assert outs[3][10, 3 * 2 + 2, 0] == round(0.5 * 250 + 0.5 * 120)
    with pytest.raises(SensorModelError, match="uint8"):
        st.apply(frames[0].astype(np.float32))
