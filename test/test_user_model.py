"""The generic user-model route: targets, projection, config, rollout, recovery (no real video)."""

from __future__ import annotations

import math
import os
import textwrap
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest

from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.core.parameters import ParameterSet
from vid2sid_ros.sim.image_projection import ImageProjection, ProjectionError, measure_background_shift
from vid2sid_ros.rigs import RigConfigError, load_rig
from vid2sid_ros.sim.pendulum import length_from_period, pendulum_period
from vid2sid_ros.sim.user_model import UserModelError, UserModelTwin, parse_user_target

MODELS = Path(__file__).resolve().parents[1] / "vid2sid_ros" / "sim" / "models"


@pytest.fixture(scope="module")
def twin() -> UserModelTwin:
    return UserModelTwin(model_path=MODELS / "pendulum.xml", parameters=MODELS / "pendulum_parameters.yaml",
                         keypoints={"apple": "apple_centre"},
                         projection={"anchor": "pivot", "width": 640, "height": 360}, max_physics_timestep=0.009)


def _free(T: int, rate: float = 30.0) -> Excitation:
    return Excitation("free", rate, np.zeros((T, 1)), ("pivot_torque",))


# -- targets ------------------------------------------------------------------------------
def test_targets_resolve_names_options_camera_and_initial_state(twin):
    m = twin.model
    b = parse_user_target(m, "length", "body_pos[apple,2]*-1, geom_size[string,1]*0.5")
    assert [(x.kind, x.field, x.ratio) for x in b] == [("model", "body_pos", -1.0), ("model", "geom_size", 0.5)]
    assert b[0].index == (2, 2)  # apple is body 2 (world, hanger, apple)
    assert parse_user_target(m, "d", "dof_damping[swing]")[0].index == (0,)
    assert parse_user_target(m, "rho", "opt.density")[0].kind == "option"
    assert parse_user_target(m, "g", "opt.gravity[2]")[0].index == (2,)
    assert parse_user_target(m, "s", "camera.px_per_m")[0].field == "px_per_m"
    q = parse_user_target(m, "a", "init.qvel[swing]")[0]
    assert (q.kind, q.index) == ("qvel", (0,))


@pytest.mark.parametrize("target, message", [
    ("body_pos[pear,2]", "no body named 'pear'"),
    ("dof_dampin[swing]", "did you mean dof_damping"),
    ("camera.px_per_metre", "did you mean px_per_m"),
    ("init.qpos[elbow]", "no joint named 'elbow'"),
    ("init.qpos[swing,3]", "component 3 out of range"),
    ("opt.gravity", "index it accordingly"),
    ("trial.delay", "valid: time_offset"),
    ("", "empty 'target'"),
])
def test_bad_targets_name_the_parameter_and_the_problem(twin, target, message):
    with pytest.raises(UserModelError) as err:
        parse_user_target(twin.model, "my_param", target)
    assert "my_param" in str(err.value)
    assert message in str(err.value)


def test_set_parameters_writes_model_option_camera_and_state(twin):
    before = twin.get_parameters()
    try:
        twin.set_parameters({"length": 0.8, "drag_density": 2.5, "damping": 0.001, "px_per_m": 400.0,
                             "initial_angle": 0.2})
        assert twin.model.body_pos[2, 2] == pytest.approx(-0.8)
        assert twin.model.geom_size[0, 1] == pytest.approx(0.4)  # the string follows the length
        assert twin.model.geom_pos[0, 2] == pytest.approx(-0.4)
        assert twin.model.opt.density == pytest.approx(2.5)
        assert twin.model.dof_damping[0] == pytest.approx(0.001)
        assert twin.projection.px_per_m == pytest.approx(400.0)
        res = twin.rollout(_free(3))
        assert res.state["qpos"][0, 0] == pytest.approx(0.2)  # row 0 = initial state
    finally:
        twin.set_parameters(before)


# -- physics ------------------------------------------------------------------------------
def test_undamped_twin_swings_with_the_elliptic_period(twin):
    """The MuJoCo twin (a physical pendulum: sphere r = 38 mm) matches T = 4 sqrt(L_eq/g) K(sin²(θ0/2))."""
    before = twin.get_parameters()
    try:
        L, th0 = 1.0, 0.5
        twin.set_parameters({"length": L, "damping": 0.0, "drag_density": 0.0, "initial_angle": th0,
                             "initial_angular_velocity": 0.0})
        res = twin.rollout(_free(600, rate=120.0))
        q = res.state["qpos"][:, 0]
        t = np.arange(len(q)) / 120.0
        s = np.sign(q)
        i = np.flatnonzero(s[1:] * s[:-1] < 0)
        tc = t[i] - q[i] * (t[i + 1] - t[i]) / (q[i + 1] - q[i])
        period = 2 * np.mean(np.diff(tc))
        L_eq = L + 2 * 0.038 ** 2 / (5 * L)  # physical pendulum, solid sphere
        assert period == pytest.approx(pendulum_period(L_eq, th0), rel=2e-4)
        assert np.max(np.abs(q)) == pytest.approx(th0, abs=1e-4)  # no damping: no decay
    finally:
        twin.set_parameters(before)


def test_drag_and_damping_decay_amplitude_and_diverging_values_are_reported(twin, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo logs the instability warning to ./MUJOCO_LOG.TXT
    before = twin.get_parameters()
    try:
        twin.set_parameters({"damping": 0.0, "drag_density": 8.0, "initial_angle": 0.5, "length": 1.0})
        q = twin.rollout(_free(300)).state["qpos"][:, 0]
        assert np.max(np.abs(q[-60:])) < 0.45
        twin.set_parameters({"initial_angular_velocity": 1e9})
        res = twin.rollout(_free(50))
        assert res.diverged and "diverged" in res.message
    finally:
        twin.set_parameters(before)


def test_period_formulas_invert():
    assert pendulum_period(1.0) == pytest.approx(2 * math.pi * math.sqrt(1 / 9.81))
    assert pendulum_period(1.0, 0.35) / pendulum_period(1.0) == pytest.approx(1 + 0.35 ** 2 / 16, rel=2e-4)
    assert length_from_period(pendulum_period(1.07, 0.3), 0.3) == pytest.approx(1.07)
    with pytest.raises(ValueError):
        pendulum_period(-1.0)


# -- projection ---------------------------------------------------------------------------
def test_projection_roll_drift_perspective_and_distortion():
    p = ImageProjection(width=640, height=360, origin_x=300, origin_y=-300, px_per_m=500)
    down = np.array([[0.0, 0.0, -1.0]])
    assert np.allclose(p.project(down, np.zeros(3)), [[300, 200]])
    rolled = p.with_values({"roll": 0.1}).project(down, np.zeros(3))
    assert rolled[0, 0] == pytest.approx(300 - 500 * math.sin(0.1))  # verticals turn clockwise
    drift = p.with_values({"drift_x": 2.0, "drift_y": -1.0}).project(down[None].repeat(2, 0), np.zeros(3),
                                                                     np.array([0.0, 3.0]))
    assert np.allclose(drift[1, 0] - drift[0, 0], [6.0, -3.0])
    near = p.with_values({"distance": 4.0}).project(np.array([[0.0, -1.0, -1.0]]), np.zeros(3))  # 1 m closer
    assert near[0, 1] == pytest.approx(-300 + 500 * 4 / 3)
    k1 = p.with_values({"radial_k1": -0.1}).project(np.array([[0.5, 0.0, -0.8]]), np.zeros(3))
    plain = p.project(np.array([[0.5, 0.0, -0.8]]), np.zeros(3))
    assert abs(k1[0, 0] - 319.5) < abs(plain[0, 0] - 319.5)  # barrel distortion pulls towards the centre
    with pytest.raises(ProjectionError, match="px_per_m"):
        ImageProjection(px_per_m=0.0)
    with pytest.raises(ProjectionError, match="unknown projection field"):
        p.with_values({"zoom": 2.0})


def test_background_shift_recovers_a_known_camera_motion():
    rng = np.random.default_rng(0)
    base = (rng.random((120, 160)) * 255).astype(np.float32)
    import cv2

    base = cv2.GaussianBlur(base, (0, 0), 1.5)
    frames = []
    for k in range(6):
        M = np.float32([[1, 0, 0.5 * k], [0, 1, -0.3 * k]])
        f = cv2.warpAffine(base, M, (160, 120), borderMode=cv2.BORDER_REFLECT)
        frames.append(np.repeat(np.clip(f, 0, 255).astype(np.uint8)[..., None], 3, axis=2))
    idx, shift, score = measure_background_shift(np.stack(frames), (30, 30, 130, 90), search_px=10)
    assert np.allclose(shift[-1], [2.5, -1.5], atol=0.15)
    assert score.min() > 0.9
    with pytest.raises(ProjectionError, match="margin"):
        measure_background_shift(np.stack(frames), (0, 0, 50, 50))


# -- a rig with no code: inline MJCF + spec + config -----------------------------------------
def test_a_new_rig_needs_only_yaml_and_a_model(tmp_path):
    """A mass on a spring-loaded slider, defined by files only, oscillates at sqrt(k/m)."""
    (tmp_path / "slider.xml").write_text(textwrap.dedent("""
        <mujoco model="slider">
          <option timestep="0.002" integrator="RK4" gravity="0 0 0"/>
          <worldbody>
            <site name="origin" pos="0 0 0" size="0.01"/>
            <body name="cart">
              <joint name="slide" type="slide" axis="1 0 0" stiffness="10" damping="0"/>
              <geom type="sphere" size="0.02" mass="0.5" rgba="0 0.6 0 1"/>
              <site name="marker" size="0.01"/>
            </body>
          </worldbody>
        </mujoco>"""))
    (tmp_path / "spec.yaml").write_text(textwrap.dedent("""
        rig: slider
        parameters:
          - {name: stiffness, unit: N/m, lower: 1, upper: 100, nominal: 20, target: "jnt_stiffness[slide]"}
          - {name: x0, unit: m, lower: -0.2, upper: 0.2, nominal: 0.1, kind: nuisance, target: "init.qpos[slide]"}
          - {name: scale, unit: px/m, lower: 100, upper: 2000, nominal: 1000, kind: nuisance,
             target: camera.px_per_m}"""))
    (tmp_path / "rig.yaml").write_text(textwrap.dedent("""
        rig: slider
        model: slider.xml
        parameters: spec.yaml
        keypoints: {cart: marker}
        projection: {anchor: origin, width: 320, height: 240, origin_x: 160, origin_y: 120}
        max_physics_timestep: 0.002
        trial: {excitation: none}"""))
    rig = load_rig(tmp_path / "rig.yaml")
    tw = rig.make_twin()
    assert tw.actuator_names == () and tw.keypoint_names == ("cart",)
    res = tw.rollout(Excitation("free", 100.0, np.zeros((100, 1)), ("none",)))
    x = res.trajectory.keypoints[:, 0, 0]
    assert x[0] == pytest.approx(160 + 100)  # 0.1 m x 1000 px/m right of the origin
    k = np.argmin(x[:60])  # half a period of sqrt(k/m) = sqrt(20/0.5) rad/s
    assert k / 100.0 == pytest.approx(math.pi / math.sqrt(20 / 0.5), abs=0.011)
    out = tw.export_model(tmp_path / "calibrated.xml")
    assert 'stiffness="20"' in out.read_text()
    with pytest.raises(RigConfigError, match=r"rig.yaml:cameras: unknown key \(did you mean camera\?\)"):
        load_rig(tmp_path / "rig.yaml", overrides={"cameras": {}})
    bad = tmp_path / "bad.yaml"
    bad.write_text((tmp_path / "rig.yaml").read_text().replace("{cart: marker}", "{cart: nowhere}"))
    with pytest.raises(RigConfigError, match=r"bad.yaml:keypoints.cart: 'nowhere' is neither a site nor a body"):
        load_rig(bad)
    missing = tmp_path / "missing.yaml"
    missing.write_text((tmp_path / "rig.yaml").read_text().replace("slider.xml", "nope.xml"))
    with pytest.raises(RigConfigError, match=r"missing.yaml:model: model file not found: .*nope.xml"):
        load_rig(missing)


def test_pendulum_is_registered_and_recovers_its_own_synthetic_swing():
    """sim2sim through the generic route: the reasoner recovers length, drag and the nuisance camera."""
    from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
    from vid2sid_ros.calibration.proposers import make_proposer
    from vid2sid_ros.core.trial import RealTrial
    rig = load_rig("pendulum")
    assert rig.name == "pendulum" and rig.excitations["holdout"][0].num_steps == 1299
    tw = rig.make_twin()
    truth = {"length": 0.9, "drag_density": 3.0, "damping": 0.0, "pivot_x": 310.0, "pivot_y": -250.0,
             "px_per_m": 480.0, "camera_roll": 0.02, "camera_drift_x": 0.2, "camera_drift_y": -0.3,
             "initial_angle": -0.4, "initial_angular_velocity": 0.05}
    tw.set_parameters(truth)
    exc = Excitation("synthetic", 30.0, np.zeros((150, 1)), ("pivot_torque",))
    real_traj = tw.rollout(exc).trajectory
    real = RealTrial([real_traj], [exc], source="synthetic")
    free = ["length", "drag_density", "pivot_x", "pivot_y", "px_per_m", "initial_angle"]
    start = {"length": 0.95, "drag_density": 1.5, "pivot_x": 300.0, "pivot_y": -270.0, "px_per_m": 460.0,
             "initial_angle": -0.38}
    params: ParameterSet = rig.parameters.with_nominal({**truth, **start}).with_frozen(free=free)
    res = run_calibration(tw, real, make_proposer("reasoner"),
                          CalibrationConfig(iterations=4, rollout_budget=40, identifiability=False,
                                            final_identifiability=False), None, parameters=params)
    assert res.error_px < 0.05
    assert res.values["length"] == pytest.approx(0.9, rel=2e-3)
    assert res.values["drag_density"] == pytest.approx(3.0, rel=0.05)
    assert res.values["px_per_m"] == pytest.approx(480.0, rel=2e-3)


def test_rig_config_rejects_unknown_keys_and_bad_split():
    with pytest.raises(RigConfigError, match=r"pendulum.yaml:camera_model: unknown key"):
        load_rig("pendulum", overrides={"camera_model": "pinhole"})
    with pytest.raises(RigConfigError, match=r"pendulum.yaml:trials\[0\].split.train_fraction: expected a number in"):
        load_rig("pendulum", overrides={"trials": [{"source": {"video": "pkg:data/pendulum_redapple/redapple_480p.mov"},
                                                    "split": {"train_fraction": 2.0}}]})


def test_stepping_reproduces_the_rollout_rows(twin):
    """The ROS lockstep graph steps one command at a time: same rows as a rollout."""
    from vid2sid_ros.sim.stepping import NativeStepper, make_stepper

    stepper = make_stepper(twin)
    assert isinstance(stepper, NativeStepper)
    exc = _free(40)
    ref = twin.rollout(exc, render=True)
    stepper.reset()
    rows = [stepper.step(exc.values[k], exc.period, render=(k == 7)) for k in range(40)]
    kp = np.stack([r.keypoints for r in rows])
    assert np.allclose(kp, ref.trajectory.keypoints, atol=1e-9)
    assert np.array_equal(rows[7].frame, ref.frames[7])
    # MuJoCo's render puts the (shaded red) bob where the keypoint projects
    x, y = np.round(ref.trajectory.keypoints[7, 0]).astype(int)
    assert 0 <= x < 640 and 0 <= y < 360
    r, g, b = (int(c) for c in ref.frames[7][y, x])
    assert r > 120 and r > 2 * g and r > 2 * b, (r, g, b)


def test_frame_timing_repair_on_a_synthetic_swing():
    """A dropped frame and a repeated frame of a 2 s-period swing are found and re-timed; a clean
    trajectory is returned untouched."""
    from vid2sid_ros.core.trajectory import Trajectory
    from vid2sid_ros.perception.frame_timing import repair_frame_timing

    fps = 60.0
    slots = np.arange(400)
    x = 300 + 200 * np.sin(2 * np.pi * slots / (2.0 * fps))
    y = 200 - 20 * np.cos(4 * np.pi * slots / (2.0 * fps))
    true = np.stack([x, y], 1)[:, None]
    clean = Trajectory(slots / fps, true, np.ones((400, 1), bool), ("bob",))
    assert repair_frame_timing(clean, fps)[0] is clean
    # the camera drops slot 60 (fast: at the bottom of the swing) and repeats frame 180 in place of 181
    frames = np.r_[0:60, 61:181, 180, 182:400]
    seen = Trajectory(np.arange(len(frames)) / fps, true[frames], np.ones((len(frames), 1), bool), ("bob",))
    fixed, notes = repair_frame_timing(seen, fps)
    assert len(notes) == 2 and "frame 60: moved" in notes[0] and "frame 180: repeats frame 179" in notes[1]
    assert "marked invalid" in notes[1]  # the repeat took a lost frame's place: no shift after it
    ok = fixed.valid[:, 0]
    assert np.allclose(fixed.keypoints[ok, 0], true[fixed.steps[ok], 0])  # every valid row at its true slot
    assert ok.sum() == len(frames) - 1 and fixed.steps[-1] == 399
    assert not fixed.valid[list(fixed.meta["frame_index"]).index(180)].any()  # the repeat carries no observation
    # a repeat that shifts the timeline (the real clip's frame 407): later frames move one slot earlier
    frames2 = np.r_[0:100, 99, 100:300]
    seen2 = Trajectory(np.arange(len(frames2)) / fps, true[frames2], np.ones((len(frames2), 1), bool), ("bob",))
    fixed2, notes2 = repair_frame_timing(seen2, fps)
    assert len(notes2) == 1 and "later frames move one slot earlier" in notes2[0]
    ok2 = fixed2.valid[:, 0]
    assert np.allclose(fixed2.keypoints[ok2, 0], true[fixed2.steps[ok2], 0])


def test_a_finer_model_timestep_is_kept_under_the_bound(tmp_path):
    """A user's MJCF said timestep="0.002"; the twin stepped it at 1/30/9 = 0.0037 s (the 0.004 s default bound) and
    the calibrated model said timestep="0.0037037". The bound is an upper bound: the model's own finer step wins,
    a coarser one (or none) is stepped at the bound, and the exported model keeps its own timestep."""
    import xml.etree.ElementTree as ET

    import mujoco

    def twin_for(option: str, **kw):
        (tmp_path / "m.xml").write_text(
            f'<mujoco>{option}<worldbody><body name="arm" pos="0 0 1"><joint name="j" type="hinge" axis="0 1 0"/>'
            '<geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.01" mass="0.2"/><site name="tip" pos="0 0 -0.3"/>'
            '</body></worldbody><actuator><motor name="m" joint="j"/></actuator></mujoco>')
        spec = ParameterSet.from_dict({"parameters": [{"name": "d", "unit": "N*m*s/rad", "lower": 0.001, "upper": 0.1,
                                                       "nominal": 0.01, "target": "dof_damping[j]"}]})
        return UserModelTwin(model=tmp_path / "m.xml", parameters=spec, keypoints={"tip": "tip"},
                             projection={"width": 64, "height": 48}, **kw)

    exc = Excitation("kick", 30.0, np.full((6, 1), 0.05), ("m",))
    for option, kw, step in [('<option timestep="0.002"/>', {}, 1 / 30 / 17),     # finer than 0.004: kept
                             ('<option timestep="0.01"/>', {}, 1 / 30 / 9),       # coarser: the bound
                             ("", {}, 1 / 30 / 9),                                  # none set: the bound
                             ('<option timestep="0.002"/>', {"max_physics_timestep": 0.001}, 1 / 30 / 34)]:
        twin = twin_for(option, **kw)
        twin.rollout(exc)
        assert twin.model.opt.timestep == pytest.approx(step), (option, kw)
    twin = twin_for('<option timestep="0.002"/>')
    twin.rollout(exc)
    out = twin.export_model(tmp_path / "calibrated_model.xml")
    assert mujoco.MjModel.from_xml_path(str(out)).opt.timestep == 0.002  # was 0.0037037
    twin = twin_for('<option timestep="0.001"/>')
    twin.rollout(exc)
    assert float(ET.parse(twin.export_model(tmp_path / "c2.xml")).getroot().find("option").get("timestep")) == 0.001
