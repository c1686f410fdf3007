"""core/excitation.py: profile kinds, CSV files, sets, validation errors."""

import numpy as np
import pytest

from vid2sid_ros.core.excitation import (EXCITATION_KINDS, Excitation, ExcitationError, build_excitation,
                                         build_excitation_sets)


def test_sine_values_and_timing():
    ex = build_excitation({"kind": "sine", "amplitude": 0.4, "frequency": 2.0, "duration": 1.0, "rate": 50,
                           "offset": 0.1})
    assert ex.values.shape == (50, 1) and ex.rate == 50 and ex.num_steps == 50
    assert ex.period == 0.02 and ex.duration == 1.0
    assert np.allclose(ex.time, np.arange(50) / 50)
    assert np.allclose(ex.values[:, 0], 0.1 + 0.4 * np.sin(2 * np.pi * 2.0 * ex.time))
    assert ex.name == "sine_2Hz" and ex.actuator_names == ("u0",)
    assert ex.meta["kind"] == "sine"
    with pytest.raises(ValueError):
        ex.values[0, 0] = 1.0  # read-only


def test_chirp_starts_at_zero_and_sweeps_up():
    ex = build_excitation({"kind": "chirp", "amplitude": 1.0, "f0": 0.5, "f1": 5.0, "duration": 4.0, "rate": 100})
    v = ex.values[:, 0]
    assert abs(v[0]) < 1e-9 and np.abs(v).max() == pytest.approx(1.0, abs=1e-3)
    crossings = np.flatnonzero(np.diff(np.sign(v[1:])) != 0)
    first, last = np.diff(crossings[:3]).mean(), np.diff(crossings[-3:]).mean()
    assert last < first / 3  # instantaneous frequency rises from 0.5 Hz towards 5 Hz
    assert ex.name == "chirp_0.5-5Hz"


def test_step_with_release():
    ex = build_excitation({"kind": "step", "amplitude": 0.6, "t_step": 0.2, "t_release": 0.5, "duration": 1.0,
                           "rate": 10, "offset": 0.1})
    assert np.allclose(ex.values[:, 0], [0.1, 0.1, 0.7, 0.7, 0.7, 0.1, 0.1, 0.1, 0.1, 0.1])


def test_multisine_is_seeded_and_peak_normalised():
    cfg = {"kind": "multisine", "amplitude": 0.3, "frequencies": [0.4, 1.1, 2.3], "duration": 3.0, "seed": 3}
    a, b = build_excitation(cfg), build_excitation(cfg)
    c = build_excitation({**cfg, "seed": 4})
    assert np.array_equal(a.values, b.values) and not np.array_equal(a.values, c.values)
    assert np.abs(a.values).max() == pytest.approx(0.3)
    spectrum = np.abs(np.fft.rfft(a.values[:, 0]))
    freqs = np.fft.rfftfreq(a.num_steps, 1 / 30)
    top = sorted(freqs[np.argsort(spectrum)[-3:]])
    assert np.allclose(top, [0.33, 1.0, 2.33], atol=0.1)


def test_actuator_selection_and_names():
    ex = build_excitation({"kind": "sine", "duration": 0.5, "actuator": "b"}, actuator_names=("a", "b"))
    assert ex.values.shape == (15, 2) and np.all(ex.values[:, 0] == 0) and np.any(ex.values[:, 1] != 0)
    with pytest.raises(ExcitationError, match="actuator 'c' not in"):
        build_excitation({"kind": "sine", "actuator": "c"}, actuator_names=("a", "b"))


def test_csv_profiles(tmp_path):
    p = tmp_path / "cmd.csv"
    p.write_text("time,flexor,extensor\n0.0,0.1,0.0\n0.1,0.2,0.5\n0.2,0.3,0.0\n")
    ex = build_excitation({"kind": "csv", "path": str(p), "rate": 10})
    assert ex.actuator_names == ("flexor", "extensor") and ex.name == "cmd"
    assert np.allclose(ex.values, [[0.1, 0.0], [0.2, 0.5], [0.3, 0.0]])
    one = tmp_path / "one.csv"  # a single data row (regression: used to raise TypeError)
    one.write_text("time,u\n0.0,0.5\n")
    assert build_excitation({"kind": "csv", "path": str(one)}).values.tolist() == [[0.5]]
    with pytest.raises(ExcitationError, match="file not found"):
        build_excitation({"kind": "csv", "path": str(tmp_path / "none.csv")})
    bad = tmp_path / "bad.csv"
    bad.write_text("time,u\n0.0,0.1\n0.1,oops\n")
    with pytest.raises(ExcitationError, match="bad.csv: non-numeric or missing value in data row 2"):
        build_excitation({"kind": "csv", "path": str(bad)})
    only_time = tmp_path / "t.csv"
    only_time.write_text("time\n0.0\n0.1\n")
    with pytest.raises(ExcitationError, match="no actuator columns"):
        build_excitation({"kind": "csv", "path": str(only_time)})


def test_unknown_kind_and_bad_config_errors():
    with pytest.raises(ExcitationError, match=r"unknown excitation kind 'sinus' \(did you mean sine\?\); valid kinds: "
                       + ", ".join(EXCITATION_KINDS)):
        build_excitation({"kind": "sinus"})
    with pytest.raises(ExcitationError, match="must be a mapping"):
        build_excitation(["sine"])
    with pytest.raises(ExcitationError, match="excitation sine: 'duration' must be > 0 s, got -1"):
        build_excitation({"kind": "sine", "duration": -1})


def test_excitation_sets_name_the_bad_entry():
    sets = build_excitation_sets({"train": [{"kind": "step"}, {"kind": "chirp"}], "holdout": [{"kind": "sine"}]})
    assert [e.name for e in sets["train"]] == ["step_0.5", "chirp_0.2-3Hz"] and len(sets["holdout"]) == 1
    with pytest.raises(ExcitationError, match=r"excitations.holdout\[1\]: unknown excitation kind"):
        build_excitation_sets({"holdout": [{"kind": "sine"}, {"kind": "noise"}]})
    with pytest.raises(ExcitationError, match="'train' must be a list"):
        build_excitation_sets({"train": {"kind": "sine"}})


def test_excitation_validation_and_scaling():
    with pytest.raises(ExcitationError, match="NaN or inf"):
        Excitation("x", 30.0, np.array([0.0, np.nan]))
    with pytest.raises(ExcitationError, match="rate must be > 0"):
        Excitation("x", 0.0, np.zeros(3))
    with pytest.raises(ExcitationError, match=r"shape \(T, A\) with T > 0"):
        Excitation("x", 30.0, np.zeros((0, 1)))
    with pytest.raises(ExcitationError, match="2 value columns but 1 actuator names"):
        Excitation("x", 30.0, np.zeros((4, 2)))
    ex = Excitation("x", 30.0, np.ones(4))
    assert ex.values.shape == (4, 1)
    s = ex.scaled(0.5)
    assert np.all(s.values == 0.5) and s.name == "x_x0.5" and s.meta["gain"] == 0.5


def test_misspelt_key_is_an_error_not_a_silent_default():
    with pytest.raises(ExcitationError, match=r"unknown key\(s\) \['amplitdue'\]"):
        build_excitation({"kind": "sine", "amplitdue": 0.3})


def test_a_ramp_from_the_held_command_leads_in_and_bad_ramps_are_refused():
    base = {"kind": "step", "amplitude": 0.6, "t_step": 0.0, "duration": 1.0, "rate": 10.0, "offset": 0.2}
    exc = build_excitation({**base, "ramp_from": [0.0], "ramp_duration": 0.3}, ["m"])
    # 3 lead-in samples from 0 to the first command 0.8 in equal steps of 0.2, then the step's 10 samples
    assert exc.num_steps == 13
    np.testing.assert_allclose(exc.values[:4, 0], [0.2, 0.4, 0.6, 0.8])
    with pytest.raises(ExcitationError, match="'ramp_from' and 'ramp_duration' go together"):
        build_excitation({**base, "ramp_from": [0.0]}, ["m"])
    with pytest.raises(ExcitationError, match="'ramp_from' must hold 2 finite number"):
        build_excitation({**base, "ramp_from": [0.0], "ramp_duration": 0.1}, ["m", "n"])
    with pytest.raises(ExcitationError, match="'ramp_duration' must be >= 0 s"):
        build_excitation({**base, "ramp_from": [0.0], "ramp_duration": -1}, ["m"])
