"""The signatures' shared pieces: what is computed once per trajectory or record length gives the values
the straightforward per-keypoint computation gives, to the bit."""

import math

import numpy as np

from vid2sid_ros.calibration.proposers import signatures as sg
from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.core.trajectory import Trajectory


def test_gradient_is_numpys_to_the_bit():
    rng = np.random.default_rng(3)
    for n in (2, 3, 8, 61):
        y = rng.normal(size=n) * 10 ** rng.uniform(-6, 3)
        assert np.array_equal(sg._gradient(y), np.gradient(y))
    y = np.array([1.0, np.nan, 2.0, np.inf, 0.5])
    assert np.array_equal(sg._gradient(y), np.gradient(y), equal_nan=True)


def test_spectrum_tables_are_the_window_and_low_bins():
    nfft, window, low = sg._spectrum_tables(60, 30.0)
    assert nfft == 512
    assert np.array_equal(window, np.hanning(60))
    assert np.array_equal(low, np.fft.rfftfreq(512, 1 / 30.0) < 1.5 * 30.0 / 60)
    assert not window.flags.writeable and not low.flags.writeable


def _ringing(rate=100.0, f=2.0, zeta=0.05, n=400, onset=20):
    """A step at frame ``onset`` and the damped response of a keypoint along x, px."""
    t = np.arange(n) / rate
    wn = 2 * math.pi * f / math.sqrt(1 - zeta ** 2)
    tau = np.clip(t - onset / rate, 0, None)
    x = 40 * (1 - np.exp(-zeta * wn * tau) * np.cos(2 * math.pi * f * tau))
    kp = np.stack([100 + x, np.full(n, 50.0)], axis=1)[:, None, :]
    u = np.zeros((n, 1))
    u[onset:] = 1.0
    traj = Trajectory(t, kp, np.ones((n, 1), bool), ("tip",), "sim", "step")
    return traj, Excitation(name="step", rate=rate, values=u), zeta * wn


def test_signatures_of_a_damped_step_response():
    traj, exc, sigma = _ringing()
    vals = {s.name: s.value for s in sg.measure_signatures(traj, exc)}
    assert abs(vals["dominant_frequency"] - 2.0) < 0.05
    assert abs(vals["ring_frequency"] - 2.0) < 0.05
    assert abs(vals["decay_rate"] - sigma) / sigma < 0.1
    assert abs(vals["damping_ratio"] - 0.05) < 0.01
    assert abs(vals["steady_state_offset"] - 40) < 1  # the command is constant at the end: the step settled
    assert 0 <= vals["onset_delay"] < 0.05
    assert vals["dead_band"] == 1.0
    assert all(s.unit != "" for s in sg.measure_signatures(traj, exc))


def test_no_frames_and_no_excitation():
    empty = Trajectory(np.zeros(0), np.zeros((0, 1, 2)), np.zeros((0, 1), bool), ("tip",), "sim", "step")
    exc = Excitation(name="step", rate=30.0, values=np.ones((5, 1)))
    for e in (None, exc):
        assert all(math.isnan(s.value) for s in sg.measure_signatures(empty, e, axes=np.array([[1.0, 0.0]])))
    traj, _, _ = _ringing()
    vals = {s.name: s.value for s in sg.measure_signatures(traj)}
    assert abs(vals["dominant_frequency"] - 2.0) < 0.05
    assert math.isnan(vals["phase_lag"]) and math.isnan(vals["onset_delay"]) and math.isnan(vals["decay_rate"])


def test_std_is_numpys_to_the_bit():
    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 8, 60, 129, 700):
        y = rng.normal(size=n) * 10 ** rng.uniform(-5, 5) + rng.normal() * 1e4
        assert sg._std(y).tobytes() == np.std(y).tobytes()


def test_mean_is_numpys_to_the_bit():
    rng = np.random.default_rng(6)
    for n in (1, 2, 7, 8, 9, 60, 129, 700):
        y = rng.normal(size=n) * 10 ** rng.uniform(-5, 5) + rng.normal() * 1e4
        assert sg._mean(y).tobytes() == np.mean(y).tobytes() == y.mean().tobytes()
        assert sg._mean(y[-n // 3:]).tobytes() == np.mean(y[-n // 3:]).tobytes()
