"""``python -m vid2sid_ros.report PATH [PATH ...] [--out FILE]``: HTML report of runs or a benchmark.

A calibration run directory (``result.json`` + ``run.json``) gets the run report (several
run directories: the first is the main run, the others are compared); a benchmark
directory (``results.json``) gets the benchmark report. Exit 0, or 2 with one line
naming the unusable directory.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("paths", nargs="+", help="run directories (the first is the main run) or a benchmark directory")
    ap.add_argument("--out", default=None, help="output .html (default: <first path>/report.html)")


def run(a: argparse.Namespace) -> int:
    from . import ReportError, render_report, write_benchmark_report

    first = Path(a.paths[0])
    try:
        if (first / "results.json").is_file() and not (first / "result.json").is_file():
            p = write_benchmark_report(first, a.out)
        else:
            p = render_report(a.out or first / "report.html", a.paths)
    except ReportError as err:
        print(f"vid2sid report: {err}", file=sys.stderr)
        return 2
    print(p)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vid2sid report", description=__doc__.splitlines()[0])
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
