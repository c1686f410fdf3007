"""A run that run_calibration's start checks refuse (a free parameter with no effect on the training
rollouts) writes nothing into its --out directory: no real_trial.json, no run.log, no lock file in
a directory it created; the corrected config then runs into the same --out."""

from __future__ import annotations

import json
import textwrap

from vid2sid_ros import cli

ARM2 = """
<mujoco model="arm2">
  <option timestep="0.004"/>
  <worldbody>
    <body name="link" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.01"/>
      <geom name="rod" type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="0.2"/>
      <site name="tip" pos="0 0 -0.5" size="0.02"/>
    </body>
    <body name="link2" pos="0.6 0 1">
      <joint name="j2" type="hinge" axis="0 1 0" damping="0.01"/>
      <geom name="rod2" type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="0.2"/>
      <site name="tip2" pos="0 0 -0.5" size="0.02"/>
    </body>
  </worldbody>
  <actuator><motor name="m1" joint="shoulder" gear="0.15"/><motor name="m2" joint="j2" gear="0.15"/></actuator>
</mujoco>
"""

RIG = textwrap.dedent("""
    rig: arm2
    model: arm2.xml
    parameters:
      gain1: {unit: N*m, lower: 0.05, upper: 0.5, nominal: 0.15, scale: log, target: "actuator_gear[m1,0]"}
    %s
    keypoints: {tip: tip, tip2: tip2}
    camera: {width: 160, height: 120, fovy: 60, pose: {position: [0.3, -2, 1], look_at: [0.3, 0, 1]}}
    actuators: [m1, m2]
    excitations:
      e1: {kind: sine, amplitude: 1.0, frequency: 1.0, duration: 1, rate: 30, actuator: m1}
    trials:
      - {name: t0, source: {sim2sim: {seed: 1, noise: keypoint}}, excitation: e1}
    calibration: {iterations: 1, rollout_budget: 12, identifiability: false, final_identifiability: false}
    """)
UNUSED = ('  damp2: {unit: N*m*s/rad, lower: 0.002, upper: 0.05, nominal: 0.01, scale: log, '
          'target: "dof_damping[j2]"}')



def _configs(tmp_path):
    """``(bad, good)`` rig configs of the two-joint arm: the bad one frees a parameter the training
    rollouts cannot see (refused at load), the good one does not."""
    (tmp_path / "arm2.xml").write_text(ARM2)
    bad, good = tmp_path / "bad.yaml", tmp_path / "good.yaml"
    bad.write_text(RIG % UNUSED)
    good.write_text(RIG % "")
    return bad, good

def _run(cfg, out):
    return cli.main(["calibrate", str(cfg), "--out", str(out), "--quiet", "--no-report"])


def test_refused_run_writes_nothing_and_the_corrected_config_runs_there(tmp_path, capsys):
    bad, good = _configs(tmp_path)
    out = tmp_path / "run"
    assert _run(bad, out) == 2
    err = capsys.readouterr().err
    assert "damp2" in err and "identical training rollouts" in err
    assert not out.exists()  # was: .vid2sid.lock, real_trial.json and run.log left behind
    assert _run(good, out) == 0  # was refused: "real_trial.json holds another hidden truth"
    assert (out / "real_trial.json").is_file() and (out / "run.log").exists()
    assert "gain1" in json.loads((out / "real_trial.json").read_text())["truth"]


def test_refused_run_into_an_existing_empty_directory_leaves_it_usable(tmp_path, capsys):
    bad, good = _configs(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    assert _run(bad, out) == 2
    assert {p.name for p in out.iterdir()} <= {".vid2sid.lock"}  # the lock only (a directory it did not create)
    assert _run(good, out) == 0
