"""Serial evaluations of a MuJoCo twin go through ``mujoco.rollout`` on the calling thread, to the bit the
twin's own stepping loop; a diverging point is reported and charged as the loop reports it."""

from __future__ import annotations

import numpy as np
import pytest

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.batch import evaluate_batch
from vid2sid_ros.calibration.objective import TrialObjective
from vid2sid_ros.rigs import load_rig
from vid2sid_ros.sim import mujoco_batch

_XML = """<mujoco model="pendulum">
  <option timestep="0.002" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="link" pos="0 0 1.0">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.4"/>
      <site name="tip" pos="0.3 0 0"/>
    </body>
  </worldbody>
  <actuator><motor name="motor" joint="hinge" gear="1.0" ctrlrange="-1 1"/></actuator>
  <sensor><jointpos name="angle" joint="hinge"/></sensor>
</mujoco>
"""

_RIG = """rig: pendulum
description: a motor-driven pendulum
model: pendulum.xml
parameters:
  damping: {unit: N*m*s/rad, lower: -400.0, upper: 0.2, nominal: 0.05, target: "dof_damping[hinge]"}
  gain: {unit: N*m, lower: 0.5, upper: 2.0, nominal: 1.0, target: "actuator_gear[motor,0]"}
keypoints: {tip: tip}
camera:
  width: 160
  height: 120
  fovy: 50
  pose: {position: [0.15, -1.5, 1.0], look_at: [0.15, 0.0, 1.0]}
excitations:
  push: {kind: step, amplitude: 0.5, t_step: 0.1, t_release: 0.5, duration: 0.8, rate: 30}
  sweep: {kind: chirp, amplitude: 0.4, f0: 0.5, f1: 2.0, duration: 1.2, rate: 30}
trials:
  - {name: push, source: {sim2sim: {seed: 0}}, excitation: push, split: train}
  - {name: sweep, source: {sim2sim: {seed: 0}}, excitation: sweep, split: train}
calibration: {iterations: 2, rollout_budget: 20, seed: 0}
proposer: reasoner
"""


@pytest.fixture(scope="module")
def objective(tmp_path_factory) -> TrialObjective:
    d = tmp_path_factory.mktemp("pendulum")
    (d / "pendulum.xml").write_text(_XML)
    (d / "rig.yaml").write_text(_RIG)
    rig = load_rig(str(d / "rig.yaml"))
    real = make_sim2sim_trial(rig, dict(rig.parameters.nominal(), damping=0.08, gain=1.2), seed=1, noise="keypoint")
    return TrialObjective(rig.make_twin(), real.train_excitations, real.train, rig.parameters)


@pytest.fixture()
def batches(monkeypatch):
    """Every ``batched_states`` call: (rollouts in it, MjData it steps with = threads; 1 is the calling thread)."""
    calls = []
    real = mujoco_batch.batched_states
    monkeypatch.setattr(mujoco_batch, "batched_states",
                        lambda models, datas, *a, **k: calls.append((len(models), len(datas)))
                        or real(models, datas, *a, **k))
    return calls


@pytest.fixture()
def loops(objective):
    """Every rollout of the twin's own stepping loop (``twin.rollout``), counted."""
    twin = objective.twin
    calls = []
    real = twin.rollout
    twin.rollout = lambda exc, **k: calls.append(exc.name) or real(exc, **k)
    yield calls
    del twin.rollout


def _key(ev):
    return ev.error_px, ev.failed, ev.rollouts, ev.message, ev.per_keypoint_px


def _same(a, b) -> None:
    assert _key(a) == _key(b)
    assert len(a.sim) == len(b.sim)
    for s, t in zip(a.sim, b.sim):
        np.testing.assert_array_equal(s.keypoints, t.keypoints)
        np.testing.assert_array_equal(s.valid, t.valid)


def _loop(objective, values):
    objective.clear_cache()
    ev = objective.evaluate_in_loop(values)[0]
    objective.clear_cache()
    return ev


def test_one_point_rolls_all_its_trials_out_in_one_call_on_the_calling_thread(objective, batches, loops):
    nominal = objective.parameters.nominal()
    for p in (nominal, dict(nominal, damping=0.15, gain=0.7)):
        ref = _loop(objective, p)
        batches.clear()
        loops.clear()
        got = objective.evaluate(p)[0]
        assert batches == [(2, 1)] and loops == []  # both trials, one mujoco.rollout call, no thread of its own
        _same(ref, got)
        assert got.rollouts == objective.cost == 2 and not got.failed
        batches.clear()
        again = objective.evaluate(p)[0]  # the cache: no rollout, none charged
        assert batches == [] and again.rollouts == 0 and again.error_px == got.error_px


def test_a_serial_batch_is_one_call_with_the_loops_evaluations(objective, batches):
    nominal = objective.parameters.nominal()
    pts = [dict(nominal, damping=d) for d in (0.03, 0.06, 0.12)] + [dict(nominal, damping=0.03)]
    ref = [_loop(objective, p) for p in pts]
    ref[3] = objective.evaluate_in_loop(pts[0])[0]  # the loop run in order: the repeat is served from the cache
    objective.clear_cache()
    batches.clear()
    got = evaluate_batch(objective, pts, None)
    objective.clear_cache()
    assert batches == [(6, 1)]  # three distinct points x two trials, on the calling thread
    for a, b in zip(ref[:3], got[:3]):
        _same(a, b)
    assert got[3].rollouts == 0 and got[3].error_px == got[0].error_px


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_diverging_point_is_reported_and_charged_as_the_twins_loop_reports_it(objective, batches):
    bad = dict(objective.parameters.nominal(), damping=-400.0)
    ref = _loop(objective, bad)
    assert ref.failed and "diverged" in ref.message and ref.rollouts == 1  # stops at the first trial
    batches.clear()
    got = objective.evaluate(bad)[0]
    assert batches and batches[0] == (2, 1)  # tried in mujoco.rollout first
    _same(ref, got)
    # the cache holds what the loop left: the first trial only, so the second is rolled out (and charged) later
    key = objective.physics_key(bad)
    assert objective.cached(key)[1] is None
    objective.clear_cache()
    mixed = evaluate_batch(objective, [objective.parameters.nominal(), bad], None)
    objective.clear_cache()
    _same(ref, mixed[1])
    _same(_loop(objective, objective.parameters.nominal()), mixed[0])


def test_a_cause_patching_set_parameters_steps_the_twins_own_model(objective, batches, loops):
    """A residual-diagnosis cause wraps set_parameters to write model fields after the parameters: the batch
    then steps a copy of the twin's model (with those writes, and the model's own sensor but no keypoint
    sensor: the keypoints are read back from the states), not its sensor model compiled from the MJCF."""
    twin = objective.twin
    original = twin.set_parameters

    def patched(values):
        original(values)
        twin.model.dof_frictionloss[0] = 0.02

    nominal = objective.parameters.nominal()
    plain = _loop(objective, nominal)
    twin.set_parameters = patched
    try:
        ref = _loop(objective, nominal)
        batches.clear()
        loops.clear()
        got = objective.evaluate(nominal)[0]
        objective.clear_cache()
    finally:
        del twin.set_parameters
        twin.model.dof_frictionloss[0] = 0.0
    assert batches == [(2, 1)] and loops == []  # no rollout fell back to the twin's loop
    _same(ref, got)
    assert got.error_px != plain.error_px  # the cause's write changed the rollout


def test_a_wall_time_limit_keeps_the_twins_own_loop(objective, batches):
    """``calibration.rollout_max_wall_s`` is metered by the twin's loop: no mujoco.rollout call then."""
    from vid2sid_ros.sim.base import RolloutLimits

    twin = objective.twin
    saved = twin.rollout_limits
    nominal = objective.parameters.nominal()
    ref = _loop(objective, nominal)
    twin.rollout_limits = RolloutLimits(max_wall_s=60.0)
    try:
        objective.clear_cache()
        got = objective.evaluate(nominal)[0]
        pts = evaluate_batch(objective, [dict(nominal, damping=d) for d in (0.03, 0.06)], None)
        objective.clear_cache()
    finally:
        twin.rollout_limits = saved
    assert batches == [] and not any(e.failed for e in pts)
    _same(ref, got)
