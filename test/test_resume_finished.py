"""A run that ended (converged, iterations done...) is not continued by a resume: nothing is appended
and its stop line stays; the CLI says in one line that the run is finished, exit 0."""

from __future__ import annotations

import pytest

from vid2sid_ros import cli
from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers.proposer import Proposal
from vid2sid_ros.sim.toy import make_rig

TRUTH = {"stiffness": 0.7, "damping": 0.01, "gain": 0.4}


class _ConvergesAtOnce:
    """Proposes a small move of the first free parameter and declares its (test) convergence."""

    name = "converges_at_once"

    def propose(self, context):
        free = context.parameters.free_names[0]
        return Proposal(values={free: float(context.current[free]) * 1.01}, rationale="one step",
                        confidence=0.5, converged=True)


def test_resuming_a_converged_run_appends_nothing(tmp_path):
    rig = make_rig()
    real = make_sim2sim_trial(rig, TRUTH, noise="none", seed=0)
    rd = tmp_path / "run"
    res = run_calibration(rig, real, _ConvergesAtOnce(), CalibrationConfig(iterations=4, rollout_budget=40, seed=0,
                                                                           identifiability=False,
                                                                           final_identifiability=False), rd)
    assert res.stopped == "converged" and res.iterations == 1
    lines = (rd / "iterations.jsonl").read_bytes()
    for _ in range(2):
        again = run_calibration(rig, real, _ConvergesAtOnce(),
                                CalibrationConfig(iterations=4, rollout_budget=40, seed=0, identifiability=False,
                                                  final_identifiability=False, resume=True), rd)
        assert again.stopped == "converged" and again.iterations == 1  # was 2, then 3 ("converged after 2 of 4")
        assert (rd / "iterations.jsonl").read_bytes() == lines
        assert again.error_px == pytest.approx(res.error_px)


def test_cli_resume_of_a_finished_run_says_so_and_changes_nothing(tmp_path, capsys):
    rd = tmp_path / "run"
    args = ["calibrate", "--rig", "toy", "--iterations", "1", "--out", str(rd), "--quiet", "--no-report"]
    assert cli.main(args) == 0
    before = {p.name: p.read_bytes() for p in rd.iterdir() if p.is_file()}
    capsys.readouterr()
    for _ in range(2):
        rc = cli.main(args + ["--resume"])
        out, err = capsys.readouterr()
        assert rc == 0
        lines = [x for x in (out + err).splitlines() if x.strip()]
        assert len(lines) == 1 and "is finished (iterations done after 1 of 1 iterations)" in lines[0]
        assert str(rd / "result.yaml") in lines[0]
        after = {p.name: p.read_bytes() for p in rd.iterdir() if p.is_file()}
        assert after == before  # result.json was rewritten before (its wall time changed)
