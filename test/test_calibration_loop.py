"""The calibration loop on the toy arm: budgets, records, resume, bad proposers, diverging rollouts."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace

import numpy as np
import pytest

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, CalibrationError, load_history, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.calibration.proposers.proposer import BudgetExhausted, Proposal
from vid2sid_ros.core.parameters import load_parameter_set
from vid2sid_ros.core.trial import RealTrial
from vid2sid_ros.sim.base import RolloutResult
from vid2sid_ros.sim.toy import ToyArmTwin, make_rig

TRUTH = {"stiffness": 0.62, "damping": 0.035, "gain": 0.21}
FAST = dict(identifiability=False, final_identifiability=False)


@pytest.fixture(scope="module")
def toy():
    rig = make_rig()
    return rig, make_sim2sim_trial(rig, TRUTH, seed=1, noise="keypoint", keypoint_sigma_px=0.3)


@pytest.mark.parametrize("method", ["reasoner", "nelder-mead"])
def test_reasoner_and_baseline_reduce_training_error(toy, method):
    rig, real = toy
    cfg = CalibrationConfig(iterations=6, rollout_budget=24, seed=3, **FAST)
    res = run_calibration(rig, real, make_proposer(method), cfg)
    assert res.rollouts <= 24
    assert res.initial_error_px > 3.0
    assert res.error_px < 0.5 * res.initial_error_px
    assert res.history[0].iteration == 0 and res.history[0].proposer == "initial"
    assert [r.iteration for r in res.history] == list(range(len(res.history)))
    assert res.holdout_mae_px is not None and res.holdout_mae_px < res.initial_error_px
    # the best-seen tracking: the result is the minimum over every evaluation recorded
    seen = [e["error_px"] for r in res.history for e in r.extra["evaluations"] if e["error_px"] is not None]
    assert res.error_px == pytest.approx(min(seen), rel=1e-12)


def test_reasoner_recovers_truth_on_toy(toy):
    rig, real = toy
    res = run_calibration(rig, real, make_proposer("reasoner"), CalibrationConfig(iterations=10, rollout_budget=40,
                                                                                  **FAST))
    for name, true in TRUTH.items():
        assert res.values[name] == pytest.approx(true, rel=0.05), name
    # every accepted move has a rationale naming a parameter with its unit
    moves = [r for r in res.history[1:] if r.rationale]
    assert moves and all(r.rationale for r in moves)
    assert any("N·m/rad" in r.rationale or "N·m·s/rad" in r.rationale for r in moves)


def _run(rig, real, method, run_dir, *, iterations, interrupt_at=None, resume=False, seed=2):
    proposer = make_proposer(method)
    if interrupt_at is not None:
        inner = proposer.propose

        def propose(ctx):
            if ctx.iteration == interrupt_at:
                raise KeyboardInterrupt  # what Ctrl-C does mid-run
            return inner(ctx)

        proposer.propose = propose
    cfg = CalibrationConfig(iterations=iterations, rollout_budget=30, seed=seed, resume=resume, **FAST)
    return run_calibration(rig, real, proposer, cfg, run_dir)


@pytest.mark.parametrize("method", ["reasoner", "cmaes"])
def test_resume_after_interruption_gives_the_same_result(toy, tmp_path, method):
    rig, real = toy
    full = _run(rig, real, method, tmp_path / "full", iterations=6)
    with pytest.raises(KeyboardInterrupt):
        _run(rig, real, method, tmp_path / "cut", iterations=6, interrupt_at=4)
    lines = (tmp_path / "cut" / "iterations.jsonl").read_text().splitlines()
    assert [json.loads(x)["iteration"] for x in lines] == [1, 2, 3]
    with open(tmp_path / "cut" / "iterations.jsonl", "a") as f:
        f.write('{"iteration": 4, "proposer": "rea')  # a line torn by a crash mid-write
    with pytest.raises(CalibrationError, match="resume"):
        _run(rig, real, method, tmp_path / "cut", iterations=6)  # refuses to overwrite without resume
    resumed = _run(rig, real, method, tmp_path / "cut", iterations=6, resume=True)
    assert resumed.values == full.values
    assert resumed.error_px == full.error_px
    assert resumed.rollouts == full.rollouts
    assert [r.values for r in resumed.history] == [r.values for r in full.history]
    assert [r.error_px for r in resumed.history] == [r.error_px for r in full.history]
    assert len(load_history(tmp_path / "cut")) == 7
    with pytest.raises(CalibrationError, match="seed"):
        _run(rig, real, method, tmp_path / "cut", iterations=6, resume=True, seed=5)


class _Scripted:
    """A proposer replaying fixed answers (or exceptions)."""

    name = "scripted"

    def __init__(self, answers):
        self.answers = list(answers)

    def propose(self, ctx):
        a = self.answers.pop(0)
        if isinstance(a, BaseException):
            raise a
        return a


def test_bad_proposals_are_repaired_recorded_and_the_loop_continues(toy, tmp_path):
    rig, real = toy
    answers = [
        Proposal(values={"stiffness": float("nan"), "gain": 0.25}, rationale="nan", confidence=0.4),
        Proposal(values={"stiffness": 9.0, "damping": -1.0}, rationale="out of bounds", confidence=1.7),
        Proposal(values={"gain": 0.22}, rationale="missing the others"),
        RuntimeError("model replied gibberish"),
        Proposal(values={"bogus": 1.0, "inertia": 0.02, "stiffness": 0.5}, rationale="unknown + frozen"),
        "not a proposal",
    ]
    res = run_calibration(rig, real, _Scripted(answers), CalibrationConfig(iterations=6, rollout_budget=None, **FAST),
                          tmp_path)
    recs = [json.loads(x) for x in (tmp_path / "iterations.jsonl").read_text().splitlines()]
    assert len(recs) == 6 and len(res.history) == 7
    r1, r2, r3, r4, r5, r6 = recs
    assert any("'stiffness': non-finite value nan rejected" in n for n in r1["notes"])
    assert r1["values"]["stiffness"] == rig.parameters["stiffness"].nominal and r1["values"]["gain"] == 0.25
    assert r2["values"]["stiffness"] == 2.0 and r2["values"]["damping"] == 0.002
    assert any("outside [0.1, 2], clamped to 2" in n for n in r2["notes"])
    assert any("confidence" in n for n in r2["notes"]) and r2["confidence"] == 1.0
    assert any("no value for stiffness, damping, latency: kept current" in n for n in r3["notes"])
    assert r3["values"]["stiffness"] == 2.0 and r3["values"]["gain"] == 0.22
    assert any("raised RuntimeError: model replied gibberish" in n for n in r4["notes"])
    assert r4["values"] == r3["values"] and r4["rollouts_used"] == 0  # unchanged point: not paid twice
    assert any("unknown parameter 'bogus' ignored" in n for n in r5["notes"])
    assert any("'inertia' is frozen" in n for n in r5["notes"]) and r5["values"]["inertia"] == 0.01
    assert any("not a Proposal" in n for n in r6["notes"])
    assert all(math.isfinite(r["error_px"]) for r in recs)


def test_fallback_proposer_takes_over_when_the_main_one_raises(toy):
    rig, real = toy
    res = run_calibration(rig, real, _Scripted([RuntimeError("quota")] * 2), CalibrationConfig(
        iterations=2, rollout_budget=30, **FAST), fallback=make_proposer("reasoner"))
    assert [r.proposer for r in res.history[1:]] == ["reasoner", "reasoner"]
    assert all(any("fallback 'reasoner' used" in n for n in r.notes) for r in res.history[1:])
    assert res.error_px < res.initial_error_px


class _Fragile(ToyArmTwin):
    """Diverges for stiff springs; raises for very high gain."""

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


def test_diverging_rollout_is_a_failed_evaluation_not_a_crash(toy, tmp_path):
    rig, real = toy
    twin = _Fragile(rig.parameters)
    answers = [Proposal(values={"stiffness": 1.8}, rationale="too stiff"),
               Proposal(values={"gain": 0.95}, rationale="too strong"),
               Proposal(values={"stiffness": 0.6}, rationale="fine")]
    res = run_calibration(twin, real, _Scripted(answers), CalibrationConfig(iterations=3, rollout_budget=None, **FAST),
                          tmp_path)
    r1, r2, r3 = res.history[1:]
    assert r1.error_px == math.inf and r1.extra["failed"]
    assert any("diverged" in n for n in r1.notes) and r1.rollouts_used == 1  # stopped after the first trial
    assert r2.error_px == math.inf and any("FloatingPointError" in n for n in r2.notes)
    # the current point stayed at the last good one, so the third proposal is evaluated normally
    assert math.isfinite(r3.error_px) and r3.values["gain"] == rig.parameters["gain"].nominal
    assert math.isfinite(res.error_px)


def test_budget_is_enforced_and_evaluate_raises_when_spent(toy):
    rig, real = toy
    seen = {}

    class Greedy:
        name = "greedy"

        def propose(self, ctx):
            n = 0
            try:
                while True:
                    ctx.evaluate({"stiffness": 0.3 + 0.01 * n})
                    n += 1
            except BudgetExhausted as err:
                seen["msg"] = str(err)
                seen["n"] = n
            return Proposal(values={"stiffness": 0.35}, rationale="done")

    res = run_calibration(rig, real, Greedy(), CalibrationConfig(iterations=3, rollout_budget=11, **FAST))
    assert res.rollouts == 10 and seen["n"] == 4  # 2 (iteration 0) + 4 evaluations x 2 trials
    assert "rollout budget exhausted" in seen["msg"]
    assert res.stopped == "rollout budget exhausted" and res.iterations == 1


def test_result_files_are_loadable(toy, tmp_path):
    rig, real = toy
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a well-posed spec raises no identifiability warning
        res = run_calibration(rig, real, make_proposer("reasoner"),
                              CalibrationConfig(iterations=3, rollout_budget=20, seed=0), tmp_path)
    spec = load_parameter_set(tmp_path / "result.yaml")
    # result.yaml holds the physics (what the twin loads); the latency nuisance is reported apart
    assert spec.nominal() == pytest.approx({k: v for k, v in res.values.items() if k != "latency"})
    assert "latency" not in spec.names
    nuisance = spec.extra["nuisance"]["latency"]
    assert nuisance["value"] == pytest.approx(res.values["latency"]) and nuisance["unit"] == "s"
    assert set(spec.extra["calibration"]["uncertainty"]) == set(rig.parameters.free_names)
    assert all(v["std"] > 0 for v in spec.extra["calibration"]["uncertainty"].values())
    assert res.identifiability is not None and res.identifiability.identifiable
    assert res.final_identifiability is not None and res.diagnostic_rollouts > 0
    assert (tmp_path / "calibrated_model.yaml").is_file()
    twin = rig.make_twin()
    twin.set_parameters(spec.nominal())  # the twin accepts the result as is
    summary = json.loads((tmp_path / "result.json").read_text())
    assert summary["training_mae"] == pytest.approx(res.error_px) and summary["rollouts"] == res.rollouts
    trial_path = real.save(tmp_path / "real.json")
    again = RealTrial.load(trial_path)
    assert np.allclose(again.train[0].keypoints, real.train[0].keypoints) and again.truth == real.truth


def test_video_proposer_gets_side_by_side_videos(toy, tmp_path):
    rig, real = toy
    got = {}

    class Watcher:
        name = "watcher"
        wants_video = True

        def propose(self, ctx):
            got[ctx.iteration] = dict(ctx.videos)
            return Proposal(values={"stiffness": 0.5}, rationale="watched")

    run_calibration(rig, real, Watcher(), CalibrationConfig(iterations=1, rollout_budget=None, **FAST), tmp_path)
    videos = got[1]
    assert set(videos) >= {"real", "sim", "side_by_side"}
    from vid2sid_ros.io.video import read_video

    clip = read_video(videos["side_by_side"])
    assert clip.num_frames == real.train[0].num_frames and clip.width > rig.make_twin().camera.width
