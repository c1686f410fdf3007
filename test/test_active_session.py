"""ActiveSession: active learning for a calibration that grows one request at a time (the ROS
calibrator's sessions), without ROS: the design on a real trial's data (with its measurement
nuisances), the profile the excitation node is sent, the trial added and persisted, a rebuilt
session that keeps it, and what is refused."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import numpy as np
import pytest

from vid2sid_ros.benchmark.sim2sim import sim2sim_stand_in
from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.active import SESSION_LOG, ActiveSession, parse_active_learning
from vid2sid_ros.calibration.design import (DesignResult, ExcitationLimits, ExcitationRefused, candidate_profiles,
                                            steepest_change, validate_profile)
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.nuisance import rig_nuisance
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.core.excitation import Excitation, build_excitation
from vid2sid_ros.core.trial import RealTrial
from vid2sid_ros.rigs import load_rig

TRUTH = {"joint_stiffness": 0.42, "joint_damping": 0.0065, "joint_friction": 0.0035, "actuator_gain": 12.5}


@pytest.fixture(scope="module")
def finger_phase(tmp_path_factory):
    """A real (truth-less, so latency and marker offsets are fitted too) finger trial, one
    calibration iteration on it, as the calibrator node runs a session's first phase."""
    rig = load_rig("finger")
    twin = rig.make_twin()
    sim = make_sim2sim_trial(rig, {**rig.parameters.nominal(), **TRUTH}, seed=0, noise="keypoint")
    real = RealTrial(sim.train[:1], sim.train_excitations[:1], source="ros:finger_0")  # truth None: a real trial
    cfg = CalibrationConfig(iterations=1, rollout_budget=300, seed=0, final_identifiability=False, diagnosis=False,
                            nuisance=rig_nuisance(rig))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_calibration(twin, real, make_proposer("reasoner"), cfg,
                                 tmp_path_factory.mktemp("s") / "phase_0", parameters=rig.parameters)
    limits = ExcitationLimits.from_rig(twin, real.train_excitations, {"max_amplitude": 0.5})
    return rig, twin, real, cfg, result, limits


def test_a_trial_is_designed_run_added_persisted_and_kept_by_a_rebuilt_session(finger_phase, tmp_path):
    rig, twin, real, cfg, result, limits = finger_phase
    assert any(n.startswith("marker_offset") for n in result.values)  # the nuisances were fitted too
    active = parse_active_learning({"trigger": "always", "after_iteration": 1})
    session = ActiveSession(tmp_path, real, active, limits, 300)
    assert session.phase_dir == tmp_path / "phase_0" and session.phase_budget() == 300
    # regression: the design set the twin to the fitted nuisances' names too ("unknown parameter(s)
    # ['latency', 'marker_offset.proximal.x', ...]") on any real trial
    design, why = session.next_design(twin, result, cfg, rig.parameters)
    assert design is not None, why
    # no identifiability check ran (trigger: always): the rationale claims no trade-off (it did: "X, Y and Z
    # trade off on the training trials")
    assert "trade off" not in design.rationale and "none being flagged" in design.rationale, design.rationale
    prof = session.command_profile(design)
    sent = build_excitation(json.loads(json.dumps(prof)), limits.actuator_names)  # as the excitation node builds it
    np.testing.assert_allclose(sent.values, design.excitation.values, atol=1e-12)
    assert sent.values.min() >= 0.0 and sent.values.max() <= 0.5  # within [0, 1] ctrlrange and max_amplitude

    traj = dataclasses.replace(sim2sim_stand_in(rig, {**rig.parameters.nominal(), **TRUTH})(sent), trial_id="finger_1")
    rec = session.complete(design, result, "finger_1", traj, sent)
    assert rec["applied"] and rec["trial"] == "finger_1" and rec["training_trials"] == 2
    assert rec["charged_after"] == result.rollouts + design.rollouts  # the design is charged to the session
    assert session.phase_dir == tmp_path / "phase_1" and session.phase_budget() == 300 - rec["charged_after"]
    on_disk = [json.loads(x) for x in (tmp_path / SESSION_LOG).read_text().splitlines()]
    assert on_disk == [rec] and (tmp_path / rec["trial_file"]).is_file()

    again = ActiveSession(tmp_path, real, active, limits, 300)  # the next request, or a restarted node
    assert again.trials_run == 1 and again.phase_dir == tmp_path / "phase_1"
    assert [t.trial_id for t in again.real.train] == [real.train[0].trial_id, "finger_1"]
    np.testing.assert_allclose(again.real.train_excitations[1].values, sent.values)
    assert again.start == pytest.approx({k: float(v) for k, v in result.values.items()})
    assert again.phase_budget() == session.phase_budget()
    none, why = again.next_design(twin, result, cfg, rig.parameters)
    assert none is None and why == "1 designed trial(s) already run (max_trials 1)"


def test_a_trial_that_stopped_early_or_an_early_phase_is_not_used(finger_phase, tmp_path):
    rig, twin, real, cfg, result, limits = finger_phase
    session = ActiveSession(tmp_path, real, parse_active_learning({"trigger": "always", "after_iteration": 3}),
                            limits, 300)
    none, why = session.next_design(twin, result, cfg, rig.parameters)
    assert none is None and why.startswith("1 of the 3 iteration(s) on the current data done (after_iteration)")
    session.active = parse_active_learning({"trigger": "always", "after_iteration": 1})
    design, _ = session.next_design(twin, result, cfg, rig.parameters)
    short = Excitation("cut", design.excitation.rate, design.excitation.values[:20], design.excitation.actuator_names)
    traj = sim2sim_stand_in(rig, TRUTH)(short)
    rec = session.complete(design, result, "finger_1", traj, short)
    assert rec["applied"] is False and "stopped after 20 of 60 commands" in rec["reason"]
    assert session.trials_run == 0 and len(session.real.train) == 1  # not added
    assert rec["charged_after"] == result.rollouts + design.rollouts  # but its design was paid for


def test_a_profile_clipped_sample_by_sample_is_never_sent(finger_phase, tmp_path):
    """A chirp about 0 on a tendon that only pulls ([0, 1]): validate_profile clips every negative sample,
    which no excitation profile can express, so the excitation node is never sent it."""
    rig, twin, real, cfg, result, limits = finger_phase
    prof, exc, notes = validate_profile({"kind": "chirp", "amplitude": 0.4, "f0": 0.5, "f1": 2.0, "duration": 2.0,
                                         "rate": 30.0}, limits)
    assert notes and exc.values.min() == 0.0
    design = DesignResult(prof, exc, "proposer_request", [], math.nan, math.nan, math.nan, math.nan, [], 0, "asked", notes)
    session = ActiveSession(tmp_path, real, parse_active_learning(True), limits, 300)
    with pytest.raises(ExcitationRefused, match="clipped sample by sample"):
        session.command_profile(design)


def test_the_robots_command_limits_narrow_the_design_limits_or_refuse_in_one_line():
    rig_limits = ExcitationLimits((1.0,), ("flexor_motor",), (0.05, 6.0), 2.0, 30.0, {}, ((0.0, 1.0),))
    robot = rig_limits.narrowed([(-0.2, 0.55)], 1.5, "excitation_node limits")
    assert robot.range_of(0) == (0.0, 0.55) and robot.amplitude == (0.55,) and robot.max_duration_s == 1.5
    assert robot.source == {"range[flexor_motor]": "excitation_node limits", "max_duration_s": "excitation_node limits"}
    assert rig_limits.narrowed([(-1e9, 1e9)], 0.0, "x") == rig_limits  # no robot limit: unchanged
    with pytest.raises(ExcitationRefused, match="may command \\[0, 1\\] here and \\[-1, -0.5\\] on the robot"):
        rig_limits.narrowed([(-1.0, -0.5)], None, "excitation_node limits")
    with pytest.raises(ExcitationRefused, match="2 command ranges for 1 actuators"):
        rig_limits.narrowed([(0, 1), (0, 1)], None, "excitation_node limits")


def test_the_excitation_nodes_joint_limits_map_back_to_the_twins_actuators():
    pytest.importorskip("rclpy", reason="the excitation node's module needs rclpy")
    from vid2sid_ros.nodes.excitation_node import actuator_command_ranges

    # default: one command joint per actuator, in order; one value = every joint
    assert actuator_command_ranges(["a", "b"], [""], [""], [-1.0, -2.0], [0.5]) == [(-1.0, 0.5), (-2.0, 0.5)]
    # a controller commanding only the mapped joint of b: a is not limited by it
    assert actuator_command_ranges(["a", "b"], ["jb"], ["b=jb"], [-2.0], [3.0]) == [(-math.inf, math.inf),
                                                                                      (-2.0, 3.0)]
    with pytest.raises(ValueError, match="command_joints: \\['jc'\\] driven by no actuator"):
        actuator_command_ranges(["a", "b"], ["jc"], [""], [-1.0], [1.0])


def test_refused_designs_are_charged_and_the_session_never_exceeds_its_budget(finger_phase, tmp_path):
    """Two designs the excitation node refuses (its rate limit): each is charged in its record, ends its
    phase, and the next phase starts with what is left, so phases and designs together stay within
    ``rollout_budget`` (before: the refused designs were charged to the session but not to the running
    phase, whose budget was fixed, and the session went over by their rollouts)."""
    rig, twin, real, cfg, _, limits = finger_phase
    budget = 160
    active = parse_active_learning({"trigger": "always", "after_iteration": 1, "max_trials": 3})
    why = "excitation_node refused the trial: step 0: flexor_motor changes at 9.31 per s, faster than max_rate 0.5"
    charged_after = 0
    for k in range(3):
        session = ActiveSession(tmp_path, real, active, limits, budget)  # rebuilt per request, as the node does
        assert session.phase_dir == tmp_path / f"phase_{k}"
        assert session.phase_budget() == budget - charged_after  # a phase starts with what is left
        start = {n: v for n, v in (session.start or {}).items() if n in rig.parameters} or None
        pcfg = dataclasses.replace(cfg, iterations=1 if k < 2 else 40, rollout_budget=session.phase_budget(),
                                   start=start)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = run_calibration(twin, session.real, make_proposer("reasoner"), pcfg, session.phase_dir,
                                     parameters=rig.parameters)
        assert charged_after + result.rollouts == session.charged(result) <= budget
        if k == 2:
            break
        design, not_why = session.next_design(twin, result, pcfg, rig.parameters)
        assert design is not None, not_why
        rec = session.refuse(design, result, why)
        assert rec["applied"] is False and rec["reason"] == why and rec["rollouts"] == design.rollouts > 0
        assert rec["charged_after"] == charged_after + result.rollouts + design.rollouts <= budget  # the charge
        charged_after = rec["charged_after"]
    on_disk = [json.loads(x) for x in (tmp_path / SESSION_LOG).read_text().splitlines()]
    assert [r["phase"] for r in on_disk] == [0, 1] and all(r["charged_after"] <= budget for r in on_disk)


def _robot_rate(values, rate, held):
    """The excitation node's rate check (CommandLimits.violation with the held command), by hand: (A,) per s."""
    v = np.vstack([np.asarray(held, float)[None, :], values])
    return np.max(np.abs(np.diff(v, axis=0)), axis=0) * rate


def test_the_candidate_family_respects_the_robots_max_rate_and_ramps_from_the_held_command():
    """The excitation node refuses a trial changing faster than max_rate, also from the command it holds to the
    trial's first command. The candidates are rate-limited (amplitude scaled down, noted), a step is refused with
    its reason, and a trial starting away from the held command starts with a ramp the profile expresses."""
    rig = ExcitationLimits((0.5,), ("flexor_motor",), (0.05, 6.0), 2.0, 30.0, {}, ((0.0, 1.0),))
    lim = rig.narrowed([(0.0, 1.0)], None, "excitation_node limits", max_rate=[2.0], held=[0.0])
    assert lim.max_rate == (2.0,) and lim.held == (0.0,) and lim.source["max_rate"] == "excitation_node limits"
    kept, refused, limited = [], [], []
    for cfg in candidate_profiles(lim):
        try:
            prof, exc, notes = validate_profile(cfg, lim)
        except ExcitationRefused as err:
            refused.append((cfg["kind"], str(err)))
            continue
        kept.append(cfg["kind"])
        limited += [n for n in notes if "rate-limited" in n]
        assert _robot_rate(exc.values, exc.rate, [0.0])[0] <= 2.0 * (1 + 1e-9), (cfg, notes)
        assert exc.duration <= 2.0 + 1e-9 and exc.values.min() >= 0.0 and exc.values.max() <= 0.5 + 1e-12
        assert prof["ramp_from"] == [0.0] and prof["ramp_duration"] > 0  # it starts at the offset 0.25, not 0
        sent = build_excitation(json.loads(json.dumps(prof)), lim.actuator_names)  # as the excitation node builds it
        np.testing.assert_allclose(sent.values, exc.values, atol=1e-12)
    assert [k for k, _ in refused] == ["step"] and "faster than max_rate 2 per s" in refused[0][1], refused
    assert len(kept) == 6 and limited  # the fast chirps are rate-limited, not dropped
    # without a robot rate limit nothing changes (the rig's own limits only)
    assert all("ramp_from" not in validate_profile(c, rig)[0] for c in candidate_profiles(rig))


def test_a_session_designs_within_the_robots_max_rate(finger_phase, tmp_path):
    rig, twin, real, cfg, result, limits = finger_phase
    active = parse_active_learning({"trigger": "always", "after_iteration": 1})
    session = ActiveSession(tmp_path, real, active, limits, 300)
    session.limits = session.limits.narrowed([(0.0, 1.0)], None, "excitation_node limits", max_rate=[1.5],
                                             held=[0.0])
    design, why = session.next_design(twin, result, cfg, rig.parameters)
    assert design is not None, why
    prof = session.command_profile(design)  # within the rate from the held command: sent
    sent = build_excitation(json.loads(json.dumps(prof)), limits.actuator_names)
    assert steepest_change(sent.values, sent.rate, np.zeros(1))[0] <= 1.5 * (1 + 1e-9)
    assert any("candidate refused" in n and "faster than max_rate" in n for n in design.notes), design.notes


def test_the_excitation_nodes_rate_limit_and_held_command_map_back_to_the_twins_actuators():
    pytest.importorskip("rclpy", reason="the excitation node's module needs rclpy")
    from vid2sid_ros.nodes.excitation_node import actuator_held_command, actuator_rate_limits

    assert actuator_rate_limits(["a", "b"], [""], [""], [0.5, 0.0]) == [0.5, math.inf]  # 0 = no limit
    assert actuator_rate_limits(["a", "b"], ["jb"], ["b=jb"], [2.0]) == [math.inf, 2.0]
    # on_stop hold: the last command sent; zero; home through the joint map; nothing sent yet: not known
    assert actuator_held_command(["a", "b"], [""], [""], "hold", [0.0], [0.3, 0.1]) == [0.3, 0.1]
    assert actuator_held_command(["a", "b"], [""], [""], "hold", [0.0], None) is None
    assert actuator_held_command(["a", "b"], [""], [""], "zero", [0.0], [0.3, 0.1]) == [0.0, 0.0]
    assert actuator_held_command(["a", "b"], ["jb"], ["b=jb"], "home", [0.4], [0.3, 0.1]) == [0.3, 0.4]
