"""What a person reads: the HTML report of a run, a benchmark report, the terminal summary.

Public API:

* :func:`write_report` — ``RUN_DIR/report.html`` of one calibration run (what
  ``vid2sid calibrate`` and the ROS bringup call);
* :func:`render_report` — the same page for several runs compared, with caller
  sections and videos (the demo);
* :func:`write_benchmark_report` — ``BENCH_DIR/report.html`` of a sim2sim benchmark;
* :func:`run_summary_lines` — the end-of-run terminal summary;
* the data types :class:`RunSummary`, :class:`TrajectoryPanel`, :class:`ReportSection`.

Command line: ``python -m vid2sid_ros.report RUN_DIR|BENCH_DIR [...] [--out FILE]``
(also ``vid2sid report``).
"""

from .benchmark import write_benchmark_report
from .insights import Insight, ParameterRow, insights, parameter_rows, stop_sentence
from .page import REPORT_SIZE_BUDGET, SECTION_IDS, render_report, write_report
from .run import (ReportError, ReportSection, RunSummary, TrajectoryPanel, load_run, load_trajectories,
                  save_trajectories)
from .terminal import run_summary_lines

__all__ = ["write_report", "render_report", "write_benchmark_report", "run_summary_lines", "ReportError",
           "ReportSection", "RunSummary", "TrajectoryPanel", "load_run", "load_trajectories", "save_trajectories",
           "parameter_rows", "insights", "stop_sentence", "Insight", "ParameterRow", "SECTION_IDS",
           "REPORT_SIZE_BUDGET"]
