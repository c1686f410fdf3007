"""``--executor threads`` on a rig-config twin: ``rollout_many`` (one ``mujoco.rollout`` call) gives the twin's
own rollouts to the bit on models whose options change what a batched rollout sees: sensors switched off,
bodies put to sleep by a ``time_offset`` pre-roll, a blow-up in the last physics step with MuJoCo's automatic
reset switched off. Small models built here; each test runs in well under a second."""

from __future__ import annotations

import numpy as np

from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec
from vid2sid_ros.sim.user_model import UserModelTwin

CAMERA = {"width": 320, "height": 240, "fovy": 50.0, "pose": {"position": [0.15, -1.6, 1.0], "look_at": [0.15, 0, 1.0]}}

_ARM = """<mujoco model="arm">
  <option timestep="0.002">{flags}</option>
  <worldbody>
    <body name="link" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5"/>
      <site name="tip" pos="0.3 0 0"/>
    </body>
  </worldbody>
  <actuator><motor name="m" joint="hinge" gear="1"/></actuator>
</mujoco>
"""

_BOXES = """<mujoco model="boxes">
  <option timestep="0.002" sleep_tolerance="1e-3"><flag sleep="enable"/></option>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="box" pos="0 0 0.2">
      <freejoint name="bj"/>
      <geom name="bg" type="box" size="0.05 0.05 0.05" mass="0.4"/>
      <site name="corner" pos="0.05 0.05 0.05"/>
    </body>
    <body name="ball" pos="-0.5 0 0.5">
      <freejoint/>
      <geom type="sphere" size="0.05" mass="0.2"/>
    </body>
  </worldbody>
</mujoco>
"""

_BALL = """<mujoco model="ball">
  <option timestep="0.04"><flag autoreset="disable"/></option>
  <worldbody>
    <body name="b" pos="0 0 1">
      <joint name="ball" type="ball" damping="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5"/>
      <site name="tip" pos="0.3 0 0"/>
    </body>
  </worldbody>
  <actuator><motor name="m" joint="ball" gear="0 0 1"/></actuator>
</mujoco>
"""


def _twin(tmp_path, xml: str, specs, keypoints, **kw) -> UserModelTwin:
    path = tmp_path / "model.xml"
    path.write_text(xml)
    return UserModelTwin(model=path, parameters=ParameterSet(tuple(specs)), keypoints=keypoints, camera=CAMERA, **kw)


def _serial(twin: UserModelTwin, pairs) -> list:
    out = []
    for exc, values in pairs:
        twin.set_parameters(values)
        out.append(twin.rollout(exc))
    return out


def _assert_same(ref, got) -> None:
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        assert (a.diverged, a.message) == (b.diverged, b.message)
        for k in a.state:
            np.testing.assert_array_equal(a.state[k], b.state[k], err_msg=k)
        np.testing.assert_array_equal(a.trajectory.keypoints, b.trajectory.keypoints)
        np.testing.assert_array_equal(a.trajectory.valid, b.trajectory.valid)


def test_a_model_with_its_sensors_switched_off_gets_its_keypoints_all_the_same(tmp_path):
    """``<flag sensor="disable"/>``: the batch model's keypoint sensors would never be computed (keypoints at the
    world origin, 160 px off); the keypoints are read back from the states instead."""
    specs = [ParameterSpec("damping", "N*m*s/rad", 0.02, 0.2, 0.05, "", "dof_damping[hinge]"),
             ParameterSpec("gain", "N*m", 0.5, 2.0, 1.0, "", "actuator_gear[m,0]")]
    twin = _twin(tmp_path, _ARM.format(flags='<flag sensor="disable"/>'), specs, {"tip": "tip", "link": "link"},
                 trial_init={"push": {"qpos[hinge]": 0.3}})
    u = np.where(np.arange(45) >= 6, 0.4, 0.0)[:, None]
    exc = Excitation("push", 30.0, u, ("m",), meta={"trial": "push"})
    pairs = [(exc, {"damping": d, "gain": g}) for d, g in ((0.05, 1.0), (0.1, 1.5))]
    ref = _serial(twin, pairs)
    _assert_same(ref, twin.rollout_many(pairs, nthread=2))
    assert np.ptp(ref[0].trajectory.keypoints[:, 0, 0]) > 1.0  # the tip moves in the image


def test_bodies_put_to_sleep_by_the_time_offset_pre_roll_stay_asleep(tmp_path):
    """MuJoCo's sleep flag: a box at rest falls asleep during a 1.5 s pre-roll; which bodies sleep is not in the
    state mujoco.rollout starts from (it wakes them), so such a rollout is the twin's own."""
    specs = [ParameterSpec("friction", "1", 0.3, 1.2, 0.8, "", "geom_friction[bg,0]"),
             ParameterSpec("mass", "kg", 0.1, 1.0, 0.4, "", "body_mass[box]")]
    twin = _twin(tmp_path, _BOXES, specs, {"corner": "corner", "ball": "ball"}, max_physics_timestep=0.002)
    exc = Excitation("drop", 30.0, np.zeros((45, 1)), ("u0",), meta={"trial": "drop", "time_offset": 1.5,
                                                                     "init": {"qvel[bj,0]": 0.5}})
    pairs = [(exc, {"friction": f, "mass": m}) for f, m in ((0.5, 0.3), (0.9, 0.6))]
    _assert_same(_serial(twin, pairs), twin.rollout_many(pairs, nthread=2))


def test_a_blow_up_in_the_last_physics_step_without_automatic_reset_is_reported_as_the_serial_loop_does(tmp_path):
    """``<flag autoreset="disable"/>``: the step that warns still advances time; a huge kick in the trial's last
    command period (one physics step per period) must still be reported as a divergence, as the twin's loop
    reports it, not returned as a clean rollout."""
    specs = [ParameterSpec("damping", "N*m*s/rad", 0.005, 0.05, 0.01, "", "dof_damping[ball]"),
             ParameterSpec("gain", "N*m", 0.1, 1e14, 1.0, "", "actuator_gear[m,2]", "log")]
    twin = _twin(tmp_path, _BALL, specs, {"tip": "tip"}, max_physics_timestep=0.04)
    u = np.zeros((30, 1))
    u[-1] = 1.0  # the kick: the last command period only
    exc = Excitation("kick", 30.0, u, ("m",), meta={"trial": "kick"})
    pairs = [(exc, {"damping": 0.01, "gain": 1.0}), (exc, {"damping": 0.01, "gain": 1e14}),
             (exc, {"damping": 0.02, "gain": 1e13})]
    ref = _serial(twin, pairs)
    assert [r.diverged for r in ref] == [False, True, True]
    _assert_same(ref, twin.rollout_many(pairs, nthread=2))


def test_a_kept_model_copy_written_again_is_a_fresh_copy_and_rolls_out_the_twins_own_rollouts(tmp_path):
    """The read-back sensor model copies kept between batches (one per point of a batch) are written again
    at the next batch's points: mass, inertia-derived constants and all, the same as a fresh copy, and the
    same rollouts as the twin's own loop."""
    specs = [ParameterSpec("damping", "N*m*s/rad", 0.02, 0.2, 0.05, "", "dof_damping[hinge]"),
             ParameterSpec("mass", "kg", 0.2, 2.0, 0.5, "", "body_mass[link]")]
    twin = _twin(tmp_path, _ARM.format(flags=""), specs, {"tip": "tip"})
    u = np.zeros((20, 1))
    u[3:] = 0.4
    exc = Excitation("push", 30.0, u, ("m",), meta={"trial": "push"})
    first = [(exc, {"damping": 0.03, "mass": 1.7}), (exc, {"damping": 0.15, "mass": 0.3}),
             (exc, {"damping": 0.08, "mass": 0.9})]
    twin.rollout_many(first, nthread=2)
    kept = list(twin.__dict__["_batch_sensor_copies"])
    assert len(kept) == 3
    second = [(exc, {"damping": 0.12, "mass": 0.6}), (exc, {"damping": 0.05, "mass": 1.2})]
    got = twin.rollout_many(second, nthread=2)
    assert all(a is b for a, b in zip(twin.__dict__["_batch_sensor_copies"], kept))  # the same, written again
    _assert_same(_serial(twin, second), got)
    twin.set_parameters(first[0][1])
    again = twin._sensor_model(slot=1)  # the kept copy of slot 1 (written at two other points before)
    fresh = twin._sensor_model()  # a fresh copy of the template
    assert again is kept[1] and fresh is not again
    for name in dir(fresh):
        x = getattr(fresh, name, None)
        if isinstance(x, np.ndarray):
            assert getattr(again, name).tobytes() == x.tobytes(), name
    assert again.opt.timestep == fresh.opt.timestep


def test_clean_rollouts_are_judged_step_by_step():
    """A batch's rollouts are clean exactly where every judged step advanced time, is finite and keeps
    |qpos| within the bound (the whole batch tested first, each step only when something fails)."""
    import warnings

    from vid2sid_ros.sim.mujoco_batch import _clean

    rng = np.random.default_rng(8)
    nq, bound = 3, 50.0
    for case in range(60):
        B, S = int(rng.integers(1, 5)), int(rng.integers(1, 30))
        init = rng.normal(size=(B, 8))
        init[:, 0] = 0.0
        states = rng.normal(size=(B, S, 8))
        states[:, :, 0] = np.arange(1, S + 1) * 0.01
        for _ in range(int(rng.integers(0, 3))):
            b, k, j = int(rng.integers(B)), int(rng.integers(S)), int(rng.integers(8))
            states[b, k, j] = rng.choice([np.nan, np.inf, -np.inf, 1e308, 60.0, -60.0, 0.0])
        upto = rng.integers(1, S + 1, size=B)
        t = np.concatenate([init[:, None, 0], states[:, :, 0]], axis=1)
        step_ok = ((np.diff(t, axis=1) > 0) & np.all(np.isfinite(states), axis=2)
                   & np.all(np.abs(states[:, :, 1:1 + nq]) <= bound, axis=2))
        want = np.array([step_ok[b, :upto[b]].all() for b in range(B)])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert np.array_equal(_clean(init, states, nq, bound, upto), want), case
