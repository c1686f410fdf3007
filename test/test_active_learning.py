"""Experiment design and active learning: the criterion on a linear model, limits, a sim2sim run that adds and resumes a trial."""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from vid2sid_ros.calibration.design import (ExcitationLimits, ExcitationRefused, information_criterion,
                                            profile_from_change, validate_profile)

REPO = Path(__file__).resolve().parents[1]


def _limits(amp=0.3, band=(0.1, 4.0), dur=4.0):
    return ExcitationLimits((amp,), ("tau",), band, dur, 30.0)


def test_d_optimal_criterion_on_a_linear_model_has_the_known_answer():
    """y = a·x1 + b·x2 with training rows x1 = x2 (a and b trade off exactly): the candidate that adds the
    orthogonal row wins; log det equals the closed form; D_s with b nuisance is the Schur complement."""
    J0 = np.array([[1.0, 1.0], [2.0, 2.0]])
    parallel = np.array([[1.0, 1.0]])
    orthogonal = np.array([[1.0, -1.0]])
    F0 = J0.T @ J0
    assert information_criterion(F0, [0, 1]) == -math.inf  # singular: nothing separates a from b
    d_par = information_criterion(F0 + parallel.T @ parallel, [0, 1])
    d_ort = information_criterion(F0 + orthogonal.T @ orthogonal, [0, 1])
    assert d_par == -math.inf and d_ort > d_par
    F = F0 + orthogonal.T @ orthogonal  # [[6, 4], [4, 6]]: det 20
    assert d_ort == pytest.approx(math.log(20.0))
    # D_s for a alone, b estimated too: F_aa - F_ab^2 / F_bb = 6 - 16/6
    assert information_criterion(F, [0]) == pytest.approx(math.log(6 - 16 / 6))
    # invariance to scaling a parameter: log det shifts by a constant, the ranking stays
    S = np.diag([10.0, 1.0])
    assert information_criterion(S @ F @ S, [0, 1]) - d_ort == pytest.approx(2 * math.log(10.0))


def test_out_of_limit_amplitude_and_band_are_clipped_and_recorded():
    prof, exc, notes = validate_profile({"kind": "chirp", "amplitude": 2.0, "f0": 0.01, "f1": 30.0,
                                         "duration": 3.0, "rate": 30.0}, _limits())
    assert prof["amplitude"] == pytest.approx(0.3) and prof["f0"] == 0.1 and prof["f1"] == 4.0
    assert np.max(np.abs(exc.values)) <= 0.3 + 1e-12
    assert any("amplitude 2 " in n and "clipped to 0.3" in n for n in notes)
    assert any("f1 30 Hz clipped to 4 Hz" in n for n in notes)


@pytest.mark.parametrize("cfg, why", [
    ({"kind": "chirp", "amplitude": 0.1, "f0": 5.0, "f1": 9.0, "duration": 2.0}, "empty after clipping"),
    ({"kind": "sine", "amplitude": 0.1, "frequency": 1.0, "duration": 60.0}, "at most 4 s"),
    ({"kind": "sine", "amplitude": 0.1, "duration": 2.0, "actuator": "elbow"}, "names actuator 'elbow'"),
    ({"kind": "teleport", "duration": 2.0}, "unknown excitation kind"),
    ({"kind": "step", "amplitude": 0.1, "offset": 0.5, "duration": 2.0}, "nothing left to excite"),
])
def test_requests_clipping_cannot_repair_are_refused_with_the_reason(cfg, why):
    with pytest.raises(ExcitationRefused, match=why):
        validate_profile(cfg, _limits())


def test_a_vlm_excitation_change_goes_through_the_same_validation():
    from vid2sid_ros.core.excitation import build_excitation

    base = build_excitation({"kind": "sine", "amplitude": 0.03, "frequency": 0.1, "duration": 4.0}, ("tau",))
    prof = profile_from_change({"amplitude_gain": 40.0, "frequency_low_hz": 0.5, "frequency_high_hz": 50.0},
                               base, _limits())
    out, exc, notes = validate_profile(prof, _limits())
    assert out["amplitude"] == pytest.approx(0.3) and out["f1"] == 4.0 and len(notes) == 2
    with pytest.raises(ExcitationRefused, match="finite number"):
        profile_from_change({"amplitude_gain": float("nan")}, base, _limits())


def test_limits_come_from_the_actuator_ctrlrange_and_the_config(tmp_path):
    sys.path.insert(0, str(REPO / "bench"))
    import bench_active_learning as bench

    rig = bench.load_hinge(tmp_path)
    twin = rig.make_twin()
    lim = ExcitationLimits.from_rig(twin, rig.excitations["train"], {})
    assert lim.amplitude == (1.0,) and lim.source["amplitude[u0]"] == "actuator ctrlrange"
    assert lim.frequency_hz[1] == pytest.approx(6.0)  # 15 Hz capped at a fifth of the 30 Hz rate
    lim = ExcitationLimits.from_rig(twin, rig.excitations["train"], {"max_amplitude": 0.2})
    assert lim.amplitude == (0.2,)
    with pytest.raises(ExcitationRefused, match="max_amplitude"):
        ExcitationLimits.from_rig(twin, rig.excitations["train"], {"max_amplitude": -1})


def test_parse_active_learning_refuses_bad_settings_in_one_line():
    from vid2sid_ros.calibration.active import parse_active_learning
    from vid2sid_ros.calibration.loop import CalibrationError

    assert parse_active_learning(None).enabled is False and parse_active_learning(True).enabled is True
    assert parse_active_learning({"max_trials": 2}).max_trials == 2
    for bad, key in (({"max_trials": 0}, "max_trials"), ({"criterion": "e"}, "criterion"),
                     ({"enabled": "yes"}, "enabled"), ({"colour": 1}, "unknown key")):
        with pytest.raises(CalibrationError, match=key):
            parse_active_learning(bad)


def test_sim2sim_active_learning_adds_a_designed_trial_persists_it_and_resumes(tmp_path):
    """The hinge's slow sine hides gain vs stiffness (the warning fires); one designed trial is run by the
    stand-in, saved with its record the moment it completes, clears the warning and lowers the parameter
    error; a resumed run loads the trial instead of running the stand-in again."""
    sys.path.insert(0, str(REPO / "bench"))
    import bench_active_learning as bench
    from vid2sid_ros.benchmark.sim2sim import sim2sim_stand_in
    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
    from vid2sid_ros.calibration.active import parse_active_learning, run_active_calibration
    from vid2sid_ros.calibration.loop import CalibrationConfig
    from vid2sid_ros.calibration.proposers import make_proposer

    rig = bench.load_hinge(tmp_path)
    truth = draw_ground_truth(rig.parameters, 0)
    real = make_sim2sim_trial(rig, truth, seed=0, noise="keypoint", keypoint_sigma_px=0.5)
    cfg = CalibrationConfig(iterations=6, rollout_budget=100, seed=0, diagnosis=False,
                            nuisance=dict(rig.nuisance or {}))
    al = parse_active_learning({"after_iteration": 2, "max_amplitude": 0.3, "frequency_hz": [0.1, 4.0]})
    calls = []
    inner = sim2sim_stand_in(rig, truth, seed=0, noise="keypoint", keypoint_sigma_px=0.5)

    def stand_in(exc):
        calls.append(exc.name)
        return inner(exc)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        off = run_active_calibration(rig, real, lambda: make_proposer("least-squares"), cfg,
                                     parse_active_learning(False), tmp_path / "off")
        on = run_active_calibration(rig, real, lambda: make_proposer("least-squares"), cfg, al, tmp_path / "on",
                                    stand_in=stand_in)
    assert len(calls) == 1 and on.robot_trials == 1 and len(on.real.train) == 2
    assert on.warning_before is not None and on.warning_after is None
    assert 0 < on.design_rollouts < on.rollouts <= 100
    assert on.rollouts == sum(p.rollouts for p in on.phases) + on.design_rollouts
    err = {k: np.mean([abs(r.result.values[n] - truth[n]) / truth[n] for n in rig.parameters.free_names])
           for k, r in (("off", off), ("on", on))}
    assert err["on"] < 0.5 * err["off"], err
    rec = [json.loads(x) for x in (tmp_path / "on" / "active_learning.jsonl").read_text().splitlines()]
    assert len(rec) == 1 and rec[0]["applied"] and rec[0]["rationale"].count("condition number") == 2
    saved = (tmp_path / "on" / rec[0]["trial_file"])
    assert saved.is_file()
    summary = json.loads((tmp_path / "on" / "active_learning.json").read_text())
    assert summary["design_rollouts"] == on.design_rollouts and summary["robot_trials"] == 1
    assert [p["training_trials"] for p in summary["phases"]] == [1, 2]
    # resume: the recorded trial is loaded, the stand-in is not run again, the result is the same
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = run_active_calibration(rig, real, lambda: make_proposer("least-squares"),
                                       CalibrationConfig(**{**cfg.to_dict(), "resume": True}), al, tmp_path / "on",
                                       stand_in=stand_in)
    assert len(calls) == 1 and len(again.real.train) == 2
    assert again.result.values == pytest.approx(on.result.values)


def test_recorded_data_gets_a_recommendation_saved_in_the_run(tmp_path):
    sys.path.insert(0, str(REPO / "bench"))
    import bench_active_learning as bench
    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
    from vid2sid_ros.calibration.active import parse_active_learning, run_active_calibration
    from vid2sid_ros.calibration.loop import CalibrationConfig
    from vid2sid_ros.calibration.proposers import make_proposer
    from vid2sid_ros.core.excitation import build_excitation

    rig = bench.load_hinge(tmp_path)
    real = make_sim2sim_trial(rig, draw_ground_truth(rig.parameters, 1), seed=1, noise="keypoint")
    cfg = CalibrationConfig(iterations=2, rollout_budget=80, seed=0, diagnosis=False,
                            nuisance=dict(rig.nuisance or {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_active_calibration(rig, real, lambda: make_proposer("least-squares"), cfg,
                                     parse_active_learning({"max_amplitude": 0.3}), tmp_path / "run")
    assert res.robot_trials == 0 and len(res.real.train) == 1 and not res.designs[0]["applied"]
    csv = tmp_path / "run" / "designed_excitation.csv"
    exc = build_excitation({"kind": "csv", "path": str(csv)})
    assert exc.rate == pytest.approx(30.0) and np.max(np.abs(exc.values)) <= 0.3 + 1e-9
    block = (tmp_path / "run" / "designed_trial.yaml").read_text()
    assert "excitation: {" in block and "condition number" in block


class _Asker:
    """A stand-in for a VLM: keeps the current values and asks for an excitation change."""

    name = "asker"

    def __init__(self, change):
        self.change = change

    def propose(self, ctx):
        from vid2sid_ros.calibration.proposers.proposer import Proposal

        return Proposal({n: ctx.current[n] for n in ctx.parameters.free_names}, "the motion is too small to see",
                        0.3, excitation_change=dict(self.change))


def _hinge_run(tmp_path, change, label, *, stand_in_calls):
    sys.path.insert(0, str(REPO / "bench"))
    import bench_active_learning as bench
    from vid2sid_ros.benchmark.sim2sim import sim2sim_stand_in
    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
    from vid2sid_ros.calibration.active import parse_active_learning, run_active_calibration
    from vid2sid_ros.calibration.loop import CalibrationConfig

    rig = bench.load_hinge(tmp_path)
    truth = draw_ground_truth(rig.parameters, 2)
    real = make_sim2sim_trial(rig, truth, seed=2, noise="keypoint")
    inner = sim2sim_stand_in(rig, truth, seed=2, noise="keypoint")

    def stand_in(exc):
        stand_in_calls.append(exc)
        return inner(exc)

    cfg = CalibrationConfig(iterations=2, rollout_budget=40, seed=0, diagnosis=False,
                            nuisance=dict(rig.nuisance or {}), identifiability=False)
    al = parse_active_learning({"after_iteration": 1, "trigger": "flagged", "max_amplitude": 0.3,
                                "frequency_hz": [0.1, 4.0], "design_budget": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_active_calibration(rig, real, lambda: _Asker(change), cfg, al, tmp_path / label, stand_in=stand_in)


def test_a_proposers_excitation_change_is_clipped_and_applied_through_the_same_path(tmp_path):
    calls = []
    res = _hinge_run(tmp_path, {"amplitude_gain": 100.0, "frequency_low_hz": 0.5, "frequency_high_hz": 60.0},
                     "clip", stand_in_calls=calls)
    assert len(calls) == 1 and res.robot_trials == 1 and len(res.real.train) == 2
    sent = calls[0]
    assert np.max(np.abs(sent.values)) <= 0.3 + 1e-12  # never beyond the limit, even asked 100x
    rec = res.designs[0]
    assert rec["applied"] and rec["criterion"] == "proposer_request" and rec["rollouts"] == 0
    assert "clipped to 0.3" in rec["rationale"] and "f1 60 Hz clipped to 4 Hz" in rec["rationale"]
    assert "asker at iteration 1" in rec["rationale"]


def test_a_proposers_excitation_change_that_cannot_be_repaired_is_refused_and_never_sent(tmp_path):
    calls = []
    res = _hinge_run(tmp_path, {"amplitude_gain": 1.0, "frequency_low_hz": 20.0, "frequency_high_hz": 30.0},
                     "refuse", stand_in_calls=calls)
    refused = [d for d in res.designs if d.get("source") == "proposer request"]
    assert refused and not refused[0]["applied"] and "empty after clipping" in refused[0]["reason"]
    assert all(np.max(np.abs(e.values)) <= 0.3 + 1e-12 for e in calls)  # only a D-optimal design, if any
    lines = (tmp_path / "refuse" / "active_learning.jsonl").read_text().splitlines()
    assert any("refused" in json.loads(x).get("reason", "") for x in lines)


def _hinge_yaml(tmp_path, **al):
    import yaml

    sys.path.insert(0, str(REPO / "bench"))
    import bench_active_learning as bench

    (tmp_path / "hinge.xml").write_text(bench.HINGE_XML)
    cfg = bench.hinge_config()
    cfg["real"] = {"sim2sim": {"noise": "keypoint"}}
    cfg["calibration"]["active_learning"] = {**cfg["calibration"]["active_learning"], **al}
    (tmp_path / "hinge.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path / "hinge.yaml"


def _cli(*argv):
    import subprocess

    return subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", *map(str, argv)], capture_output=True, text=True,
                          cwd=REPO, timeout=600)


def test_calibrate_active_learning_flag_saves_the_recommendation_and_names_it_in_one_line(tmp_path):
    """A rig config with the block switched off calibrates as before (the block is not a CalibrationConfig
    field); --active-learning turns it on: the designed trial is in the run and on the terminal."""
    cfg = _hinge_yaml(tmp_path, enabled=False)
    out = tmp_path / "run"
    p = _cli("calibrate", cfg, "--active-learning", "--proposer", "least-squares", "--budget", 20, "--iterations", 1,
             "--out", out, "--no-report", "-q")
    assert p.returncode == 0, p.stderr
    lines = [x for x in p.stdout.splitlines() if x.startswith("active learning:")]
    assert len(lines) == 1 and "designed_trial.yaml" in lines[0] and "condition number" in lines[0]
    res = json.loads((out / "result.json").read_text())
    assert res["designed_trial"]["applied"] is False and res["designed_trial"]["charged"] is False
    assert (out / "designed_excitation.csv").is_file()
    p = _cli("calibrate", cfg, "--proposer", "least-squares", "--budget", 20, "--iterations", 1,
             "--out", tmp_path / "plain", "--no-report", "-q")
    assert p.returncode == 0, p.stderr
    assert "active learning" not in p.stdout and not (tmp_path / "plain" / "designed_trial.yaml").exists()


def test_a_bad_active_learning_block_is_refused_in_one_line_naming_the_field(tmp_path):
    cfg = _hinge_yaml(tmp_path, max_trials=0)
    p = _cli("calibrate", cfg, "--proposer", "least-squares", "--out", tmp_path / "run", "-q")
    assert p.returncode == 2 and "calibration.active_learning.max_trials" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_benchmark_active_learning_charges_the_design_and_reuses_it(tmp_path):
    cfg = _hinge_yaml(tmp_path, after_iteration=1)
    args = ("benchmark", "sim2sim", "--rig", cfg, "--methods", "least-squares", "--seeds", 1, "--budget", 60,
            "--iterations", 3, "--noise", "keypoint", "--active-learning", "--out", tmp_path / "b", "--no-progress")
    p = _cli(*args)
    assert p.returncode == 0, p.stderr
    rec = json.loads((tmp_path / "b" / "results.json").read_text())["per_seed"][0]["methods"]["least-squares"]
    al = rec["active_learning"]
    assert al["robot_trials"] == 1 and 0 < al["design_rollouts"] <= rec["rollouts"] <= 60
    md = (tmp_path / "b" / "results.md").read_text()
    assert "Active learning (designed trials run by the stand-in" in md
    assert f"| least-squares | {al['design_rollouts']} | 1 | " in md
    p = _cli(*args)  # rerun: the phases are reused, the stand-in does not run the designed trial again
    assert p.returncode == 0, p.stderr
    lines = (tmp_path / "b" / "seed_0" / "least-squares" / "active_learning.jsonl").read_text().splitlines()
    assert len(lines) == 1



def _heavier_body_objective(tmp_path):
    """``(objective, limits)``: damping free, the real side's body 1.2x heavier than the twin's (a mass
    error the diagnosis ties with the armature), on a slow sine, within an amplitude of 0.3."""
    from test_diagnosis_causes import _excitations, _real, _spec, _twin

    from vid2sid_ros.calibration.objective import TrialObjective

    params = _spec(free=("damping",))
    excs = _excitations("slow_sine")
    reals = _real(_twin(tmp_path, params), excs, {"damping": 0.02, "stiffness": 0.5, "armature": 0.0005},
                  body_scale=1.2)
    return (TrialObjective(_twin(tmp_path, params), excs, reals, params),
            ExcitationLimits((0.3,), ("m",), (0.1, 4.0), 4.0, 30.0))

def test_separation_design_says_when_no_trial_can_tell_link_inertia_from_armature(tmp_path):
    """About a single hinge without gravity a 20 % heavier link and a larger armature are the same effect: the
    diagnosis reports them indistinguishable, and the separation criterion finds no candidate that separates
    them by 3 σ — the rationale says the model cannot tell them apart (no trial is promised to)."""

    from vid2sid_ros.calibration.design import design_separating_excitation, separation

    obj, lim = _heavier_body_objective(tmp_path)
    d = design_separating_excitation(obj, {"damping": 0.02}, lim)
    assert d is not None and d.criterion == "separation"
    assert "frozen parameter 'armature'" in d.flagged and "mass of body 'link' (mass and inertia together)" in d.flagged
    scores = [c["score"] for c in d.candidates]
    assert max(scores) < 3.0  # chosen by the criterion, and honest that it is not enough
    # the chosen trial's closest pairs refitted to each other's prediction for real: closer still
    assert d.score_after <= max(scores) and any("refitted to each other's prediction" in n for n in d.notes)
    assert "cannot tell them apart" in d.rationale and d.rollouts > 0
    pair = next(p for c in d.candidates for p in c["pairs"]
                if {p[0], p[1]} == {"frozen parameter 'armature'", "mass of body 'link' (mass and inertia together)"})
    assert pair[2] < 3.0


def test_separation_of_identical_predictions_is_zero_and_of_a_scaled_difference_grows():
    """The pairwise distance after the linearised refit: identical predictions 0; a difference the free
    parameter's column can absorb 0; an orthogonal difference its norm over σ."""
    from types import SimpleNamespace

    from vid2sid_ros.calibration import design

    class Ctx:
        def __init__(self, preds, col):
            self.u0, self.sigma2, self.rollouts, self.params = np.array([0.5]), 4.0, 0, None
            self.preds, self.col = preds, col
            self.objective = SimpleNamespace(twin=SimpleNamespace(set_parameters=lambda v: None,
                                                                   rollout=lambda e: SimpleNamespace(diverged=False,
                                                                                                    trajectory=None)),
                                             measurement=SimpleNamespace(split=lambda v: (v, {})))

        def values_at(self, u):
            return {}

        def residual(self, parts, theta, u, objective=None):
            if not parts:
                return np.zeros(3) + (self.col * (u[0] - 0.5))
            return self.preds[parts[0]] + 0.0 * theta[0]

    def member(name):
        return SimpleNamespace(parts=[name], refit=SimpleNamespace(theta=[0.0], u=np.array([0.5])),
                               cause=SimpleNamespace(name=name))

    orig = design.TrialObjective
    design.TrialObjective = lambda *a, **k: None
    try:
        col = np.array([1.0, 0.0, 0.0])
        same = Ctx({"a": np.array([1.0, 2.0, 3.0]), "b": np.array([1.0, 2.0, 3.0])}, col)
        assert design.separation(same, [member("a"), member("b")], None)[0] == pytest.approx(0.0)
        absorbed = Ctx({"a": np.array([5.0, 0.0, 0.0]), "b": np.zeros(3)}, col)
        assert design.separation(absorbed, [member("a"), member("b")], None)[0] == pytest.approx(0.0, abs=1e-12)
        apart = Ctx({"a": np.array([0.0, 6.0, 8.0]), "b": np.zeros(3)}, col)
        assert design.separation(apart, [member("a"), member("b")], None)[0] == pytest.approx(10.0 / 2.0)
    finally:
        design.TrialObjective = orig


def test_an_asymmetric_ctrlrange_clips_every_sample_into_it():
    """A tendon that only pulls (ctrlrange [0, 1]): a chirp's negative half is clipped to 0, never sent."""
    lim = ExcitationLimits((1.0,), ("tendon",), (0.1, 4.0), 4.0, 30.0, command_range=((0.0, 1.0),))
    _, exc, notes = validate_profile({"kind": "chirp", "amplitude": 0.5, "f0": 0.5, "f1": 2.0, "duration": 2.0,
                                      "rate": 30.0}, lim)
    assert exc.values.min() == 0.0 and exc.values.max() <= 0.5
    assert any("clipped to the actuator limits tendon [0, 1]" in n for n in notes)


def test_candidates_fit_an_asymmetric_range_without_clipping():
    from vid2sid_ros.calibration.design import candidate_profiles

    lim = ExcitationLimits((1.0,), ("tendon",), (0.1, 4.0), 3.0, 30.0, command_range=((0.0, 1.0),))
    for cfg in candidate_profiles(lim):
        _, exc, notes = validate_profile(cfg, lim)
        assert not notes, (cfg, notes)
        assert exc.values.min() >= 0.0 and exc.values.max() <= 1.0 and np.ptp(exc.values) > 0.4


def test_a_design_that_leaves_no_budget_to_fit_its_trial_is_not_run_and_the_budget_holds(tmp_path):
    sys.path.insert(0, str(REPO / "bench"))
    import bench_active_learning as bench
    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
    from vid2sid_ros.calibration.active import parse_active_learning, run_active_calibration
    from vid2sid_ros.calibration.loop import CalibrationConfig
    from vid2sid_ros.calibration.proposers import make_proposer

    rig = bench.load_hinge(tmp_path)
    truth = draw_ground_truth(rig.parameters, 0)
    real = make_sim2sim_trial(rig, truth, seed=0, noise="keypoint")
    calls = []
    cfg = CalibrationConfig(iterations=2, rollout_budget=50, seed=0, diagnosis=False,
                            nuisance=dict(rig.nuisance or {}))
    al = parse_active_learning({"after_iteration": 1, "max_amplitude": 0.3, "design_budget": 10_000})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_active_calibration(rig, real, lambda: make_proposer("least-squares"), cfg, al, tmp_path / "run",
                                     stand_in=lambda e: calls.append(e))
    assert res.rollouts <= 50 and res.design_rollouts > 0
    assert not calls and res.robot_trials == 0 and len(res.real.train) == 1
    assert "designed but not run" in res.designs[-1]["reason"]


def test_with_nothing_flagged_the_rest_of_the_budget_is_spent_on_the_same_data(tmp_path):
    """Regression: with active learning on and nothing to design, the run stopped after the first phase's share of
    the budget (the finger's reasoner: 24 of 60 rollouts, 3.8 % error against 0.7 % without active learning)."""
    sys.path.insert(0, str(REPO / "bench"))
    import bench_active_learning as bench
    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
    from vid2sid_ros.calibration.active import parse_active_learning, run_active_calibration
    from vid2sid_ros.calibration.loop import CalibrationConfig
    from vid2sid_ros.calibration.proposers import make_proposer
    from vid2sid_ros.rigs import load_rig

    (tmp_path / "hinge.xml").write_text(bench.HINGE_XML)
    cfg_doc = bench.hinge_config()
    cfg_doc["excitations"]["train"] = [{"kind": "step", "amplitude": 0.3, "t_step": 0.2, "t_release": 2.0,
                                        "duration": 4.0, "rate": 30.0}]  # well identified: no warning
    rig = load_rig(cfg_doc, source=(str(tmp_path / "hinge.yaml"), tmp_path))
    truth = draw_ground_truth(rig.parameters, 0)
    real = make_sim2sim_trial(rig, truth, seed=0, noise="keypoint")
    cfg = CalibrationConfig(iterations=6, rollout_budget=60, seed=0, diagnosis=False, stop_when_converged=False,
                            nuisance=dict(rig.nuisance or {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_active_calibration(rig, real, lambda: make_proposer("nelder-mead"), cfg,
                                     parse_active_learning({"after_iteration": 2}), tmp_path / "run",
                                     stand_in=lambda e: pytest.fail("nothing flagged: no trial may run"))
    assert res.warning_before is None and res.robot_trials == 0 and res.design_rollouts == 0
    assert "neither the identifiability check" in res.designs[0]["reason"]
    assert len(res.phases) == 2 and res.phases[0].rollouts <= 20 < res.rollouts <= 60
    assert sum(p.iterations for p in res.phases) == 6


def test_a_designed_candidate_outside_the_limits_is_clipped_or_refused_and_never_rolled_out(tmp_path):
    """The designer's own path: a candidate beyond the amplitude and band limits is clipped (the clip is in the
    design's notes) before any rollout, one it cannot repair is refused with the reason and never rolled out."""
    sys.path.insert(0, str(REPO / "bench"))
    import bench_active_learning as bench
    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
    from vid2sid_ros.calibration.design import design_excitation
    from vid2sid_ros.calibration.objective import TrialObjective

    rig = bench.load_hinge(tmp_path)
    truth = draw_ground_truth(rig.parameters, 0)
    real = make_sim2sim_trial(rig, truth, seed=0, noise="keypoint")
    twin = rig.make_twin()
    sent = []
    rollout = twin.rollout

    def spy(exc, *a, **k):
        sent.append(np.asarray(exc.values, float).copy())
        return rollout(exc, *a, **k)

    twin.rollout = spy
    obj = TrialObjective(twin, real.train_excitations, real.train, rig.parameters)
    limits = ExcitationLimits.from_rig(twin, real.train_excitations, {"max_amplitude": 0.3, "frequency_hz": [0.1, 4]})
    cands = [{"kind": "chirp", "amplitude": 5.0, "f0": 0.5, "f1": 40.0, "duration": 4.0, "rate": 30.0},
             {"kind": "sine", "amplitude": 0.2, "frequency": 1.0, "duration": 600.0, "rate": 30.0},
             {"kind": "chirp", "amplitude": 0.2, "f0": 20.0, "f1": 30.0, "duration": 4.0, "rate": 30.0}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = design_excitation(obj, truth, limits, candidates=cands)
    assert d.profile["amplitude"] == pytest.approx(0.3) and d.profile["f1"] == pytest.approx(4.0)
    assert np.max(np.abs(d.excitation.values)) <= 0.3 + 1e-12
    assert any("clipped to 0.3" in n for n in d.notes) and any("f1 40 Hz clipped to 4 Hz" in n for n in d.notes)
    refused = [n for n in d.notes if n.startswith("candidate refused")]
    assert len(refused) == 2 and any("at most 4 s" in n for n in refused) and any("empty after clipping" in n
                                                                                  for n in refused)
    assert len(d.candidates) == 1  # only the repaired candidate was evaluated
    assert sent and all(np.max(np.abs(v)) <= 1.0 + 1e-12 for v in sent)  # within ctrlrange
    assert all(v.shape[0] <= 4.0 * 30.0 + 2 for v in sent)  # nothing 600 s long ever rolled out


def test_a_separation_design_given_the_diagnosis_tied_causes_probes_only_those(tmp_path):
    """Regression: the design re-ran the whole diagnosis (every candidate cause) before a single candidate
    excitation; on the finger that took about 360 of its allowance of about 200 rollouts and the design failed
    ('no candidate excitation could be evaluated'), so no trial was ever run. Given the tied set it probes only
    those causes: the same members and choice, fewer rollouts."""

    from vid2sid_ros.calibration.design import design_separating_excitation

    obj, lim = _heavier_body_objective(tmp_path)
    full = design_separating_excitation(obj, {"damping": 0.02}, lim)
    tied = design_separating_excitation(obj, {"damping": 0.02}, lim, tied=full.flagged)
    assert sorted(tied.flagged) == sorted(full.flagged) and len(tied.flagged) >= 2
    assert tied.rollouts < full.rollouts
    assert tied.profile == full.profile


@pytest.mark.parametrize("bad,key", [({"max_amplitude": 0}, "max_amplitude"),
                                     ({"max_amplitude": -0.5}, "max_amplitude"),
                                     ({"max_amplitude": []}, "max_amplitude"),
                                     ({"frequency_hz": [5.0, 1.0]}, "frequency_hz"),
                                     ({"frequency_hz": [0, 0]}, "frequency_hz"), ({"frequency_hz": 3}, "frequency_hz"),
                                     ({"max_duration_s": 0}, "max_duration_s"),
                                     ({"max_duration_s": "4 s"}, "max_duration_s")])
def test_the_limit_keys_are_checked_when_the_block_is_read(bad, key):
    """A zero/negative amplitude, an inverted or zero band, a zero duration were read without a word and the
    design failed after the whole calibration budget was spent."""
    from vid2sid_ros.calibration.active import parse_active_learning
    from vid2sid_ros.calibration.loop import CalibrationError

    with pytest.raises(CalibrationError, match=rf"^src\.{key}: expected "):
        parse_active_learning({"trigger": "always", **bad}, source="src")


@pytest.mark.parametrize("al,says", [
    ({"max_amplitude": [0.1, 0.2, 0.3]}, "max_amplitude: expected a number > 0 or a list of 1 number > 0 "
                                         "(one per actuator: tau), got [0.1, 0.2, 0.3]"),
    ({"max_duration_s": 0.001}, "max_duration_s: expected at least 0.333333 s (10 command steps at 30 Hz)"),
    ({"frequency_hz": [7.0, 9.0]}, "frequency_hz: expected a low frequency below 6 Hz"),
])
def test_limits_that_do_not_fit_the_rig_are_refused_before_the_run(tmp_path, al, says):
    """The list's length against the model's actuators (named as the model names them, not u0), the duration
    against the command rate: exit 2 in one line, no run directory (was: exit 0 after the whole budget)."""
    cfg = _hinge_yaml(tmp_path, **al)
    p = _cli("calibrate", cfg, "--active-learning", "--proposer", "least-squares", "--budget", 20, "--iterations", 1,
             "--out", tmp_path / "run", "--no-report", "-q")
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and says in p.stderr, p.stderr
    assert "u0" not in p.stderr and not (tmp_path / "run").exists()


def test_a_design_that_fails_after_the_run_is_a_missing_artefact_exit_3(tmp_path, monkeypatch, capsys):
    """--active-learning promises designed_trial.yaml: a design that fails says so, result.yaml says
    artefacts_missing and the exit code is 3 (was: one stderr line and exit 0)."""
    import yaml

    import vid2sid_ros.calibration.active as active
    from vid2sid_ros.cli import main

    def refuse(*a, **k):
        raise ExcitationRefused("no candidate fits the limits")

    monkeypatch.setattr(active, "recommend_trial", refuse)
    cfg = _hinge_yaml(tmp_path, enabled=False)
    out = tmp_path / "run"
    rc = main(["calibrate", str(cfg), "--active-learning", "--proposer", "least-squares", "--budget", "20",
               "--iterations", "1", "--out", str(out), "--no-report", "-q"])
    err = capsys.readouterr().err
    assert rc == 3, err
    assert "active learning: no trial designed: no candidate fits the limits" in err
    doc = yaml.safe_load((out / "result.yaml").read_text())
    assert doc["calibration"]["status"] == "artefacts_missing"
    assert doc["calibration"]["artefacts_missing"][-1]["file"] == "designed_trial.yaml"
    assert not (out / "designed_trial.yaml").exists()


def test_every_candidate_is_named_as_a_rig_config_accepts():
    """Designed names held '.' and '/' ('designed_step_0.6_at_0.2_s', a multisine's '0.1/0.55/1'): a
    designed trial pasted into the rig config's trials was refused (letters, digits, _ and - only)."""
    from vid2sid_ros.calibration.design import candidate_profiles, trial_name
    from vid2sid_ros.rigs.loader import _NAME_RE

    names = [c["name"] for c in candidate_profiles(_limits(amp=0.6, band=(0.1, 4.0), dur=5.6))]
    assert len(set(names)) == len(names) and {n.split("_")[1] for n in names} == {"chirp", "step", "multisine"}
    assert all(_NAME_RE.match(n) for n in names), names
    assert "designed_step_0p6_at_0p2_s" in names
    assert trial_name("designed multisine 0.1/0.55/1 Hz amplitude 0.3") == "designed_multisine_0p1_0p55_1_Hz_amplitude_0p3"
    assert trial_name("designed chirp 0.1–4 Hz") == "designed_chirp_0p1-4_Hz"


def test_the_designed_trial_proposes_the_rigs_source_kind_and_rounds_the_profile():
    import yaml

    from vid2sid_ros.calibration.active import _trial_block
    from vid2sid_ros.calibration.design import DesignResult
    from vid2sid_ros.core.rig import TrialSpec

    class _Rig:
        trials = [TrialSpec("stand_in", {"sim2sim": {"seed": 0}}),
                  TrialSpec("log", {"joint_csv": {"path": "/data/d.csv", "joints": {"shoulder": "shoulder"},
                                                  "units": "rad", "time_column": None, "noise": 0.002}})]

    class _Design:
        profile = {"name": "designed", "kind": "step", "t_step": 0.2, "duration": 3.49996500001,
                   "rate": 30.00030000299998, "amplitude": 0.1}
        rationale = "why"

    design: DesignResult = _Design()  # type: ignore[assignment]
    entry = yaml.safe_load(_trial_block(design, "designed_excitation.csv", _Rig()))[0]
    assert entry["source"] == {"joint_csv": {"path": "PATH/TO/RECORDING", "joints": {"shoulder": "shoulder"},
                                             "units": "rad", "noise": 0.002}}
    assert entry["excitation"] == {"kind": "step", "t_step": 0.2, "duration": 3.499965, "rate": 30.0003,
                                   "amplitude": 0.1}
    assert yaml.safe_load(_trial_block(design, "x.csv"))[0]["source"] == {"video": "PATH/TO/RECORDING"}
