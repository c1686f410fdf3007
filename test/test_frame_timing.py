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


def test_a_camera_noise_stand_in_keeps_exact_times_and_its_dropped_frames_only_invalid(tmp_path):
    """The sim2sim stand-in's `dropped_frames` are the sensor model's in-place drops (the /work/nu benchmark's
    `dropped_frames: 9`): each keeps its time slot, invalid; no row is re-timed."""
    from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
    from vid2sid_ros.rigs import load_rig

    (tmp_path / "slider.xml").write_text(
        '<mujoco><option timestep="0.01"/><worldbody><light pos="0 -1 2" dir="0 0.5 -1"/>'
        '<body name="cart"><joint name="slide" type="slide" axis="1 0 0" damping="1"/>'
        '<geom type="box" size="0.08 0.05 0.08" mass="1" rgba="0.9 0.1 0.1 1"/><site name="mark"/></body>'
        '</worldbody><actuator><motor name="push" joint="slide" gear="2"/></actuator></mujoco>')
    (tmp_path / "rig.yaml").write_text(
        "model: slider.xml\n"
        "parameters: {damping: {unit: N*s/m, lower: 0.1, upper: 5, nominal: 1, target: 'dof_damping[slide]'}}\n"
        "keypoints: {cart: mark}\n"
        "camera: {width: 96, height: 72, fovy: 50, pose: {position: [0, -2, 0], look_at: [0, 0, 0]}}\n"
        "tracker: {markers: [{name: cart, hsv_lower: [170, 100, 60], hsv_upper: [10, 255, 255]}]}\n"
        "excitations: {push: {kind: sine, amplitude: 0.5, frequency: 1, duration: 2, rate: 30}}\n"
        "trials: [{name: run1, source: {sim2sim: {}}, excitation: push}]\n")
    rig = load_rig(tmp_path / "rig.yaml")
    real = make_sim2sim_trial(rig, rig.parameters.nominal(), seed=3, noise="camera",
                              noise_config={"drop_prob": 0.2})
    (tr,), (exc,) = real.train, real.train_excitations
    n = real.meta["tracking"]["run1"]["dropped_frames"]
    assert n > 0 and int((~tr.valid[:, 0]).sum()) >= n
    assert np.array_equal(tr.steps, np.arange(exc.num_steps))  # one row per slot, none moved or removed
    assert "retimed" not in tr.meta and "frame_index" not in tr.meta
    assert np.allclose(np.diff(tr.time), 1 / 30.0)
