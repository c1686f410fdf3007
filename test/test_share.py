"""Shared files (config/, msg/) are found from the checkout and from an install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vid2sid_ros.share import find_share_path, share_candidates

REPO = Path(__file__).resolve().parents[1]


def test_checkout_config_wins():
    assert find_share_path("config", "pendulum_redapple.yaml") == REPO / "config"
    assert share_candidates("msg")[0] == REPO / "msg"


def test_missing_file_lists_where_it_looked():
    with pytest.raises(FileNotFoundError, match=r"config/ with nope\.yaml not found; searched: .*config"):
        find_share_path("config", "nope.yaml")


def test_installed_copy_finds_config_and_messages(tmp_path):
    # regression: `make demo` runs the installed console script, whose package lives in
    # site-packages; it looked for <site-packages>/config/pendulum_redapple.yaml and failed
    installed = Path(sys.prefix) / "share" / "vid2sid_ros" / "config" / "pendulum_redapple.yaml"
    if not installed.is_file():
        pytest.skip(f"no install in {sys.prefix} (run `make setup`)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH")}
    code = ("import vid2sid_ros, vid2sid_ros.sim.pendulum as p, vid2sid_ros.io.rosbag as r;"
            "print(vid2sid_ros.__file__); print(p.find_config()); print(r.find_interface_dir())")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    pkg, cfg, msg = out.stdout.split()
    assert Path(pkg).parent != REPO / "vid2sid_ros", "expected the installed copy, not the checkout"
    assert Path(cfg) == installed
    assert Path(msg) == installed.parents[1] / "msg"
