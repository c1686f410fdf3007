"""Rollout budgets: a rollout too costly to run is a failed evaluation, never a hang (issue 12 item 4).

Was: a tentacle whose Young's modulus bound reaches 1e15 Pa needs ~6 million PyElastica
substeps per frame (the explicit step scales as 1/sqrt(E)) and a calibration there ran
for hours without output. Now every twin checks ``RolloutLimits`` (substeps per rollout,
optionally wall time), and a spec whose bounds allow such rollouts is warned about before
iteration 0.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import yaml

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import (CalibrationConfig, CalibrationError, RolloutBudgetWarning,
                                          run_calibration, rollout_budget_warnings)
from vid2sid_ros.calibration.proposers.proposer import Proposal
from vid2sid_ros.cli import main
from vid2sid_ros.core.parameters import ParameterSet
from vid2sid_ros.sim.base import RolloutLimits
from vid2sid_ros.sim.toy import ToyArmTwin, make_rig

TOY = "toy"


@pytest.mark.timeout(60)
def test_tentacle_at_1e15_pa_is_refused_at_once_and_the_bounds_are_warned_about():
    from vid2sid_ros.sim.elastica_tentacle import TentacleTwin
    from vid2sid_ros.sim.registry import make_rig as make_registered

    rig = make_registered("tentacle")
    d = rig.parameters.to_dict()
    for e in d["parameters"]:
        if e["name"] == "youngs_modulus":
            e["upper"] = 1e15
    spec = ParameterSet.from_dict(d, source="stiff.yaml")
    twin = TentacleTwin(parameters=spec)
    exc = rig.excitations["train"]
    (w,) = rollout_budget_warnings(twin, spec, exc, RolloutLimits())
    assert "youngs_modulus 1e+15 Pa" in w and "over the budget of 1,000,000" in w
    assert rollout_budget_warnings(TentacleTwin(), rig.parameters, exc, RolloutLimits()) == []  # shipped bounds fit

    twin.set_parameters({"youngs_modulus": 1e15})
    t0 = time.monotonic()
    res = twin.rollout(exc[0])
    assert time.monotonic() - t0 < 30.0  # refused before stepping (was: hours)
    assert res.diverged and res.message.startswith("rollout refused: it needs ")
    assert "youngs_modulus 1e+15 Pa" in res.message and "calibration.rollout_max_substeps" in res.message
    assert not res.trajectory.valid.any()
    # the substep count is what the twin would have run: period / dt per frame, all frames
    dt = twin.time_step(exc[0].period)
    assert f"{exc[0].num_steps * round(exc[0].period / dt):,} physics substeps" in res.message
    # stepping one command at a time (the ROS lockstep graph) is refused before the first step too
    from vid2sid_ros.sim.base import TwinError

    t0 = time.monotonic()
    with pytest.raises(TwinError, match=r"tentacle twin: rollout refused: it needs 6,\d{3},\d{3} physics substeps "
                                        r"\(one 0.03333 s command period at youngs_modulus 1e\+15 Pa\)"):
        twin.step([0.0], exc[0].period)
    assert time.monotonic() - t0 < 30.0  # refused, not stepped (hours)


class StiffToy(ToyArmTwin):
    """The toy arm with an explicit integrator's step limit: substeps per frame grow as sqrt(k)."""

    def _substeps_for(self, k: float) -> int:
        return int(math.ceil(20 * math.sqrt(k / 0.5)))

    def set_parameters(self, values):
        super().set_parameters(values)
        self._substeps = self._substeps_for(self._values["stiffness"])

    def rollout_cost_bound(self, parameters, excitations):
        per = self._substeps_for(parameters["stiffness"].upper)
        n = max(e.num_steps for e in excitations) * per
        return n, f"stiffness {parameters['stiffness'].upper:g} N*m/rad, {per} substeps per frame"


class Scripted:
    name = "scripted"

    def __init__(self, answers):
        self.answers = list(answers)

    def propose(self, ctx):
        return Proposal(values=self.answers.pop(0), rationale="scripted")


def test_loop_records_an_over_budget_rollout_as_failed_and_warns_up_front(tmp_path):
    rig = make_rig()
    real = make_sim2sim_trial(rig, {"stiffness": 0.6, "damping": 0.03, "gain": 0.3}, noise="none")
    twin = StiffToy(rig.parameters)
    n_frames = max(e.num_steps for e in real.train_excitations + real.holdout_excitations)
    # nominal stiffness 0.5 needs 20 substeps per frame; the upper bound 2.0 needs 40
    cfg = CalibrationConfig(iterations=2, rollout_budget=None, identifiability=False, final_identifiability=False,
                            stop_when_converged=False, rollout_max_substeps=30 * n_frames)
    warned: list[str] = []
    res = run_calibration(twin, real, Scripted([{"stiffness": 2.0}, {"stiffness": 0.6}]), cfg, tmp_path / "run",
                          on_warning=warned.append)
    assert len(warned) == 1 and "stiffness 2 N*m/rad, 40 substeps per frame" in warned[0]
    assert warned[0] in res.history[0].notes  # kept with the run
    r1, r2 = res.history[1:]
    assert r1.extra["failed"] and r1.error_px == math.inf
    assert any("rollout refused: it needs" in n for n in r1.notes)
    assert not r2.extra["failed"] and r2.error_px < res.initial_error_px  # the loop went on
    with pytest.warns(RolloutBudgetWarning, match="stiffness 2 N\\*m/rad"):  # default: a Python warning
        run_calibration(StiffToy(rig.parameters), real, Scripted([{"stiffness": 0.6}]),
                        CalibrationConfig(iterations=1, rollout_budget=None, identifiability=False,
                                          final_identifiability=False, rollout_max_substeps=30 * n_frames))


def test_finger_substep_and_wall_time_limits():
    from vid2sid_ros.sim.registry import make_rig as make_registered

    rig = make_registered("finger")
    twin = rig.make_twin()
    exc = rig.excitations["train"][0]
    twin.rollout_limits = RolloutLimits(max_substeps=10)
    res = twin.rollout(exc)
    assert res.diverged and "rollout refused" in res.message and not res.trajectory.valid.any()
    twin.rollout_limits = RolloutLimits(max_substeps=None, max_wall_s=1e-9)
    res = twin.rollout(exc)
    assert res.diverged and res.message.startswith("rollout stopped after command step 0: ")
    assert "calibration.rollout_max_wall_s" in res.message
    assert res.trajectory.valid[0].all() and not res.trajectory.valid[1:].any()  # what ran is kept
    twin.rollout_limits = RolloutLimits()
    assert not twin.rollout(exc).diverged  # the default budget does not touch a normal rollout


def test_limits_are_configurable_from_the_cli_and_checked(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"rig": TOY, "real": {"sim2sim": {"noise": "none"}},
                                   "calibration": {"iterations": 1, "rollout_max_substeps": 100,
                                                   "identifiability": False}}))
    rc = main(["calibrate", str(cfg), "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "the start point cannot be simulated" in err
    assert "rollout refused: it needs 1,800 physics substeps (20 per frame, 90 frames), over the budget of 100" in err
    cfg.write_text(yaml.safe_dump({"rig": TOY, "calibration": {"rollout_max_wall_s": -1}}))
    rc = main(["calibrate", str(cfg), "--out", str(tmp_path / "run2")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "calibration: 'rollout_max_wall_s' must be a number > 0 (s) or null, got -1" in err
    with pytest.raises(CalibrationError, match="'rollout_max_substeps' must be a positive integer or null"):
        CalibrationConfig(rollout_max_substeps=0)
    assert np.isfinite(RolloutLimits().max_substeps)
