"""MuJoCo's own warnings reach the run's log and one terminal line, never a MUJOCO_LOG.TXT beside the
user's files; a model with many visual geoms renders without "Pre-allocated visual geom buffer is full",
and ``render.maxgeom`` sets that buffer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mujoco
import pytest

from vid2sid_ros.sim import mujoco_log
from vid2sid_ros.sim.mujoco_render import default_maxgeom

REPO = Path(__file__).resolve().parents[1]


def _beads(n: int) -> str:
    """A hinged rod with a red tip marker (a geom, drawn first) and ``n`` small visual-only beads."""
    beads = "".join(f'<geom type="sphere" size="0.004" pos="0 0 {-0.3 * (i + 1) / (n + 1):.4f}" contype="0" '
                    f'conaffinity="0" mass="0.0001" rgba="0.5 0.5 0.5 1"/>' for i in range(n))
    return f"""<mujoco model="beads">
  <option timestep="0.002"/>
  <worldbody>
    <light pos="0 -1 2"/>
    <body name="rod" pos="0 0 0.5"><joint name="swing" type="hinge" axis="0 1 0" damping="0.02"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.01" mass="0.1" rgba="0.2 0.2 0.2 1"/>
      <geom type="sphere" pos="0 0 -0.3" size="0.02" mass="0.001" contype="0" conaffinity="0" rgba="1 0 0 1"/>
      {beads}<site name="tip" pos="0 0 -0.3" size="0.005" rgba="1 0 0 0"/>
    </body>
  </worldbody>
  <actuator><motor name="m" joint="swing" gear="1"/></actuator>
</mujoco>"""


def _rig(tmp_path: Path, n: int, render: str = "") -> Path:
    (tmp_path / "beads.xml").write_text(_beads(n))
    cfg = tmp_path / "rig.yaml"
    cfg.write_text(f"""model: beads.xml
parameters: {{damping: {{unit: N*m*s/rad, lower: 0.005, upper: 0.1, nominal: 0.02, scale: log,
              target: "dof_damping[swing]"}}}}
keypoints: {{tip: tip}}
camera: {{width: 160, height: 120, fovy: 50, pose: {{position: [0, -1.2, 0.4], look_at: [0, 0, 0.35]}}}}
tracker: {{markers: [{{name: tip, hsv_lower: [170, 120, 70], hsv_upper: [8, 255, 255], min_area_px: 4}}]}}
excitations: {{drive: {{kind: sine, amplitude: 0.02, frequency: 1.0, duration: 2.0, rate: 30}}}}
trials: [{{name: t, source: {{sim2sim: {{seed: 0}}}}, excitation: drive}}]
{render}""")
    return cfg


def _calibrate(cfg: Path, cwd: Path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "calibrate", str(cfg), "--iterations", "1",
                           "--out", "run", "--no-report"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def test_an_unstable_step_is_counted_and_logged_not_written_to_a_file(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    mujoco_log.install()
    mujoco_log.take_counts()
    m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body><freejoint/><geom size=".1"/></body>'
                                       '</worldbody></mujoco>')
    d = mujoco.MjData(m)
    d.qvel[0] = 1e30
    with caplog.at_level("WARNING", logger=mujoco_log.LOGGER_NAME):
        mujoco.mj_step(m, d)
    counts = mujoco_log.take_counts()
    assert len(counts) == 1 and counts[0][1] == 1 and "QVEL" in counts[0][0]
    assert any("The simulation is unstable" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert mujoco_log.take_counts() == []  # reset
    line = mujoco_log.summary_line(counts, "run/run.log")
    assert line.startswith("MuJoCo warned 1 time(s): 'Nan, Inf or huge value in QVEL") and "run/run.log" in line


def test_the_default_scene_buffer_holds_every_visual_geom():
    m = mujoco.MjModel.from_xml_string(_beads(150))
    assert default_maxgeom(m) >= 4 * m.ngeom  # never smaller than before


def test_a_full_geom_buffer_goes_to_run_log_and_render_maxgeom_fixes_it(tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    proc = _calibrate(_rig(small, 150, render="render: {maxgeom: 100}"), small)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MuJoCo warned" in proc.stdout and "Pre-allocated visual geom buffer is full" in proc.stdout
    assert "Pre-allocated visual geom buffer is full" in (small / "run" / "run.log").read_text()
    assert not list(small.rglob("MUJOCO_LOG.TXT"))
    auto = tmp_path / "auto"
    auto.mkdir()
    proc = _calibrate(_rig(auto, 150), auto)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MuJoCo warned" not in proc.stdout + proc.stderr
    assert not list(auto.rglob("MUJOCO_LOG.TXT"))


def test_a_bad_render_maxgeom_is_one_line(tmp_path):
    from vid2sid_ros.rigs import RigConfigError, load_rig

    with pytest.raises(RigConfigError) as info:
        load_rig(_rig(tmp_path, 3, render="render: {maxgeom: 12.5}"))
    assert "render.maxgeom" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("bad", ["50000000", "2147483648", "1e12", ".nan"])
def test_a_huge_render_maxgeom_is_refused_in_one_line(tmp_path, bad):
    """Was: 50000000 ended in mujoco.FatalError (could not allocate), 2147483648 in a raw pybind message."""
    from vid2sid_ros.rigs import RigConfigError, load_rig

    with pytest.raises(RigConfigError) as info:
        load_rig(_rig(tmp_path, 3, render=f"render: {{maxgeom: {bad}}}"))
    assert "render.maxgeom" in str(info.value) and "\n" not in str(info.value)
