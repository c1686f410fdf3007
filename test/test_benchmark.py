"""sim2sim benchmark and the `vid2sid calibrate` / `vid2sid benchmark` commands (toy rig; one small finger run)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vid2sid_ros.benchmark.run import run_benchmark
from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, CalibrationError, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.cli import main
from vid2sid_ros.sim.toy import make_rig

TOY = "toy"


def test_ground_truth_is_seeded_and_inside_the_shrunken_box():
    params = make_rig().parameters
    draws = [draw_ground_truth(params, s) for s in range(20)]
    assert draw_ground_truth(params, 3) == draws[3]
    u = np.array([params.to_unit_vector(d) for d in draws])
    assert u.min() >= 0.15 and u.max() <= 0.85 and len({tuple(x) for x in u}) == 20
    assert all(d["inertia"] == params["inertia"].nominal for d in draws)  # frozen stays nominal


def test_benchmark_results_structure(tmp_path):
    res = run_benchmark(make_rig(), ["reasoner", "random"], 2, budget=16, iterations=3, noise="keypoint",
                        out=tmp_path, progress=False)
    assert res["noise"] == "keypoint" and res["seeds"] == [0, 1] and res["budget_rollouts"] == 16
    for m in ("reasoner", "random"):
        r = res["methods"][m]
        assert set(r) >= {"mean_rel_param_error", "holdout_mae", "train_mae", "unit", "rollouts", "iterations",
                          "wall_s", "per_parameter"}
        per_seed = [s["methods"][m] for s in res["per_seed"]]
        rel_all = [v for p in per_seed for v in p["rel_error"].values()]
        assert r["mean_rel_param_error"] == pytest.approx(np.mean(rel_all))
        assert r["rollouts"] <= 16
        truths = [s["truth"] for s in res["per_seed"]]
        for p, t in zip(per_seed, truths):
            assert p["rel_error"]["stiffness"] == pytest.approx(abs(p["values"]["stiffness"] - t["stiffness"])
                                                                / t["stiffness"])
    assert res["methods"]["reasoner"]["train_mae"] < res["methods"]["random"]["train_mae"]
    md = (tmp_path / "results.md").read_text()
    assert "| method | mean rel. param. error | holdout MAE (px) |" in md  # nothing bias-corrected: no column and "| reasoner |" in md
    assert json.loads((tmp_path / "results.json").read_text())["methods"].keys() == {"reasoner", "random"}
    assert (tmp_path / "seed_1" / "random" / "iterations.jsonl").is_file()


def test_benchmark_command(tmp_path, capsys):
    rc = main(["benchmark", "sim2sim", "--rig", TOY, "--methods", "reasoner,golden-cd", "--seeds", "1", "--budget",
               "10", "--iterations", "2", "--out", str(tmp_path), "--no-progress"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "| golden-cd |" in out and (tmp_path / "results.json").is_file()
    assert main(["benchmark", "sim2sim", "--rig", TOY, "--methods", "reasoner,annealing", "--out",
                 str(tmp_path / "x"), "--no-progress"]) == 2
    assert "unknown proposer 'annealing'; valid proposers: reasoner" in capsys.readouterr().err


def test_a_benchmark_whose_later_run_directory_is_unusable_is_refused_before_any_run(tmp_path, capsys):
    """Regression: seed 1's directory holding iterations without run.json was refused only after seed 0 had
    run and OUT/results.{json,md} were written; a bad nuisance block only after OUT was created."""
    out = tmp_path / "bench"
    (out / "seed_1" / "reasoner").mkdir(parents=True)
    (out / "seed_1" / "reasoner" / "iterations.jsonl").write_text('{"iteration": 1}\n')
    args = ["benchmark", "sim2sim", "--rig", TOY, "--methods", "reasoner", "--seeds", "2", "--budget", "10",
            "--iterations", "1", "--noise", "keypoint", "--no-progress"]
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'seed_1' / 'reasoner'}: run.json is missing but iterations.jsonl" in err, err
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        "seed_1", "seed_1/reasoner", "seed_1/reasoner/iterations.jsonl"]  # seed 0 never ran
    bad = tmp_path / "bad.yaml"
    bad.write_text("rig: toy\nnuisance: {latency: {bounds: [0.01, 0.02]}}\n")
    assert main([*args[:3], str(bad), *args[4:], "--out", str(tmp_path / "b")]) == 2
    assert "nuisance.latency.bounds: expected [lower, upper] with lower < 0 < upper" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_calibrate_command_with_config_and_resume(tmp_path, capsys):
    cfg = tmp_path / "cal.yaml"
    cfg.write_text(f"rig: '{TOY}'\nreal: {{sim2sim: {{seed: 1, noise: keypoint}}}}\n"
                   # latency off: with it free the reasoner has not converged after 2 iterations and spends the
                   # whole budget, leaving nothing for the resumed third iteration this test is about
                   "calibration: {iterations: 2, rollout_budget: 40, identifiability: false, "
                   "nuisance: {latency: false}}\n")
    out = tmp_path / "run"
    assert main(["calibrate", str(cfg), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "iter  1/2  error" in text and "iter  2/2  error" in text and "truth" in text
    assert (out / "result.yaml").is_file() and (out / "real_trial.json").is_file()
    assert main(["calibrate", str(cfg), "--out", str(out), "--iterations", "3"]) == 2  # exists, no --resume
    assert "--resume" in capsys.readouterr().err
    assert main(["calibrate", str(cfg), "--out", str(out), "--iterations", "3", "--resume", "--quiet"]) == 0
    assert len((out / "iterations.jsonl").read_text().splitlines()) == 3
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"rig: '{TOY}'\nproposr: random\n")
    assert main(["calibrate", str(bad)]) == 2
    assert "bad.yaml:proposr: unknown key (did you mean proposer?)" in capsys.readouterr().err


def test_finger_reasoner_small_budget(tmp_path):
    """One small finger run (no rendering): the reasoner improves and the calibrated MJCF is written."""
    pytest.importorskip("mujoco")
    from vid2sid_ros.core.parameters import load_parameter_set
    from vid2sid_ros.sim.registry import make_rig as make_registered

    rig = make_registered("finger")
    truth = draw_ground_truth(rig.parameters, 7)
    real = make_sim2sim_trial(rig, truth, seed=7, noise="keypoint", keypoint_sigma_px=0.2)
    res = run_calibration(rig, real, make_proposer("reasoner"),
                          CalibrationConfig(iterations=4, rollout_budget=24, identifiability=False,
                                            final_identifiability=False), tmp_path)
    assert res.rollouts <= 24 and res.error_px < 0.3 * res.initial_error_px
    assert (tmp_path / "calibrated_model.xml").read_text().lstrip().startswith("<mujoco")
    assert load_parameter_set(tmp_path / "result.yaml").nominal()["joint_stiffness"] == pytest.approx(
        res.values["joint_stiffness"])


def test_the_rig_configs_start_stage_runs_once_per_seed_and_is_charged_to_every_method(tmp_path):
    """A rig config's calibration.start (here a 3-point multistart) is the benchmark's start for every
    method (was: ignored, every method started at the nominal values whatever the config said)."""
    from vid2sid_ros.rigs import load_rig

    cfg = tmp_path / "toy_start.yaml"
    cfg.write_text("rig: toy\ncalibration: {start: {kind: multistart, points: 3}}\n")
    rig = load_rig(cfg)
    n_train = len(rig.excitations["train"])
    res = run_benchmark(rig, ["reasoner", "random"], [2], budget=24, iterations=3, noise="keypoint", out=None,
                        progress=False, diagnosis=False, nominal_identifiability=False)
    seed = res["per_seed"][0]
    assert seed["start"]["kind"] == "multistart" and seed["start"]["rollouts"] == 4 * n_train
    start_values = seed["start"]["values"]
    plain = run_benchmark(make_rig(), ["reasoner"], [2], budget=24, iterations=3, noise="keypoint", out=None,
                          progress=False, diagnosis=False, nominal_identifiability=False)["per_seed"][0]
    assert "start" not in plain
    nominal = make_rig().parameters
    assert any(start_values[n] != pytest.approx(nominal[n].nominal) for n in start_values)  # the start moved
    for m in ("reasoner", "random"):
        rec = seed["methods"][m]
        assert rec["start_rollouts"] == 4 * n_train and 4 * n_train < rec["rollouts"] <= 24   # charged, in budget
        # every method starts where the start stage ended, not at the nominal values
        assert rec["initial_train_mae"] == pytest.approx(seed["start"]["training_error"])
    assert seed["start"]["training_error"] < plain["methods"]["reasoner"]["initial_train_mae"]


def test_a_start_stage_the_benchmark_budget_cannot_pay_for_is_refused_before_any_work(tmp_path):
    from vid2sid_ros.rigs import load_rig

    cfg = tmp_path / "toy_start.yaml"
    cfg.write_text("rig: toy\ncalibration: {start: {kind: multistart, points: 30, guess: null}}\n")
    with pytest.raises(CalibrationError, match=r"toy_start.yaml:calibration.start.points: the multistart costs"):
        run_benchmark(load_rig(cfg), ["reasoner"], 1, budget=20, out=tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
    cfg.write_text("rig: toy\ncalibration: {start: {stiffness: 2.0}}\n")
    with pytest.raises(CalibrationError, match=r"start values \(stiffness\) are not used by the sim2sim benchmark"):
        run_benchmark(load_rig(cfg), ["reasoner"], 1, budget=20, out=tmp_path / "out", progress=False)


def test_results_tables_name_the_measurement_unit_and_read_older_px_keys():
    """The tables said "holdout MAE (px)" whatever the trials measured; a benchmark of mocap trials
    (m) is shown in mm, and results of earlier versions (``*_mae_px``, no unit) say the unit is unknown."""
    from vid2sid_ros.benchmark.run import format_results_markdown

    base = {"rig": "rod", "free_parameters": ["k"], "seeds": [0], "budget_rollouts": 8, "iterations": 2,
            "noise": "none", "protocol": "p", "per_seed": [{"seed": 0, "methods": {}}]}
    row = {"mean_rel_param_error": 0.1, "per_parameter": {"k": 0.1}, "rollouts": 8, "iterations": 2, "wall_s": 1.0}
    md = format_results_markdown({**base, "methods": {"reasoner": {**row, "holdout_mae": 0.0021, "train_mae": 0.0012,
                                                                   "unit": "m", "holdout_unit": "m"}}})
    assert "holdout MAE (mm) | train MAE (mm)" in md and "| 2.1 | 1.2 |" in md and "(px)" not in md
    old = format_results_markdown({**base, "methods": {"reasoner": {**row, "holdout_mae_px": 2.5,
                                                                    "train_mae_px": 1.5}}})
    assert "holdout MAE (unit?) | train MAE (unit?)" in old and "| 2.5 | 1.5 |" in old


def test_a_bias_corrected_cell_keeps_the_methods_own_point_error_beside_it():
    """Was: a benchmark cell scored only the values after the tracker-bias correction, which spends diagnostic
    rollouts the budget does not charge and so finishes an unfinished method's fit; the method's own point at the
    budget was lost."""
    from types import SimpleNamespace

    from vid2sid_ros.benchmark.sweep import _own_point_error

    truth = {"a": 2.0, "b": 4.0}
    moved = SimpleNamespace(bias_correction={"applied": True, "before": {"a": 3.0, "b": 4.4, "latency": 0.0}})
    out = _own_point_error(moved, truth, ["a", "b"])
    assert out["own_rel_error"] == pytest.approx({"a": 0.5, "b": 0.1})
    assert out["own_mean_rel_error"] == pytest.approx(0.3) and out["own_values"] == {"a": 3.0, "b": 4.4}
    assert _own_point_error(SimpleNamespace(bias_correction={"applied": False, "before": {"a": 3.0}}), truth,
                            ["a"]) == {}
    assert _own_point_error(SimpleNamespace(bias_correction=None), truth, ["a"]) == {}
