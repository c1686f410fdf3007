"""Each finger parameter moves the *tracked* (rendered -> tracker) trajectory the physical way.

Signals are on the fingertip marker's image row y (px); flexion moves the tip down the
image, so y grows with deflection.
"""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from vid2sid_ros.core.excitation import build_excitation  # noqa: E402
from vid2sid_ros.perception.markers import MarkerTracker  # noqa: E402
from vid2sid_ros.sim.registry import make_rig  # noqa: E402

STEP = {"kind": "step", "name": "step_0.35", "amplitude": 0.35, "t_step": 0.1, "duration": 1.2}
SMALL_STEP = {"kind": "step", "name": "step_0.06", "amplitude": 0.06, "t_step": 0.1, "duration": 0.6}


@pytest.fixture(scope="module")
def setup():
    rig = make_rig("finger")
    twin = rig.make_twin()
    tracker = MarkerTracker.from_config(rig.tracker)
    yield rig, twin, tracker
    twin.close()


def _tip_y(setup, values, cfg):
    rig, twin, tracker = setup
    twin.set_parameters({**rig.parameters.nominal(), **values})
    r = twin.rollout(build_excitation(cfg, twin.actuator_names), render=True)
    traj = tracker.track(r.frames, time=r.trajectory.time)
    assert traj.valid.all() and not r.diverged
    return traj.keypoint("tip")[:, 1]


def _step_metrics(y):
    """sag (px row at rest), deflection, overshoot (px) and time of the first peak (s, sub-frame)."""
    final = y[-8:].mean()
    k = int(np.argmax(y))
    a, b, c = y[k - 1], y[k], y[k + 1]
    t_peak = (k + 0.5 * (a - c) / (a - 2 * b + c)) / 30.0
    return {"sag": y[0], "deflection": final - y[0], "overshoot": y.max() - final, "t_peak": t_peak}


def test_more_stiffness_less_sag_smaller_deflection_higher_frequency(setup):
    soft = _step_metrics(_tip_y(setup, {"joint_stiffness": 0.2}, STEP))
    stiff = _step_metrics(_tip_y(setup, {"joint_stiffness": 0.5}, STEP))
    assert stiff["sag"] < soft["sag"] - 20  # less gravity sag at rest
    assert stiff["deflection"] < 0.8 * soft["deflection"]
    assert stiff["t_peak"] < 0.9 * soft["t_peak"]  # faster: higher natural frequency


def test_more_damping_smaller_overshoot(setup):
    low = _step_metrics(_tip_y(setup, {"joint_damping": 0.0025}, STEP))
    high = _step_metrics(_tip_y(setup, {"joint_damping": 0.008}, STEP))
    assert high["overshoot"] < 0.8 * low["overshoot"]
    assert high["sag"] == pytest.approx(low["sag"], abs=0.3)  # damping does not change the rest pose


def test_more_friction_larger_dead_band(setup):
    low = _tip_y(setup, {"joint_friction": 0.002}, SMALL_STEP)
    high = _tip_y(setup, {"joint_friction": 0.010}, SMALL_STEP)
    moved_low = low[-5:].mean() - low[0]
    moved_high = high[-5:].mean() - high[0]
    assert moved_low > 3.0  # a small command moves a low-friction finger
    assert moved_high < 0.3 * moved_low  # but hardly a high-friction one


def test_more_gain_larger_deflection(setup):
    weak = _step_metrics(_tip_y(setup, {"actuator_gain": 7.0}, STEP))
    strong = _step_metrics(_tip_y(setup, {"actuator_gain": 15.0}, STEP))
    assert strong["deflection"] > 1.5 * weak["deflection"]
    assert strong["sag"] == pytest.approx(weak["sag"], abs=0.3)  # gain does not change the rest pose
