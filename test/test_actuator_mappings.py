"""A rig config's ``actuators`` given as mappings (the README's form, adding a motor to the model) with a
generated excitation: its columns are named after the actuators. Was: ``unhashable type: 'dict'`` (the
mappings themselves became the excitation's column names) and rc 2 on every such run."""

from __future__ import annotations

from vid2sid_ros.rigs import build_real_trial, load_rig

ARM = """<mujoco model="arm">
  <option timestep="0.002" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="upper" pos="0 0 0.5"><joint name="shoulder" type="hinge" axis="0 1 0" damping="0.02"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.01" mass="0.2"/><site name="tip" pos="0 0 -0.3"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_mapping_actuators_name_the_excitation_columns(tmp_path):
    (tmp_path / "arm.xml").write_text(ARM)
    cfg = tmp_path / "rig.yaml"
    cfg.write_text("""model: arm.xml
actuators: [{name: motor, joint: shoulder, kind: motor, gear: 0.15}]
parameters: {damping: {unit: N*m*s/rad, lower: 0.005, upper: 0.1, nominal: 0.02, scale: log,
              target: "dof_damping[shoulder]"}}
keypoints: {tip: tip}
camera: {width: 160, height: 120, fovy: 50, pose: {position: [0, -1.2, 0.35], look_at: [0, 0, 0.35]}}
excitations: {drive: {kind: sine, amplitude: 1.0, frequency: 1.0, duration: 2.0, rate: 30}}
trials: [{name: t, source: {sim2sim: {seed: 0, noise: none}}, excitation: drive}]
""")
    rig = load_rig(cfg)
    assert rig.named_excitations["drive"].actuator_names == ("motor",)
    real = build_real_trial(rig)
    twin = rig.make_twin()
    roll = twin.rollout(real.train_excitations[0])
    assert roll.trajectory.num_frames == real.train[0].num_frames
