"""`--resume` after a last iteration whose evaluation failed (diverged or raised).

The loop keeps its current point when an evaluation fails; a resumed run must restart
from that point (the record's ``current_after``), not from the last *proposed* values.
Before this test, every resume test interrupted after a successful iteration, where the
two coincide, so restarting from the proposed point went unnoticed (issue 12, item 17a).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers.proposer import Proposal
from vid2sid_ros.sim.base import RolloutResult
from vid2sid_ros.sim.toy import ToyArmTwin, make_rig

TRUTH = {"stiffness": 0.62, "damping": 0.035, "gain": 0.21}
FAST = dict(identifiability=False, final_identifiability=False)
GOOD = {"stiffness": 0.55, "damping": 0.03, "gain": 0.25}


class _Fragile(ToyArmTwin):
    """Diverges (NaN keypoints) for stiff springs; raises for a very high gain."""

    def rollout(self, excitation, *, render=False):
        if self.get_parameters()["gain"] > 0.9:
            raise FloatingPointError("solver blew up")
        res = super().rollout(excitation, render=render)
        if self.get_parameters()["stiffness"] > 1.5:
            kp = res.trajectory.keypoints.copy()
            kp[30:] = np.nan
            return RolloutResult(replace(res.trajectory, keypoints=kp, valid=np.isfinite(kp).all(axis=2)),
                                 None, True, "arm diverged at step 30")
        return res


class _ByIteration:
    """Answers by iteration number (so a resumed run gets the same answers); records what it saw."""

    name = "scripted"

    def __init__(self, answers, interrupt_at=None):
        self.answers = answers
        self.interrupt_at = interrupt_at
        self.seen: dict[int, tuple[dict, float, bool]] = {}

    def propose(self, ctx):
        if ctx.iteration == self.interrupt_at:
            raise KeyboardInterrupt  # Ctrl-C while the proposer works
        self.seen[ctx.iteration] = (dict(ctx.current), ctx.current_eval.error_px, ctx.current_eval.failed)
        return Proposal(values=dict(self.answers[ctx.iteration]), rationale=f"step {ctx.iteration}", confidence=0.5)


@pytest.fixture(scope="module")
def toy():
    rig = make_rig()
    return rig, make_sim2sim_trial(rig, TRUTH, seed=1, noise="keypoint", keypoint_sigma_px=0.3)


@pytest.mark.parametrize("bad", [{"stiffness": 1.8}, {"gain": 0.95}], ids=["diverged", "raised"])
def test_resume_restarts_from_the_point_the_loop_kept_not_the_failed_proposal(toy, tmp_path, bad):
    rig, real = toy
    answers = {1: GOOD, 2: {**GOOD, **bad}, 3: {"stiffness": 0.6}, 4: {"damping": 0.034}}
    cfg = CalibrationConfig(iterations=4, rollout_budget=None, seed=0, **FAST)

    full_p = _ByIteration(answers)
    full = run_calibration(_Fragile(rig.parameters), real, full_p, cfg, tmp_path / "full")
    assert full.history[2].extra["failed"] and full.history[2].error_px == math.inf  # the failure really happened
    kept, kept_error, kept_failed = full_p.seen[3]
    assert {n: kept[n] for n in GOOD} == pytest.approx(GOOD) and not kept_failed  # the loop kept iteration 1's point

    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        run_calibration(_Fragile(rig.parameters), real, _ByIteration(answers, interrupt_at=3), cfg, cut)
    resumed_p = _ByIteration(answers)
    resumed = run_calibration(_Fragile(rig.parameters), real, resumed_p, replace(cfg, resume=True), cut)

    assert sorted(resumed_p.seen) == [3, 4]  # iterations 1 and 2 were not re-run
    cur, cur_error, cur_failed = resumed_p.seen[3]
    assert cur == pytest.approx(kept), "resume restarted from the failed proposal, not the point the loop kept"
    assert not cur_failed and cur_error == pytest.approx(kept_error, rel=1e-12)
    assert resumed_p.seen[4][0] == pytest.approx(full_p.seen[4][0])
    assert [r.values for r in resumed.history] == [r.values for r in full.history]
    assert [r.error_px for r in resumed.history] == [r.error_px for r in full.history]
    assert resumed.values == full.values and resumed.error_px == full.error_px
