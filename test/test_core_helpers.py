"""Core helpers no core test called (the "no tests" mutants of ``bench/mutation.py --only core``):
the sim2sim ground-truth draw, how errors are printed per unit, unit labels, and the per-keypoint
noise levels the mixed-unit objective divides by."""

from __future__ import annotations

import numpy as np
import pytest

from vid2sid_ros.core.parameters import ParameterSet, draw_ground_truth
from vid2sid_ros.core.trajectory import (DEFAULT_NOISE, Trajectory, TrajectoryError, display_unit, format_error,
                                         noise_levels, unit_label)

SPEC = ParameterSet.from_dict({"parameters": [
    {"name": "k", "unit": "N*m/rad", "lower": 0.0, "upper": 10.0, "nominal": 5.0},
    {"name": "c", "unit": "N*m*s/rad", "lower": 1.0, "upper": 3.0, "nominal": 2.0},
    {"name": "m", "unit": "kg", "lower": 0.0, "upper": 1.0, "nominal": 0.25, "frozen": True}]})


def test_ground_truth_is_seeded_inside_the_normalised_band_and_keeps_frozen_nominals():
    a = draw_ground_truth(SPEC, 3)
    assert a == draw_ground_truth(SPEC, 3) and a != draw_ground_truth(SPEC, 4)
    assert set(a) == {"k", "c", "m"} and a["m"] == 0.25  # frozen: nominal
    # the documented seeding: numpy default_rng([seed, 0x5EED]), one uniform draw per free parameter
    u = np.random.default_rng([3, 0x5EED]).uniform(0.15, 0.85, size=2)
    assert a["k"] == pytest.approx(10.0 * u[0]) and a["c"] == pytest.approx(1.0 + 2.0 * u[1])
    draws = [draw_ground_truth(SPEC, s) for s in range(200)]
    ks = np.array([d["k"] for d in draws])
    assert ks.min() >= 1.5 and ks.max() <= 8.5 and ks.max() - ks.min() > 6.0  # [0.15, 0.85] of [0, 10]
    narrow = draw_ground_truth(SPEC, 3, low=0.5, high=0.5 + 1e-9)
    assert narrow["k"] == pytest.approx(5.0) and narrow["c"] == pytest.approx(2.0)
    full = draw_ground_truth(SPEC, 3, low=0.0, high=1.0)  # the limits themselves are allowed
    assert 0.0 <= full["k"] <= 10.0
    for low, high in [(-0.1, 0.5), (0.5, 0.5), (0.6, 0.5), (0.2, 1.1)]:
        with pytest.raises(ValueError, match=f"need 0 <= low < high <= 1, got low={low}, high={high}"):
            draw_ground_truth(SPEC, 0, low=low, high=high)


def test_parameter_set_iterates_over_its_specs_in_order():
    assert [s.name for s in SPEC] == ["k", "c", "m"]
    assert [s.name for s in SPEC] == [s.name for s in SPEC.specs]


def test_errors_are_printed_in_their_unit():
    assert format_error(2.17, "px") == "2.170 px"
    assert format_error(0.001234, "m") == "1.234 mm"  # metres shown in mm
    assert format_error(0.0123, "rad") == "0.0123 rad"  # one more decimal for radians
    assert format_error(1.5, "sigma") == "1.500 sigma"
    assert format_error(0.5, "rad|m") == "0.500 rad|m"
    assert format_error(2.17, "px", digits=1) == "2.2 px" and format_error(0.0123, "rad", digits=2) == "0.012 rad"
    assert format_error(float("inf"), "m") == "inf mm" and format_error(float("nan"), "px") == "nan px"
    assert display_unit("m") == (1000.0, "mm") and display_unit("px") == (1.0, "px")
    assert display_unit("rad") == (1.0, "rad")


def test_unit_labels():
    assert unit_label("m") == "m"
    assert unit_label(["rad", "rad", "m", "rad"]) == "rad|m"  # first-seen order, no repeats
    assert unit_label(["px", "px"]) == "px"
    assert unit_label([]) == "px"


def _joints(unit, meta=None) -> Trajectory:
    T, K = 3, len(unit) if isinstance(unit, tuple) else 2
    return Trajectory(np.arange(T) / 10.0, np.zeros((T, K, 1)), np.ones((T, K), bool), tuple(f"j{k}" for k in range(K)),
                      kind="joints", unit=unit, meta=meta or {})


def test_noise_levels_per_keypoint_unit_with_overrides():
    assert DEFAULT_NOISE == {"px": 1.0, "m": 0.001, "rad": 0.005}
    mixed = _joints(("rad", "m", "rad"))
    assert noise_levels(mixed).tolist() == [0.005, 0.001, 0.005]
    assert noise_levels(mixed, {"rad": 0.01}).tolist() == [0.01, 0.001, 0.01]  # per-unit override
    assert noise_levels(mixed, None).tolist() == [0.005, 0.001, 0.005]
    own = _joints(("rad", "m"), meta={"noise": 0.02})  # the trial's own level wins over both
    assert noise_levels(own, {"rad": 0.01, "m": 0.5}).tolist() == [0.02, 0.02]
    assert noise_levels(_joints("rad"), {"rad": 3}).tolist() == [3.0, 3.0]  # an int level is a number
    for bad in (0.0, -1.0, float("inf"), float("nan"), True, "1"):
        with pytest.raises(TrajectoryError, match="noise level of unit 'rad' must be a number > 0, got"):
            noise_levels(_joints("rad"), {"rad": bad})
    with pytest.raises(TrajectoryError, match="noise level of unit 'rad' must be a number > 0, got None"):
        noise_levels(_joints("rad"), {"rad": None})
    assert noise_levels(_joints("rad"), {"rad": 0.5}).dtype == float


def test_parameter_set_errors_name_the_default_source():
    from vid2sid_ros.core.parameters import ParameterSpecError

    with pytest.raises(ParameterSpecError, match=r"^<dict>: expected a mapping with a 'parameters' list, got list$"):
        ParameterSet.from_dict([])
    with pytest.raises(ParameterSpecError, match=r"^rig\.yaml: field 'parameters' must be a list"):
        ParameterSet.from_dict({"parameters": 3}, source="rig.yaml")
