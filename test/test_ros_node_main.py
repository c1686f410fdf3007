"""`ros2 run vid2sid_ros <node>` entry points: start as their own process, stop cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_node_main_runs_and_shuts_down_cleanly(sig):
    # env (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, ROS_DOMAIN_ID) is inherited from conftest
    proc = subprocess.Popen([sys.executable, "-m", "vid2sid_ros.nodes.excitation_node", "--ros-args",
                             "--params-file", str(REPO / "config" / "finger.yaml")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60.0
        line = ""
        while time.monotonic() < deadline and "excitation 'train_step'" not in line:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
        assert "excitation 'train_step'" in line, "node did not come up"
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=30)
        # 0 after SIGINT (what ros2 launch sends first), 128 + 15 after SIGTERM
        assert proc.returncode == (0 if sig == signal.SIGINT else 143), rest
        assert "Traceback" not in rest and "Exception ignored" not in rest and "RCLError" not in rest, rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("at", [0.4, 0.9, 1.5, 2.5])
def test_sigint_at_any_moment_of_start_up_exits_0_without_a_traceback(at):
    """Imports, rclpy.init, construction, first spin: a SIGINT anywhere ends the process cleanly.

    (was: KeyboardInterrupt tracebacks from the imports, and "the given context is not valid"
    from SingleThreadedExecutor(...) when rclpy's handler shut the context down mid-construction).
    The first ~0.25 s belong to the interpreter's own start-up (site, .pth files), before any
    line of the package runs: a signal there is Python's to handle.
    """
    proc = subprocess.Popen([sys.executable, "-m", "vid2sid_ros.nodes.excitation_node", "--ros-args",
                             "--params-file", str(REPO / "config" / "finger.yaml")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(at)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert "Traceback" not in out and "Exception ignored" not in out and "RCLError" not in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_signal_during_construction_stops_it_at_once_with_the_signals_status(monkeypatch):
    """In-process: a SIGTERM raised while make_node() runs ends main() with 143, rclpy shut down."""
    import os

    import rclpy

    from vid2sid_ros.nodes import common, startup

    built = []

    def slow_make_node():
        os.kill(os.getpid(), signal.SIGTERM)  # handled by startup's handler in this (main) thread
        time.sleep(5.0)  # interrupted by StartupInterrupted
        built.append(True)

    monkeypatch.setattr(startup, "_received", [])
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        t0 = time.monotonic()
        with pytest.raises(SystemExit) as exc:
            common.run_node(slow_make_node, [])
        assert exc.value.code == 143
        assert not built  # the 5 s sleep was cut short by the signal
        assert not rclpy.ok()
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def test_sigint_mid_trial_still_sends_the_trial_end_notice(ros):
    """(was: rclpy's handler shut the context down first: a SIGINT mid-trial published no trial_end and
    logged nothing about the robot's state)"""
    from vid2sid_ros.nodes.common import STREAM_QOS, ExcitationCommand

    ends, commands = [], []
    listener = ros.node("trial_listener")
    listener.create_subscription(ExcitationCommand, "/vid2sid/excitation/trial_end", ends.append, STREAM_QOS)
    listener.create_subscription(ExcitationCommand, "/vid2sid/excitation/command", commands.append, STREAM_QOS)
    proc = subprocess.Popen([sys.executable, "-m", "vid2sid_ros.nodes.excitation_node", "--ros-args",
                             "--params-file", str(REPO / "config" / "finger.yaml"), "-p", "autostart:=true",
                             "-p", "start_delay:=0.5", "-p", 'wait_for:=[""]', "-p", "excitation_config:='{kind: sine, frequency: 1.0, "
                             "amplitude: 0.2, duration: 30.0, rate: 30.0}'"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert ros.spin_until(lambda: len(commands) >= 10, timeout=60.0), "no trial started"
        proc.send_signal(signal.SIGINT)
        assert ros.spin_until(lambda: bool(ends), timeout=10.0), "no trial-end notice after SIGINT"
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert ends[0].trial_id == commands[0].trial_id and 10 <= ends[0].step < 900
        assert "node shutting down after" in out and "on_stop hold: the robot holds the last command" in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_malformed_ros_arguments_are_one_line_and_exit_2():
    """(was: a traceback from rclpy.init: "Failed to parse global arguments")"""
    proc = subprocess.run([sys.executable, "-m", "vid2sid_ros.nodes.excitation_node", "--ros-args", "-p",
                           "excitation_config:={kind: sine}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "vid2sid_ros excitation_node: bad ROS arguments: " in proc.stderr, proc.stderr


def test_a_node_given_a_bad_rig_config_says_so_in_one_line_and_exits_2(tmp_path):
    """`ros2 run vid2sid_ros calibrator_node --ros-args -p rig_config:=BAD` (was: a traceback from __init__)."""
    bad = tmp_path / "bad_rig.yaml"
    bad.write_text("rig: toy\nnuisanse: {}\n")
    proc = subprocess.run([sys.executable, "-m", "vid2sid_ros.nodes.calibrator_node", "--ros-args",
                           "-p", f"rig_config:={bad}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"vid2sid_ros calibrator_node: {bad}:nuisanse: unknown key (did you mean nuisance?)")
