"""The end-of-run terminal summary: what matters first.

:func:`run_summary_lines` turns a finished run directory into the lines ``vid2sid
calibrate`` (and the bringup) print last: the stop reason (converged / budget /
iterations / interrupted) first, then the errors, the share of frames each keypoint was
tracked in (per trial), the residual diagnosis's warnings (the
model is probably wrong: before any claim that the parameters are physical), the
parameters with units and their intervals labelled for what they are (Gauss–Newton,
unreliable and why), the other warnings (insights about those parameters), and where
the report is. No colours, no cursor control (logs stay readable).

:class:`CalibrationTerminal` is everything printed while the run goes: a progress bar with
a time estimate (stderr, only on a terminal), one line per iteration, each warning once,
rationales and traces with ``-v``.
"""

from __future__ import annotations

import math
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any, Mapping, TextIO

from ..calibration.proposers.rationale import unit_text
from ..core.trajectory import format_error

from .insights import (ParameterRow, applied_bias_correction, go_on_advice, insights, parameter_rows, stop_sentence,
                       tracked_lines, unconverged_reason)
from .run import RunSummary, load_run, stop_kind

__all__ = ["run_summary_lines", "CalibrationTerminal", "moved_parameters", "unit_text", "terminal_width", "wrap_line",
           "DEFAULT_WIDTH"]

#: the summary's width when stdout is not a terminal (a log, a pipe)
DEFAULT_WIDTH = 100


def _tracked_summary(res: Mapping[str, Any]) -> list[str]:
    """The ``tracked:`` lines of the trials whose tracking was warned about (a share below the rig's
    ``tracking.min_tracked_fraction``, jumps, blobs unlike a marker): one per trial when there are at
    most two, else one line for all of them (the lowest share and where). Trials tracked well are
    not listed here: their shares are in the report and ``result.json``."""
    tracking = {k: t for k, t in (res.get("tracking") or {}).items()
                if isinstance(t, Mapping) and t.get("warnings")}
    per = tracked_lines({"tracking": tracking})
    if len(per) <= 2:
        return [f"tracked: {t}" for t in per]
    shares = [(float(f), trial, n) for trial, t in tracking.items()
              for n, f in (t.get("tracked") or {}).items() if isinstance(f, (int, float)) and math.isfinite(f)]
    if not shares:
        return []
    low, trial, name = min(shares)
    return [f"tracked: {len(per)} trials warned about, lowest share {100 * low:.0f} % ('{name}' in trial "
            f"'{trial}')"]


def terminal_width(stream: TextIO | None = None) -> int:
    """Columns of the terminal ``stream`` (default stdout) is on (:func:`shutil.get_terminal_size`,
    at least 40); :data:`DEFAULT_WIDTH` when it is not a terminal (a log file, a pipe)."""
    stream = stream if stream is not None else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    if not tty:
        return DEFAULT_WIDTH
    return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def wrap_line(line: str, width: int, indent: int = 4) -> list[str]:
    """``line`` wrapped to ``width`` columns, continuation lines indented by ``indent`` more than the
    line's own leading spaces (a word longer than the width is cut)."""
    if len(line) <= width:
        return [line]
    lead = len(line) - len(line.lstrip(" "))
    return textwrap.wrap(line, width, initial_indent="", subsequent_indent=" " * min(lead + indent, width // 2),
                         break_on_hyphens=False, drop_whitespace=True) or [line[:width]]


def _residual_titles(diag: Any, titles: list[str]) -> list[str]:
    """The residual diagnosis's warnings, its generic headline ("the model is probably wrong somewhere
    ... (1 warning(s))") folded into the first finding instead of a line of its own."""
    summary = f"Residual diagnosis: {diag.get('summary')}" if isinstance(diag, Mapping) and diag.get("summary") else None
    rest = [t for t in titles if t != summary]
    if summary is None or summary not in titles or not rest:
        return titles
    first = rest[0].removeprefix("Residual diagnosis: ")
    return [f"Residual diagnosis (the model is probably wrong; do not read the parameters as physical): {first}",
            *rest[1:]]


def interval_digits(lower: float, value: float, upper: float, least: int = 4, most: int = 12) -> int:
    """Significant digits (``least`` to ``most``) at which the printed interval reads as the numbers do: the
    printed bounds differ where the bounds differ, and the value (printed with ``max(6, digits)``) lies inside
    the printed bounds where it lies inside the interval. ``[0.035, 0.035]`` beside ``0.034999`` read as a value
    outside a zero-width interval; ``[0.034995, 0.035004]`` does not."""
    vals = (lower, value, upper)
    if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in vals):
        return least
    for d in range(least, most + 1):
        lo, hi = float(f"{lower:.{d}g}"), float(f"{upper:.{d}g}")
        v = float(f"{value:.{max(6, d)}g}")
        if (lo < hi or not lower < upper) and (lo <= v <= hi or not lower <= value <= upper):
            return d
    return most


#: marks of the interval notes said once (in the table's header when they fit, else under it)
_NOTE_MARKS = "†‡§¶"


def _parameter_lines(rows: list[ParameterRow], stop_reason: str = "", bias_corrected: bool = False) -> list[str]:
    """The identified-parameter table, each thing said once.

    A reason every flagged row shares is said above the table (``values UNRELIABLE: <reason>``;
    ``stop_reason``, the unconverged stop the stop line already names, is left out: the caller
    says it there) and each flagged row carries the mark ``UNRELIABLE`` plus only the reasons of its
    own (value at a bound, poorly identifiable). An interval note that differs between rows only by
    the optimum it names (``the least-squares optimum ... is 1.66; the interval is extended to the
    identified value``) is a mark after the interval (``[0.4, 2]†``), its text once in the header
    (the optimum is in the report and ``result.json: intervals``).
    """
    free = [p for p in rows if not p.frozen]
    marked = [p for p in free if p.flagged]
    common = ([c for c in marked[0].unreliable_because if all(c in p.unreliable_because for p in marked)]
              if len(marked) >= 2 else [])
    said = set(common) | {stop_reason}
    notes: dict[str, str] = {}  # note template -> mark
    width = max((len(p.name) for p in free), default=8)
    body = []
    for p in free:
        d = interval_digits(p.interval[0], p.final, p.interval[1]) if p.interval is not None else 4
        line = f"  {p.name:>{width}s} = {p.final:.{max(6, d)}g} {unit_text(p.unit)}".rstrip()
        if p.interval is not None:
            line += f"  [{p.interval[0]:.{d}g}, {p.interval[1]:.{d}g}]"  # the header says what it is
            named = f" is {p.centre:.4g}" if p.centre is not None else None
            if p.interval_note and named and named in p.interval_note:
                template = p.interval_note.replace(named, "", 1)
                line += notes.setdefault(template, _NOTE_MARKS[min(len(notes), len(_NOTE_MARKS) - 1)])
            if p.interval_kind and p.interval_kind != "two-sided":
                line += f" {p.interval_kind}"
            if p.interval_note and not (named and named in p.interval_note):
                line += f" ({p.interval_note})"
            elif not p.interval_note and not p.interval[0] <= p.final <= p.interval[1] and p.centre is not None:
                line += (f" (centred on {p.centre:.4g}, the optimum once the tracker's bias is modelled: "
                         "the identified value lies outside it)")  # a run from older code
            if p.flagged:
                own = [c for c in p.unreliable_because if c not in said]
                line += " UNRELIABLE" + (f" ({'; '.join(own)})" if own else "")
        else:
            line += f"  ({p.interval_method})"
        if p.consider_interval is not None:
            line += f"; consider 95 % [{p.consider_interval[0]:.4g}, {p.consider_interval[1]:.4g}] (caveat)"
        if p.truth is not None:
            re = p.rel_error
            line += f"  truth {p.truth:.6g}, error {100 * re:.1f} %" if re is not None else f"  truth {p.truth:.6g}"
            if p.truth_inside is not None:
                line += ", in interval" if p.truth_inside else ", interval MISSES it"
        body.append(line)
    shared = [c for c in common if c != stop_reason]
    head = [f"values UNRELIABLE: {'; '.join(shared)}"] if shared else []
    what = "95 % interval: Gauss–Newton, local" + "".join(f"; {m} {_short_note(t)}" for t, m in notes.items())
    # bias-corrected: the values are the least-squares optimum with the twin filmed like the robot, not the point the
    # stop line is about (result.json: bias_correction; calibration/bias_correction.py)
    head.append("identified parameters" + (", bias-corrected" if bias_corrected else "") + f" ({what}"
                + ("; UNRELIABLE where marked" if marked else "") + "):")
    return head + body


def _short_note(template: str) -> str:
    """An interval note without its number, short enough for the table's header: the loop's "the
    least-squares optimum ...; the interval is extended to the identified value" (an interval
    centred elsewhere, extended to hold the value) is ``extended to the identified value``."""
    if template.endswith("the interval is extended to the identified value"):
        return "extended to the identified value" + (" (the optimum beyond the bound)" if "beyond the bound" in template
                                                      else "")
    return template


def _go_on_lines(r: RunSummary, resume_command: str | None, go_on: Mapping[str, str] | None,
                 width: int) -> list[str]:
    """What to do about an unconverged stop (:func:`~vid2sid_ros.report.insights.go_on_advice`): the
    resume command after an interrupt; the command that runs again with more iterations and a larger
    budget when the run was still improving at its limit (printed whole on a line of its own, so it
    pastes as printed); else why running longer will not help."""
    kind = stop_kind(r.stopped)
    helps, advice = go_on_advice(r)
    if kind == "interrupted" and resume_command:
        return [f"continue this run: {resume_command}"]
    if kind not in ("budget", "iterations", "stalled"):
        return []
    if not helps:
        return wrap_line(advice[:1].upper() + advice[1:], width)
    cmd = (go_on or {}).get(kind)
    how = ("continue this run" if kind in ("budget", "iterations")
           else "start a new run from the optimum the diagnosis found")
    if cmd:
        return wrap_line(f"to go on ({advice}), {how}:", width) + [f"  {cmd}"]
    if kind in ("budget", "iterations"):
        return wrap_line(f"to go on ({advice}): run it again with --resume, the same --out and more --iterations "
                         "and a larger --budget", width)
    return wrap_line(f"to go on ({advice}): start a new run in another --out with --start NAME=VALUE,... at the "
                     "values above", width)


def run_summary_lines(run: RunSummary | str | Path, *, report: str | Path | None = None,
                      resume_command: str | None = None, go_on: Mapping[str, str] | None = None,
                      width: int | None = None) -> list[str]:
    """Lines of the final summary (no trailing newlines), each at most ``width`` columns (default
    :func:`terminal_width`) except a command to run, printed whole on a line of its own.

    Args:
        run: a run directory or a loaded :class:`RunSummary`.
        report: the HTML report path to point at (None: not written).
        resume_command: the exact command that continues this run (printed when it was
            interrupted; a budget- or iteration-stopped run is told what to change instead).
        go_on: ``{"budget": command, "iterations": command, "stalled": command}``: what continues it
            (:func:`~vid2sid_ros.commands.calibrate.go_on_commands`: this run resumed with larger limits, or a
            stalled run started anew at its optimum), printed when it stopped that way and running longer can
            help (:func:`~vid2sid_ros.report.insights.go_on_advice`); without it, the flags to change are named.
        width: columns to wrap to (None: :func:`terminal_width`).

    Raises:
        ReportError: ``run`` is not a finished run directory.
    """
    r = run if isinstance(run, RunSummary) else load_run(run)
    width = width or terminal_width()
    res = r.result
    lines = [stop_sentence(r)]
    err = res.get("training_mae")
    u, hu = str(res.get("unit") or "px"), str(res.get("holdout_unit") or res.get("unit") or "px")
    s0 = res.get("initial_mae")
    txt = (f"training MAE {format_error(err, u)} (start {format_error(s0 if s0 is not None else math.nan, u)})"
           if err is not None else "training MAE n/a (no evaluation succeeded)")
    h = res.get("holdout_mae")
    txt += f"; holdout MAE {format_error(h, hu)}" if h is not None else "; no holdout trial"
    lines.append(txt + f"; {res.get('rollouts')} rollouts, {res.get('wall_s', 0.0):.1f} s")
    lines.extend(_tracked_summary(res))  # share of frames each keypoint was measured in
    from ..calibration.phases import phase_summary_line

    timing = phase_summary_line(res.get("phases"))
    if timing:
        lines.append(timing)
    rows = parameter_rows(r)
    found = [i for i in insights(r, rows) if i.kind != "unconverged"]
    # the residual diagnosis says whether the parameters can be read as physical: before any of them
    said: set[str] = set()  # each warning once (two insights may carry the same title)

    def warn(title: str) -> None:
        if title not in said:
            said.add(title)
            lines.append(f"warning: {title}")

    for title in _residual_titles(res.get("residual_diagnosis"), [i.title for i in found if i.kind == "residual"]):
        warn(title)
    for i in found:  # a nominal value the fit cannot check: not a model error, but the values rest on it
        if i.kind == "caveat" and i.title not in said:
            said.add(i.title)
            lines.append(f"caveat: {i.title}")
    stop_reason = unconverged_reason(r.stopped)
    if stop_reason and any(stop_reason in p.unreliable_because for p in rows):
        lines[0] += ", so the values below are UNRELIABLE"  # said once here, a mark on each row
    lines.extend(_parameter_lines(rows, stop_reason, applied_bias_correction(res) is not None))
    for i in found:  # about the parameters above (bounds, identifiability, correlations, ...) and the tracking
        if i.kind not in ("residual", "caveat") and not (i.kind in ("start_identifiability", "tracking")
                                                         and i.severity == "info"):
            warn(i.title)  # a start-point warning the check at the result cleared is in the report only;
            # the tracked fractions are the "tracked:" lines
    lines = [w for ln in lines for w in wrap_line(ln, width)]
    lines.extend(_go_on_lines(r, resume_command, go_on, width))
    if report is not None:
        lines.append(f"report: {report}")
    return lines


#: at most this many moved parameters on an iteration's line
MAX_MOVES = 4


def _value_text(x: float, unit: str, digits: int = 3) -> str:
    return f"{x:.{digits}g} {unit_text(unit)}".strip()


def moved_parameters(before: Mapping[str, float], after: Mapping[str, float], units: Mapping[str, str],
                     digits: int = 3) -> list[str]:
    """``["joint_damping 0.00295 → 0.00274 N·m·s/rad", ...]``: the parameters whose printed value
    (``digits`` significant digits) changed between ``before`` and ``after``; a move that rounds to
    the same printed value is not a move on the terminal. Order: that of ``units``."""
    out = []
    for name, unit in units.items():
        if name not in before or name not in after:
            continue
        a, b = float(before[name]), float(after[name])
        if not (math.isfinite(a) and math.isfinite(b)) or f"{a:.{digits}g}" == f"{b:.{digits}g}":
            continue
        out.append(f"{name} {a:.{digits}g} → {_value_text(b, unit, digits)}")
    return out


def _moves_text(moved: list[str], named: int) -> str:
    """The first ``named`` moves, the rest counted: ``a 1 → 2, b 3 → 4, 2 more`` (``4 parameters moved``
    when none is named)."""
    if named <= 0 and moved:
        return f"{len(moved)} parameter{'s' if len(moved) > 1 else ''} moved"
    return ", ".join(moved[:named] + ([f"{len(moved) - named} more"] if len(moved) > named else []))


class CalibrationTerminal:
    """What ``vid2sid calibrate`` prints while it runs: every line goes through here.

    Default verbosity (0): a progress bar with a time estimate on stderr (only when stderr is
    a terminal: a log or a pipe gets no carriage-return animation), one line per iteration
    (iteration, training error with its unit, best so far, the parameters moved, rollouts
    used), each warning and each distinct iteration note once. ``verbosity=1`` (``-v``) adds
    every iteration's rationale and trace and repeats nothing else; ``-1`` (``--quiet``)
    prints only warnings (the final summary is printed by the caller either way).

    Args:
        units: ``{free parameter name: unit}``, the order moves are listed in (physics first:
            the first :data:`MAX_MOVES` moved are named, the others counted).
        iterations: the run's iteration limit.
        budget: the rollout budget (None: unlimited; the bar then counts iterations).
        unit: the training error's unit (``px``, ``m``, ``rad``, ...; see ``format_error``).
        verbosity: -1, 0 or 1 (see above).
        out, err: text streams (default ``sys.stdout``/``sys.stderr`` at call time).
        progress: force the bar on or off (default: ``err.isatty()`` and ``verbosity >= 0``).
        proposer: the run's proposer; an iteration proposed by another (the fallback) says so.
        width: the iteration lines' width in columns (default :func:`terminal_width` of ``out``).

    The default ``err`` is a duplicate of file descriptor 2 taken here, so the bar and the
    warnings still reach the terminal while the run sends fd 2 (OpenCV, FFmpeg) to its log.
    """

    def __init__(self, units: Mapping[str, str], *, iterations: int, budget: int | None, unit: str = "px",
                 verbosity: int = 0, out: TextIO | None = None, err: TextIO | None = None,
                 progress: bool | None = None, proposer: str | None = None, width: int | None = None):
        self.units = dict(units)
        self.iterations, self.budget, self.unit, self.verbosity = int(iterations), budget, unit, int(verbosity)
        self.proposer = proposer
        self.out = out if out is not None else sys.stdout
        self.width = int(width) if width else terminal_width(self.out)
        self._own_err = err is None
        self.err = err if err is not None else _terminal_stderr()
        if progress is None:
            isatty = getattr(self.err, "isatty", None)
            progress = bool(callable(isatty) and isatty()) and self.verbosity >= 0
        self._progress = progress
        self._bar = None
        self._seen: set[str] = set()
        self._last: dict[str, float] | None = None

    # -- output primitives --------------------------------------------------------------------
    def _write(self, text: str, stream: TextIO | None = None) -> None:
        stream = stream if stream is not None else self.out
        if self._bar is not None:  # the bar is on its own stream: clear it, write the line, redraw it below
            self._bar.clear()
            print(text, file=stream, flush=True)
            self._bar.refresh()
        else:
            print(text, file=stream, flush=True)

    def line(self, text: str) -> None:
        """An informational line (the run's header, the start stage); not with ``--quiet``."""
        if self.verbosity >= 0:
            self._write(text)

    def warning(self, text: str, *, prefix: str = "warning") -> None:
        """``warning: text`` on stderr (``note: text`` on stdout), the first time this exact text is seen."""
        key = f"{prefix}: {text}"
        if key in self._seen:
            return
        self._seen.add(key)
        self._write(key, self.err if prefix == "warning" else self.out)

    def seen(self, text: str) -> bool:
        """True when ``warning: text`` (or ``note: text``) was already printed."""
        return f"warning: {text}" in self._seen or f"note: {text}" in self._seen

    # -- the run --------------------------------------------------------------------------------
    def start(self) -> None:
        """Open the progress bar (rollouts against the budget, else iterations)."""
        if not self._progress or self._bar is not None:
            return
        from tqdm import tqdm

        total, what = (self.budget, "rollout") if self.budget else (self.iterations, "iteration")
        self._bar = tqdm(total=total, unit=what, file=self.err, leave=False, dynamic_ncols=True,
                         desc="calibrating", bar_format="{desc} {bar} {n_fmt}/{total_fmt} {unit}s "
                                                        "[{elapsed}<{remaining}]")

    def iteration(self, rec: Any) -> None:
        """One completed :class:`~vid2sid_ros.calibration.loop.IterationRecord` (iteration 0 included)."""
        values = {k: float(v) for k, v in (rec.values or {}).items()}
        if self._bar is not None:  # counted first: the redraw after the line below shows it
            done = rec.extra.get("rollouts_total", rec.rollouts_used) if self.budget else rec.iteration
            self._bar.n = max(0, min(int(done), int(self._bar.total)))
            self._bar.refresh()
        if self.verbosity >= 0:
            self._write(self.iteration_line(rec, self._last or values))
        if self.verbosity >= 1:
            import textwrap

            self._write(textwrap.indent(textwrap.fill(str(rec.rationale or ""), 100), "    "))
        for n in rec.notes if self.verbosity >= 0 else ():  # --quiet: warnings and the summary only
            if self.verbosity >= 1:
                self._write(f"    note: {n}")
            elif not self.seen(n):
                self.warning(n, prefix="note")
        self.resume_after(rec)

    def resume_after(self, rec: Any) -> None:
        """Continue after ``rec``, an :class:`~vid2sid_ros.calibration.loop.IterationRecord` (the one just shown,
        or the last of a run being resumed): the next line names what moved from the point it left."""
        current = (rec.extra or {}).get("current_after") or rec.values or {}
        self._last = {k: float(v) for k, v in current.items()}

    def iteration_line(self, rec: Any, before: Mapping[str, float]) -> str:
        """One iteration's line, e.g.
        ``iter  3/10  error 0.096 px (best 0.096 px)  joint_damping 0.00295 → 0.00274 N·m·s/rad  [22/40 rollouts]``:
        at most :data:`MAX_MOVES` moved parameters named, fewer when the line would be wider than
        ``width`` (the others counted, ``3 more``; none named: ``5 parameters moved``)."""
        u = self.unit
        err = format_error(rec.error_px, u) if math.isfinite(rec.error_px) else "failed"
        best = (rec.extra or {}).get("best_error_px")
        total = (rec.extra or {}).get("rollouts_total", rec.rollouts_used)
        head = f"iter {rec.iteration:2d}/{self.iterations}  error {err}"
        if best is not None and rec.iteration > 0:
            head += f" (best {format_error(best, u)})"
        if rec.iteration == 0:
            moves = "start point"
        else:
            moved = moved_parameters(before, rec.values or {}, self.units)
            named = min(len(moved), MAX_MOVES)  # the first ones (physics before nuisances); the rest counted
            tail = f"  [{total}{'/' + str(self.budget) if self.budget else ''} rollouts]"
            while named > 0 and len(f"{head}  {_moves_text(moved, named)}{tail}") > self.width:
                named -= 1  # one line within the terminal's width: fewer named, more counted
            if moved:
                moves = _moves_text(moved, named)
            elif any(float(v) != float(before.get(k, v)) for k, v in (rec.values or {}).items()):
                moves = "moves below 3 significant digits"
            else:
                moves = "no parameter moved"
            fallback = ((rec.extra or {}).get("fallback") or {}).get("to")
            if fallback:  # a proposer that ran its own fallback (a VLM without a key or quota)
                moves += f" (by fallback '{fallback}')"
            elif self.proposer and rec.proposer and rec.proposer != self.proposer:
                moves += f" (by {rec.proposer})"
        return f"{head}  {moves}  [{total}{'/' + str(self.budget) if self.budget else ''} rollouts]"

    def close(self) -> None:
        """Remove the progress bar (before the summary)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._own_err and self.err is not sys.stderr:  # the duplicate fd: closed; later lines go to stderr
            self.err.close()
            self.err = sys.stderr


def _terminal_stderr() -> TextIO:
    """A line-buffered text stream on a duplicate of fd 2 (sys.stderr itself when it has no fd)."""
    import os

    try:
        sys.stderr.flush()
        return os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1, encoding="utf-8", errors="replace",
                         closefd=True)
    except (OSError, ValueError, AttributeError):  # pytest's capture, an embedded interpreter
        return sys.stderr
