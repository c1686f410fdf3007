"""Every file a model names is opened only if it is a regular file within a size bound: a FIFO
mesh is refused at once (it used to block MuJoCo's open() past every signal)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vid2sid_ros.core.files import NotARegularFileError, read_regular_file
from vid2sid_ros.sim.mujoco_model import ModelError, load_spec, model_files

ARM = Path(__file__).resolve().parents[1] / "examples" / "rigs" / "urdf_arm"


def test_fifo_mesh_refused_in_one_line_without_blocking(tmp_path, ros_env):
    arm = tmp_path / "arm"
    shutil.copytree(ARM, arm)
    mesh = arm / "meshes" / "forearm.obj"
    mesh.unlink()
    os.mkfifo(mesh)  # nobody ever writes it: an open() for reading without O_NONBLOCK waits forever
    p = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "calibrate", str(arm / "rig.yaml"), "--iterations",
                        "1", "--out", str(tmp_path / "run"), "--quiet", "--no-report"],
                       capture_output=True, text=True, env=ros_env, timeout=60)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "forearm.obj" in lines[0] and "FIFO" in lines[0], p.stderr
    assert not (tmp_path / "run").exists()


def test_mjcf_include_and_assets_listed_and_a_device_refused(tmp_path):
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "box.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n")
    (tmp_path / "body.xml").write_text('<mujoco><worldbody><body><geom type="mesh" mesh="box"/></body></worldbody>'
                                       '</mujoco>')
    main = tmp_path / "m.xml"
    main.write_text('<mujoco><compiler meshdir="assets"/><asset><mesh name="box" file="box.obj"/></asset>'
                    '<include file="body.xml"/></mujoco>')
    assert model_files(main) == [main, tmp_path / "assets" / "box.obj", tmp_path / "body.xml"]
    load_spec(main)  # loads
    (tmp_path / "assets" / "box.obj").unlink()
    (tmp_path / "assets" / "box.obj").symlink_to("/dev/zero")
    with pytest.raises(ModelError, match="box.obj: a mesh file the model names is a device"):
        load_spec(main)


def test_read_regular_file_bounds_size(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_bytes(b"x" * 1000)
    assert read_regular_file(f, max_bytes=1000) == b"x" * 1000
    with pytest.raises(NotARegularFileError, match="1,000 bytes, over the limit of 999"):
        read_regular_file(f, max_bytes=999)


def test_fifo_rig_config_refused_in_one_line(tmp_path):
    from vid2sid_ros.rigs import RigConfigError, load_rig

    cfg = tmp_path / "rig.yaml"
    os.mkfifo(cfg)
    with pytest.raises(RigConfigError, match="rig config is a FIFO"):
        load_rig(str(cfg))
