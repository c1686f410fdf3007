"""Nothing in a run directory is lost or silently replaced (issue 12 items 5-7).

- a refused second run never rewrites ``real_trial.json`` (the run's hidden truth);
- ``run.json`` missing with completed iterations present: refuse, name what is missing,
  say how to recover, delete nothing (with or without ``--resume``);
- ``--resume`` validates ``iterations.jsonl`` as a sequence (indices, rollout counts,
  finite numbers) and refuses with the line number.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, CalibrationError, load_history, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.cli import main
from vid2sid_ros.sim.toy import make_rig

TOY = "toy"


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def _cli_base(tmp_path_factory):
    base = tmp_path_factory.mktemp("cli")
    cfg = base / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"rig": TOY, "proposer": "reasoner",
                                   "calibration": {"iterations": 2, "rollout_budget": None, "identifiability": False,
                                                   "final_identifiability": False, "stop_when_converged": False}}))
    assert main(["calibrate", str(cfg), "--out", str(base / "run"), "--seed", "0", "--quiet", "--no-report"]) == 0
    return cfg, base / "run"


@pytest.fixture
def cli_run(_cli_base, tmp_path):
    """A fresh copy of one completed 2-iteration CLI run (reasoner, proposer_state/ present)."""
    cfg, run = _cli_base
    out = tmp_path / "run"
    shutil.copytree(run, out)
    return cfg, out


@pytest.mark.parametrize("extra", [["--resume", "--seed", "1"], ["--seed", "1"]])
def test_refused_second_run_leaves_real_trial_json_alone(cli_run, capsys, extra):
    cfg, out = cli_run
    before = _snapshot(out)
    truth = json.loads((out / "real_trial.json").read_text())["truth"]
    capsys.readouterr()
    rc = main(["calibrate", str(cfg), "--out", str(out), "--quiet", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert ("'seed' differs" in err) if "--resume" in extra else ("already holds a calibration run" in err)
    # was: real_trial.json rewritten with seed 1's truth before the refusal
    assert _snapshot(out) == before
    assert json.loads((out / "real_trial.json").read_text())["truth"] == truth


@pytest.mark.parametrize("resume", [True, False])
def test_missing_run_json_with_iterations_is_refused_and_nothing_deleted(cli_run, capsys, resume):
    cfg, out = cli_run
    (out / "run.json").unlink()
    assert (out / "proposer_state").is_dir()
    before = _snapshot(out)
    capsys.readouterr()
    rc = main(["calibrate", str(cfg), "--out", str(out), "--seed", "0", "--quiet"] + (["--resume"] if resume else []))
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "run.json is missing but iterations.jsonl and proposer_state/ hold(s) completed iterations" in err
    assert "restore run.json" in err and "nothing was changed" in err
    # was (with --resume): started afresh, iterations.jsonl deleted, stale proposer_state/ kept
    assert _snapshot(out) == before


@pytest.fixture(scope="module")
def toy_trial():
    rig = make_rig()
    return rig, make_sim2sim_trial(rig, {"stiffness": 0.7, "damping": 0.04, "gain": 0.4}, seed=3, noise="none")


def _cal(toy_trial, run_dir, *, resume=False, iterations=4):
    rig, real = toy_trial
    cfg = CalibrationConfig(iterations=iterations, rollout_budget=None, seed=1, identifiability=False,
                            final_identifiability=False, resume=resume)
    return run_calibration(rig, real, make_proposer("random"), cfg, run_dir)


def _edit_lines(jl: Path, fn) -> bytes:
    lines = jl.read_text().splitlines()
    jl.write_text("\n".join(fn(lines)) + "\n")
    return jl.read_bytes()


@pytest.mark.parametrize("edit, msg", [
    (lambda ls: ls[:2] + [ls[1]] + ls[2:], r"line 3: iteration 2 where 3 was expected \(a duplicate"),
    (lambda ls: ls[:1] + ls[2:], r"line 2: iteration 3 where 2 was expected \(iterations are missing\)"),
    (lambda ls: [ls[0].replace('"error_px": ', '"error_px": NaN, "was": ', 1)] + ls[1:],
     r"line 1: non-finite number NaN"),
    (lambda ls: [ls[0], ls[1].replace('"rollouts_used": ', '"rollouts_used": 5, "was": ', 1)] + ls[2:],
     r"line 2: rollouts_total \d+ but the iterations so far used \d+ rollout"),
])
def test_resume_refuses_a_bad_sequence_with_the_line_number(tmp_path, toy_trial, edit, msg):
    run = tmp_path / "r"
    _cal(toy_trial, run)
    before = _edit_lines(run / "iterations.jsonl", edit)
    snap = _snapshot(run)
    with pytest.raises(CalibrationError, match=r"iterations\.jsonl " + msg + r".*nothing was changed"):
        _cal(toy_trial, run, resume=True, iterations=6)
    assert (run / "iterations.jsonl").read_bytes() == before and _snapshot(run) == snap
    with pytest.raises(CalibrationError, match=msg):  # the report's reader refuses it too
        load_history(run)


def test_valid_sequence_still_resumes(tmp_path, toy_trial):
    full = _cal(toy_trial, tmp_path / "full", iterations=6)
    _cal(toy_trial, tmp_path / "r", iterations=3)
    res = _cal(toy_trial, tmp_path / "r", resume=True, iterations=6)
    assert res.values == full.values and res.rollouts == full.rollouts
    assert [r.iteration for r in load_history(tmp_path / "r")] == list(range(7))


def test_cli_resume_with_the_same_settings_passes_the_checks(cli_run, capsys):
    """The CLI's early check sees the spec as the loop does (measurement nuisances such as latency added)."""
    cfg, out = cli_run
    capsys.readouterr()
    rc = main(["calibrate", str(cfg), "--out", str(out), "--seed", "0", "--quiet", "--resume", "--iterations", "3",
               "--no-report"])
    assert rc == 0, capsys.readouterr().err
    recs = [json.loads(x) for x in (out / "iterations.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in recs] == [1, 2, 3]


def test_resume_with_another_explicit_truth_leaves_real_trial_json_alone(tmp_path, capsys):
    """The resume signature has the seed, not an explicit truth: real_trial.json itself is compared."""
    base = {"rig": TOY, "proposer": "random",
            "calibration": {"iterations": 1, "rollout_budget": None, "identifiability": False,
                            "final_identifiability": False}}
    cfg = tmp_path / "cfg.yaml"
    out = tmp_path / "run"
    truth = {"stiffness": 0.6, "damping": 0.03, "gain": 0.3}
    cfg.write_text(yaml.safe_dump({**base, "real": {"sim2sim": {"truth": truth, "noise": "none"}}}))
    assert main(["calibrate", str(cfg), "--out", str(out), "--quiet", "--no-report"]) == 0
    before = _snapshot(out)
    cfg.write_text(yaml.safe_dump({**base, "real": {"sim2sim": {"truth": {**truth, "gain": 0.4}, "noise": "none"}}}))
    capsys.readouterr()
    rc = main(["calibrate", str(cfg), "--out", str(out), "--quiet", "--no-report", "--resume", "--iterations", "2"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "real_trial.json holds another hidden truth (differs in gain)" in err and "nothing was changed" in err
    assert _snapshot(out) == before


def test_a_budget_below_one_evaluation_is_refused_before_the_run_directory_is_written(tmp_path, capsys):
    """Regression: `calibrate --budget 1` on a two-excitation rig wrote OUT/real_trial.json and OUT/run.log, then
    refused; the budget is now one of check_run_dir's refusal checks."""
    out = tmp_path / "run"
    assert main(["calibrate", "--rig", TOY, "--budget", "1", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "rollout budget 1 cannot pay for one evaluation (2 rollouts)" in err and err.count("\n") == 1, err
    assert not out.exists()
