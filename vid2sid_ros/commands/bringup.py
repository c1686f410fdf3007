"""``vid2sid bringup GRAPH``: run a ROS 2 graph in-process (where ``ros2 launch`` is unavailable).

Examples::

    vid2sid bringup finger --arg camera_source=0              # real camera
    vid2sid bringup finger_stand_in                           # a twin at hidden parameters plays the robot
    vid2sid bringup replay_finger --arg replay_bag=runs/bag_x # re-run a recorded real trial
    vid2sid bringup config/finger.yaml -p excitation_node.autostart=true
    vid2sid bringup finger_stand_in --rig-config my_finger.yaml   # every rig node reads this rig config
    vid2sid bringup finger_stand_in --calibrate 5 --arg run_dir=runs/ros  # trial + calibration + report, exits

GRAPH is a graph name (``vid2sid bringup --list``) or its config file. The nodes, their
executables and params files come from :data:`vid2sid_ros.nodes.graph.GRAPHS`, the same
table the launch files use. Stops on Ctrl-C / SIGTERM (the bag is closed cleanly).

``--calibrate N`` makes the graph do the job by itself: it runs one trial per training
excitation of the rig (``/vid2sid/excitation/start``; an explicit ``excitation_config``
runs once), waits for each trial's real and sim trajectories, calls
``/vid2sid/propose`` with ``iterations: N, apply: true`` on all of them, writes the session's
``report.html`` (with the stand-in's hidden parameters as the truth when the graph has
one), closes the bag and prints the summary; exit 0 when the calibration was accepted
and applied, 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

from ..core.yamlio import loads_yaml

HELP = "run a vid2sid ROS 2 graph in one process (in-process equivalent of ros2 launch)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", nargs="?", help="graph name or config file (e.g. finger, config/finger.yaml)")
    parser.add_argument("--list", action="store_true", help="list the graphs, their nodes and arguments")
    parser.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                        help="graph argument (same names as the launch file's), repeatable")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NODE.PARAM=VALUE",
                        help="override one node parameter (value parsed as YAML), repeatable")
    parser.add_argument("--rig-config", metavar="RIG.yaml", default=None,
                        help="rig config every rig node uses (= --arg rig_config=RIG.yaml; the nodes' rig_config "
                             "parameter); checked before any node starts")
    parser.add_argument("--allow-code", action="store_true",
                        help="let the nodes import a module:function rig reference (sets VID2SID_ALLOW_CODE=1 for "
                             "this process; runs that code)")
    parser.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0 = run until Ctrl-C)")
    parser.add_argument("--namespace", default="", help="namespace of the whole graph (e.g. robot1: topics and "
                        "services under /robot1/...); empty = the root namespace")
    parser.add_argument("--threads", type=int, default=8, help="executor threads")
    parser.add_argument("--calibrate", type=int, default=0, metavar="N",
                        help="run a trial, then an N-iteration calibration through /vid2sid/propose (applied to the "
                             "twin), write the report and the bag, print the result and exit")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="with --calibrate: longest wait for the trial and for the calibration, s (default 600)")


def _split(item: str, what: str) -> tuple[str, str]:
    if "=" not in item:
        raise ValueError(f"{what} {item!r}: expected NAME=VALUE")
    k, v = item.split("=", 1)
    return k.strip(), v


def run(args: argparse.Namespace) -> int:
    from ..nodes.graph import GRAPH_ARGUMENTS, GRAPHS

    if args.list or not args.graph:
        for g, nodes in GRAPHS.items():
            print(f"{g}: " + ", ".join(f"{n.name} ({n.executable}, {'+'.join(n.params_files)})" for n in nodes))
            for a in GRAPH_ARGUMENTS[g]:
                print(f"    --arg {a.name}=...  {a.description}")
        return 0 if args.list else 2
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    from .._interfaces import require_interfaces

    require_interfaces()  # one line (vid2sid_ros.cli) where ROS 2 or the interfaces are missing
    try:
        from ..nodes.bringup import Bringup, graph_for_config

        graph = graph_for_config(args.graph)
        arguments = dict(_split(a, "--arg") for a in args.arg)
        if args.rig_config:
            arguments["rig_config"] = args.rig_config
        if args.allow_code:
            os.environ["VID2SID_ALLOW_CODE"] = "1"  # the nodes' rig loader reads it (a node has no flags)
        if arguments.get("rig_config"):  # the whole file checked up front: one line, no node started
            from pathlib import Path

            from ..rigs import RigConfigError, UnknownRigError, load_rig

            try:
                load_rig(arguments["rig_config"])
            except (RigConfigError, UnknownRigError) as err:
                raise ValueError(str(err)) from None
            if Path(arguments["rig_config"]).exists():
                arguments["rig_config"] = str(Path(arguments["rig_config"]).resolve())
        known = [a.name for a in GRAPH_ARGUMENTS[graph]]
        for name in arguments:
            if name not in known:
                raise KeyError(f"graph {graph!r} has no argument {name!r}; arguments: {', '.join(known)}")
        overrides: dict[str, dict] = {}
        for item in args.param:
            key, value = _split(item, "-p")
            if "." not in key:
                raise ValueError(f"-p {item!r}: expected NODE.PARAM=VALUE")
            node, param = key.split(".", 1)
            overrides.setdefault(node, {})[param] = loads_yaml(value, source=f"-p {item!r}")
    except (KeyError, ValueError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        print(f"vid2sid bringup: {msg}", file=sys.stderr)
        return 2
    import signal

    import rclpy
    from rclpy.signals import SignalHandlerOptions

    # Our own SIGINT/SIGTERM handling: stop the trial and let in-flight messages reach the bag
    # before the context goes down (rclpy's handlers would shut it down at once).
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    try:
        bringup = Bringup(graph, arguments=arguments, overrides=overrides, context=rclpy.get_default_context(),
                          num_threads=args.threads, namespace=args.namespace)
    except Exception as err:  # noqa: BLE001 - one clear line for a bad config
        print(f"vid2sid bringup: cannot start graph {graph!r}: {type(err).__name__}: {err}", file=sys.stderr)
        rclpy.try_shutdown()
        return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"vid2sid bringup: graph {graph!r} running: {', '.join(bringup.nodes)} (Ctrl-C to stop)", flush=True)
    bringup.start()
    if args.calibrate > 0:
        try:
            return _calibrate(bringup, args.calibrate, args.timeout)
        finally:
            bringup.drain()
            bringup.shutdown()
            rclpy.try_shutdown()
    try:
        stop.wait(args.duration if args.duration > 0 else None)
        print("vid2sid bringup: stopping (finishing the trial's messages and the bag)", flush=True)
        bringup.drain()
    finally:
        bringup.shutdown()
        rclpy.try_shutdown()
    return 0


def _calibrate(bringup, iterations: int, timeout: float) -> int:
    """``--calibrate N``: trial, N-iteration calibration, report, bag (see the module docstring)."""
    import json
    from pathlib import Path

    import rclpy

    from ..nodes.graph_client import GraphClient, GraphClientError
    from ..report import ReportError, run_summary_lines, write_report

    if "calibrator_node" not in bringup.nodes or "excitation_node" not in bringup.nodes:
        print(f"vid2sid bringup: --calibrate needs a graph with excitation_node and calibrator_node; "
              f"{bringup.graph!r} has {', '.join(bringup.nodes)}", file=sys.stderr)
        return 2
    from rclpy.parameter import Parameter

    from ..nodes.common import resolve_rig

    exc_node = bringup["excitation_node"]
    if exc_node.get_parameter("excitation_config").value.strip():
        profiles = [exc_node.get_parameter("excitation").value]  # an explicit profile: one trial of it
    else:  # one trial per training excitation of the rig (e.g. the finger's step and chirp)
        rig = resolve_rig(exc_node.get_parameter("rig").value)
        profiles = [f"train:{i}" for i in range(len(rig.excitations.get("train", ()))) or 1]
    bringup["calibrator_node"].set_parameters([Parameter("trials", value="all")])
    client = GraphClient(rclpy.get_default_context(), "vid2sid_bringup_client", namespace=bringup.namespace)
    trials = []
    try:
        for prof in profiles:
            exc_node.set_parameters([Parameter("excitation", value=prof)])
            trial = client.start_trial()
            print(f"vid2sid bringup: trial {trial} ({prof}) started; waiting for its real and sim trajectories",
                  flush=True)
            client.wait_trajectories(trial, timeout)
            trials.append(trial)
        print(f"vid2sid bringup: calibrating ({iterations} iterations) on trial(s) {', '.join(trials)}", flush=True)
        r = client.propose(apply=True, iterations=iterations, timeout=timeout)
    except GraphClientError as err:
        print(f"vid2sid bringup: {err}", file=sys.stderr)
        client.close()
        return 1
    run_root = Path(bringup["calibrator_node"].get_parameter("run_dir").value)
    sessions = sorted((d for d in run_root.glob("*") if (d / "result.json").is_file()),
                      key=lambda d: (d / "result.json").stat().st_mtime)
    report = None
    if sessions:
        session = sessions[-1]
        stand_in = bringup.nodes.get("stand_in_rig_node")
        if stand_in is not None and getattr(stand_in, "hidden", None):
            (session / "truth.json").write_text(json.dumps(
                {"source": "stand_in_rig_node hidden parameters", "values": dict(stand_in.hidden)}))
        try:
            report = write_report(session)
        except (ReportError, OSError) as err:
            print(f"vid2sid bringup: report not written: {err}", file=sys.stderr)
    bag = ""
    if "recorder_node" in bringup.nodes:
        try:
            bag = client.stop_recorder()
        except GraphClientError as err:
            bag = f"(bag not closed: {err})"
    client.close()
    print()
    if sessions:
        for line in run_summary_lines(sessions[-1], report=report):
            print(line)
    print(f"/vid2sid/propose: {'accepted' if r.accepted else 'NOT accepted'}: {r.message}")
    if bag:
        print(f"bag: {bag}")
    return 0 if r.accepted else 1
