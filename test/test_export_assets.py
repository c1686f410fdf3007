"""The exported calibrated model loads from any directory when the model has meshes and includes
(asset paths written absolute), and reloaded it reproduces the calibrated twin's rollout."""

from __future__ import annotations

import os
import textwrap

import mujoco
import numpy as np
import pytest

from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.rigs import load_rig

TETRA = "v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"


def _rig(root):
    (root / "assets").mkdir()
    (root / "assets" / "m.obj").write_text(TETRA)
    (root / "inc.xml").write_text('<mujoco><worldbody><body name="deco" pos="0 0.3 0.2"><geom type="mesh" '
                                  'mesh="m" contype="0" conaffinity="0"/></body></worldbody></mujoco>')
    (root / "arm.xml").write_text(textwrap.dedent("""
        <mujoco model="arm">
          <compiler meshdir="assets"/>
          <option timestep="0.004"/>
          <asset><mesh name="m" file="m.obj"/></asset>
          <include file="inc.xml"/>
          <worldbody>
            <body name="link" pos="0 0 1">
              <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.01"/>
              <geom name="rod" type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="0.2"/>
              <site name="tip" pos="0 0 -0.5" size="0.02"/>
            </body>
          </worldbody>
          <actuator><motor name="motor" joint="shoulder" gear="0.15"/></actuator>
        </mujoco>"""))
    (root / "rig.yaml").write_text(textwrap.dedent("""
        rig: armm
        model: arm.xml
        parameters:
          motor_gain: {unit: N*m, lower: 0.05, upper: 0.5, nominal: 0.15, scale: log, target: "actuator_gear[motor,0]"}
          damping: {unit: N*m*s/rad, lower: 0.002, upper: 0.05, nominal: 0.01, scale: log, target: "dof_damping[shoulder]"}
        keypoints: {tip: tip}
        camera: {width: 160, height: 120, fovy: 50, pose: {position: [0, -1.5, 1], look_at: [0, 0, 1]}}
        excitations: {push: {kind: sine, amplitude: 1.0, frequency: 1.0, duration: 2, rate: 30}}
        trials: [{name: t0, source: {sim2sim: {seed: 1, noise: keypoint}}, excitation: push}]
        """))
    return root / "rig.yaml"


def test_export_with_mesh_and_include_reloads_elsewhere_and_reproduces_the_rollout(tmp_path, monkeypatch):
    src = tmp_path / "model"
    src.mkdir()
    rig = load_rig(_rig(src))
    twin = rig.make_twin()
    twin.set_parameters({"motor_gain": 0.31, "damping": 0.004})
    out = twin.export_model(tmp_path / "run" / "calibrated_model.xml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    m = mujoco.MjModel.from_xml_path(str(out))  # was "Error opening file 'm.obj'"
    assert m.nmesh == 1
    # the reloaded file reproduces the calibrated rollout: same commands, same joint motion
    ctrl = 1.0 * np.sin(2 * np.pi * np.arange(60) / 30.0)
    d = mujoco.MjData(m)
    q_file = []
    steps = int(round((1 / 30.0) / m.opt.timestep))
    for u in ctrl:
        q_file.append(d.qpos[0])
        d.ctrl[:] = u
        for _ in range(steps):
            mujoco.mj_step(m, d)
    assert m.actuator_gear[0, 0] == pytest.approx(0.31) and m.dof_damping[0] == pytest.approx(0.004)
    twin.model.opt.timestep = m.opt.timestep
    m2, d2 = twin.model, mujoco.MjData(twin.model)
    q_twin = []
    for u in ctrl:
        q_twin.append(d2.qpos[0])
        d2.ctrl[:] = u
        for _ in range(steps):
            mujoco.mj_step(m2, d2)
    assert np.max(np.abs(np.array(q_file) - np.array(q_twin))) < 1e-9
    assert max(abs(x) for x in q_file) > 0.05  # it moved
    # the export also loads as a model file of a new twin, from this other directory
    (elsewhere / "rig2.yaml").write_text((src / "rig.yaml").read_text().replace("arm.xml", str(out)))
    again = load_rig(elsewhere / "rig2.yaml").make_twin()
    exc = Excitation("push", 30.0, ctrl[:, None], ("motor",))
    twin.set_parameters({"motor_gain": 0.31, "damping": 0.004})
    again.set_parameters({"motor_gain": 0.31, "damping": 0.004})
    a = twin.rollout(exc).trajectory.keypoints
    b = again.rollout(exc).trajectory.keypoints
    assert np.allclose(a, b, atol=1e-6)
    assert os.getcwd() == str(elsewhere)
