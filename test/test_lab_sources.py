"""The lab-data trial source kinds of the rig config: mocap, joint_csv, bag (io/lab_sources.py).

A rig config of our soft rod whose trials are Motive takes is loaded and calibrated;
a bad column, unit, time or topic fails at load time with one line naming the config
key and the file's column/line/topic.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers.soft_rod import POSES, make_twin, record_motive_takes, release_excitation, write_rig_config  # noqa: E402
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration  # noqa: E402
from vid2sid_ros.calibration.proposers import make_proposer  # noqa: E402
from vid2sid_ros.core.parameters import draw_ground_truth, relative_parameter_error  # noqa: E402
from vid2sid_ros.rigs import RigConfigError, build_real_trial, load_rig  # noqa: E402


@pytest.fixture(scope="module")
def takes(tmp_path_factory):
    d = tmp_path_factory.mktemp("rod")
    twin = make_twin(d / "model")
    truth = draw_ground_truth(twin.parameters, 1)
    excs = [release_excitation(f"pose{i}", p, free_s=1.2) for i, p in enumerate(POSES[:4])]
    return d, truth, excs, record_motive_takes(twin, truth, excs, d / "takes", seed=1)


#: the identifiability diagnostics (extra rollouts) are not what these tests check
FAST = dict(identifiability=False, final_identifiability=False)


def test_rig_config_with_mocap_trials_calibrates(takes, tmp_path):
    d, truth, excs, paths = takes
    rig = load_rig(write_rig_config(tmp_path, paths, excs))
    real = build_real_trial(rig)
    assert [t.kind for t in real.train] == ["points"] * 3 and real.holdout[0].unit == "m"
    assert any("invalid samples" in w and "disk2" in w for w in real.meta["warnings"])
    res = run_calibration(rig, real, make_proposer("reasoner"), CalibrationConfig(iterations=8, rollout_budget=160,
                                                                                    **FAST))
    rel = relative_parameter_error(res.values, truth, rig.parameters.free_names)
    assert np.mean(list(rel.values())) < 0.03, rel
    assert res.unit == "m" and res.holdout_mae_px < 1e-3


def _bad(tmp_path, takes, old, new, **kw):
    d, truth, excs, paths = takes
    cfg = write_rig_config(tmp_path, paths, excs, **kw)
    cfg.write_text(cfg.read_text().replace(old, new, 1))
    with pytest.raises(RigConfigError) as info:
        load_rig(cfg)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_bad_mocap_blocks_fail_at_load_naming_key_and_column(takes, tmp_path):
    msg = _bad(tmp_path, takes, "disk3: 'rod:disk3'", "disk3: 'rod:disk4'")
    assert "rig.yaml:trials[0].source.mocap:" in msg and "marker column 'disk4' (keypoint 'disk3') not found" in msg
    assert "pose0.csv" in msg
    msg = _bad(tmp_path, takes, "frame: {up_axis: y}", "frame: {up_axis: y}, unit: inch")
    assert "rig.yaml:trials[0].source.mocap: " in msg and "unknown length unit 'inch'" in msg
    msg = _bad(tmp_path, takes, "frame: {up_axis: y}", "frme: {up_axis: y}")
    assert "rig.yaml:trials[0].source.mocap.frme: unknown key (did you mean frame?)" in msg
    d, truth, excs, paths = takes
    broken = tmp_path / "broken.csv"
    lines = paths[0].read_text().splitlines()
    lines[9], lines[10] = lines[10], lines[9]   # two samples out of order
    broken.write_text("\n".join(lines) + "\n")
    msg = _bad(tmp_path, takes, str(paths[0]), str(broken))
    assert f"broken.csv:11: time column: non-monotonic time" in msg


def test_joint_csv_and_bag_kinds_are_checked_up_front(takes, tmp_path):
    d, truth, excs, paths = takes
    js = tmp_path / "js.csv"
    js.write_text("time,j0x,j0y\n0.0,0.0,0.0\n0.01,0.01,0.0\n")
    extra = f"  - {{name: joints, source: {{joint_csv: {{path: {js}, joints: [j0x, j9x]}}}}, split: holdout}}"
    msg = _bad(tmp_path, takes, "calibration:", "calibration:", extra_trial=extra)
    assert "rig.yaml:trials[4].source.joint_csv: " in msg and "joint column 'j9x' not found" in msg
    extra = f"  - {{name: lab, source: {{bag: {{path: {tmp_path}, trial: x}}}}}}"
    msg = _bad(tmp_path, takes, "calibration:", "calibration:", extra_trial=extra)
    assert "rig.yaml:trials[4].source.bag.path:" in msg and "no .mcap or .db3 storage file" in msg
