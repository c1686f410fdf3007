"""ParameterSpec/ParameterSet edges left open by the core tests (survivors of bench/mutation.py):
a nominal on a bound, the one-line description with a value and a meaning, a spec without a
rig name, and vector round trips that must come back as floats."""

from __future__ import annotations

import numpy as np
import pytest

from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec, ParameterSpecError


def test_nominal_on_a_bound_is_valid_outside_is_not():
    assert ParameterSpec("d", "N*m*s/rad", 0.0, 0.01, 0.0).nominal == 0.0  # damping starts at its lower bound
    assert ParameterSpec("d", "N*m*s/rad", 0.0, 0.01, 0.01).nominal == 0.01
    with pytest.raises(ParameterSpecError):
        ParameterSpec("d", "N*m*s/rad", 0.0, 0.01, 0.02)


def test_describe_uses_the_given_value_and_the_meaning():
    s = ParameterSpec("k", "N*m/rad", 0.1, 2.0, 0.5, meaning="joint stiffness")
    assert s.describe() == "k = 0.5 N*m/rad (bounds [0.1, 2]): joint stiffness"
    assert s.describe(1.25) == "k = 1.25 N*m/rad (bounds [0.1, 2]): joint stiffness"
    assert ParameterSpec("k", "N*m/rad", 0.1, 2.0, 0.5).describe() == "k = 0.5 N*m/rad (bounds [0.1, 2])"


def test_spec_without_rig_name_and_unit_vectors():
    d = {"parameters": [{"name": "a", "unit": "m", "lower": 0.0, "upper": 2.0, "nominal": 1.0},
                        {"name": "b", "unit": "m", "lower": 1.0, "upper": 100.0, "nominal": 10.0, "scale": "log"}]}
    ps = ParameterSet.from_dict(d)
    assert ps.rig == "" and ParameterSet.from_dict({**d, "rig": None}).rig == ""
    assert ParameterSet.from_dict({**d, "rig": "arm"}).rig == "arm"
    u = ps.to_unit_vector({"a": 1, "b": 10})  # ints in: floats out
    assert u.dtype == np.float64 and u == pytest.approx([0.5, 0.5])
    back = ps.from_unit_vector([1, 0])
    assert back == {"a": 2.0, "b": 1.0} and all(isinstance(v, float) for v in back.values())
    assert ps.complete({"a": 0.2}) == {"a": 0.2, "b": 10.0} and ps.with_nominal({"b": 20.0}).nominal()["a"] == 1.0
