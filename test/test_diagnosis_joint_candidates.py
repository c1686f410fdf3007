"""The residual diagnosis offers no image-only cause for trials that are not filmed.

Was: on a pan-tilt head calibrated from joint-state CSV files (``joint_csv``), the diagnosis weighed "keypoint
'pan' offset along x" and "keypoint 'tilt' offset along x" as candidate causes: a marker offset, for a joint
reading that has no marker (the calibration itself frees no marker offset for joint trials). Now a keypoint
offset is a candidate only for image keypoints and motion-capture markers, and a camera field only when a trial
is filmed; the candidates that act on the model, the commands and the timing are unchanged.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers.pan_tilt import write_rig  # noqa: E402
from vid2sid_ros.calibration.diagnosis.causes import frozen_parameters, marker_causes  # noqa: E402
from vid2sid_ros.cli import main  # noqa: E402
from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec  # noqa: E402
from vid2sid_ros.core.trajectory import Trajectory  # noqa: E402

#: the causes that act only on a camera's image (the diagnosis's kinds)
IMAGE_ONLY = {"offset", "camera", "rolling_shutter", "tracker"}


def _traj(kind: str, unit: str, names=("a", "b")) -> Trajectory:
    d = {"image": 2, "points": 3, "joints": 1}[kind]
    return Trajectory(time=np.arange(5) * 0.1, keypoints=np.zeros((5, len(names), d)),
                      valid=np.ones((5, len(names)), bool), names=tuple(names), kind=kind, unit=unit)


def _ctx(*reals, unit: str, params=None):
    params = params or ParameterSet((ParameterSpec(name="k", unit="N/m", lower=1, upper=2, nominal=1.5),))
    return SimpleNamespace(params=params, reals=list(reals), unit=unit, full=params.nominal())


def test_keypoint_offsets_are_candidates_for_image_and_mocap_markers_only():
    assert marker_causes(_ctx(_traj("joints", "rad"), unit="rad")) == []  # was: 'a' and 'b' offsets along x
    image = marker_causes(_ctx(_traj("image", "px"), unit="px"))
    assert [c.name for c in image] == ["keypoint 'a' offset", "keypoint 'b' offset"] and image[0].unit == "px"
    mocap = marker_causes(_ctx(_traj("points", "m"), unit="m"))
    assert [c.name for c in mocap] == ["keypoint 'a' offset", "keypoint 'b' offset"] and mocap[0].unit == "m"
    # joint trials beside a video: only the video's keypoints, never the joints
    mixed = marker_causes(_ctx(_traj("joints", "rad", ("pan", "tilt")), _traj("image", "px", ("tip",)),
                               unit="sigma"))
    assert [c.name for c in mixed] == ["keypoint 'tip' offset"]


def test_a_frozen_camera_field_is_no_candidate_without_a_filmed_trial():
    params = ParameterSet((ParameterSpec(name="k", unit="N/m", lower=1, upper=2, nominal=1.5),
                           ParameterSpec(name="cam_x", unit="m", lower=-1, upper=1, nominal=0.0, kind="nuisance",
                                         target="camera.x", frozen=True),
                           ParameterSpec(name="gain", unit="1", lower=1, upper=2, nominal=1.5, frozen=True)))
    assert [c.name for c in frozen_parameters(_ctx(_traj("joints", "rad"), unit="rad", params=params))] == [
        "frozen parameter 'gain'"]
    assert [c.name for c in frozen_parameters(_ctx(_traj("image", "px"), unit="px", params=params))] == [
        "frozen parameter 'cam_x'", "frozen parameter 'gain'"]


def test_a_joint_csv_calibrations_diagnosis_weighs_no_image_only_cause(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_rig(tmp_path, calibration={"far_refit": "never", "identifiability": False})  # the candidates, quickly
    assert main(["calibrate", "rig.yaml", "--budget", "6", "--iterations", "3", "--out", "run", "--no-report",
                 "-q"]) == 0
    diag = json.loads((tmp_path / "run" / "result.json").read_text())["residual_diagnosis"]
    weighed = diag["statistics"]["causes"]
    kinds = {c["kind"] for c in weighed}
    assert weighed and not kinds & IMAGE_ONLY, sorted(kinds)
    assert not [c["cause"] for c in weighed if "keypoint" in c["cause"] or "camera" in c["cause"]]
    assert {"joint", "inertia"} <= kinds  # the model's own quantities are still weighed
