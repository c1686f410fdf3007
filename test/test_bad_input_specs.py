"""Adversarial input: parameter spec YAML files and excitation configs/CSVs.

Each case is a bug found by feeding bad input; the test asserts the one clear
message (naming the file/field and what was expected) that replaced a raw Python
exception or a silently wrong result.
"""

from __future__ import annotations

import numpy as np
import pytest

from vid2sid_ros.core.excitation import ExcitationError, build_excitation, build_excitation_sets
from vid2sid_ros.core.parameters import ParameterSpecError, load_parameter_set

_ENTRY = "{name: a, unit: m, lower: 0, upper: 1, nominal: 0.5%s}"


def _spec(tmp_path, text: str | bytes, name="spec.yaml"):
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


# -- parameter specs -----------------------------------------------------------------
def test_binary_spec_file_names_the_file_not_a_codec_error(tmp_path):
    # was: UnicodeDecodeError "'utf-8' codec can't decode byte 0xff" with no file name
    p = _spec(tmp_path, b"\x00\xff\xfe\x89PNG garbage\xc3\x28")
    with pytest.raises(ParameterSpecError, match=r"spec\.yaml: not a UTF-8 text YAML file \(invalid start byte at byte 1\)"):
        load_parameter_set(p)


@pytest.mark.parametrize("field, value, shown", [("unit", "3", "int 3"), ("meaning", "[x]", "list ['x']"),
                                                 ("target", "{x: 1}", "dict {'x': 1}")])
def test_text_fields_must_be_strings(tmp_path, field, value, shown):
    # was: accepted, then a number/list/dict flowed into prompts, rationales and the twin's targets
    entry = "{name: a, unit: m, lower: 0, upper: 1, nominal: 0.5}" if field != "unit" else \
        "{name: a, lower: 0, upper: 1, nominal: 0.5}"
    entry = entry[:-1] + f", {field}: {value}}}"
    p = _spec(tmp_path, f"parameters:\n - {entry}\n")
    import re

    with pytest.raises(ParameterSpecError,
                       match=re.escape(f"spec.yaml: parameter 'a': field '{field}' must be a string, got {shown}")):
        load_parameter_set(p)


def test_rig_field_must_be_a_name_and_directory_is_not_missing(tmp_path):
    p = _spec(tmp_path, "rig: [finger]\nparameters:\n - " + _ENTRY % "" + "\n")
    with pytest.raises(ParameterSpecError, match=r"field 'rig' must be a rig name string, got \['finger'\]"):
        load_parameter_set(p)  # was: rig "['finger']" (str of the list)
    d = tmp_path / "dir.yaml"
    d.mkdir()
    with pytest.raises(ParameterSpecError, match="dir.yaml: is a directory, expected a parameter spec YAML file"):
        load_parameter_set(d)  # was: "parameter spec not found" for a path that exists
    ok = load_parameter_set(_spec(tmp_path, "rig: finger\nparameters:\n - " + _ENTRY % ", meaning: spring" + "\n"))
    assert ok.rig == "finger" and ok["a"].meaning == "spring" and ok["a"].nominal == 0.5


# -- excitations ---------------------------------------------------------------------
@pytest.mark.parametrize("cfg, msg", [
    ({"kind": "sine", "duration": "abc"}, "excitation sine: 'duration' must be a number, got 'abc'"),
    ({"kind": "sine", "rate": "fast"}, "excitation sine: 'rate' must be a number, got 'fast'"),
    ({"kind": "chirp", "name": "c", "f1": [3]}, r"excitation c: 'f1' must be a number, got \[3\]"),
    ({"kind": "step", "amplitude": True}, "excitation step: 'amplitude' must be a number, got True"),
    ({"kind": "sine", "duration": 1e9}, "duration 1e\\+09 s at 30 Hz is 30000000000 command steps; at most"),
    ({"kind": "step", "duration": 0.001}, r"duration 0.001 s at 30 Hz gives no command step \(needs duration >= "),
    ({"kind": "multisine", "frequencies": []}, r"'frequencies' must be a non-empty list of finite numbers \(Hz\)"),
    ({"kind": "multisine", "frequencies": "abc"}, r"'frequencies' must be a list of numbers \(Hz\), got 'abc'"),
    ({"kind": "sine", "name": 5}, "'name' must be a string, got 5"),
])
def test_excitation_fields_are_named(cfg, msg):
    # were: ValueError "could not convert string to float", MemoryError (224 GiB), a silent
    # all-zero multisine, "values must have shape (T, A)" and an int name
    with pytest.raises(ExcitationError, match=msg):
        build_excitation(cfg)


def test_csv_profiles_reject_empty_headerless_and_bad_time(tmp_path):
    def csv(name, text):
        p = tmp_path / name
        p.write_text(text)
        return {"kind": "csv", "path": str(p)}

    with pytest.raises(ExcitationError, match="empty.csv: the file is empty; expected a header row"):
        build_excitation(csv("empty.csv", ""))  # was: IndexError 'list index out of range'
    with pytest.raises(ExcitationError, match=r"the first row \['0', '0.1'\] holds numbers; expected a header row"):
        build_excitation(csv("nohead.csv", "0,0.1\n0.1,0.2\n"))  # was: actuators '0', '01', first row lost
    with pytest.raises(ExcitationError, match=r"column 'time' must increase strictly; data row 3 \(0.1 s\) is not "
                                              r"after row 2 \(0.2 s\)"):
        build_excitation(csv("back.csv", "time,u\n0,0.1\n0.2,0.2\n0.1,0.3\n"))  # was: accepted
    with pytest.raises(ExcitationError, match="sampled at 10 Hz but the config says rate 30 Hz"):
        build_excitation({**csv("r.csv", "time,u\n0,0.1\n0.1,0.2\n0.2,0.3\n"), "rate": 30})  # was: played at 30 Hz
    with pytest.raises(ExcitationError, match="not uniformly spaced"):
        build_excitation(csv("jit.csv", "time,u\n0,0.1\n0.1,0.2\n0.5,0.3\n"))
    with pytest.raises(ExcitationError, match=r"nan.csv: non-numeric or missing value in data row 2"):
        build_excitation(csv("nan.csv", "time,u\n0,0.1\n0.1,nan\n"))
    with pytest.raises(ExcitationError, match=r"header.csv: expected a header row and at least one data row"):
        build_excitation(csv("header.csv", "time,u\n"))
    ex = build_excitation(csv("ok.csv", "time,u\n0,0.1\n0.01,0.2\n0.02,0.3\n"))  # rate from the time column
    assert ex.rate == pytest.approx(100.0) and np.allclose(ex.values[:, 0], [0.1, 0.2, 0.3])


def test_excitation_sets_reject_duplicates_and_non_mappings():
    with pytest.raises(ExcitationError, match=r"excitations.train: duplicate excitation name\(s\) \['a'\]"):
        build_excitation_sets({"train": [{"kind": "sine", "name": "a"}, {"kind": "step", "name": "a"}]})
    with pytest.raises(ExcitationError, match=r"excitations must be a mapping \{set name: \[profiles\]\}"):
        build_excitation_sets([{"kind": "sine"}])  # was: AttributeError 'list' object has no attribute 'items'
    sets = build_excitation_sets({"train": [{"kind": "sine"}, {"kind": "step"}]})
    assert [e.name for e in sets["train"]] == ["sine_1Hz", "step_0.5"]
