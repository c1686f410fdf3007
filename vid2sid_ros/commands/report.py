"""``vid2sid report PATH [...]``: write the HTML report of calibration run(s) or a benchmark.

See :mod:`vid2sid_ros.report.__main__` for the arguments.
"""

from __future__ import annotations

import argparse

HELP = "write the self-contained HTML report of a calibration run directory or a benchmark directory"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..report.__main__ import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from ..report.__main__ import run as run_report

    return run_report(args)
