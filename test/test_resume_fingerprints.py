"""run.json fingerprints the model (and its meshes), the rig config and the real data; a resume
against a changed one is refused in one line unless --resume-changed, which is recorded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vid2sid_ros import cli
from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, CalibrationError, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.rigs import load_rig

ARM = Path(__file__).resolve().parents[1] / "examples" / "rigs" / "urdf_arm"


def _calibrate(rig_yaml: Path, out: Path, iterations: int, *extra: str) -> int:
    return cli.main(["calibrate", str(rig_yaml), "--iterations", str(iterations), "--budget", "30", "--out", str(out),
                     "--no-report", "--quiet", *extra])


@pytest.fixture
def arm(tmp_path):
    d = tmp_path / "arm"
    shutil.copytree(ARM, d)
    return d


def test_resume_after_the_urdf_mass_changed_is_refused_then_allowed_and_recorded(arm, tmp_path, capsys):
    out = tmp_path / "run"
    assert _calibrate(arm / "rig.yaml", out, 1) == 0
    fp = json.loads((out / "run.json").read_text())["fingerprints"]
    assert set(fp) == {"model", "rig_config", "real_data"}
    urdf = arm / "arm2.urdf"
    urdf.write_text(urdf.read_text().replace('<mass value="0.40"/>', '<mass value="4.0"/>'))
    capsys.readouterr()
    jl = (out / "iterations.jsonl").read_bytes()
    assert _calibrate(arm / "rig.yaml", out, 2, "--resume") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the model file (or a file it includes)" in err[0] and "changed" in err[0]
    assert "--resume-changed" in err[0]
    assert (out / "iterations.jsonl").read_bytes() == jl  # nothing was changed
    assert _calibrate(arm / "rig.yaml", out, 2, "--resume-changed") == 0
    meta = json.loads((out / "run.json").read_text())
    (entry,) = meta["resumed_with_changes"]
    assert "model" in entry["changed"] and entry["after_iteration"] == 1
    assert entry["old"]["model"] == fp["model"] and entry["new"]["model"] != fp["model"]


def test_a_changed_mesh_is_a_changed_model(arm, tmp_path, capsys):
    out = tmp_path / "run"
    assert _calibrate(arm / "rig.yaml", out, 1) == 0
    with open(arm / "meshes" / "forearm.obj", "a") as f:
        f.write("# edited\n")
    capsys.readouterr()
    assert _calibrate(arm / "rig.yaml", out, 2, "--resume") == 2
    err = capsys.readouterr().err
    assert "the model file (or a file it includes) changed" in err and "real data" not in err


def test_resume_against_changed_real_data_is_refused():
    import tempfile

    rig = load_rig("toy")
    truth = rig.parameters.nominal()
    with tempfile.TemporaryDirectory() as d:
        rd = Path(d) / "run"
        cfg = CalibrationConfig(iterations=1, rollout_budget=20)
        run_calibration(rig, make_sim2sim_trial(rig, truth, seed=0, noise="keypoint"), make_proposer("reasoner"), cfg, rd)
        other = make_sim2sim_trial(rig, truth, seed=1, noise="keypoint")  # same trials, other measurements
        with pytest.raises(CalibrationError, match="the real data .* changed"):
            run_calibration(rig, other, make_proposer("reasoner"),
                            CalibrationConfig(iterations=2, rollout_budget=20, resume=True), rd)
