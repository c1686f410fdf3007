"""A joint-state CSV trial is checked against the model at load: its command columns name exactly the model's
actuators, its joints are hinge/slide joints of the model in their units. Each mistake is one line naming the
field, before any run directory exists.

Was: a command column naming an actuator that does not exist was mapped to an actuator by its position (a run
that completed with exit 0 on the wrong physics); ``units: m`` on a hinge crashed with a traceback at the start
point; a joint-name typo or a missing command column failed only at the start point, after a run directory and a
misleading identifiability warning had been written."""

import numpy as np
import pytest

from vid2sid_ros.rigs import load_rig
from vid2sid_ros.rigs.schema import RigConfigError

MODEL = """<mujoco model="pan_tilt">
  <option timestep="0.002"/>
  <worldbody>
    <body name="base">
      <joint name="pan" type="hinge" axis="0 0 1" damping="0.02"/>
      <geom type="cylinder" size="0.05 0.02" mass="0.5"/>
      <body name="head" pos="0 0 0.05">
        <joint name="tilt" type="hinge" axis="1 0 0" damping="0.01"/>
        <geom type="box" size="0.03 0.03 0.03" pos="0 0.05 0" mass="0.3"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="pan_motor" joint="pan"/>
    <motor name="tilt_motor" joint="tilt"/>
  </actuator>
</mujoco>
"""


def _write(tmp_path, source: str):
    (tmp_path / "m.xml").write_text(MODEL)
    t = np.arange(100) * 0.02
    rows = np.column_stack([t, 0.1 * np.sin(t), 0.05 * np.sin(2 * t), 0.05 * np.sin(3 * t), 0.02 * np.cos(t)])
    np.savetxt(tmp_path / "run.csv", rows, delimiter=",", header="time,pan_angle,tilt_angle,pan_cmd,tilt_cmd",
               comments="")
    cfg = tmp_path / "rig.yaml"
    cfg.write_text(f"""rig: pan_tilt
model: m.xml
keypoints: {{head: head}}
parameters:
  pan_damping: {{unit: N*m*s/rad, lower: 0.001, upper: 0.1, nominal: 0.02, target: "dof_damping[pan]"}}
trials:
  - name: run1
    source: {{joint_csv: {source}}}
""")
    return cfg


GOOD = "{path: run.csv, joints: {pan_angle: pan, tilt_angle: tilt}, commands: {pan_cmd: pan_motor, tilt_cmd: tilt_motor}}"


def test_a_good_joint_csv_rig_loads_with_its_commands_by_actuator_name(tmp_path):
    rig = load_rig(str(_write(tmp_path, GOOD)))
    (exc,) = rig.excitations["train"]
    assert tuple(exc.actuator_names) == ("pan_motor", "tilt_motor")


@pytest.mark.parametrize("source, field, words", [
    (GOOD.replace("pan_cmd: pan_motor", "pan_cmd: pan_motr"), "joint_csv.commands:",
     "command column(s) name 'pan_motr', which is not an actuator of the model (did you mean pan_motor?); its "
     "actuators: pan_motor, tilt_motor"),
    ("{path: run.csv, joints: {pan_angle: pan, tilt_angle: tilt}, commands: [pan_cmd, tilt_cmd]}",
     "joint_csv.commands:", "'pan_cmd', 'tilt_cmd', which are not actuators of the model"),
    ("{path: run.csv, joints: {pan_angle: pan, tilt_angle: tilt}, commands: {tilt_cmd: tilt_motor}}",
     "joint_csv.commands:", "no command column for actuator(s) pan_motor"),
    (GOOD.replace("pan_angle: pan,", "pan_angle: pann,"), "joint_csv.joints:",
     "'pann' is not a hinge or slide joint of the model (did you mean 'pan'?); its joints: pan, tilt"),
    (GOOD.replace("commands:", "units: {pan_angle: m}, commands:"), "joint_csv.units:",
     "joint 'pan' is a hinge (measured in rad), not m"),
])
def test_a_joint_csv_mistake_is_one_line_at_load_naming_the_field(tmp_path, source, field, words):
    cfg = _write(tmp_path, source)
    with pytest.raises(RigConfigError) as err:
        load_rig(str(cfg))
    msg = str(err.value)
    assert "\n" not in msg and f"rig.yaml:trials[0].source.{field}" in msg and words in msg, msg


def test_a_time_column_in_milliseconds_is_one_line_at_load(tmp_path):
    """Was: a time column in ms (20, 40, ...) read as seconds: a 0.05 Hz log whose rollout was then refused as
    needing millions of substeps, reported as 'diverged'."""
    from vid2sid_ros.io.joint_csv import JointCsvError, load_joint_csv

    t = np.arange(50) * 20.0  # ms
    np.savetxt(tmp_path / "ms.csv", np.column_stack([t, np.zeros(50)]), delimiter=",", header="time,pan_angle",
               comments="")
    with pytest.raises(JointCsvError, match=r"column 'time': samples 20 s apart \(0.05 Hz\); times must be in "
                                            r"seconds \(a column in ms: divide by 1000"):
        load_joint_csv(tmp_path / "ms.csv", joints={"pan_angle": "pan"})
    np.savetxt(tmp_path / "s.csv", np.column_stack([t / 1000.0, np.zeros(50)]), delimiter=",",
               header="time,pan_angle", comments="")
    assert load_joint_csv(tmp_path / "s.csv", joints={"pan_angle": "pan"}).rate == pytest.approx(50.0)


def test_a_rig_reads_each_joint_csv_once_per_file_version_and_hands_out_copies(tmp_path, monkeypatch):
    """A trial's CSV is parsed once although the check, probe, load, commands and measurement each ask for it;
    a changed file is read again, and a caller changing what it got changes nothing the next one gets."""
    import os

    from vid2sid_ros.io import joint_csv, lab_sources
    from vid2sid_ros.io.sources import SourceContext

    path = tmp_path / "j.csv"
    path.write_text("time,shoulder\n0.0,0.1\n0.01,0.2\n0.02,0.3\n")
    calls = []
    real = joint_csv.load_joint_csv
    monkeypatch.setattr(joint_csv, "load_joint_csv", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(lab_sources, "_JOINT_CACHE", {})
    block = {**lab_sources.JOINT_CSV_KEYS, "path": str(path), "joints": ["shoulder"]}
    ctx = SourceContext(where="trials[0].joint_csv", base_dir=tmp_path)
    first = lab_sources._joint_read(block, ctx)
    first.positions[:] = 99.0  # a caller changing its copy
    second = lab_sources._joint_read(block, ctx)
    assert len(calls) == 1 and second.positions[:, 0].tolist() == [0.1, 0.2, 0.3]
    path.write_text("time,shoulder\n0.0,0.5\n0.01,0.6\n0.02,0.7\n")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # a new version, even if fast
    assert lab_sources._joint_read(block, ctx).positions[:, 0].tolist() == [0.5, 0.6, 0.7] and len(calls) == 2
