"""Joint-position trials get no marker offsets, and a joint_csv run resumes.

A slide joint's position is in metres, like a mocap marker's, and the calibration gave it three
``marker_offset.<keypoint>.x|y|z`` nuisances named after the rig's keypoints; a ``--resume``
named them after the joints instead and was refused ("'parameters' differs"). A marker offset
means nothing for a joint reading: none is added.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_parameter_effects import MASS, _joint_trial, _record, _rig  # noqa: E402
from vid2sid_ros.calibration.nuisance import offset_unit  # noqa: E402
from vid2sid_ros.core.trajectory import Trajectory  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _traj(kind, unit, k=1):
    import numpy as np

    d = {"image": 2, "points": 3, "joints": 1}[kind]
    return Trajectory(time=np.arange(3) * 0.1, keypoints=np.zeros((3, k, d)), valid=np.ones((3, k), bool),
                      names=tuple(f"k{i}" for i in range(k)), kind=kind, unit=unit)


def test_offset_unit_by_kind():
    assert offset_unit([_traj("image", "px")]) == "px"
    assert offset_unit([_traj("points", "m")]) == "m"
    assert offset_unit([_traj("joints", "m")]) is None          # a slide joint's metres
    assert offset_unit([_traj("joints", "rad")]) is None
    assert offset_unit([_traj("points", "m"), _traj("joints", "m")]) is None
    assert offset_unit([]) is None


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
                          stdin=subprocess.DEVNULL)


def test_a_joint_csv_run_fits_no_marker_offset_and_resumes(tmp_path):
    _record(tmp_path / "truth.csv", mass=1.0)
    rig = _rig(tmp_path, MASS, [_joint_trial("train", str(tmp_path / "truth.csv"))])
    first = _cli("calibrate", str(rig), "--iterations", "1", "--out", "run", "--no-report", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    run = yaml.safe_load((tmp_path / "run" / "run.json").read_text())
    names = [p["name"] for p in run["signature"]["parameters"]] if isinstance(run["signature"]["parameters"], list) \
        else list(run["signature"]["parameters"])
    assert not [n for n in names if n.startswith("marker_offset.")], names
    again = _cli("calibrate", str(rig), "--iterations", "3", "--out", "run", "--no-report", "--resume", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "differs from the interrupted run" not in again.stderr
