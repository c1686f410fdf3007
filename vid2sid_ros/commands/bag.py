"""``vid2sid bag``: inspect and repair rosbag2 bags (no ROS needed).

``vid2sid bag info BAG`` lists topics, types, message counts and whether the bag was
finished; ``vid2sid bag repair BAG`` rebuilds the MCAP summary and ``metadata.yaml`` of a
bag whose recorder was killed (:mod:`vid2sid_ros.io.bag_repair`), keeping the unfinished
file beside it. Exit 0 on success, 2 with one line on bad input.
"""

from __future__ import annotations

import argparse
import sys

HELP = "inspect (info) or repair a rosbag2 bag whose recorder was killed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bag_command", metavar="ACTION")
    p = sub.add_parser("repair", help="rebuild the MCAP summary and metadata.yaml from the completed chunks")
    p.add_argument("bag", help="bag directory (or its .mcap file)")
    p = sub.add_parser("info", help="topics, types, message counts; says when the bag is unfinished")
    p.add_argument("bag", help="bag directory (or its .mcap / .db3 file)")


def run(args: argparse.Namespace) -> int:
    from ..io.rosbag import BagError, bag_topics, check_bag_finished

    action = getattr(args, "bag_command", None)
    if action not in ("repair", "info"):
        print("vid2sid bag: give an action: repair BAG or info BAG", file=sys.stderr)
        return 2
    try:
        if action == "repair":
            from ..io.bag_repair import repair_bag

            report = repair_bag(args.bag)
            print(report.summary())
            return 0
        check_bag_finished(args.bag)
        topics = bag_topics(args.bag)
    except BagError as err:
        print(f"vid2sid bag {action}: {err}", file=sys.stderr)
        return 2
    print(f"bag {args.bag}: finished; {sum(n for _, n in topics.values())} messages")
    for t, (msgtype, n) in sorted(topics.items()):
        print(f"  {t:40s} {msgtype:40s} {n}")
    return 0
