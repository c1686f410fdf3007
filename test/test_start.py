"""The generic start: multistart in normalised coordinates, and named guesses that only suggest nominal values."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
import yaml

from vid2sid_ros.calibration.start import StartConfig, StartError, apply_guess, generic_start, parse_start
from vid2sid_ros.cli import main
from vid2sid_ros.core.parameters import load_parameter_set
from vid2sid_ros.rigs import load_rig
from vid2sid_ros.share import resolve_path


def _swing_clip(path, *, pivot=(160.0, -60.0), px_per_m=300.0, period=1.5, amp=0.3, seconds=5.0, fps=30.0):
    """A red disc swinging like a pendulum (BGR video), 320x240."""
    length = 9.81 * (period / (2 * math.pi)) ** 2
    r = px_per_m * length
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (320, 240))
    for k in range(int(seconds * fps)):
        th = amp * math.cos(2 * math.pi * k / fps / period) * math.exp(-0.05 * k / fps)
        f = np.full((240, 320, 3), 235, np.uint8)
        cv2.circle(f, (int(round(pivot[0] + r * math.sin(th))), int(round(pivot[1] + r * math.cos(th)))), 9,
                   (30, 30, 210), -1, cv2.LINE_AA)
        w.write(f)
    w.release()
    return length


def _rig_files(tmp_path, clip, *, pivot_y_bounds=(-3000.0, 360.0), start=None):
    spec = load_parameter_set(resolve_path("pkg:sim/models/pendulum_parameters.yaml", None)).to_dict()
    for e in spec["parameters"]:
        if e["name"] == "pivot_y":
            e["lower"], e["upper"] = pivot_y_bounds
            e["nominal"] = min(max(e["nominal"], e["lower"]), e["upper"])
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    rig = {"rig": "swing", "description": "a red disc on a string", "model": "pkg:sim/models/pendulum.xml",
           "parameters": "spec.yaml", "keypoints": {"apple": "apple_centre"},
           "projection": {"anchor": "pivot", "width": 320, "height": 240}, "max_physics_timestep": 0.009,
           "tracker": {"kind": "markers", "markers": [{"name": "apple", "hsv_lower": [165, 80, 50],
                                                        "hsv_upper": [12, 255, 255], "min_area_px": 40}]},
           "trials": [{"name": "swing", "source": {"video": str(clip)}, "split": {"train_fraction": 0.7}}],
           "calibration": {"iterations": 3, "rollout_budget": 30, "identifiability": False,
                           "final_identifiability": False, **({"start": start} if start else {})}}
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump(rig, sort_keys=False))
    return tmp_path / "rig.yaml"


def test_a_guess_outside_the_spec_is_logged_and_ignored_and_calibrate_exits_0(tmp_path, capsys):
    clip = tmp_path / "swing.mp4"
    _swing_clip(clip)
    # the clip puts the pivot 60 px above the frame; this spec says it is inside it: the guess is out of bounds
    cfg = _rig_files(tmp_path, clip, pivot_y_bounds=(0.0, 360.0), start={"guess": "pendulum_circle"})
    rc = main(["calibrate", str(cfg), "--out", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    import re

    m = re.search(r"start: start guess 'pendulum_circle': pivot_y = (-\d+\.?\d*) px is outside \[0, 360\]; ignored "
                  r"\(bounds are never narrowed\)", out)
    assert m and -70 < float(m.group(1)) < -50, out  # the clip's pivot is 60 px above the frame
    spec = load_parameter_set(tmp_path / "run" / "result.yaml")
    assert (spec["pivot_y"].lower, spec["pivot_y"].upper) == (0.0, 360.0)  # bounds as the config says
    assert (tmp_path / "run" / "report.html").is_file()


def test_the_guess_only_moves_nominal_values_and_a_failing_guess_is_ignored(tmp_path):
    clip = tmp_path / "swing.mp4"
    length = _swing_clip(clip)
    rig = load_rig(_rig_files(tmp_path, clip))
    from vid2sid_ros.rigs import build_real_trial

    real = build_real_trial(rig)
    guessed, notes = apply_guess(rig.parameters, real, "pendulum_circle")
    assert guessed["length"].nominal == pytest.approx(length, rel=0.03)
    assert [(s.lower, s.upper) for s in guessed] == [(s.lower, s.upper) for s in rig.parameters]
    short = type(real)([real.train[0].slice(0, 12)], [real.train_excitations[0]])  # under one swing
    same, notes = apply_guess(rig.parameters, short, "pendulum_circle")
    assert same is rig.parameters and "failed and is ignored" in notes[0]


def test_multistart_charges_its_rollouts_and_never_returns_a_worse_start(tmp_path):
    clip = tmp_path / "swing.mp4"
    _swing_clip(clip)
    rig = load_rig(_rig_files(tmp_path, clip))
    from vid2sid_ros.rigs import build_real_trial

    real = build_real_trial(rig)
    params = rig.parameters.with_frozen(free=["length", "px_per_m", "pivot_y", "initial_angle"])
    twin = rig.make_twin()
    res = generic_start(twin, real, params, StartConfig("multistart", 6), seed=1)
    assert res.rollouts == 7 * len(real.train)  # the start point + 6 Sobol points, one rollout per training trial
    from vid2sid_ros.calibration.objective import TrialObjective

    obj = TrialObjective(twin, real.train_excitations, real.train, params)
    assert res.error == pytest.approx(obj.evaluate(res.parameters.nominal())[0].error_px)
    assert res.error <= obj.evaluate(params.nominal())[0].error_px
    assert [(s.lower, s.upper) for s in res.parameters] == [(s.lower, s.upper) for s in params]
    again = generic_start(twin, real, params, StartConfig("multistart", 6), seed=1)
    assert again.parameters.nominal() == res.parameters.nominal()  # seeded


def test_start_block_errors_name_file_and_key():
    with pytest.raises(StartError, match=r"f.yaml:calibration.start.kind: expected one of nominal, multistart"):
        parse_start({"kind": "cmaes"}, "f.yaml:calibration.start")
    with pytest.raises(StartError, match=r"start.guess: unknown start plugin 'pendulum_circel' \(did you mean "
                                         r"pendulum_circle\?\)"):
        parse_start({"guess": "pendulum_circel"}, "f.yaml:calibration.start")
    with pytest.raises(StartError, match=r"start.points: expected an integer in \[1, 100000\]"):
        parse_start({"points": 0}, "f.yaml:calibration.start")
    cfg, values = parse_start({"points": 4, "length": 1.0}, "x")
    assert cfg == StartConfig("multistart", 4, None) and values == {"length": 1.0}


def test_calibrate_charges_the_multistart_to_the_budget(tmp_path, capsys):
    clip = tmp_path / "swing.mp4"
    _swing_clip(clip)
    cfg = _rig_files(tmp_path, clip, start={"kind": "multistart", "points": 5})
    rc = main(["calibrate", str(cfg), "--budget", "20", "--out", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "start: multistart: 5 Sobol points + the start point, 6 rollouts" in out
    import json

    res = json.loads((tmp_path / "run" / "result.json").read_text())
    assert res["rollouts"] <= 20 - 6  # the proposer got what the start stage left
    rc = main(["calibrate", str(cfg), "--budget", "6", "--out", str(tmp_path / "run2")])
    assert rc == 2 and "calibration.start.points: the multistart costs 6 rollouts, the whole budget is 6" in \
        capsys.readouterr().err
    assert not (tmp_path / "run2").exists()


def test_start_values_may_name_the_measurement_nuisances_and_an_unknown_name_still_errors():
    from vid2sid_ros.calibration.nuisance import nuisance_names

    spec = load_parameter_set(resolve_path("pkg:sim/models/pendulum_parameters.yaml", None))
    names = nuisance_names(["apple"])
    assert names[0] == "latency" and "marker_offset.apple.x" in names and "marker_offset.apple.z" in names
    _, values = parse_start({"latency": 0.02, "marker_offset.apple.y": -1.5}, "x", spec, names)
    assert values == {"latency": 0.02, "marker_offset.apple.y": -1.5}
    with pytest.raises(StartError, match=r"^f.yaml:calibration.start.latncy: unknown parameter \(did you mean "
                                         r"latency\?\); valid: .*latency"):
        parse_start({"latncy": 0.02}, "f.yaml:calibration.start", spec, names)
    with pytest.raises(StartError, match=r"start.latency: unknown parameter"):  # not offered: refused as before
        parse_start({"latency": 0.02}, "f.yaml:calibration.start", spec)


def test_calibrate_starts_a_measurement_nuisance_at_its_calibration_start_value(tmp_path, capsys):
    import json

    clip = tmp_path / "swing.mp4"
    _swing_clip(clip)
    cfg = _rig_files(tmp_path, clip, start={"marker_offset.apple.x": 1.25})
    doc = yaml.safe_load(cfg.read_text())
    cfg.write_text(yaml.safe_dump({**doc, "nuisance": {"marker_offsets": True}}, sort_keys=False))
    rc = main(["calibrate", str(cfg), "--iterations", "1", "--budget", "4", "--out", str(tmp_path / "run")])
    assert rc == 0, capsys.readouterr().err
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["initial"]["values"]["marker_offset.apple.x"] == 1.25  # iteration 0 is the start point
