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


def _dominant_frequency_1d(y, rate):
    """The dominant frequency of one record as it was computed keypoint by keypoint (the reference)."""
    v = np.gradient(y) * rate
    if np.allclose(v, 0):
        return math.nan
    nfft, window, low = sg._spectrum_tables(y.size, float(rate))
    spec = np.abs(np.fft.rfft((v - np.mean(v)) * window, nfft))
    spec[low] = 0.0
    i = int(np.argmax(spec))
    return math.nan if spec[i] <= 0 else float(sg._parabolic_peak(spec, i) * rate / nfft)


def _phase_lag_1d(y, cmd, rate):
    """The lag of one record as it was computed keypoint by keypoint (the reference)."""
    y_std = np.std(y)
    if cmd is None or cmd.unit_u is None or y_std == 0:
        return math.nan
    a, b, n = cmd.unit_u, (y - np.mean(y)) / y_std, cmd.unit_u.size
    max_lag = min(int(rate), n // 3)
    if max_lag < 2:
        return math.nan
    nfft = 1 << (2 * n - 1).bit_length()
    xc = np.fft.irfft(np.conj(np.fft.rfft(a, nfft)) * np.fft.rfft(b, nfft), nfft)[: max_lag + 1]
    c = np.abs(xc) / (n - np.arange(max_lag + 1))
    return float(sg._parabolic_peak(c, int(np.argmax(c))) / rate)


def _keypoint_by_keypoint(traj, exc, axes, thr):
    """Every keypoint's signatures, one keypoint at a time (the reference of :func:`sg._measure`)."""
    u_full = sg._command(exc, int(traj.steps.max()) + 1)
    cmd = sg._command_facts(u_full, traj.steps)
    out = {}
    for k, name in enumerate(traj.names):
        y = sg._displacement(traj.keypoints[:, k], traj.valid[:, k], axes[k], cmd)
        if y is None:
            continue
        peak = float(np.max(np.abs(y)))
        vals = {"dominant_frequency": _dominant_frequency_1d(y, exc.rate), "peak_amplitude": peak,
                "rms_amplitude": float(np.std(y)), "phase_lag": _phase_lag_1d(y, cmd, exc.rate)}
        if cmd.steady_tail:
            vals["steady_state_offset"] = float(np.mean(y[-max(2, int(round(0.15 * y.size))):]))
        vals["decay_rate"], vals["damping_ratio"], vals["ring_frequency"] = sg._free_response(y, cmd, exc.rate, 0.5)
        vals["onset_delay"], vals["dead_band"] = sg._onset(y, cmd, max(thr[k], 0.5), exc.rate)
        out.update({(name, s): v for s, v in vals.items()})
    return out


def test_every_keypoint_at_once_is_each_keypoint_alone_to_the_bit():
    """The signatures of all keypoints of a trajectory taken at once (their displacements, spectra, sums and
    lags row by row) equal those measured one keypoint at a time, to the bit; with gaps and a still
    keypoint too (those take the keypoint-by-keypoint displacement)."""
    rng = np.random.default_rng(11)
    for case in range(40):
        T, K, rate = int(rng.integers(8, 200)), int(rng.integers(1, 5)), float(rng.choice([30.0, 100.0]))
        t = np.arange(T) / rate
        onset = int(rng.integers(0, T))
        resp = np.exp(-0.3 * np.clip(t - onset / rate, 0, None)) * np.cos(2 * np.pi * rng.uniform(0.5, 4) * t)
        kp = 100 + rng.normal(size=(T, K, 2)) + resp[:, None, None] * rng.uniform(-50, 50, size=(1, K, 2))
        valid = np.ones((T, K), bool) if case % 3 else rng.random((T, K)) > 0.2
        if case % 5 == 0:
            kp[:, 0] = 100.0
        traj = Trajectory(t, kp, valid, tuple(f"k{i}" for i in range(K)), "sim", "x")
        u = np.zeros((T, 1))
        u[onset:] = 1.0 if case % 2 else 0.0
        if case % 2 == 0:
            u[:, 0] = np.sin(2 * np.pi * 1.3 * t)
        exc = Excitation(name="x", rate=rate, values=u)
        axes, thr = sg.principal_axes(traj), list(rng.uniform(0, 5, K))
        got = {(s.keypoint, s.name): s.value for s in sg.measure_signatures(traj, exc, axes=axes,
                                                                            onset_threshold_px=thr)}
        want = _keypoint_by_keypoint(traj, exc, axes, thr)
        for key, v in got.items():
            w = want.get(key, math.nan)
            assert (math.isnan(v) and math.isnan(w)) or v == w, (case, key, v, w)
