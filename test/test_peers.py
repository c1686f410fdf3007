"""The least-squares peers: same residual vector, every rollout metered, known parameters recovered."""

from __future__ import annotations

import math
import sys
import types

import pytest

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers import PEER_NAMES, PROPOSERS, make_proposer
from vid2sid_ros.calibration.proposers.peers import PeerUnavailableError
from vid2sid_ros.sim.toy import make_rig

FAST = dict(identifiability=False, final_identifiability=False)
TRUTH = {"stiffness": 0.7, "damping": 0.01, "gain": 0.4}


@pytest.fixture(scope="module")
def toy():
    rig = make_rig()
    return rig, make_sim2sim_trial(rig, TRUTH, seed=3, noise="none")


def test_peers_are_registered():
    assert set(PEER_NAMES) <= set(PROPOSERS)


@pytest.mark.parametrize("method", PEER_NAMES)
def test_peer_recovers_the_truth_and_charges_every_rollout(toy, method):
    rig, real = toy
    res = run_calibration(rig, real, make_proposer(method), CalibrationConfig(iterations=3, rollout_budget=400,
                                                                              seed=0, **FAST))
    for name, v in TRUTH.items():
        assert res.values[name] == pytest.approx(v, rel=0.02), name
    # the meter: two training trials, so an evaluation is 2 rollouts, all of them recorded -- except one
    # that moves only the latency (a measurement nuisance: the cached trajectory is resampled, no rollout)
    evals = [e for r in res.history for e in r.extra["evaluations"]]
    assert res.rollouts == sum(e["rollouts"] for e in evals)
    physics = lambda e: tuple(v for k, v in sorted(e["values"].items()) if k != "latency")  # noqa: E731
    seen = set()
    for e in evals:
        assert e["rollouts"] == (0 if physics(e) in seen else 2)
        seen.add(physics(e))
    assert any(e["rollouts"] == 0 for e in evals)  # the latency column of the Jacobian was free
    # one solve, then holding: later iterations spend nothing
    assert res.history[2].rollouts_used == 0 and "holding" in res.history[2].rationale
    # the rationale starts with one sentence per parameter moved, with both values and the unit
    assert res.history[1].rationale.startswith(("Raising", "Lowering"))
    assert "N·m/rad" in res.history[1].rationale.split(".")[0] + res.history[1].rationale


@pytest.mark.parametrize("method", PEER_NAMES)
def test_peer_stops_at_the_budget_with_the_best_point(toy, method):
    rig, real = toy
    res = run_calibration(rig, real, make_proposer(method), CalibrationConfig(iterations=3, rollout_budget=12,
                                                                              seed=0, **FAST))
    assert res.rollouts <= 12
    assert res.error_px < res.initial_error_px
    assert "budget ran out" in res.history[1].rationale


def test_mujoco_sysid_without_its_extras_says_what_to_install(monkeypatch):
    fake = types.ModuleType("mujoco.sysid")  # what mujoco.sysid is when absl/tabulate are missing: no names
    monkeypatch.setitem(sys.modules, "mujoco.sysid", fake)
    with pytest.raises(PeerUnavailableError, match=r"mujoco\[sysid\]"):
        make_proposer("mujoco-sysid")


def test_peer_rejects_a_bad_step():
    with pytest.raises(ValueError, match="fd_step"):
        make_proposer("least-squares", fd_step=0.0)
    assert math.isfinite(make_proposer("least-squares", fd_step=0.01).fd_step)


def test_reasoner_rationale_leads_with_one_sentence_per_moved_parameter(toy):
    rig, real = toy
    res = run_calibration(rig, real, make_proposer("reasoner"), CalibrationConfig(iterations=2, rollout_budget=30,
                                                                                  seed=0, **FAST))
    rec = res.history[1]
    lead, _, trace = rec.rationale.partition(" Trace: ")
    assert trace and ("Measured sensitivities" in trace or "Diagnosis" in trace)  # the numeric trace follows
    moved = [n for n in ("stiffness", "damping", "gain")
             if abs(rec.values[n] - res.history[0].values[n]) > 1e-9 * max(abs(res.history[0].values[n]), 1)]
    sentences = [s for s in lead.split(". ") if s.startswith(("Raising", "Lowering"))]
    assert len(sentences) >= len(moved) > 0
    for n in moved:
        assert any(s.split(" ")[1] == n and "→" in s for s in sentences), (n, lead)
    assert "on the robot" in lead  # the observation behind a move, with the robot's value


def _bench_peers(monkeypatch):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "bench_peers.py"
    spec = importlib.util.spec_from_file_location("bench_peers", path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_peers", mod)  # the process pool pickles its functions by name
    spec.loader.exec_module(mod)
    return mod


def test_bench_peers_table_is_by_increasing_budget_and_the_same_with_jobs(tmp_path, capsys, monkeypatch):
    """bench/bench_peers.py: budgets run in the order given, the table is in increasing budget, and
    ``--jobs 2`` (one process per budget) gives exactly the figures of one process."""
    bench = _bench_peers(monkeypatch)
    common = ["--rig", "toy", "--seeds", "1", "--budgets", "8,4", "--methods", "least-squares"]
    assert bench.main(common + ["--out", str(tmp_path / "serial")]) == 0
    serial = (tmp_path / "serial" / "toy_sweep.md").read_text()
    assert bench.main(common + ["--out", str(tmp_path / "pool"), "--jobs", "2"]) == 0
    pooled = (tmp_path / "pool" / "toy_sweep.md").read_text()
    assert serial == pooled
    header = [ln for ln in serial.splitlines() if ln.startswith("| method")][0]
    assert header == "| method | 4 rollouts | 8 rollouts |"
    assert {(tmp_path / "pool" / f"toy_{b}" / "results.json").exists() for b in (4, 8)} == {True}
    with pytest.raises(SystemExit):
        bench.main(["--rig", "toy", "--budgets", "8,x"])
    assert "--budgets: expected comma-separated integers" in capsys.readouterr().err
