"""Excitation profiles against their closed forms, with the documented defaults.

Written against the survivors of the mutation run (bench/mutation.py): every default
(amplitude 0.5, frequency 1 Hz, phase 0, f0 0.2 / f1 3 Hz, t_step 0.1 s, frequencies
[0.5, 1.3, 2.7] Hz, seed 0, rate 30 Hz, duration 3 s), the sign of the phase, the chirp's
end time, the multisine's phase draw and peak normalisation, CSV time columns and
duplicate names in a set.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import chirp

from vid2sid_ros.core.excitation import ExcitationError, build_excitation, build_excitation_sets

T30 = np.arange(90) / 30.0  # the default 3 s at 30 Hz


def _col(cfg, names=("u0",)):
    return build_excitation(cfg, names).values[:, 0]


def test_sine_defaults_and_phase_sign():
    e = build_excitation({"kind": "sine"})
    assert e.rate == 30.0 and e.num_steps == 90 and e.name == "sine_1Hz"
    assert np.allclose(e.values[:, 0], 0.5 * np.sin(2 * np.pi * T30))
    got = _col({"kind": "sine", "phase": 0.7, "frequency": 2.0, "amplitude": 0.25, "offset": 0.1})
    assert np.allclose(got, 0.1 + 0.25 * np.sin(2 * np.pi * 2.0 * T30 + 0.7))


def test_chirp_defaults_and_end_time():
    e = build_excitation({"kind": "chirp", "rate": 20.0, "duration": 2.0})
    t = np.arange(40) / 20.0
    assert e.name == "chirp_0.2-3Hz"
    assert np.allclose(e.values[:, 0], 0.5 * chirp(t, f0=0.2, t1=t[-1], f1=3.0, method="linear", phi=-90))
    one = _col({"kind": "chirp", "rate": 10.0, "duration": 0.1, "f0": 1.0, "f1": 5.0})  # a single step: t1 = 1 s
    assert one.shape == (1,) and one[0] == pytest.approx(0.0, abs=1e-12)  # starts at sin(0)


def test_step_defaults_and_release():
    e = build_excitation({"kind": "step", "duration": 1.0, "rate": 10.0})
    assert e.name == "step_0.5"
    assert e.values[:, 0].tolist() == [0.0] + [0.5] * 9  # t >= 0.1 s
    v = _col({"kind": "step", "duration": 1.0, "rate": 10.0, "t_step": 0.3, "t_release": 0.6, "amplitude": 2.0})
    assert v.tolist() == [0.0] * 3 + [2.0] * 3 + [0.0] * 4
    # t_release defaults to 0 only when given: with it, "t_release: 0" releases at once
    assert not _col({"kind": "step", "duration": 1.0, "rate": 10.0, "t_release": 0.0}).any()


def test_multisine_defaults_phases_and_peak():
    e = build_excitation({"kind": "multisine"})
    assert e.name == "multisine_s0"
    freqs = np.array([0.5, 1.3, 2.7])
    phases = np.random.default_rng(0).uniform(0, 2 * np.pi, size=3)
    s = np.sin(2 * np.pi * freqs[None, :] * T30[:, None] + phases[None, :]).sum(axis=1)
    assert np.allclose(e.values[:, 0], 0.5 * s / np.abs(s).max())
    assert np.abs(e.values[:, 0]).max() == pytest.approx(0.5)  # peak-normalised to the amplitude
    other = _col({"kind": "multisine", "seed": 1})
    assert not np.allclose(other, e.values[:, 0])  # the seed draws the phases
    single = _col({"kind": "multisine", "frequencies": [1.0], "amplitude": 2.0})
    assert np.abs(single).max() == pytest.approx(2.0)
    for bad in ([], [1.0, float("nan")], [[1.0, 2.0]]):
        with pytest.raises(ExcitationError, match="non-empty list of finite numbers"):
            build_excitation({"kind": "multisine", "frequencies": bad})
    for seed in (-1, True, 1.5):
        with pytest.raises(ExcitationError, match="'seed' must be an integer >= 0"):
            build_excitation({"kind": "multisine", "seed": seed})
    assert build_excitation({"kind": "multisine", "seed": 0}).name == "multisine_s0"  # 0 is a valid seed


def test_csv_time_column_gives_the_rate_and_is_checked(tmp_path):
    p = tmp_path / "cmd.csv"
    p.write_text("time,flexor,extensor\n0.0,0.1,0.0\n0.05,0.2,0.5\n0.10,0.3,1.0\n")
    e = build_excitation({"kind": "csv", "path": str(p)})
    assert e.rate == pytest.approx(20.0) and e.actuator_names == ("flexor", "extensor") and e.name == "cmd"
    assert np.allclose(e.values, [[0.1, 0.0], [0.2, 0.5], [0.3, 1.0]])
    assert build_excitation({"kind": "csv", "path": str(p), "rate": 20.1}).rate == pytest.approx(20.1)  # within 1 %
    with pytest.raises(ExcitationError, match="sampled at 20 Hz but the config says rate 25 Hz"):
        build_excitation({"kind": "csv", "path": str(p), "rate": 25.0})
    t_col = tmp_path / "t.csv"
    t_col.write_text("t,u\n0,1\n0.1,2\n")
    assert build_excitation({"kind": "csv", "path": str(t_col)}).rate == pytest.approx(10.0)  # 't' is a time column
    no_time = tmp_path / "plain.csv"
    no_time.write_text("u\n1\n2\n3\n")
    assert build_excitation({"kind": "csv", "path": str(no_time), "rate": 50.0}).rate == 50.0
    assert build_excitation({"kind": "csv", "path": str(no_time)}).rate == 30.0
    for text, msg in (("time,u\n0,1\n0.1,2\n0.1,3\n", "data row 3 \\(0.1 s\\) is not after row 2 \\(0.1 s\\)"),
                      ("time,u\n0,1\n0.1,2\n0.25,3\n", "not uniformly spaced"),
                      ("time,u\n0,1\n0.1,2\n0.2,3\n0.305,4\n", "not uniformly spaced"),
                      ("time\n0\n0.1\n", "no actuator columns"),
                      ("0,1\n1,2\n", "holds numbers; expected a header row")):
        bad = tmp_path / "bad.csv"
        bad.write_text(text)
        with pytest.raises(ExcitationError, match=msg):
            build_excitation({"kind": "csv", "path": str(bad)})
    ok_jitter = tmp_path / "jitter.csv"
    ok_jitter.write_text("time,u\n0,1\n0.1,2\n0.2005,3\n0.3,4\n")  # 0.5 % jitter: accepted
    assert build_excitation({"kind": "csv", "path": str(ok_jitter)}).num_steps == 4
    with pytest.raises(ExcitationError, match="no 'path' given"):
        build_excitation({"kind": "csv"})
    with pytest.raises(ExcitationError, match="file not found"):
        build_excitation({"kind": "csv", "path": str(tmp_path / "missing.csv")})


def test_sets_refuse_duplicate_names_and_pass_the_actuators():
    sets = build_excitation_sets({"train": [{"kind": "sine", "actuator": "b"}, {"kind": "step"}]}, ("a", "b"))
    assert [e.name for e in sets["train"]] == ["sine_1Hz", "step_0.5"]
    assert not sets["train"][0].values[:, 0].any() and sets["train"][0].values[:, 1].any()
    assert sets["train"][1].actuator_names == ("a", "b")
    with pytest.raises(ExcitationError, match=r"excitations.train: duplicate excitation name\(s\) \['sine_1Hz'\]"):
        build_excitation_sets({"train": [{"kind": "sine"}, {"kind": "sine", "amplitude": 0.2}]})
    three = build_excitation_sets({"h": [{"kind": "sine", "name": n} for n in "xyz"]})
    assert [e.name for e in three["h"]] == ["x", "y", "z"]


def test_csv_rate_of_rounded_times_is_the_nominal_rate(tmp_path):
    """Times written with 6 decimals at 30 Hz (0.033333, 0.066667, ...): the rate is 30 Hz to 1e-7,
    so a 30 fps clip's trial accepts it (the median step gave 30.0003 Hz, refused at 1e-6)."""
    p = tmp_path / "cmd.csv"
    t = np.arange(180) / 30.0
    p.write_text("time,push\n" + "".join(f"{ti:.6f},{0.1 * i:.6f}\n" for i, ti in enumerate(t)))
    e = build_excitation({"kind": "csv", "path": str(p)})
    assert e.rate == pytest.approx(30.0, rel=1e-7)
    assert e.values.shape == (180, 1) and e.actuator_names == ("push",)


def test_chirp_f0_and_a_two_step_chirp_end_time():
    t = np.arange(60) / 20.0
    got = _col({"kind": "chirp", "rate": 20.0, "duration": 3.0, "f0": 1.0, "f1": 4.0, "amplitude": 1.0})
    assert np.allclose(got, chirp(t, f0=1.0, t1=t[-1], f1=4.0, method="linear", phi=-90))
    two = _col({"kind": "chirp", "rate": 10.0, "duration": 0.2, "f0": 1.0, "f1": 2.0, "amplitude": 1.0})
    assert np.allclose(two, chirp(np.array([0.0, 0.1]), f0=1.0, t1=0.1, f1=2.0, method="linear", phi=-90))


def test_duration_limits_and_errors_name_the_excitation(monkeypatch):
    from vid2sid_ros.core import excitation
    from vid2sid_ros.core.excitation import _t

    MAX_STEPS = 100  # the real limit (10 million) at a size a test can allocate in no time
    monkeypatch.setattr(excitation, "MAX_STEPS", MAX_STEPS)
    with pytest.raises(ExcitationError, match=r"^excitation wobble: 'duration' must be > 0 s, got 0$"):
        build_excitation({"kind": "sine", "name": "wobble", "duration": 0})
    with pytest.raises(ExcitationError, match=r"^excitation sine: 'rate' must be > 0 Hz"):
        build_excitation({"kind": "sine", "rate": -1})
    assert _t({"duration": MAX_STEPS / 1000.0, "rate": 1000.0}).shape == (MAX_STEPS,)  # the limit itself is allowed
    with pytest.raises(ExcitationError, match=f"at most {MAX_STEPS} are supported"):
        _t({"duration": (MAX_STEPS + 1) / 1000.0, "rate": 1000.0})


def test_csv_time_columns_offset_start_header_only_and_rate_limits(tmp_path):
    t_col = tmp_path / "t.csv"
    t_col.write_text("t,u\n0,1\n0.1,2\n")
    assert build_excitation({"kind": "csv", "path": str(t_col)}).actuator_names == ("u",)  # 't' is not an actuator
    late = tmp_path / "late.csv"
    late.write_text("time,u\n2.0,1\n2.1,2\n2.2,3\n")  # a clock that does not start at 0: the span gives the rate
    assert build_excitation({"kind": "csv", "path": str(late)}).rate == pytest.approx(10.0)
    head = tmp_path / "head.csv"
    head.write_text("time,u\n")
    with pytest.raises(ExcitationError, match="expected a header row and at least one data row"):
        build_excitation({"kind": "csv", "path": str(head)})
    assert build_excitation({"kind": "step", "amplitude": 2.0}).name == "step_2"
    assert build_excitation({"kind": "sine", "rate": 0.5, "duration": 4.0}).num_steps == 2  # a rate below 1 Hz is fine
    with pytest.raises(ExcitationError, match="'rate' must be > 0 Hz, got 0"):
        build_excitation({"kind": "sine", "rate": 0})


def test_excitation_normalises_values_and_names_and_multisine_names_its_seed():
    from vid2sid_ros.core.excitation import Excitation

    e = Excitation("x", 30.0, np.zeros((3, 2), int), actuator_names=["a", "b"])
    assert e.values.dtype == float and e.actuator_names == ("a", "b")
    assert build_excitation({"kind": "multisine", "seed": 3}).name == "multisine_s3"
