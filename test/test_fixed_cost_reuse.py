"""A calibration's fixed cost: the command imports only what it uses, and the diagnostics reuse what the run
measured (the final identifiability check's probes serve the residual diagnosis; the report's trial curves
reuse the start and best points' evaluations), with results unchanged and every rollout in one phase."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _calibrate_in_subprocess(tmp_path: Path, *extra: str) -> dict:
    code = ("import json, sys\nfrom vid2sid_ros.cli import main\n"
            f"rc = main(['calibrate', '--rig', 'toy', '--iterations', '2', '--out', {str(tmp_path / 'run')!r}, "
            f"'--quiet', *{list(extra)!r}])\n"
            "mods = sorted(m for m in sys.modules)\n"
            "print(json.dumps({'rc': rc, 'modules': mods}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_calibrate_imports_neither_scipy_stats_nor_rclpy_nor_the_other_commands(tmp_path):
    """scipy.stats cost half a CPU second to import (the diagnosis's chi-square quantiles come from
    scipy.special); the CLI imported every subcommand (the ROS graph's, the benchmark's, the demo's)."""
    got = _calibrate_in_subprocess(tmp_path)
    assert got["rc"] == 0
    mods = set(got["modules"])
    assert "vid2sid_ros.calibration.diagnosis" in mods  # the diagnosis ran
    for heavy in ("scipy.stats", "scipy.signal", "rclpy", "matplotlib", "pandas", "vid2sid_ros.commands.demo",
                  "vid2sid_ros.commands.bringup", "vid2sid_ros.commands.benchmark", "vid2sid_ros.commands.track",
                  "plotly.graph_objects", "plotly.io", "plotly.subplots"):  # the report's figures are plain JSON
        assert heavy not in mods, heavy
    assert (tmp_path / "run" / "report.html").is_file()


def test_calibrate_without_the_report_does_not_import_plotly(tmp_path):
    got = _calibrate_in_subprocess(tmp_path, "--no-report")
    assert got["rc"] == 0 and not (tmp_path / "run" / "report.html").exists()
    assert not any(m == "plotly" or m.startswith("plotly.") for m in got["modules"])


def test_the_diagnosis_chi_square_functions_are_scipy_stats_own():
    from scipy.stats import chi2, ncx2

    from vid2sid_ros.calibration.diagnosis.chi2 import chi2_ppf, chi2_sf, ncx2_sf_1

    for p in (0.95, 1 - 0.05 / 7, 0.999):
        for df in (1, 2, 5):
            assert chi2_ppf(p, df) == float(chi2.ppf(p, df))  # bit for bit
    for x in (0.5, 3.84, 11.7, 40.0):
        assert chi2_sf(x, 1) == float(chi2.sf(x, 1))
        for nc in (0.01, 1.0, 17.0, 300.0):
            assert ncx2_sf_1(x, nc) == pytest.approx(float(ncx2.sf(x, 1, nc)), rel=1e-12, abs=1e-300)


def _fitted(rig, real):
    """The parameter set the run fitted: the rig's and the default measurement nuisances (the latency)."""
    from vid2sid_ros.calibration.loop import CalibrationConfig
    from vid2sid_ros.calibration.nuisance import add_measurement_nuisances, offset_unit

    return add_measurement_nuisances(rig.parameters, CalibrationConfig().nuisance,
                                     keypoints=rig.make_twin().keypoint_names, excitations=real.train_excitations,
                                     real_trial=real.truth is None, unit=offset_unit(real.train), source="config")


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """A toy calibration whose diagnosis names a caveat (the frozen transmission aliases the gain)."""
    from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
    from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
    from vid2sid_ros.calibration.proposers import make_proposer
    from vid2sid_ros.sim.toy import make_rig

    rig = make_rig()
    real = make_sim2sim_trial(rig, rig.parameters.complete({}), seed=0, noise="keypoint", keypoint_sigma_px=0.2)
    d = tmp_path_factory.mktemp("toy") / "run"
    res = run_calibration(rig, real, make_proposer("reasoner"), CalibrationConfig(iterations=3, rollout_budget=20), d)
    return rig, real, res, d


def test_the_diagnosis_takes_its_free_columns_from_the_final_check_and_is_unchanged(toy_run):
    """The final identifiability check's own +step probes are the diagnosis's free columns (same point, same
    step): the diagnosis is the one it measures itself, bit for bit, for F evaluations fewer."""
    from vid2sid_ros.calibration.diagnosis import diagnose
    from vid2sid_ros.calibration.identifiability import check_identifiability
    from vid2sid_ros.calibration.objective import TrialObjective

    rig, real, res, _ = toy_run
    params = _fitted(rig, real)
    values = res.values

    def objective():
        return TrialObjective(rig.make_twin(), real.train_excitations, real.train, params)

    report = check_identifiability(objective(), values, parameters=params, warn=False)
    F = report.forward_jacobian
    assert F is not None and F.shape[1] == len(params.free) and np.isfinite(F).all()
    reused = diagnose(objective(), values, parameters=params, free_jacobian=F)
    measured = diagnose(objective(), values, parameters=params)
    assert reused.statistics.pop("free_columns") == "the final identifiability check's forward differences"
    assert measured.statistics.pop("free_columns") == "measured by forward differences"
    a, b = reused.to_dict(), measured.to_dict()
    # each physics column costs one rollout per training trial; a measurement nuisance's column (the
    # latency) re-samples rollouts already made and costs none
    physics = [p for p in params.free if not p.target.startswith("measurement.")]
    assert len(physics) == 3
    assert measured.rollouts - reused.rollouts == len(physics) * len(real.train_excitations)
    a.pop("rollouts", None), b.pop("rollouts", None)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    # a matrix of another shape is not taken: the columns are measured
    other = diagnose(objective(), values, parameters=params, free_jacobian=F[:, :1])
    assert other.rollouts == measured.rollouts and other.statistics["free_columns"] == "measured by forward differences"


def test_the_run_spends_no_rollout_on_the_free_columns_or_the_curves_and_every_rollout_is_in_one_phase(toy_run):
    rig, real, res, d = toy_run
    doc = json.loads((d / "result.json").read_text())
    phases = doc["phases"]
    assert sum(p["charged_rollouts"] for p in phases.values()) == doc["rollouts"]
    assert sum(p["diagnostic_rollouts"] for p in phases.values()) == doc["diagnostic_rollouts"]
    assert phases["diagnosis"]["diagnostic_rollouts"] == doc["residual_diagnosis"]["rollouts"]
    assert doc["residual_diagnosis"]["statistics"]["free_columns"] == \
        "the final identifiability check's forward differences"
    # the start and best points' training trajectories were at hand: the report's two renders per trial and at
    # most the holdout's start point are rolled out (was: also both training curves, 2 per training trial)
    n_train, n_hold = len(real.train_excitations), len(real.holdout_excitations) if real.holdout else 0
    assert phases["trial_curves"]["diagnostic_rollouts"] <= 2 * (n_train + n_hold) + n_hold
    # the caveat the consider analysis raised with its own measured columns is still raised
    (cav,) = [c for c in doc["residual_diagnosis"]["consider"]["caveats"] if c["parameter"] == "gain"]
    assert cav["cause"] == "frozen parameter 'transmission'"


def test_trial_curves_from_evaluations_at_hand_equal_the_rolled_out_ones(toy_run):
    from vid2sid_ros.calibration.objective import TrialObjective
    from vid2sid_ros.calibration.trial_curves import trial_curves

    rig, real, res, _ = toy_run
    params = _fitted(rig, real)
    obj = TrialObjective(rig.make_twin(), real.train_excitations, real.train, params)
    ini, best = res.history[0].values, res.values
    doc, spent = trial_curves([("train", obj)], ini, best)
    e0, _ = TrialObjective(rig.make_twin(), real.train_excitations, real.train, params).evaluate(ini)
    e1, _ = TrialObjective(rig.make_twin(), real.train_excitations, real.train, params).evaluate(best)
    doc2, spent2 = trial_curves([("train", obj)], ini, best, evaluations={"train": (e0, e1)})
    assert spent > 0 and spent2 == 0
    assert json.dumps(doc, sort_keys=True) == json.dumps(doc2, sort_keys=True)


def test_a_joint_space_trial_is_not_rendered_for_the_report(tmp_path):
    """The report's overlay video and contact sheet show only image-keypoint trials: a joint-space run rendered
    two rollouts per trial (a second of CPU on a small problem) for nothing."""
    sys.path.insert(0, str(ROOT / "bench"))
    from rigs import sysid_style as S

    from vid2sid_ros.cli import main

    problem = S.PROBLEMS["spring_mass"]()
    t, u, q = S.simulate(problem, problem.truth)
    S.write_rig(problem, tmp_path, t, u, q, calibration={"iterations": 3, "rollout_budget": None})
    out = tmp_path / "run"
    assert main(["calibrate", str(tmp_path / "rig.yaml"), "--out", str(out), "--quiet"]) == 0
    doc = json.loads((out / "result.json").read_text())
    assert doc["phases"]["trial_curves"]["diagnostic_rollouts"] == 0  # curves reused, nothing rendered
    assert not (out / "twin_renders.npz").exists()
    assert "No overlay video: the trials measure 3-D points or joint positions" in (out / "report.html").read_text()


def test_jsonable_of_long_plain_lists_is_what_it_was():
    """Plain items of a list are converted inline (a trajectory's lists of floats): the same values and types."""
    from vid2sid_ros.core.trial import jsonable

    class F(float):
        pass

    x = [1.0, float("nan"), float("inf"), None, True, 3, "a", np.float32(2.5), np.int64(4), np.bool_(True),
         Path("/x"), (1, 2.0), [np.nan], {"a": [1.0, np.float64("nan")]}, F(1.5), F("nan"), np.array([1.0, np.nan])]
    got = jsonable(x)
    assert got == [1.0, None, None, None, True, 3, "a", 2.5, 4, True, "/x", [1, 2.0], [None], {"a": [1.0, None]},
                   1.5, None, [1.0, None]]
    assert [type(v) for v in got[:10]] == [float, type(None), type(None), type(None), bool, int, str, float, int, bool]


def test_the_compressed_plotly_bundle_is_kept_in_the_user_cache_and_is_the_bundle(tmp_path, monkeypatch):
    import base64
    import gzip

    from plotly.offline import get_plotlyjs

    from vid2sid_ros.report.page import _plotly_gz

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = _plotly_gz()
    (kept,) = (tmp_path / "cache" / "vid2sid_ros").glob("plotly-*.js.gz.b64")
    assert kept.read_text(encoding="ascii") == first == _plotly_gz()  # the second page reads it
    assert gzip.decompress(base64.b64decode(first)).decode("utf-8") == get_plotlyjs()
    (tmp_path / "blocked").write_text("a file, not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "blocked"))  # an unusable cache: compressed again
    assert _plotly_gz() == first
