"""`vid2sid bringup`: the in-process graph as a command, stopped cleanly by SIGTERM (bag closed)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")  # before any module that imports it

from vid2sid_ros.nodes.bringup import graph_for_config  # noqa: E402
from vid2sid_ros.nodes.graph import GRAPHS  # noqa: E402


def test_graph_names_and_config_files_resolve():
    assert graph_for_config("finger") == "finger"
    assert graph_for_config("config/finger.yaml") == "finger"
    assert graph_for_config("/x/config/tentacle_ros.yaml") == "tentacle"
    assert graph_for_config("replay_finger.yaml") == "replay_finger"
    with pytest.raises(KeyError, match="graphs: finger"):
        graph_for_config("nope.yaml")


def test_list_and_bad_arguments(ros_env):
    out = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "bringup", "--list"], env=ros_env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    starts = [ln.split(":")[0] for ln in out.stdout.splitlines() if not ln.startswith(" ")]
    assert starts == list(GRAPHS)
    bad = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "bringup", "finger", "--arg", "nope=1"],
                         env=ros_env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "has no argument 'nope'" in bad.stderr


def test_sigterm_stops_the_graph_and_closes_the_bag(ros_env, tmp_path):
    from vid2sid_ros.io.rosbag import bag_topics

    bag = tmp_path / "bag"
    cmd = [sys.executable, "-m", "vid2sid_ros.cli", "bringup", "finger_stand_in", "--arg", f"bag_path={bag}",
           "--arg", f"run_dir={tmp_path / 'runs'}", "-p", "excitation_node.autostart=true",
           "-p", "excitation_node.start_delay=0.5"]
    proc = subprocess.Popen(cmd, env=ros_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "completed after 60 steps" in line or proc.poll() is not None:
                break
        assert any("completed after 60 steps" in ln for ln in lines), "".join(lines[-20:])
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest[-2000:]
    assert f"bag {bag} closed" in rest
    topics = bag_topics(bag)  # metadata.yaml written: the bag is complete and readable
    assert topics["/vid2sid/excitation/command"] == ("vid2sid_ros/msg/ExcitationCommand", 60)
    assert topics["/vid2sid/real/image_raw"][1] >= 55  # frames still in the pipeline at SIGTERM may be missing


def test_bad_rig_config_is_refused_before_any_node_starts(ros_env, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rig: finger\nproposr: random\n")
    r = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "bringup", "finger_stand_in", "--rig-config",
                        str(bad), "--duration", "0.1"], capture_output=True, text=True, timeout=120, env=ros_env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{bad}:proposr: unknown key (did you mean proposer?)" in r.stderr and "running" not in r.stdout
