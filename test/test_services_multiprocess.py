"""Propose and Rollout services called across two OS processes over real DDS.

A stand-in server (test/helpers/fake_service_server.py) runs as a subprocess and answers
deterministically from the request; this process is the client and checks every field.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parent / "helpers" / "fake_service_server.py"
TIMEOUT = 20.0


@pytest.fixture
def service_server(ros_env, request):
    """Start the fake server in its own process; yield (namespace, pid); always kill it."""
    namespace = f"/vid2sid_test_{os.getpid()}"
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--namespace", namespace, "--lifetime", "120"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=ros_env)
    try:
        ready: list[str] = []
        reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(TIMEOUT)
        line = ready[0].strip() if ready else ""
        if not line.startswith("READY"):
            proc.kill()
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"fake service server did not start: {line!r}\n{err[-2000:]}")
        yield namespace, int(line.split()[1])
    finally:
        if proc.poll() is None:
            try:
                proc.stdin.close()  # asks it to exit
                proc.wait(timeout=5)
            except (subprocess.TimeoutExpired, OSError):
                proc.kill()
                proc.wait(timeout=5)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


def _call(ros, client, req):
    assert client.wait_for_service(timeout_sec=TIMEOUT), f"{client.srv_name} not available"
    return ros.spin_future(client.call_async(req), timeout=TIMEOUT)


def test_propose_across_processes(ros, service_server):
    from vid2sid_ros.srv import Propose

    namespace, server_pid = service_server
    assert server_pid != os.getpid()
    client = ros.node("propose_client").create_client(Propose, f"{namespace}/propose")

    req = Propose.Request(proposer="gemini", trial_id="trial-7", names=["joint_stiffness", "mass"],
                          apply=True, iterations=3)
    res = _call(ros, client, req)
    assert res.accepted is True
    assert list(res.names) == ["joint_stiffness", "mass"]
    assert list(res.values) == [pytest.approx(0.3), pytest.approx(0.6)]
    assert list(res.units) == ["N*m/rad", "1"]
    assert res.rationale == "fake proposal by gemini for trial-7"
    assert res.confidence == 0.75
    assert res.error_px == 2.5
    assert res.iteration == 2
    assert res.message == f"served by pid {server_pid}"

    # defaults: "" proposer, all free parameters, no apply -> not accepted, NaN error
    res = _call(ros, client, Propose.Request())
    assert res.accepted is False
    assert list(res.names) == ["joint_stiffness", "joint_damping"]
    assert list(res.values) == [pytest.approx(0.1), pytest.approx(0.2)]
    assert res.rationale == "fake proposal by reasoner for "
    assert math.isnan(res.error_px)
    assert res.iteration == 0


def test_rollout_across_processes(ros, service_server):
    from vid2sid_ros.msg import ExcitationCommand
    from vid2sid_ros.srv import Rollout

    namespace, server_pid = service_server
    client = ros.node("rollout_client").create_client(Rollout, f"{namespace}/sim/rollout")

    commands = [ExcitationCommand(trial_id="trial-9", step=s, period=0.05,
                                  actuator_names=["a", "b"], values=[0.5 * s, 1.0])
                for s in range(5)]
    req = Rollout.Request(names=["joint_stiffness", "joint_damping"], values=[2.0, 0.5],
                          excitation="chirp", commands=commands, render=True)
    res = _call(ros, client, req)
    assert res.success is True
    assert res.message.startswith(f"served by pid {server_pid}; set ")
    assert "'joint_stiffness': 2.0" in res.message and res.message.endswith("render=True")
    traj = res.trajectory
    assert traj.source == "sim" and traj.trial_id == "trial-9"
    assert list(traj.keypoint_names) == ["tip"]
    assert traj.num_steps == 5
    assert list(traj.time) == [pytest.approx(0.05 * s) for s in range(5)]
    assert list(traj.x) == [pytest.approx(2.5 * (0.5 * s + 1.0)) for s in range(5)]
    assert list(traj.y) == [pytest.approx(-(0.5 * s + 1.0)) for s in range(5)]
    assert list(traj.valid) == [True] * 5
    assert traj.dropped_frames == 0 and traj.late_frames == 5
    assert traj.header.stamp.sec == 7

    # named excitation, no commands, mismatched names/values -> success False
    res = _call(ros, client, Rollout.Request(names=["x"], excitation="sine"))
    assert res.success is False
    assert res.trajectory.trial_id == "sine"
    assert res.trajectory.num_steps == 3
    assert res.message.endswith("render=False")
