"""A joint-state (or motion-capture) run's delay is the measurement's, never a camera's or a video's.

The ``latency`` nuisance was described as "camera delay behind the commands (positive: the video shows
the motion late)" whatever the trials measured, and the residual diagnosis spoke of "a camera latency",
"the video's delay" and "the video's time stamps" on a joint-state log. The words now depend on the
measurement: a camera's and a video's for image keypoints (px) only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("MUJOCO_GL", "egl")

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_parameter_effects import MASS, _joint_trial, _record, _rig  # noqa: E402
from vid2sid_ros.calibration.diagnosis.advice import how_to_free  # noqa: E402
from vid2sid_ros.calibration.diagnosis.causes import TimeWarp, timing_causes  # noqa: E402
from vid2sid_ros.calibration.diagnosis.core import _latency_note, _named_message  # noqa: E402
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration  # noqa: E402
from vid2sid_ros.calibration.nuisance import latency_meaning  # noqa: E402
from vid2sid_ros.calibration.proposers import make_proposer  # noqa: E402
from vid2sid_ros.core.parameters import ParameterSpec  # noqa: E402
from vid2sid_ros.report import load_run, parameter_rows, render_report, run_summary_lines  # noqa: E402
from vid2sid_ros.rigs import build_real_trial, load_rig  # noqa: E402

MEASUREMENT = "measurement delay behind the commands (positive: the measurement records the motion late)"
CAMERA = "camera delay behind the commands (positive: the video shows the motion late)"
#: words that call the delay a camera's or the recording a video
CAMERA_WORDS = ("camera delay", "camera latency", "video's delay", "video shows", "the video's time stamps")


def test_the_latency_meaning_names_a_camera_for_image_trials_only():
    assert latency_meaning("px") == CAMERA
    for unit in (None, "m", "rad", "rad|m", "sigma"):
        assert latency_meaning(unit) == MEASUREMENT


def test_motion_capture_nuisances_are_worded_as_a_measurement_not_an_image():
    import numpy as np

    from vid2sid_ros.calibration.nuisance import add_measurement_nuisances
    from vid2sid_ros.core.excitation import Excitation
    from vid2sid_ros.core.parameters import ParameterSet

    exc = [Excitation("chirp", 100.0, np.sin(np.linspace(0.0, 6.0, 50))[:, None], ("push",))]
    base = ParameterSet((ParameterSpec("mass", "kg", 0.5, 4.0, 2.0, "ball mass", "body_mass[ball]"),))
    for unit, where in (("m", ""), ("px", "image ")):
        specs = {s.name: s for s in add_measurement_nuisances(base, None, keypoints=["tip"], excitations=exc,
                                                               real_trial=True, unit=unit).specs}
        assert specs["latency"].meaning == (CAMERA if unit == "px" else MEASUREMENT)
        assert specs["marker_offset.tip.x"].meaning == f"constant {where}x offset of keypoint 'tip' (marker off its site)"


@pytest.fixture(scope="module")
def joint_run(tmp_path_factory) -> Path:
    """A joint_csv calibration (a slide joint, positions in m, commanded: the latency nuisance is free)."""
    d = tmp_path_factory.mktemp("joint")
    _record(d / "t0.csv", mass=1.0)
    rig = load_rig(_rig(d, MASS, [_joint_trial("t0", "t0.csv", split={"train_fraction": 0.7})]))
    real = build_real_trial(rig)
    assert real.train[0].kind == "joints"
    run_calibration(rig, real, make_proposer("reasoner"),
                    CalibrationConfig(iterations=2, rollout_budget=12, identifiability=False,
                                      final_identifiability=False, diagnosis=False), d / "run")
    return d / "run"


def test_a_joint_state_runs_delay_is_the_measurements_in_result_report_and_terminal(joint_run):
    doc = yaml.safe_load((joint_run / "result.yaml").read_text())
    assert doc["nuisance"]["latency"]["meaning"] == MEASUREMENT
    rows = {r.name: r for r in parameter_rows(load_run(joint_run))}
    assert rows["latency"].meaning == MEASUREMENT
    page = render_report(joint_run / "report.html", [joint_run]).read_text(encoding="utf-8")
    assert MEASUREMENT in page
    assert not [w for w in CAMERA_WORDS if w in page], [w for w in CAMERA_WORDS if w in page]
    lines = "\n".join(run_summary_lines(joint_run, width=300))
    assert "latency" in lines and not [w for w in CAMERA_WORDS if w in lines], lines


def test_an_older_joint_state_run_that_called_it_a_camera_delay_is_reported_as_the_measurements(joint_run, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(joint_run, old)
    doc = yaml.safe_load((old / "result.yaml").read_text())
    doc["nuisance"]["latency"]["meaning"] = CAMERA  # what older code wrote for every trial kind
    (old / "result.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    assert {r.name: r for r in parameter_rows(load_run(old))}["latency"].meaning == MEASUREMENT
    page = render_report(old / "report.html", [old]).read_text(encoding="utf-8")
    assert "camera delay" not in page and "video shows" not in page


def _latency_spec() -> ParameterSpec:
    return ParameterSpec("latency", "s", -0.05, 0.05, 0.0, MEASUREMENT, "measurement.latency", kind="nuisance")


@pytest.mark.parametrize("unit, delay, recording", [("rad", "a measurement delay", "the recording's time stamps"),
                                                    ("m", "a measurement delay", "the recording's time stamps"),
                                                    ("px", "a camera latency", "the video's time stamps")])
def test_the_diagnosis_calls_the_delay_a_cameras_for_image_trials_only(unit, delay, recording):
    ctx = SimpleNamespace(unit=unit, rate=100.0, duration_s=3.0, params=SimpleNamespace(free=[]),
                          camera=SimpleNamespace(height=240))
    causes = {c.kind: c for c in timing_causes(ctx)}
    assert causes["latency"].name.startswith(delay)
    assert how_to_free(causes["timing"], unit).startswith(f"check {recording}")
    group = [SimpleNamespace(cause=causes["latency"])]
    text = _named_message(ctx, group, SimpleNamespace(theta=[0.012]), 0.9, 2.0, 0.5, group)
    assert text.endswith(f"— {delay} or a delay in the drive.")
    # the free latency on its bound: the delay that may lie beyond it
    spec = _latency_spec()
    free_ctx = SimpleNamespace(unit=unit, rate=100.0, full={"latency": 0.05}, params=SimpleNamespace(free=[spec]))
    (note,) = _latency_note(free_ctx)
    what = "video" if unit == "px" else "measurement"
    assert f"ms): the {what}'s delay may lie beyond it" in note.message
    if unit != "px":
        for text in (causes["latency"].name, how_to_free(causes["timing"], unit), note.message):
            assert not [w for w in CAMERA_WORDS + ("video",) if w in text], text


def test_a_run_whose_nuisance_was_worded_by_older_code_resumes(joint_run, tmp_path):
    """The words of a parameter's meaning are not what is fitted: a joint-state run interrupted under the
    camera wording resumes (was: refused, "'parameters' differs from the interrupted run")."""
    import json
    import shutil

    d = joint_run.parent
    old = tmp_path / "old"
    shutil.copytree(joint_run, old)
    meta = json.loads((old / "run.json").read_text())
    lat = next(p for p in meta["signature"]["parameters"] if p["name"] == "latency")
    assert lat["meaning"] == MEASUREMENT
    lat["meaning"] = CAMERA
    (old / "run.json").write_text(json.dumps(meta))
    rig = load_rig(d / "rig.yaml")
    res = run_calibration(rig, build_real_trial(rig), make_proposer("reasoner"),
                          CalibrationConfig(iterations=3, rollout_budget=12, identifiability=False,
                                            final_identifiability=False, diagnosis=False, resume=True), old)
    assert res.iterations >= 2
