"""``vid2sid propose``: call ``/vid2sid/propose`` of a running graph (an rclpy client; no ``ros2`` CLI needed).

The request fields are those of ``srv/Propose.srv``::

    vid2sid propose                                  # one proposal from the node's default proposer
    vid2sid propose --iterations 10 --apply          # a 10-iteration calibration, applied to the twin
    vid2sid propose --proposer cmaes --names joint_stiffness,joint_damping --trial-id finger_0
    vid2sid propose --namespace robot1 --apply       # the graph launched with namespace:=robot1
    vid2sid propose --iterations 4 --apply --active-learning   # then design the next trial; the rig runs it

is what ``ros2 service call /vid2sid/propose vid2sid_ros/srv/Propose "{iterations: 10, apply: true}"``
does on a ROS 2 install (``--active-learning`` / ``--no-active-learning`` first sets the
calibrator's ``active_learning`` parameter, as ``ros2 param set /calibrator_node active_learning true``
does). Prints every response field; exit 0 when the proposal was accepted,
1 when the calibrator refused (its message says why), 2 when the service is not available.
The graph must run on the same ``ROS_DOMAIN_ID`` (discovery stays on this machine).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

HELP = "call /vid2sid/propose on a running graph (same request fields as srv/Propose.srv)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--proposer", default="", help="proposer name; empty = the calibrator's default")
    parser.add_argument("--trial-id", default="", help="trial to calibrate against; empty = the calibrator's choice")
    parser.add_argument("--names", default="", help="comma-separated parameters to propose for; empty = all free")
    parser.add_argument("--apply", action="store_true", help="apply an accepted proposal to the twin")
    parser.add_argument("--iterations", type=int, default=0, help="0 or 1: one proposal; N > 1: an N-iteration run")
    parser.add_argument("--active-learning", action=argparse.BooleanOptionalAction, default=None,
                        help="switch the calibrator's active learning on (or off) for this call and the ones after "
                             "it: after the iterations, design the next trial and have the rig run it "
                             "(docs/active_learning.md); default: leave the calibrator's setting")
    parser.add_argument("--namespace", default="", help="namespace of the graph (its launch / bringup `namespace` "
                        "argument, e.g. robot1); empty = the root namespace")
    parser.add_argument("--timeout", type=float, default=None,
                        help="longest wait for the answer, s (default 120 + 60 per iteration asked for; a busy "
                             "calibrator answers at once)")


def run(args: argparse.Namespace) -> int:
    if args.iterations < 0:
        print("vid2sid propose: --iterations must be >= 0", file=sys.stderr)
        return 2
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    from .._interfaces import InterfacesNotBuiltError, require_interfaces

    try:
        require_interfaces()  # before `import rclpy`: one line where ROS 2 is absent
    except InterfacesNotBuiltError as err:
        print(f"vid2sid propose: {err}", file=sys.stderr)
        return 2
    import rclpy

    from ..nodes.graph_client import GraphClient, GraphClientError

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        client = GraphClient(context, "vid2sid_propose_client", namespace=args.namespace)
    except Exception as err:  # noqa: BLE001 - an invalid namespace: one line
        print(f"vid2sid propose: --namespace {args.namespace!r}: {err}", file=sys.stderr)
        rclpy.try_shutdown(context=context)
        return 2
    try:
        if args.active_learning is not None:  # the calibrator reads its switch when it serves the request
            client.set_parameter("calibrator_node", "active_learning", bool(args.active_learning))
        r = client.propose(proposer=args.proposer, trial_id=args.trial_id,
                           names=[n.strip() for n in args.names.split(",") if n.strip()], apply=args.apply,
                           iterations=args.iterations, timeout=args.timeout)
    except GraphClientError as err:
        print(f"vid2sid propose: {err}", file=sys.stderr)
        return 2
    finally:
        client.close()
        rclpy.try_shutdown(context=context)
    print(f"accepted: {str(r.accepted).lower()}")
    for n, v, u in zip(r.names, r.values, r.units):
        print(f"  {n} = {v:.6g} {u}")
    print(f"error_px: {r.error_px:.4f}" if math.isfinite(r.error_px) else "error_px: nan (not evaluated)")
    print(f"confidence: {r.confidence:.2f}\niteration: {r.iteration}")
    if r.rationale:
        print(f"rationale: {r.rationale}")
    print(f"message: {r.message}")
    return 0 if r.accepted else 1
