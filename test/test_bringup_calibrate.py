"""The ROS graph does the job by itself: `vid2sid bringup finger_stand_in --calibrate 5`.

One subprocess runs the graph with the stand-in rig (a twin at hidden parameters behind the
camera topic): a trial per training excitation, a 5-iteration calibration through
/vid2sid/propose, the report and the bag, then exits. Checked here: exit 0, the hidden
parameters recovered within 1 %, ``--arg run_dir`` reaching both the calibrator and the
recorder, a bag with image annotations (visualization_msgs/ImageMarker) and camera_info
beside each image topic, the report opening cleanly in headless Chromium. Then
`vid2sid propose` (an rclpy client in its own process) asks a running graph with the same
request fields as srv/Propose.srv.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers.browser import chromium, probe_page  # noqa: E402

from vid2sid_ros.nodes.graph import GRAPH_ARGUMENTS, argument_settings  # noqa: E402

HIDDEN = {"joint_stiffness": 0.42, "joint_damping": 0.0065, "joint_friction": 0.0035, "actuator_gain": 12.5}


def test_bringup_calibrate_exits_with_result_report_and_bag(ros_env, tmp_path):
    from vid2sid_ros.io.rosbag import bag_topics

    run_dir = tmp_path / "ros_runs"
    proc = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "bringup", "finger_stand_in", "--calibrate", "5",
                           "--arg", f"run_dir={run_dir}"], env=ros_env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "stopped: converged" in out and "/vid2sid/propose: accepted" in out
    # --arg run_dir reached the calibrator (sessions) and the recorder (bags): nothing in ./runs
    sessions = [d for d in run_dir.iterdir() if (d / "result.json").is_file()]
    bags = [d for d in run_dir.iterdir() if d.name.startswith("bag_")]
    assert len(sessions) == 1 and len(bags) == 1 and not (tmp_path / "runs").exists()
    res = json.loads((sessions[0] / "result.json").read_text())
    rel = {n: abs(res["values"][n] / v - 1.0) for n, v in HIDDEN.items()}
    assert max(rel.values()) < 0.01, rel  # measured: at most 0.3 %
    report = sessions[0] / "report.html"
    assert f"report: {report}" in out
    topics = bag_topics(bags[0])
    for side in ("real", "sim"):
        assert topics[f"/vid2sid/{side}/image_markers"][0] == "visualization_msgs/msg/ImageMarker"
        assert topics[f"/vid2sid/{side}/camera_info"] == ("sensor_msgs/msg/CameraInfo",
                                                         topics[f"/vid2sid/{side}/image_raw"][1])
    _check_bag_messages(bags[0])
    if chromium() is not None:
        found = probe_page(report, tmp_path)
        assert found["errors"] == [] and all(v["ok"] for v in found["videos"]) and all(p["ok"] for p in found["plots"])
        from vid2sid_ros.report import SECTION_IDS

        assert set(SECTION_IDS) <= set(found["sections"]), found["sections"]


def _check_bag_messages(bag: Path) -> None:
    """The annotations sit on the image (same stamp, in-image pixels); camera_info matches the frames."""
    from rosbags.highlevel import AnyReader

    stamps: dict[str, list] = {}
    with AnyReader([bag]) as reader:
        conns = [c for c in reader.connections if c.topic in ("/vid2sid/real/image_markers",
                                                               "/vid2sid/real/camera_info", "/vid2sid/real/image_raw")]
        for conn, _t, raw in reader.messages(connections=conns):
            msg = reader.deserialize(raw, conn.msgtype)
            stamps.setdefault(conn.topic, []).append((msg.header.stamp.sec, msg.header.stamp.nanosec))
            if conn.topic.endswith("image_markers"):
                assert len(msg.points) == 3 and msg.type == 4  # ImageMarker.POINTS, one per finger marker
                assert all(0 <= p.x < 320 and 0 <= p.y < 240 for p in msg.points)
            elif conn.topic.endswith("camera_info"):
                assert (msg.width, msg.height) == (320, 240) and msg.k[0] > 0 and msg.k[8] == 1.0
    assert sorted(stamps["/vid2sid/real/image_markers"]) == sorted(stamps["/vid2sid/real/image_raw"])
    assert sorted(stamps["/vid2sid/real/camera_info"]) == sorted(stamps["/vid2sid/real/image_raw"])


def test_run_dir_argument_sets_calibrator_and_recorder():
    arg = next(a for a in GRAPH_ARGUMENTS["finger_stand_in"] if a.name == "run_dir")
    assert argument_settings(arg, "finger_stand_in") == [("calibrator_node", "run_dir"), ("recorder_node", "output_dir")]
    from vid2sid_ros.nodes.bringup import Bringup

    # an unknown argument is refused before any node is built
    with pytest.raises(KeyError, match="no argument"):
        Bringup("finger_stand_in", arguments={"nope": "x"})


def test_propose_command_is_a_client_of_a_running_graph(ros_env, tmp_path):
    graph = subprocess.Popen([sys.executable, "-m", "vid2sid_ros.cli", "bringup", "finger_stand_in", "--arg",
                              f"run_dir={tmp_path}", "-p", "recorder_node.enabled=false", "-p",
                              "excitation_node.autostart=true", "-p", "excitation_node.start_delay=0.5"],
                             env=ros_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        seen = []
        while time.monotonic() < deadline:
            line = graph.stdout.readline()
            seen.append(line)
            if "calibrator_node]: real trial finger_0" in line or graph.poll() is not None:
                break
        assert any("real trial finger_0" in ln for ln in seen), "".join(seen[-20:])

        def propose(*extra):
            return subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "propose", *extra], env=ros_env,
                                  capture_output=True, text=True, timeout=180)

        bad = propose("--names", "bogus")
        assert bad.returncode == 1 and "accepted: false" in bad.stdout and "unknown parameter(s) ['bogus']" in bad.stdout
        ok = propose("--iterations", "2", "--apply", "--trial-id", "finger_0")
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "accepted: true" in ok.stdout and "joint_stiffness = " in ok.stdout and "applied to sim_twin_node" in ok.stdout
        err = float(next(ln for ln in ok.stdout.splitlines() if ln.startswith("error_px:")).split()[1])
        assert math.isfinite(err) and err < 1.0
    finally:
        graph.terminate()
        graph.communicate(timeout=30)
    # no graph on this domain any more: one line, exit 2
    gone = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "propose", "--timeout", "3"], env=ros_env,
                          capture_output=True, text=True, timeout=120)
    assert gone.returncode == 2 and gone.stderr.count("\n") == 1 and "not available" in gone.stderr
