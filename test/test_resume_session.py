"""The restored session of a resumed calibration (``loop._resume_session``), checked field by field.

The loop goes on from a run directory exactly where it stopped only if the restored session has
the right rollout meter (the start's rollouts plus every record's), the right diagnostic count,
the earlier runs' wall time, the start's identifiability report, the best over every recorded
evaluation (not only the proposals; an evaluation without an error skipped), the iteration the
best came from, and the restart point (``current_after``, else the last record's values), and
the torn last line of ``iterations.jsonl`` cut off. Records are written here by hand on the toy
arm, so each expected value is known; the restart point is re-evaluated for real (a toy rollout).
"""

from __future__ import annotations

import math

import pytest

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, RunDirCheck, _resume_session, _Session
from vid2sid_ros.calibration.proposers.proposer import IterationRecord
from vid2sid_ros.sim.toy import make_rig

TRUTH = {"stiffness": 0.7, "damping": 0.01, "gain": 0.4}


@pytest.fixture(scope="module")
def toy():
    rig = make_rig()
    real = make_sim2sim_trial(rig, TRUTH, noise="none")
    return rig, real


def _session(toy, rd):
    rig, real = toy
    return _Session(rig.make_twin(), rig.parameters, real, CalibrationConfig(), rd)


def _values(params, **free):
    return params.complete(free)


def _rec(i, values, error, *, per_kp=None, rollouts=2, wall=0.5, extra=None):
    return IterationRecord(iteration=i, proposer="reasoner", values=dict(values), error_px=error,
                           per_keypoint_px=dict(per_kp or {}), rationale="r", confidence=0.5,
                           rollouts_used=rollouts, wall_s=wall, extra=dict(extra or {}))


def test_the_meter_the_best_record_and_the_last_values_without_current_after(toy, tmp_path):
    """Best = a record's own proposal (no evaluations listed), with its per-keypoint errors and
    iteration; the restart point = the last record's values (no current_after); the torn last line
    cut at the good prefix; the report of the start restored."""
    rig, real = toy
    p = rig.parameters
    v0, v1, v2 = (_values(p, stiffness=s) for s in (0.5, 0.6, 0.65))
    init = _rec(0, v0, 5.0, per_kp={"tip": 5.0}, rollouts=2, wall=0.25)
    rec1 = _rec(1, v1, 3.0, per_kp={"tip": 3.0, "elbow": 1.0}, rollouts=4, wall=1.5)
    rec2 = _rec(2, v2, 4.0, per_kp={"tip": 4.0}, rollouts=6, wall=2.0)
    good = b'{"iteration": 1}\n{"iteration": 2}\n'
    (tmp_path / "iterations.jsonl").write_bytes(good + b'{"iteration": 3, "torn')
    report = {"names": ["stiffness"], "point": {"stiffness": 0.5}, "sensitivity_px": {"stiffness": 2.0},
              "singular_values": [2.0], "condition_number": 1.0, "rollouts": 3}
    meta = {"initial_rollouts": 2, "diagnostic_rollouts": 3, "initial_wall_s": 0.25, "identifiability": report}
    s = _session(toy, tmp_path)
    history, start_report, prior_wall, current_eval = _resume_session(
        s, RunDirCheck(meta, init, [rec1, rec2], len(good)), tmp_path)
    assert history == [init, rec1, rec2]
    assert (tmp_path / "iterations.jsonl").read_bytes() == good  # the torn line is gone, the rest kept
    assert s.used == 2 + 4 + 6 and prior_wall == pytest.approx(0.25 + 1.5 + 2.0)
    assert s.diagnostic == 3 + current_eval.rollouts and current_eval.rollouts == 2  # the re-run is not charged
    assert start_report is not None and start_report.names == ["stiffness"]
    assert start_report.sensitivity_px == {"stiffness": 2.0} and start_report.rollouts == 3
    assert s.best == (3.0, v1, {"tip": 3.0, "elbow": 1.0}) and s.best_iteration == 1
    assert s.current == v2 and current_eval.values == v2 and math.isfinite(current_eval.error_px)


def test_the_best_evaluation_the_restart_point_where_the_loop_moved_and_an_old_run_json(toy, tmp_path):
    """Best = an evaluation listed in a record (lower than every proposal; one without an error
    skipped); restart at the last record's current_after (the loop moved to its best evaluation, not
    to the proposal, and not to an earlier record's point); a run.json without the meter keys counts
    from 0; no iterations.jsonl (nothing to cut) and no report."""
    rig, real = toy
    p = rig.parameters
    v0, v1, v2, v3, v4 = (_values(p, stiffness=s) for s in (0.5, 0.6, 0.9, 0.62, 0.55))
    free = p.free_names

    def pt(v):
        return {n: v[n] for n in free}

    init = _rec(0, v0, 5.0, rollouts=2, extra={"evaluations": [{"values": pt(v0), "error_px": 5.0}]})
    rec1 = _rec(1, v1, 3.0, per_kp={"tip": 3.0}, rollouts=4, wall=1.0, extra={"current_after": pt(v1)})
    rec2 = _rec(2, v4, 3.5, rollouts=2, wall=0.5, extra={"current_after": pt(v4)})
    rec3 = _rec(3, v2, 9.0, rollouts=6, wall=2.0,
                extra={"evaluations": [{"values": pt(v3), "error_px": 2.5}, {"values": pt(v2), "error_px": None}],
                       "current_after": pt(v3)})  # the proposal v2 was worse: the loop moved to v3
    s = _session(toy, tmp_path)
    history, start_report, prior_wall, current_eval = _resume_session(
        s, RunDirCheck({}, init, [rec1, rec2, rec3], 0), tmp_path)
    assert history == [init, rec1, rec2, rec3] and not (tmp_path / "iterations.jsonl").exists()
    assert s.used == 0 + 4 + 2 + 6 and prior_wall == pytest.approx(0.0 + 1.0 + 0.5 + 2.0) and s.diagnostic == 2
    assert start_report is None
    assert s.best == (2.5, v3, {}) and s.best_iteration == 3
    assert s.current == v3 and current_eval.values == v3
