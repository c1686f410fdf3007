#!/usr/bin/env python3
"""A stand-in calibrator + sim twin serving Propose and Rollout, for multi-process tests.

Answers are a deterministic function of the request (see ``answer_propose`` and
``answer_rollout``) so the client in another process can check every field. Prints
``READY <pid>`` on stdout once both services exist; exits when stdin closes, on SIGTERM,
or after ``--lifetime`` seconds, whichever comes first.

Usage: fake_service_server.py [--namespace /vid2sid] [--lifetime 60]
"""

from __future__ import annotations

import argparse
import math
import os
import select
import signal
import sys
import time
from pathlib import Path

# Runs as a script from the checkout: make the checkout's vid2sid_ros importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

DEFAULT_NAMES = ["joint_stiffness", "joint_damping"]
UNITS = {"joint_stiffness": "N*m/rad", "joint_damping": "N*m*s/rad"}


def answer_propose(request, response):
    names = list(request.names) or list(DEFAULT_NAMES)
    iterations = max(int(request.iterations), 1)
    response.accepted = bool(request.apply)
    response.names = names
    response.values = [round(0.1 * (i + 1) * iterations, 6) for i in range(len(names))]
    response.units = [UNITS.get(n, "1") for n in names]
    response.rationale = f"fake proposal by {request.proposer or 'reasoner'} for {request.trial_id}"
    response.confidence = 0.75
    response.error_px = 2.5 if request.apply else math.nan
    response.iteration = iterations - 1
    response.message = f"served by pid {os.getpid()}"
    return response


def answer_rollout(request, response):
    from vid2sid_ros.msg import Trajectory

    commands = list(request.commands)
    names = ["tip"]
    if commands:
        times = [c.step * c.period for c in commands]
        xs = [float(sum(c.values)) for c in commands]
        trial_id = commands[0].trial_id
    else:
        times = [0.0, 0.1, 0.2]
        xs = [1.0, 2.0, 3.0]
        trial_id = request.excitation or "default"
    scale = float(sum(request.values)) if len(request.values) else 1.0
    response.success = len(request.names) == len(request.values)
    response.message = (f"served by pid {os.getpid()}; set {dict(zip(request.names, request.values))}; "
                        f"render={bool(request.render)}")
    response.trajectory = Trajectory(
        source="sim",
        trial_id=trial_id,
        keypoint_names=names,
        num_steps=len(times),
        time=times,
        x=[scale * x for x in xs],
        y=[-x for x in xs],
        valid=[True] * len(times),
        dropped_frames=0,
        late_frames=len(commands),
    )
    response.trajectory.header.stamp.sec = 7
    return response


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="/vid2sid")
    parser.add_argument("--lifetime", type=float, default=60.0)
    args = parser.parse_args(argv)

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from vid2sid_ros._interfaces import require_interfaces

    require_interfaces()
    from vid2sid_ros.srv import Propose, Rollout

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append("SIGTERM"))
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("fake_vid2sid_services")
    ns = args.namespace.rstrip("/")
    node.create_service(Propose, f"{ns}/propose", answer_propose)
    node.create_service(Rollout, f"{ns}/sim/rollout", answer_rollout)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    print(f"READY {os.getpid()}", flush=True)

    deadline = time.monotonic() + args.lifetime
    try:
        while not stop and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
            readable, _, _ = select.select([sys.stdin], [], [], 0)
            if readable and not sys.stdin.readline():  # EOF: the parent went away
                break
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
