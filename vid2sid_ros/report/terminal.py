"""The end-of-run terminal summary: what matters first.

:func:`run_summary_lines` turns a finished run directory into the lines ``vid2sid
calibrate`` (and the bringup) print last: the stop reason (converged / budget /
iterations / interrupted) first, then the errors, the residual diagnosis's warnings (the
model is probably wrong: before any claim that the parameters are physical), the
parameters with units and their intervals labelled for what they are (Gauss–Newton,
unreliable and why), the other warnings (insights about those parameters), and where
the report is. No colours, no cursor control (logs stay readable).
"""

from __future__ import annotations

import math
from pathlib import Path

from ..core.trajectory import format_error

from .insights import insights, parameter_rows, stop_sentence
from .run import RunSummary, load_run, stop_kind

__all__ = ["run_summary_lines"]


def run_summary_lines(run: RunSummary | str | Path, *, report: str | Path | None = None,
                      resume_command: str | None = None) -> list[str]:
    """Lines of the final summary (no trailing newlines).

    Args:
        run: a run directory or a loaded :class:`RunSummary`.
        report: the HTML report path to point at (None: not written).
        resume_command: the exact command that continues this run (printed when it was
            interrupted; a budget- or iteration-stopped run is told what to change instead).

    Raises:
        ReportError: ``run`` is not a finished run directory.
    """
    r = run if isinstance(run, RunSummary) else load_run(run)
    res = r.result
    lines = [stop_sentence(r)]
    err = res.get("error_px")
    u, hu = str(res.get("unit") or "px"), str(res.get("holdout_unit") or res.get("unit") or "px")
    s0 = res.get("initial_error_px")
    txt = (f"training MAE {format_error(err, u)} (start {format_error(s0 if s0 is not None else math.nan, u)})"
           if err is not None else "training MAE n/a (no evaluation succeeded)")
    h = res.get("holdout_mae_px")
    txt += f"; holdout MAE {format_error(h, hu)}" if h is not None else "; no holdout trial"
    lines.append(txt + f"; {res.get('rollouts')} rollouts, {res.get('wall_s', 0.0):.1f} s")
    rows = parameter_rows(r)
    found = [i for i in insights(r, rows) if i.kind != "unconverged"]
    # the residual diagnosis says whether the parameters can be read as physical: before any of them
    lines.extend(f"warning: {i.title}" for i in found if i.kind == "residual")
    free = [p for p in rows if not p.frozen]
    lines.append("identified parameters (95 % interval: " + (
        "Gauss–Newton, local" if all(p.reliable for p in free if p.interval)
        else "Gauss–Newton, local; UNRELIABLE where marked") + "):")
    width = max((len(p.name) for p in free), default=8)
    for p in free:
        line = f"  {p.name:>{width}s} = {p.final:.6g} {p.unit}"
        if p.interval is not None:
            line += f"  95 % [{p.interval[0]:.4g}, {p.interval[1]:.4g}]"
            if p.interval_kind and p.interval_kind != "two-sided":
                line += f" {p.interval_kind}"
            if p.interval_note:
                line += f" ({p.interval_note})"
            elif not p.interval[0] <= p.final <= p.interval[1] and p.centre is not None:  # a run from older code
                line += (f" (centred on {p.centre:.4g}, the optimum once the tracker's bias is modelled: "
                         "the identified value lies outside it)")
            line += "" if p.reliable else f" UNRELIABLE ({'; '.join(p.unreliable_because)})"
        else:
            line += f"  ({p.interval_method})"
        if p.truth is not None:
            re = p.rel_error
            line += f"  truth {p.truth:.6g}, error {100 * re:.1f} %" if re is not None else f"  truth {p.truth:.6g}"
            if p.truth_inside is not None:
                line += ", interval contains it" if p.truth_inside else ", interval MISSES it"
        lines.append(line)
    for i in found:
        if i.kind not in ("residual", "start_identifiability"):  # about the parameters above (bounds, ...);
            # the start point's check was printed when it ran
            lines.append(f"warning: {i.title}")
    kind = stop_kind(r.stopped)
    if kind == "interrupted" and resume_command:
        lines.append(f"continue this run: {resume_command}")
    elif kind == "budget":
        lines.append("to go on: a larger --budget in a new --out (a run resumes only with its own budget)")
    elif kind == "iterations":
        lines.append("to go on: more --iterations in a new --out (a run resumes only with its own settings)")
    if report is not None:
        lines.append(f"report: {report}")
    return lines
