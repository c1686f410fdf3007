"""The command an unconverged run prints to go on really continues it.

Was: a pan-tilt head (two position servos, joint_csv trials) stopped at its rollout budget short of its
optimum; the summary said "to go on ..., in a new run directory" and printed ``calibrate ... --iterations 6
--budget 12 --out run_more``: a fresh run from the nominal values that redid every finished iteration
(``--resume`` refused a larger budget, and refused to continue a run that had ended at its budget). Now the
printed command resumes the same run directory with larger limits, keeps the finished iterations and goes on
from the point the run had reached; a stalled run short of its optimum is told to start a new run at the
optimum the residual diagnosis found (``--start``).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers.pan_tilt import TRUTH, write_rig  # noqa: E402
from vid2sid_ros.cli import main  # noqa: E402
from vid2sid_ros.calibration.proposers import reasoner  # noqa: E402


def _go_on_command(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    (i,) = [k for k, ln in enumerate(lines) if ln.startswith("to go on")]
    while not (lines[i].startswith("  ") and lines[i][2] != " "):  # the advice wraps (4 spaces); the command
        i += 1  # is on a line of its own (2 spaces)
    return shlex.split(lines[i])


def _records(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "iterations.jsonl").read_text().splitlines()]


@pytest.fixture
def seen(monkeypatch):
    """``(iteration, the point the reasoner is asked to move from)`` of every proposal made."""
    calls: list[tuple[int, dict]] = []
    original = reasoner.Reasoner.propose

    def propose(self, ctx):
        calls.append((ctx.iteration, dict(ctx.current)))
        return original(self, ctx)

    monkeypatch.setattr(reasoner.Reasoner, "propose", propose)
    return calls


def test_a_budget_stopped_run_is_continued_by_the_printed_command(tmp_path, capsys, monkeypatch, seen):
    monkeypatch.chdir(tmp_path)
    write_rig(tmp_path)
    assert main(["calibrate", "rig.yaml", "--budget", "6", "--iterations", "3", "--out", "run", "--no-report",
                 "-q"]) == 0
    first = json.loads((tmp_path / "run" / "result.json").read_text())
    assert first["stopped"] == "iterations done" and first["rollouts"] == 6  # at both limits, still improving
    argv = _go_on_command(capsys.readouterr().out)
    assert argv[argv.index("--out") + 1] == "run" and argv[-1] == "--resume"  # was: --out run_more, no --resume
    assert argv[argv.index("--budget") + 1] == "12" and argv[argv.index("--iterations") + 1] == "6"
    before = (tmp_path / "run" / "iterations.jsonl").read_bytes()
    last = _records(tmp_path / "run")[-1]
    seen.clear()
    assert main([*argv[3:], "--no-report", "-q"]) == 0  # runs as printed
    assert (tmp_path / "run" / "iterations.jsonl").read_bytes().startswith(before)  # nothing redone
    records = _records(tmp_path / "run")
    assert [r["iteration"] for r in records] == list(range(1, len(records) + 1)) and len(records) > 3
    # the first new iteration moves from the point the run had reached, not from the nominal values
    it, current = seen[0]
    assert it == 4 and current == pytest.approx(last["extra"]["current_after"], rel=0, abs=0)
    res = json.loads((tmp_path / "run" / "result.json").read_text())
    assert 6 < res["rollouts"] <= 12 and res["iterations"] == len(records)
    assert res["training_mae"] <= first["training_mae"]
    assert abs(res["values"]["pan_kp"] - TRUTH["pan_kp"]) < 0.05 * TRUTH["pan_kp"]
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["config"]["rollout_budget"] == 12 and meta["config"]["iterations"] == 6
    (ext,) = meta["extended"]
    assert ext["after_iteration"] == 3 and ext["old"] == {"iterations": 3, "rollout_budget": 6}


def test_a_run_ended_at_its_budget_goes_on_with_a_larger_one_and_never_with_a_smaller(tmp_path, capsys,
                                                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_rig(tmp_path)
    base = ["calibrate", "rig.yaml", "--out", "run", "--no-report", "-q"]
    assert main([*base, "--budget", "4", "--iterations", "8"]) == 0
    assert json.loads((tmp_path / "run" / "result.json").read_text())["stopped"] == "rollout budget exhausted"
    n = len(_records(tmp_path / "run"))
    capsys.readouterr()
    assert main([*base, "--budget", "4", "--iterations", "8", "--resume"]) == 0  # same budget: nothing to do
    assert "is finished (rollout budget exhausted" in capsys.readouterr().out
    assert main([*base, "--budget", "3", "--iterations", "8", "--resume"]) == 2  # a smaller budget: refused
    assert "'rollout_budget' differs from the interrupted run (4 vs 3); resume with the same budget or a larger " \
           "one" in capsys.readouterr().err
    assert len(_records(tmp_path / "run")) == n
    assert main([*base, "--budget", "8", "--iterations", "8", "--resume"]) == 0
    assert len(_records(tmp_path / "run")) > n
    assert 4 < json.loads((tmp_path / "run" / "result.json").read_text())["rollouts"] <= 8


def test_a_stalled_run_short_of_its_optimum_is_started_anew_there(tmp_path, capsys, monkeypatch):
    """A stalled run resumed would stall again at the same point: the command starts a new run at the values
    the residual diagnosis's refit found (every free parameter, nuisances included)."""
    from vid2sid_ros.commands.calibrate import add_arguments, go_on_commands
    from vid2sid_ros.calibration.loop import CalibrationConfig
    import argparse

    monkeypatch.chdir(tmp_path)
    write_rig(tmp_path)
    assert main(["calibrate", "rig.yaml", "--budget", "6", "--iterations", "3", "--out", "run", "--no-report",
                 "-q"]) == 0
    res_path = tmp_path / "run" / "result.json"
    res = json.loads(res_path.read_text())
    optimum = {"pan_kp": 3.0987654, "tilt_kp": 1.3987654, "latency": 0.0001234}
    res["stopped"] = "stalled: no step lowers the training MAE"
    res["residual_diagnosis"] = {"misspecified": False, "verdict": "not_at_optimum", "findings": [
        {"kind": "convergence", "severity": "note", "message": "Not at the optimum: ...",
         "evidence": {"values": optimum}}]}
    res_path.write_text(json.dumps(res))
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["rig.yaml", "--budget", "6", "--iterations", "3", "--out", "run"])
    cmds = go_on_commands(args, Path("run"), CalibrationConfig(iterations=3, rollout_budget=6))
    argv = shlex.split(cmds["stalled"])
    assert "--resume" not in argv and argv[argv.index("--out") + 1] == "run_restart"
    assert argv[argv.index("--start") + 1] == "pan_kp=3.09877,tilt_kp=1.39877,latency=0.0001234"
    from vid2sid_ros.report import run_summary_lines

    lines = run_summary_lines(tmp_path / "run", go_on=cmds, width=100)
    text = "\n".join(lines)
    assert "start a new run from the optimum the diagnosis found:" in text and f"  {cmds['stalled']}" in lines
    assert main([*argv[3:], "--no-report", "-q"]) == 0  # runs as printed
    (start,) = [json.loads((tmp_path / "run_restart" / "run.json").read_text())["initial"]["values"]]
    assert start == pytest.approx({"pan_kp": 3.09877, "tilt_kp": 1.39877, "latency": 0.0001234})
    assert go_on_commands(args, Path("run"), CalibrationConfig(iterations=3, rollout_budget=6))["stalled"] \
        .endswith("--out run_restart2")  # never into a run directory that exists


def test_start_values_on_the_command_line_are_checked():
    from vid2sid_ros.commands.calibrate import ConfigError, start_arg

    assert start_arg(["a=1,b=2.5e-3", "a=3"]) == {"a": 3.0, "b": 0.0025}
    for bad in ("a", "a=x", "=1", "a=nan", "a=1,,b=2"):
        with pytest.raises(ConfigError, match="--start: expected NAME=VALUE"):
            start_arg([bad])
