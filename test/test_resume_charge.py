"""The same rollout charge whether or not a run was interrupted (a nuisance-only evaluation is free
only when its physics point's rollouts were paid for, in both cases)."""

from __future__ import annotations

import json

import pytest

from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.rigs import load_rig
from vid2sid_ros.commands.calibrate import build_real


class _Kill(KeyboardInterrupt):
    pass


def _run(rd, *, stop_after=None, resume=False):
    rig = load_rig("toy")
    real = build_real(rig, {}, 0)

    def on_iteration(rec):
        if stop_after is not None and rec.iteration == stop_after:
            raise _Kill()

    return run_calibration(rig, real, make_proposer("reasoner"),
                           CalibrationConfig(iterations=10, rollout_budget=40, seed=0, resume=resume,
                                             nuisance={"latency": True}), rd, on_iteration=on_iteration)


def _charges(rd):
    return [(d["iteration"], d["rollouts_used"], d["extra"]["rollouts_total"])
            for d in map(json.loads, (rd / "iterations.jsonl").read_text().splitlines())]


@pytest.mark.parametrize("kill_at", [1, 2])
def test_resume_after_a_kill_charges_what_the_uninterrupted_run_charged(tmp_path, kill_at):
    whole = _run(tmp_path / "whole")
    with pytest.raises(_Kill):
        _run(tmp_path / "cut", stop_after=kill_at)
    resumed = _run(tmp_path / "cut", resume=True)
    assert _charges(tmp_path / "cut") == _charges(tmp_path / "whole")
    assert (resumed.rollouts, resumed.stopped, resumed.iterations) == (whole.rollouts, whole.stopped, whole.iterations)
    assert resumed.values == whole.values
