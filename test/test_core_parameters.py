"""core/parameters.py: spec validation, YAML errors, unit mapping, frozen/free, relative error."""

import math

import numpy as np
import pytest
import yaml

from vid2sid_ros.core.parameters import (ParameterSet, ParameterSpec, ParameterSpecError, load_parameter_set,
                                         relative_parameter_error)


def _entry(**kw):
    e = {"name": "k", "unit": "N*m/rad", "lower": 0.1, "upper": 1.0, "nominal": 0.3}
    e.update(kw)
    return e


def _set(*entries, source="spec.yaml"):
    return ParameterSet.from_dict({"rig": "test", "parameters": list(entries)}, source=source)


@pytest.mark.parametrize("kw, match", [
    ({"lower": 1.0, "upper": 0.5}, "lower < upper"),
    ({"lower": 1.0, "upper": 1.0}, "lower < upper"),
    ({"nominal": 2.0}, "outside"),
    ({"scale": "logarithmic"}, "scale must be one of"),
    ({"scale": "log", "lower": 0.0}, "needs lower > 0"),
    ({"kind": "camera"}, "kind must be one of"),
    ({"upper": float("inf")}, "finite number"),
    ({"nominal": "abc"}, "finite number"),
    ({"lower": True}, "finite number"),
    ({"frozen": "false"}, "frozen.*true or false"),
])
def test_spec_validation_errors(kw, match):
    with pytest.raises(ParameterSpecError, match=match):
        ParameterSpec(**_entry(**kw))


def test_typo_missing_and_malformed_fields_name_the_file_entry_and_field():
    with pytest.raises(ParameterSpecError, match=r"spec.yaml: parameters\[0\] \('k'\): unknown field.*'nomnal'"):
        _set({**{k: v for k, v in _entry().items() if k != "nominal"}, "nomnal": 0.3})
    with pytest.raises(ParameterSpecError, match=r"parameters\[1\].*missing required field.*'unit'"):
        _set(_entry(), {k: v for k, v in _entry(name="c").items() if k != "unit"})
    with pytest.raises(ParameterSpecError, match="identifier"):
        _set(_entry(name="joint stiffness"))
    with pytest.raises(ParameterSpecError, match=r"parameters\[0\]: expected a mapping"):
        _set(["k", 0.1])
    with pytest.raises(ParameterSpecError, match="'parameters' must be a list"):
        ParameterSet.from_dict({"parameters": {"k": 1}}, source="x.yaml")
    with pytest.raises(ParameterSpecError, match="expected a mapping"):
        ParameterSet.from_dict([1, 2])
    with pytest.raises(ParameterSpecError, match="duplicate parameter name 'k'"):
        _set(_entry(), _entry())
    with pytest.raises(ParameterSpecError, match="at least one"):
        _set()
    with pytest.raises(ParameterSpecError, match=r"spec.yaml: parameter 'k': nominal"):
        _set(_entry(nominal=5.0))


def test_load_parameter_set_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        load_parameter_set(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("parameters: [ {name: k, unit: m\n")
    with pytest.raises(ParameterSpecError, match=r"bad.yaml:\d+:\d+: not valid YAML"):
        load_parameter_set(bad)
    typo = tmp_path / "typo.yaml"
    typo.write_text(yaml.safe_dump({"rig": "r", "parameters": [{**_entry(), "uper": 2.0}]}))
    with pytest.raises(ParameterSpecError, match=r"typo.yaml.*unknown field.*'uper'"):
        load_parameter_set(typo)
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({"rig": "r", "notes": "kept", "parameters": [_entry(scale="log")]}))
    ps = load_parameter_set(good)
    assert ps.rig == "r" and ps.source == str(good) and ps.extra == {"notes": "kept"}
    assert ps["k"].scale == "log"


def test_unit_mapping_linear_and_log():
    lin = ParameterSpec(**_entry(lower=2.0, upper=6.0, nominal=3.0))
    assert lin.to_unit(2.0) == 0.0 and lin.to_unit(6.0) == 1.0 and lin.to_unit(4.0) == 0.5
    assert lin.to_unit(8.0) == 1.5  # no clipping on the way in
    assert lin.from_unit(0.25) == 3.0
    assert lin.from_unit(-1.0) == 2.0 and lin.from_unit(2.0) == 6.0  # clipped on the way out
    log = ParameterSpec(**_entry(lower=0.01, upper=1.0, nominal=0.1, scale="log"))
    assert log.to_unit(0.1) == pytest.approx(0.5)  # geometric midpoint
    assert log.from_unit(0.5) == pytest.approx(0.1)
    for u in np.linspace(0, 1, 7):
        assert log.to_unit(log.from_unit(u)) == pytest.approx(u)
    assert math.isfinite(log.to_unit(0.0))  # a non-positive value maps far below 0, no crash
    assert log.to_unit(0.0) < -10
    assert lin.clip(10.0) == 6.0 and "k = 3 N*m/rad" in lin.describe()


def test_vectors_frozen_and_nominal():
    ps = _set(_entry(name="a", scale="log"), _entry(name="b", frozen=True), _entry(name="c", lower=0.0))
    assert ps.free_names == ["a", "c"] and ps.names == ["a", "b", "c"]
    u = ps.to_unit_vector({"a": 0.1, "b": 0.9, "c": 1.0})
    assert u.tolist() == [0.0, 1.0]
    vals = ps.from_unit_vector([1.0, 0.5], base={"b": 0.7})
    assert vals == pytest.approx({"a": 1.0, "b": 0.7, "c": 0.5})
    assert ps.from_unit_vector([0.0, 0.0])["b"] == 0.3  # frozen -> nominal
    with pytest.raises(ValueError, match="2 free parameters"):
        ps.from_unit_vector([0.5])
    lo, hi = ps.bounds()
    assert lo.tolist() == [0.1, 0.0] and hi.tolist() == [1.0, 1.0]
    only_b = ps.with_frozen(free=["b"])
    assert only_b.free_names == ["b"]
    assert ps.with_frozen(["a"]).free_names == ["c"]
    with pytest.raises(ParameterSpecError, match="unknown parameter 'z'"):
        ps.with_frozen(["z"])
    moved = ps.with_nominal({"a": 5.0, "c": 0.2})
    assert moved["a"].nominal == 1.0 and moved["c"].nominal == 0.2  # clipped into bounds


def test_check_names_complete_and_clip():
    ps = _set(_entry(name="a"), _entry(name="b"))
    with pytest.raises(ParameterSpecError, match=r"unknown parameter\(s\) \['x'\]; valid names: a, b"):
        ps.check_names({"x": 1.0})
    with pytest.raises(ParameterSpecError, match=r"missing parameter\(s\) \['b'\]"):
        ps.check_names({"a": 0.2})
    assert ps.complete({"a": 0.5}) == {"a": 0.5, "b": 0.3}
    assert ps.clip({"a": 9.0, "b": -1.0}) == {"a": 1.0, "b": 0.1}
    with pytest.raises(KeyError, match="valid names: a, b"):
        ps["x"]
    assert "a" in ps and "x" not in ps and len(ps) == 2


def test_to_dict_round_trip():
    ps = _set(_entry(name="a", scale="log", meaning="m", target="dof_damping[0]"), _entry(name="b", frozen=True))
    again = ParameterSet.from_dict(yaml.safe_load(yaml.safe_dump(ps.to_dict())))
    assert again.specs == ps.specs and again.rig == "test"


def test_shipped_finger_spec_loads():
    from vid2sid_ros.sim.mujoco_finger import PARAMETERS_PATH

    ps = load_parameter_set(PARAMETERS_PATH)
    assert len(ps.free) == 4 and ps.rig == "finger"


def test_relative_parameter_error():
    err = relative_parameter_error({"a": 1.1, "b": -1.8, "c": 7.0}, {"a": 1.0, "b": -2.0})
    assert err == pytest.approx({"a": 0.1, "b": 0.1})
    assert relative_parameter_error({"a": 2.0}, {"a": 1.0, "b": 3.0}, names=["a"]) == {"a": 1.0}
    # true values below 1 (damping 0.004 N·m·s/rad, friction 0.0035 N·m): relative to |t|, not to max(|t|, 1)
    small = relative_parameter_error({"d": 0.0044, "f": 0.0028, "k": 4.2e-7}, {"d": 0.004, "f": 0.0035, "k": 4e-7})
    assert small == pytest.approx({"d": 0.1, "f": 0.2, "k": 0.05})
    with pytest.raises(KeyError):
        relative_parameter_error({}, {"a": 1.0})
    with pytest.raises(ValueError, match="'a' is 0"):
        relative_parameter_error({"a": 1.0}, {"a": 0.0})


def test_numeric_strings_from_yaml_are_numbers():
    # PyYAML (YAML 1.1) loads 1e-3 without a dot as the string "1e-3"
    import yaml
    data = yaml.safe_load("parameters:\n  - {name: k, unit: N, lower: 1e-3, upper: 2e-2, nominal: 5e-3}\n")
    assert isinstance(data["parameters"][0]["lower"], str)
    spec = ParameterSet.from_dict(data)["k"]
    assert spec.lower == pytest.approx(1e-3) and spec.upper == pytest.approx(2e-2) and spec.nominal == pytest.approx(5e-3)
