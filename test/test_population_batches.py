"""Population baselines evaluate a whole batch on the executor (a CMA-ES generation, an iteration's random
draws) and tell the optimiser exactly what one-at-a-time evaluation tells it."""

from __future__ import annotations

import math

import pytest

from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
from vid2sid_ros.calibration.executor import make_executor
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers import baselines
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.sim.toy import make_rig

BUDGET = 2 * 30  # two trials: 30 evaluations


def _calibrate(method: str, executor, *, one_at_a_time: bool = False, monkeypatch=None):
    rig = make_rig()
    real = make_sim2sim_trial(rig, draw_ground_truth(rig.parameters, 3), seed=3, noise="keypoint")
    cfg = CalibrationConfig(iterations=3, rollout_budget=BUDGET, seed=3, diagnosis=False, tracker_bias=False,
                            identifiability=False, final_identifiability=False)
    if one_at_a_time:  # the sequential path: the runner's batch answered point by point
        monkeypatch.setattr(baselines._Runner, "many", lambda self, us: [self(u) for u in us])
    return run_calibration(rig, real, make_proposer(method, seed=3), cfg, None, executor=executor)


def _history(res) -> list[dict]:
    out = []
    for r in res.history:
        d = dict(vars(r))
        d.pop("wall_s", None)
        out.append(d)
    return out


@pytest.mark.parametrize("method", ["cmaes", "random"])
def test_a_population_on_threads_is_the_serial_and_the_one_at_a_time_history(method, monkeypatch):
    calls: list[int] = []
    real_many = baselines._Runner.many

    def spy(self, us):
        calls.append(len(us))
        return real_many(self, us)

    monkeypatch.setattr(baselines._Runner, "many", spy)
    with make_executor("threads", 2) as ex:
        threaded = _calibrate(method, ex)
    assert calls and max(calls) > 1  # whole generations / draws went out as batches
    if method == "cmaes":  # a generation: cmaes' default population 4 + floor(3 ln n)
        n = 4  # the toy's stiffness, damping, gain and its latency nuisance
        assert max(calls) == 4 + int(math.floor(3 * math.log(n))) == 8
    serial = _calibrate(method, None)
    monkeypatch.undo()
    sequential = _calibrate(method, None, one_at_a_time=True, monkeypatch=monkeypatch)
    assert _history(threaded) == _history(serial) == _history(sequential)
    assert threaded.values == sequential.values and threaded.rollouts == sequential.rollouts <= BUDGET


class _Ctx:
    """The two evaluation entry points a runner uses, counting what is charged."""

    def __init__(self):
        from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec

        self.parameters = ParameterSet([ParameterSpec("a", "m", 0.0, 1.0, 0.5, "a length")])
        self.history, self.seen, self.batches = [], [], []

    def _ev(self, v):
        from vid2sid_ros.calibration.proposers.proposer import Evaluation

        self.seen.append(v["a"])
        return Evaluation(values=dict(v), error_px=abs(v["a"] - 0.3), per_keypoint_px={}, rollouts=1)

    def evaluate(self, v):
        return self._ev(v)

    def evaluate_many(self, vs):
        self.batches.append(len(vs))
        return [self._ev(v) for v in vs]


def test_a_batch_stops_at_the_quota_where_one_at_a_time_would_and_evaluates_a_repeated_point_once():
    import numpy as np

    ctx = _Ctx()
    f = baselines._Runner(ctx, quota=2)
    us = [np.array([0.1]), np.array([0.1]), np.array([0.5]), np.array([0.9])]
    with pytest.raises(baselines._QuotaReached):
        f.many(us)
    assert ctx.batches == [2] and ctx.seen == [0.1, 0.5]  # the repeat answered from the cache, 0.9 over quota
    assert f.cache[(0.1,)] == pytest.approx(0.2) and len(f.new) == 2
