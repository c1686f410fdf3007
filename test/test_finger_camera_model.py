"""Sensor / camera degradation model applied to rendered frames."""

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
