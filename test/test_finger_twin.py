"""MuJoCo finger twin: parameter writing, rollouts, determinism, divergence, rig config."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import math  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from vid2sid_ros.core.excitation import Excitation, build_excitation  # noqa: E402
from vid2sid_ros.core.parameters import ParameterSet, ParameterSpecError, load_parameter_set  # noqa: E402
from vid2sid_ros.sim.base import Twin, TwinError  # noqa: E402
from vid2sid_ros.sim.mujoco_finger import (MODEL_PATH, PARAMETERS_PATH, FingerTwin, default_config,  # noqa: E402
                                           make_rig, parse_targets)
from vid2sid_ros.sim.registry import make_rig as registry_make_rig  # noqa: E402


@pytest.fixture(scope="module")
def twin():
    t = FingerTwin()
    yield t
    t.close()


@pytest.fixture(autouse=True)
def _nominal(twin):
    twin.set_parameters(twin.parameters.nominal())
    yield


def _const(value, n=30, name="const"):
    return Excitation(name, 30.0, np.full((n, 1), float(value)), ("flexor_motor",))


def test_twin_satisfies_protocol_and_names(twin):
    assert isinstance(twin, Twin)
    assert twin.actuator_names == ("flexor_motor",)
    assert twin.keypoint_names == ("proximal", "middle", "tip")
    assert twin.joint_names == ("mcp", "pip", "dip")
    assert (twin.camera.width, twin.camera.height) == (320, 240)
    assert twin.camera.cx == pytest.approx(159.5) and twin.camera.cy == pytest.approx(119.5)


def test_model_has_required_physics_and_render_settings(twin):
    m = twin.model
    assert m.njnt == 3 and m.ntendon == 1 and m.nu == 1
    assert np.all(m.jnt_stiffness > 0) and np.all(m.dof_damping > 0)
    assert np.all(m.dof_frictionloss > 0) and np.all(m.dof_armature > 0)
    assert m.vis.quality.shadowsize == 0 and m.vis.quality.offsamples == 0
    assert np.allclose(m.opt.gravity, [0, 0, -9.81])


def test_spec_is_valid_with_four_free_log_parameters():
    spec = load_parameter_set(PARAMETERS_PATH)
    assert spec.free_names == ["joint_stiffness", "joint_damping", "joint_friction", "actuator_gain"]
    assert all(s.scale == "log" for s in spec)
    for s in spec:
        assert s.unit and s.meaning and s.target
        assert s.upper / s.lower >= 2.5  # realistic, non-trivial bounds


def test_set_parameters_writes_targets_with_ratios(twin):
    twin.set_parameters({"joint_stiffness": 0.4, "joint_damping": 0.005, "joint_friction": 0.003,
                         "actuator_gain": 12.0, "joint_armature": 0.0005})
    m = twin.model
    assert np.allclose(m.jnt_stiffness, [0.4, 0.24, 0.12])
    assert np.allclose(m.dof_damping, 0.005)
    assert np.allclose(m.dof_frictionloss, 0.003)
    assert m.actuator_gainprm[0, 0] == pytest.approx(12.0)
    assert np.allclose(m.dof_armature, 0.0005)
    got = twin.get_parameters()
    assert got["joint_stiffness"] == 0.4 and set(got) == set(twin.parameters.names)


def test_set_parameters_rejects_unknown_and_non_finite(twin):
    with pytest.raises(ParameterSpecError, match="joint_stifness"):
        twin.set_parameters({"joint_stifness": 0.3})
    with pytest.raises(ParameterSpecError, match="finite"):
        twin.set_parameters({"joint_damping": float("nan")})
    with pytest.raises(ParameterSpecError, match="number"):
        twin.set_parameters({"joint_damping": "soft"})
    assert twin.get_parameters()["joint_damping"] == pytest.approx(0.004)  # nothing written


def test_parse_targets_grammar_and_errors(twin):
    t = parse_targets(twin.model, "p", "jnt_stiffness[1]*0.6, actuator_gainprm[0,0]")
    assert [(x.field, x.index, x.ratio) for x in t] == [("jnt_stiffness", (1,), 0.6), ("actuator_gainprm", (0, 0), 1.0)]
    with pytest.raises(TwinError, match="did you mean dof_damping"):
        parse_targets(twin.model, "p", "dof_dampng[0]")
    with pytest.raises(TwinError, match="out of range"):
        parse_targets(twin.model, "p", "dof_damping[7]")
    with pytest.raises(TwinError, match="cannot parse"):
        parse_targets(twin.model, "p", "dof_damping(0)")
    with pytest.raises(TwinError, match="index"):
        parse_targets(twin.model, "p", "actuator_gainprm[0]")
    with pytest.raises(TwinError, match="empty"):
        parse_targets(twin.model, "p", "")


def test_spec_with_typo_in_target_fails_at_construction(tmp_path):
    data = yaml.safe_load(PARAMETERS_PATH.read_text())
    data["parameters"][1]["target"] = "dof_dampin[0]"
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(TwinError, match="joint_damping.*dof_dampin"):
        FingerTwin(parameters=p)
    data["parameters"][1].pop("target")
    data["parameters"][1]["taget"] = "dof_damping[0]"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ParameterSpecError, match=r"bad.yaml.*'joint_damping'.*unknown field.*taget"):
        FingerTwin(parameters=p)


def test_bad_model_and_camera_errors(tmp_path):
    with pytest.raises(TwinError, match="cannot load"):
        FingerTwin(model_path=tmp_path / "missing.xml")
    with pytest.raises(TwinError, match="camera 'side'"):
        FingerTwin(camera="side")
    with pytest.raises(TwinError, match="marker geom"):
        FingerTwin(keypoints={"tip": "marker_nail"})


def test_rollout_shapes_time_and_state(twin):
    ex = build_excitation({"kind": "sine", "amplitude": 0.2, "offset": 0.3, "frequency": 1.0, "duration": 1.0},
                          ("flexor_motor",))
    r = twin.rollout(ex)
    assert not r.diverged and r.frames is None
    tr = r.trajectory
    assert tr.keypoints.shape == (30, 3, 2) and tr.valid.all()
    assert np.allclose(tr.time, (np.arange(30) + 1) / 30.0)
    assert tr.trial_id == ex.name and tr.source == "sim"
    assert r.state["qpos"].shape == (30, 3)
    assert np.allclose(r.state["tendon_force"][:, 0], 10.0 * ex.values[:, 0])  # tension = gain * command
    assert tr.meta["substeps"] == 17 and tr.meta["physics_timestep"] == pytest.approx(1 / 30 / 17)


def test_rollout_is_deterministic_and_render_does_not_change_physics(twin):
    ex = build_excitation({"kind": "chirp", "amplitude": 0.2, "offset": 0.3, "duration": 1.0}, ("flexor_motor",))
    a = twin.rollout(ex)
    b = twin.rollout(ex, render=True)
    c = twin.rollout(ex)
    assert np.array_equal(a.trajectory.keypoints, c.trajectory.keypoints)
    assert np.array_equal(a.trajectory.keypoints, b.trajectory.keypoints)
    assert b.frames.shape == (30, 240, 320, 3) and b.frames.dtype == np.uint8
    b2 = twin.rollout(ex, render=True)
    assert np.array_equal(b.frames, b2.frames)


def test_rollout_starts_at_rest_in_static_equilibrium(twin):
    r = twin.rollout(_const(0.0, n=20))
    kp = r.trajectory.keypoints
    assert np.abs(kp - kp[0]).max() < 1e-3  # no motion at zero command
    q = r.state["qpos"][0]
    assert q[0] > 0.1  # the finger sags under its own weight
    # stiffer springs: less sag
    twin.set_parameters({"joint_stiffness": 0.6})
    assert twin.rollout(_const(0.0, n=2)).state["qpos"][0, 0] < q[0]


def test_divergence_is_reported_not_raised(twin):
    twin.set_parameters({"joint_stiffness": 5e4})  # far outside the bounds: explicit spring blows up
    r = twin.rollout(_const(0.3, n=30))
    assert r.diverged
    assert "diverged" in r.message and "joint_stiffness" in r.message
    assert not r.trajectory.valid[-1].any() and np.isnan(r.trajectory.keypoints[-1]).all()
    twin.set_parameters(twin.parameters.nominal())
    assert not twin.rollout(_const(0.3, n=30)).diverged  # the twin recovers


def test_excitation_column_mismatch_is_an_error(twin):
    ex = Excitation("two", 30.0, np.zeros((5, 2)), ("a", "b"))
    with pytest.raises(TwinError, match="1: \\('flexor_motor',\\)"):
        twin.rollout(ex)


def test_export_model_round_trips_calibrated_values(twin, tmp_path):
    twin.set_parameters({"joint_stiffness": 0.45, "actuator_gain": 13.0, "joint_damping": 0.006})
    path = twin.export_model(tmp_path / "calibrated.xml")
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(path))
    assert np.allclose(m.jnt_stiffness, [0.45, 0.27, 0.135])
    assert m.actuator_gainprm[0, 0] == pytest.approx(13.0)
    assert np.allclose(m.dof_damping, 0.006)


def test_make_rig_default_config_and_overrides():
    rig = registry_make_rig("finger")
    assert rig.name == "finger" and "tendon" in rig.description
    assert set(rig.excitations) == {"train", "holdout"}
    names = {e.name for s in rig.excitations.values() for e in s}
    assert names == {"train_step", "train_chirp", "holdout_multisine", "holdout_sine"}
    for s in rig.excitations.values():
        for e in s:
            assert e.rate == 30.0 and e.actuator_names == ("flexor_motor",)
            assert 1.5 <= e.duration <= 4.0
            assert e.values.min() >= 0.0 and e.values.max() <= 1.0  # inside ctrlrange: no clipping
    assert sum(e.duration for e in rig.excitations["train"]) <= 4.0
    cfg = default_config()
    assert cfg["model"] == str(MODEL_PATH) and rig.config["width"] == 320
    small = make_rig(width=160, height=120)
    t = small.make_twin()
    assert (t.camera.width, t.camera.height) == (160, 120)
    t2 = small.make_twin(width=640, height=480)
    assert t2.camera.fx == pytest.approx(2 * rig.make_twin().camera.fx)
    with pytest.raises(TwinError, match="unknown config key.*valid keys"):
        make_rig(widht=100)
    with pytest.raises(TwinError, match="unknown argument"):
        rig.make_twin(colour="red")
    assert isinstance(rig.parameters, ParameterSet)


def test_projection_matches_rendered_pixel_for_a_known_point(twin):
    """The camera model: a world point on the optical axis lands on the principal point."""
    import mujoco

    from vid2sid_ros.sim.mujoco_render import camera_extrinsics, project_points

    d = mujoco.MjData(twin.model)
    mujoco.mj_forward(twin.model, d)
    pos, rot = camera_extrinsics(d, 0)
    on_axis = pos - 0.3 * rot[:, 2]  # 0.3 m in front of the camera
    uv = project_points(on_axis, pos, rot, twin.camera)
    assert uv == pytest.approx([twin.camera.cx, twin.camera.cy])
    up = on_axis + 0.3 * math.tan(math.radians(15)) * rot[:, 1]  # top edge of the 30 deg fovy
    assert project_points(up, pos, rot, twin.camera)[1] == pytest.approx(twin.camera.cy - 120.0)


def test_no_gl_backend_gives_a_clear_error(monkeypatch):
    import mujoco.egl

    from vid2sid_ros.sim import mujoco_render

    class Broken:
        def __init__(self, *a, **k):
            raise RuntimeError("no EGL display")

    monkeypatch.setattr(mujoco.egl, "GLContext", Broken)
    monkeypatch.setenv("MUJOCO_GL", "egl")
    monkeypatch.setenv("PYOPENGL_PLATFORM", "egl")  # as after a real EGL attempt: OSMesa cannot follow
    with pytest.raises(TwinError, match=r"headless OpenGL.*egl: RuntimeError: no EGL display.*osmesa: "):
        mujoco_render._make_gl_context(32, 24)
    twin = FingerTwin()
    with pytest.raises(TwinError, match="headless OpenGL"):
        twin.rollout(_const(0.1, n=3), render=True)
    assert not twin.rollout(_const(0.1, n=3)).diverged  # physics-only rollouts need no GL



def test_forward_leaves_velocity_and_control_as_written():
    """The rest-state solve sets the velocity and the control once and then only moves qpos: mj_forward must
    read them and never write them (a control outside the actuator's range included, which MuJoCo clamps)."""
    import mujoco

    from vid2sid_ros.rigs import load_rig

    twin = load_rig("finger").make_twin()
    m, d = twin.model, twin.data
    for u in (0.0, 0.7, 5.0, -3.0):
        d.qpos[:] = 0.1
        d.qvel[:] = 0.0
        d.ctrl[:] = u
        mujoco.mj_forward(m, d)
        assert np.all(d.ctrl == u) and np.all(d.qvel == 0.0)
        q = twin.static_equilibrium([u] * m.nu)
        assert np.array_equal(q, twin.static_equilibrium([u] * m.nu))
