"""Every documented parameter target kind takes effect, and the exported model reproduces it.

docs/rig_config.md ("Parameter targets") documents: MjModel fields (named indices, ``*ratio``,
comma-separated shared targets), ``opt.<field>``, ``camera.<field>``, ``init.qpos/qvel[joint]``
(``@TRIAL``) and ``trial.time_offset``. For each kind, on a small MJCF and the same robot as a
URDF: a non-nominal value changes the rollout, and ``export_model`` reloaded into a fresh twin
(whose spec writes nothing into the model) re-simulates the same rollout.

With MuJoCo 4 a mass or armature written in place into a body on a single slide joint changed
nothing (its inertia is read from ``dof_M0``, derived at compile time) until ``mj_setConst``.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np
import pytest

from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec
from vid2sid_ros.sim.base import TwinError
from vid2sid_ros.sim.mujoco_constants import DERIVED_FIELDS
from vid2sid_ros.sim.mujoco_finger import FingerTwin
from vid2sid_ros.sim.user_model import UserModelError, UserModelTwin

MJCF = textwrap.dedent("""\
    <mujoco model="cart_and_arm">
      <option timestep="0.002" gravity="0 0 -9.81" density="0" viscosity="0"/>
      <worldbody>
        <body name="ball" pos="0 0 0.5">
          <joint name="slide" type="slide" axis="1 0 0" stiffness="10" damping="0.2"/>
          <geom name="ball" type="sphere" size="0.05" mass="2" contype="0" conaffinity="0"/>
          <site name="ball_site"/>
        </body>
        <body name="arm" pos="0.5 0 0.5">
          <joint name="swing" type="hinge" axis="0 1 0" damping="0.01"/>
          <inertial pos="0.15 0 0" mass="0.3" diaginertia="0.0005 0.003 0.003"/>
          <geom name="rod" type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" contype="0" conaffinity="0"/>
          <site name="tip" pos="0.3 0 0"/>
        </body>
      </worldbody>
      <actuator>
        <motor name="push" joint="slide" gear="1"/>
        <motor name="twist" joint="swing" gear="1"/>
      </actuator>
    </mujoco>
""")

URDF = textwrap.dedent("""\
    <robot name="cart_and_arm">
      <link name="base"/>
      <link name="ball">
        <inertial><origin xyz="0 0 0"/><mass value="2"/>
          <inertia ixx="0.002" iyy="0.002" izz="0.002" ixy="0" ixz="0" iyz="0"/></inertial>
        <visual><geometry><sphere radius="0.05"/></geometry></visual>
      </link>
      <link name="arm">
        <inertial><origin xyz="0.15 0 0"/><mass value="0.3"/>
          <inertia ixx="0.0005" iyy="0.003" izz="0.003" ixy="0" ixz="0" iyz="0"/></inertial>
        <visual><origin xyz="0.15 0 0" rpy="0 1.5708 0"/><geometry><cylinder radius="0.02" length="0.3"/></geometry></visual>
      </link>
      <joint name="slide" type="prismatic">
        <parent link="base"/><child link="ball"/><origin xyz="0 0 0.5"/><axis xyz="1 0 0"/>
        <limit lower="-10" upper="10" effort="100" velocity="100"/><dynamics damping="0.2"/>
      </joint>
      <joint name="swing" type="revolute">
        <parent link="base"/><child link="arm"/><origin xyz="0.5 0 0.5"/><axis xyz="0 1 0"/>
        <limit lower="-10" upper="10" effort="100" velocity="100"/><dynamics damping="0.01"/>
      </joint>
    </robot>
""")

CAMERA = {"width": 160, "height": 120, "fx": 120.0, "pose": {"position": [0.25, -2.0, 0.3], "look_at": [0.25, 0, 0.3]}}

#: (kind, target, nominal, changed, lower, upper): one row per documented target kind; the first
#: rows are MjModel fields MuJoCo derives compile-time constants from (mass, inertia, armature)
CASES = [
    ("body_mass (slide body)", "body_mass[ball]", 2.0, 1.0, 0.5, 4.0),
    ("body_mass (hinge body)", "body_mass[arm]", 0.3, 0.6, 0.1, 1.0),
    ("body_inertia, *ratio, shared", "body_inertia[arm,0]*0.01, body_inertia[arm,1]*0.01", 0.3, 0.6, 0.1, 1.0),
    ("body_ipos (centre of mass)", "body_ipos[arm,0]", 0.15, 0.25, 0.0, 0.3),
    ("dof_armature (slide)", "dof_armature[slide]", 0.0, 0.5, 0.0, 1.0),
    ("dof_armature (hinge)", "dof_armature[swing]", 0.0, 0.01, 0.0, 0.05),
    ("dof_damping", "dof_damping[slide]", 0.2, 1.0, 0.0, 2.0),
    ("dof_frictionloss", "dof_frictionloss[swing]", 0.0, 0.05, 0.0, 0.1),
    ("jnt_stiffness", "jnt_stiffness[slide]", 10.0, 20.0, 0.0, 40.0),
    ("actuator_gear", "actuator_gear[push,0]", 1.0, 2.0, 0.5, 4.0),
    ("body_pos (geometry)", "body_pos[arm,0]", 0.5, 0.6, 0.3, 0.7),
    ("opt.<field>", "opt.gravity[2]", -9.81, -5.0, -12.0, -1.0),
    ("opt.density", "opt.density", 0.0, 800.0, 0.0, 1000.0),
    ("camera.<field>", "camera.x", 0.25, 0.35, 0.0, 0.5),
    ("init.qpos[joint]", "init.qpos[swing]", 0.0, 0.4, -1.0, 1.0),
    ("init.qpos[joint] (slide)", "init.qpos[slide]", 0.0, 0.1, -1.0, 1.0),
    ("init.qvel[joint]@TRIAL", "init.qvel[slide]@t0", 0.0, 0.3, -1.0, 1.0),
    ("trial.time_offset", "trial.time_offset", 0.0, 0.2, 0.0, 0.5),
]


def _write(tmp_path: Path, fmt: str) -> Path:
    p = tmp_path / ("robot.xml" if fmt == "mjcf" else "robot.urdf")
    p.write_text(MJCF if fmt == "mjcf" else URDF)
    return p


def _spec(target: str, nominal: float, lower: float, upper: float) -> ParameterSet:
    kind = "nuisance" if target.split(".")[0] in ("camera", "init", "trial") else "physics"
    return ParameterSet((ParameterSpec("p", "1", lower, upper, nominal, target=target, kind=kind),))


def _twin(path: Path, fmt: str, params: ParameterSet, *, reload: bool = False) -> UserModelTwin:
    """The rig's twin; ``reload``: on an exported model, which already holds the markers and actuators."""
    markers = actuators = None
    if fmt == "urdf" and not reload:
        markers = [{"name": "ball_site", "body": "ball"}, {"name": "tip", "body": "arm", "pos": [0.3, 0, 0]}]
        actuators = [{"name": "push", "joint": "slide", "kind": "motor"},
                     {"name": "twist", "joint": "swing", "kind": "motor"}]
    return UserModelTwin(model=path, parameters=params, keypoints={"ball": "ball_site", "tip": "tip"},
                         camera=CAMERA, markers=markers, actuators=actuators, max_physics_timestep=0.002)


def _excitation() -> Excitation:
    t = np.arange(150) / 50.0
    u = np.stack([1.5 * np.sin(2 * np.pi * 0.7 * t), 0.2 * np.sin(2 * np.pi * 1.1 * t + 0.5)], axis=1)
    return Excitation("t0", 50.0, u, ("push", "twist"), meta={"trial": "t0"})


def _rollout(twin: UserModelTwin) -> np.ndarray:
    res = twin.rollout(_excitation())
    assert not res.diverged, res.message
    return np.concatenate([res.state["qpos"].ravel(), res.state["keypoints_world"].ravel(),
                           res.trajectory.keypoints.ravel()])


@pytest.mark.parametrize("fmt", ["mjcf", "urdf"])
@pytest.mark.parametrize("kind, target, nominal, changed, lower, upper", CASES, ids=[c[0] for c in CASES])
def test_each_target_kind_changes_the_rollout_and_the_export_reproduces_it(tmp_path, fmt, kind, target, nominal,
                                                                           changed, lower, upper):
    params = _spec(target, nominal, lower, upper)
    twin = _twin(_write(tmp_path, fmt), fmt, params)
    at_nominal = _rollout(twin)
    twin.set_parameters({"p": changed})
    at_changed = _rollout(twin)
    assert np.max(np.abs(at_changed - at_nominal)) > 1e-4, f"{target} = {changed} did not change the rollout"
    exported = twin.export_model(tmp_path / "calibrated_model.xml")
    # the fresh twin writes nothing into the model: physics comes from the file alone; a nuisance
    # (camera, initial state, time offset) is not a model field and is given to it again
    fresh_params = params if params["p"].kind == "nuisance" else _spec("camera.z", 0.3, 0.0, 1.0)
    fresh = _twin(exported, fmt, fresh_params, reload=True)
    if params["p"].kind == "nuisance":
        fresh.set_parameters({"p": changed})
    again = _rollout(fresh)
    np.testing.assert_allclose(again, at_changed, rtol=1e-9, atol=1e-12)
    twin.close()
    fresh.close()


@pytest.mark.parametrize("fmt", ["mjcf", "urdf"])
def test_an_exported_mass_inertia_and_armature_carry_the_written_values(tmp_path, fmt):
    """Was: calibrated_model.xml written with mass="2" (the value in the file, not the calibrated one)."""
    params = ParameterSet((
        ParameterSpec("mass", "kg", 0.5, 4.0, 2.0, target="body_mass[ball]"),
        ParameterSpec("arm_inertia", "kg*m^2", 0.001, 0.01, 0.003, target="body_inertia[arm,1]"),
        ParameterSpec("armature", "kg", 0.0, 1.0, 0.0, target="dof_armature[slide]")))
    twin = _twin(_write(tmp_path, fmt), fmt, params)
    twin.set_parameters({"mass": 1.25, "arm_inertia": 0.0033, "armature": 0.3})
    m = mujoco.MjModel.from_xml_path(str(twin.export_model(tmp_path / "out.xml")))
    bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "ball")
    aid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "arm")
    jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "slide")
    assert m.body_mass[bid] == pytest.approx(1.25, rel=1e-12)
    assert m.body_inertia[aid, 1] == pytest.approx(0.0033, rel=1e-12)
    assert m.dof_armature[m.jnt_dofadr[jid]] == pytest.approx(0.3, rel=1e-12)
    twin.close()


def test_a_slide_body_mass_write_changes_the_dynamics_as_the_compiled_mass_does(tmp_path):
    """The issue's measurement: mass doubled in place gave a rollout difference of exactly 0.0.
    Now the in-place write simulates exactly like the same mass compiled from the file."""
    path = _write(tmp_path, "mjcf")
    twin = _twin(path, "mjcf", _spec("body_mass[ball]", 2.0, 0.5, 4.0))
    twin.set_parameters({"p": 4.0})
    written = _rollout(twin)
    heavy = tmp_path / "heavy.xml"
    heavy.write_text(MJCF.replace('mass="2"', 'mass="4"'))
    compiled = _rollout(_twin(heavy, "mjcf", _spec("camera.z", 0.3, 0.0, 1.0)))
    np.testing.assert_allclose(written, compiled, rtol=1e-9, atol=1e-12)


def test_the_finger_mass_and_armature_writes_match_a_compiled_model(tmp_path):
    """The built-in finger writes its fields in place too: after the writes it simulates like the
    model compiled with those values (the solver weights were stale before)."""
    from vid2sid_ros.sim.mujoco_finger import MODEL_PATH

    spec = ParameterSet((ParameterSpec("armature", "kg*m^2", 1e-6, 1e-3, 1e-4,
                                       target="dof_armature[0], dof_armature[1], dof_armature[2]"),))
    twin = FingerTwin(parameters=spec, start="reference")
    twin.set_parameters({"armature": 4e-4})
    exc = Excitation("step", 30.0, np.full((40, 1), 0.6), twin.actuator_names)
    a = twin.rollout(exc).state["qpos"]
    text = MODEL_PATH.read_text()
    m = mujoco.MjModel.from_xml_string(text)
    out = tmp_path / "finger_armature.xml"
    twin.export_model(out)
    again = FingerTwin(model_path=out, parameters=ParameterSet((ParameterSpec(
        "unused", "1", 0.0, 1.0, float(m.dof_damping[0]), target="dof_damping[0]"),)), start="reference")
    b = again.rollout(exc).state["qpos"]
    np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)


def test_derived_fields_are_exactly_what_mj_setconst_rewrites_and_are_refused_as_targets(tmp_path):
    twin = _twin(_write(tmp_path, "mjcf"), "mjcf", _spec("camera.z", 0.3, 0.0, 1.0))
    xml = MJCF.replace("<actuator>", '<tendon><fixed name="tf"><joint joint="slide" coef="1"/></fixed></tendon>'
                       '<actuator><motor name="tm" tendon="tf"/>').replace(
        "<worldbody>", '<worldbody><light name="l" pos="0 0 2" mode="trackcom"/>'
                       '<camera name="c" pos="0 -1 0" mode="trackcom"/>')
    base = mujoco.MjModel.from_xml_string(xml)
    rewritten = []
    for f in dir(base):
        a = getattr(base, f, None)
        if f.startswith("_") or not isinstance(a, np.ndarray) or a.dtype.kind != "f" or not a.size:
            continue
        m = mujoco.MjModel.from_xml_string(xml)
        getattr(m, f)[...] += 0.125
        try:
            mujoco.mj_setConst(m, mujoco.MjData(m))
        except mujoco.FatalError:  # a moved inertial frame on a "simple" body (body_ipos, body_iquat)
            continue
        if np.allclose(getattr(m, f), a):
            rewritten.append(f)
    assert set(rewritten) <= set(DERIVED_FIELDS) and "dof_M0" in rewritten
    with pytest.raises(UserModelError, match=r"parameter 'p': 'dof_invweight0' is derived by MuJoCo from the masses"):
        UserModelTwin(model=tmp_path / "robot.xml", parameters=_spec("dof_invweight0[slide]", 1.0, 0.5, 2.0),
                      keypoints={"ball": "ball_site"}, camera=CAMERA)
    with pytest.raises(TwinError, match=r"'body_subtreemass' is derived by MuJoCo"):
        FingerTwin(parameters=ParameterSet((ParameterSpec("m", "kg", 0.01, 1.0, 0.05,
                                                          target="body_subtreemass[1]"),)))
    twin.close()


def test_a_centre_of_mass_target_on_a_simple_body_is_compiled_so_that_it_takes_effect(tmp_path):
    """A body whose inertial frame is its own frame is compiled as "simple"; mj_setConst refuses a
    moved centre of mass there ("sameframe no longer holds"). The twin compiles such a body as
    not simple, and the written centre of mass simulates like the compiled one."""
    xml = ('<mujoco><option timestep="0.002"/><worldbody><body name="bob" pos="0 0 1">'
           '<joint name="swing" type="hinge" axis="0 1 0"/><geom type="sphere" size="0.05" mass="1"/>'
           '<site name="c"/></body></worldbody><actuator><motor name="m" joint="swing"/></actuator></mujoco>')
    (tmp_path / "bob.xml").write_text(xml)
    assert mujoco.MjModel.from_xml_string(xml).body_simple[1]
    twin = UserModelTwin(model=tmp_path / "bob.xml", parameters=_spec("body_ipos[bob,2]", 0.0, -0.5, 0.0),
                         keypoints={"c": "c"}, camera=CAMERA, max_physics_timestep=0.002)
    exc = Excitation("t0", 50.0, 0.3 * np.sin(np.arange(100)[:, None] / 5.0), ("m",))
    before = twin.rollout(exc).state["qpos"]
    twin.set_parameters({"p": -0.3})
    after = twin.rollout(exc).state["qpos"]
    assert np.max(np.abs(after - before)) > 1e-3
    (tmp_path / "com.xml").write_text(xml.replace(
        '<geom type="sphere"', '<inertial pos="0 0 -0.3" mass="1" diaginertia="0.001 0.001 0.001"/><geom type="sphere"'))
    compiled = UserModelTwin(model=tmp_path / "com.xml", parameters=_spec("camera.z", 0.3, 0.0, 1.0),
                             keypoints={"c": "c"}, camera=CAMERA, max_physics_timestep=0.002)
    np.testing.assert_allclose(after, compiled.rollout(exc).state["qpos"], rtol=1e-9, atol=1e-12)
