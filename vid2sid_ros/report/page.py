"""The calibration report page: ONE self-contained HTML file per run.

:func:`write_report` (one run directory -> ``RUN_DIR/report.html``) is what
``vid2sid calibrate``, the ROS bringup and ``vid2sid report`` call;
:func:`render_report` is the general form (several runs compared, caller sections and
videos, e.g. the demo's physics checks).

Sections (each a ``<section id=...>``): ``summary`` (key numbers, stop reason),
``insights`` (title carries the count), ``trials`` (per trial: real vs initial vs
calibrated twin, the commanded excitation under it, the holdout shaded), ``overlay``
(video), ``parameters`` (initial, final, bounds, interval, unit, meaning, truth and
error on sim2sim), ``intervals`` (per-parameter interval plot), ``correlation``
(heatmap), ``designed-trial`` (only when active learning designed a trial: its rationale, command
profile, the ``trials:`` entry to paste and, for designed trials that were run, one row each),
caller sections, ``methods`` (several runs), ``convergence`` (per iteration
and per rollout) and ``iterations`` (rationale and confidence).

Plots are plotly figures; plotly.js is inlined once in the page head so the file opens
offline; videos are embedded as base64 ``data:`` URIs.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..calibration.proposers.rationale import unit_text
from .figures import _shown_unit
from .figures import (convergence_iterations_figure, convergence_rollouts_figure, correlation_figure,
                      designed_profile_figure, figure_html, interval_figure, panel_figure, trial_figure)
from .insights import Insight, ParameterRow, applied_bias_correction, insights, parameter_rows, stop_sentence
from .media import encode_webm, load_renders, overlay_frames
from .run import (DesignedTrials, ReportError, ReportSection, RunSummary, TrajectoryPanel, finite,
                  load_designed_trials, load_run, load_trajectories)

__all__ = ["write_report", "render_report", "html_page", "fmt", "table", "video_html", "interval_digits",
           "group_insights", "stop_badge", "tracking_rows", "SECTION_IDS", "point_digits", "bias_correction_note"]

#: section ids of a calibration report (the headless-browser test looks for each)
#: bytes a report (one self-contained HTML file, its media inside) may take: 3 MB, of which the
#: gzip-compressed plotly.js is about 1.96 MB (docs/calibration.md "Size")
REPORT_SIZE_BUDGET = 3_000_000

SECTION_IDS = ("summary", "insights", "trials", "overlay", "tracking", "parameters", "intervals", "correlation",
               "convergence", "iterations")

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#222;
padding:0 12px}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:3px;margin-top:1.6em}
h3{font-size:1.02em;margin:1em 0 .3em}
table{border-collapse:collapse;margin:.6em 0;font-size:.86em} th,td{border:1px solid #ccc;padding:3px 7px;
vertical-align:top;text-align:left} th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums}
.key{display:flex;flex-wrap:wrap;gap:10px;margin:.8em 0}.key div{background:#f6f8fa;border:1px solid #ddd;
border-radius:6px;padding:8px 12px}.key b{display:block;font-size:1.35em}
img{max-width:100%} video{width:640px;max-width:100%;background:#000} .muted{color:#666;font-size:.9em}
details{margin:.4em 0} summary{cursor:pointer} pre{white-space:pre-wrap;font-size:.85em;margin:0}
.warn{color:#a04000} .bad{background:#fff1e6} .ok{color:#1a7f37}
ul.insights li{margin:.3em 0} .stop{font-weight:600;padding:6px 10px;border-radius:6px;display:inline-block}
.stop.bad{border:1px solid #e0a070} .stop.good{background:#eef8f0;border:1px solid #9fd3aa}
@media print{.js-plotly-plot{page-break-inside:avoid} video{display:none} body{max-width:none}}
"""

_MIME = {".webm": "video/webm", ".mp4": "video/mp4", ".m4v": "video/mp4", ".ogv": "video/ogg", ".png": "image/png"}


def e(x: Any) -> str:
    """HTML-escaped text."""
    return html.escape(str(x), quote=True)


def fmt(x: Any, digits: int = 4, none: str = "n/a") -> str:
    """A number for a table cell (``none`` for missing/non-finite values)."""
    if x is None:
        return none
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return str(int(x))
    try:
        v = float(x)
    except (TypeError, ValueError):
        return e(x)
    if not math.isfinite(v):
        return none
    return f"{v:.{digits}g}"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, row_classes: Sequence[str] = ()) -> str:
    """An HTML table; numbers right-aligned, text escaped; ``None`` cells read ``n/a``."""
    out = ["<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in headers) + "</tr>"]
    for i, row in enumerate(rows):
        cells = []
        for c in row:
            num = isinstance(c, (int, float, np.floating, np.integer)) and not isinstance(c, bool)
            cells.append(f"<td class=\"num\">{fmt(c)}</td>" if num or c is None else f"<td>{e(c)}</td>")
        cls = row_classes[i] if i < len(row_classes) and row_classes[i] else ""
        out.append(f"<tr{f' class={chr(34)}{cls}{chr(34)}' if cls else ''}>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def video_html(paths: Sequence[Path], caption: str) -> str:
    """A ``<video>`` with one embedded ``<source>`` per existing file (order = preference)."""
    sources = []
    for p in paths:
        p = Path(p)
        mime = _MIME.get(p.suffix.lower())
        if mime is None or not p.is_file():
            continue
        sources.append(f'<source type="{mime}" src="data:{mime};base64,{base64.b64encode(p.read_bytes()).decode("ascii")}">')
    if not sources:
        return f'<p class="muted">(video {e(caption)} not available)</p>'
    return (f"<figure><video controls loop muted playsinline preload=\"auto\">{''.join(sources)}"
            f"Your browser cannot play the embedded video.</video><figcaption class=\"muted\">{e(caption)}"
            "</figcaption></figure>")


#: the page's plotly.js loader: the bundle is stored gzip-compressed (1.5 MB instead of 4.8 MB) and
#: inflated with the browser's DecompressionStream (Chromium 80+, Firefox 113+, Safari 16.4+); every
#: figure's script waits for ``window.vid2sidPlotly``
_PLOTLY_LOADER = """window.vid2sidPlotly = (async () => {
  const b64 = document.getElementById('vid2sid-plotly-gz').textContent.trim();
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const code = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).text();
  const s = document.createElement('script');
  s.textContent = code;
  document.head.appendChild(s);
  return window.Plotly;
})();"""


def _plotly_js_bytes() -> bytes:
    """The installed plotly package's plotly.js bundle (``plotly/package_data/plotly.min.js``, UTF-8), read
    without importing plotly (``plotly.offline.get_plotlyjs`` reads the same file after importing plotly and
    its tools, a twentieth of a CPU second)."""
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / "package_data" / "plotly.min.js"
        if path.is_file():
            return path.read_bytes()
    raise ReportError("the report needs plotly.js from the Python package plotly: pip install plotly")


def _plotly_gz() -> str:
    """plotly.js (the installed plotly's bundle), gzip-compressed and base64-encoded.

    Compressing the 4.8 MB bundle costs a fifth of a CPU second, as much as a small calibration's
    rollouts, and gives the same bytes every time: the result is kept in the user's cache directory
    (``$XDG_CACHE_HOME/vid2sid_ros``, default ``~/.cache/vid2sid_ros``), named by the bundle's SHA-256,
    written atomically; an unwritable cache only means compressing again next time.

    Raises:
        ReportError: plotly (the Python package that ships the bundle) is not installed."""
    import contextlib
    import gzip
    import hashlib

    js = _plotly_js_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vid2sid_ros"
    path = cache / f"plotly-{hashlib.sha256(js).hexdigest()[:16]}.js.gz.b64"
    try:
        return path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        pass
    text = base64.b64encode(gzip.compress(js, 9, mtime=0)).decode("ascii")
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="ascii")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return text


def html_page(title: str, body: Sequence[str]) -> str:
    """The complete page: head with CSS and the inlined (gzip-compressed) plotly.js bundle, then ``body``.

    The figures of :func:`~vid2sid_ros.report.figures.figure_html` draw once the bundle is
    inflated (``window.vid2sidPlotly``, a promise)."""
    return "\n".join([f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
                      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                      f"<style>{CSS}</style><script type=\"application/gzip-base64\" id=\"vid2sid-plotly-gz\">"
                      f"{_plotly_gz()}</script><script type=\"text/javascript\">{_PLOTLY_LOADER}</script></head><body>",
                      *body, "</body></html>"])


def _section(sid: str, title: str, content: str) -> str:
    return f"<section id=\"{sid}\"><h2>{e(title)}</h2>\n{content}\n</section>"


# -- sections ---------------------------------------------------------------------------
def group_insights(items: Sequence[Insight]) -> list[tuple[Insight, list[Insight]]]:
    """Insights as a reader counts them: the residual diagnosis's findings folded under its first
    line (one insight, not a header plus its items); every other insight on its own."""
    out: list[tuple[Insight, list[Insight]]] = []
    for it in items:
        if it.kind == "residual" and out and out[-1][0].kind == "residual":
            out[-1][1].append(it)
        else:
            out.append((it, []))
    return out


def _insights_html(groups: Sequence[tuple[Insight, list[Insight]]]) -> str:
    if not groups:
        return "<p class=\"ok\">Nothing to flag: converged, no parameter at a bound, no poorly identifiable " \
               "combination found.</p>"
    li = []
    for it, sub in groups:
        cls = "warn" if it.severity == "warning" else "muted"
        inner = "".join(f"<li>{e(x.title.removeprefix('Residual diagnosis: '))}</li>" for x in sub)
        li.append(f"<li data-kind=\"{e(it.kind)}\"><span class=\"{cls}\"><b>{e(it.title)}</b></span>"
                  + (f"<br><span class=\"muted\">{e(it.detail)}</span>" if it.detail else "")
                  + (f"<ul>{inner}</ul>" if inner else "") + "</li>")
    return "<ul class=\"insights\">" + "".join(li) + "</ul>"


#: insight kinds that say the fit or the model is in doubt: a converged run with one of these is not "good"
DOUBT_KINDS = ("residual", "holdout", "no_improvement", "at_bound", "poorly_identifiable", "failures")


def stop_badge(run: RunSummary, groups: Sequence[tuple[Insight, list[Insight]]]) -> tuple[str, str]:
    """``(css class, text)`` of the stop badge, agreeing with the insights: green only when the run
    converged and no insight puts the fit or the model in doubt."""
    text = stop_sentence(run)
    doubts = [it for it, _ in groups if it.severity == "warning" and it.kind in DOUBT_KINDS]
    if run.converged and not doubts:
        return "good", text
    if run.converged:
        return "bad", f"{text} — but {len(doubts)} insight(s) below put the result in doubt"
    return "bad", text


def interval_digits(lower: float, value: float | None, upper: float, *, start: int = 3, most: int = 12
                    ) -> tuple[str, str, str]:
    """``lower``, ``value`` and ``upper`` printed with the fewest significant digits (at least
    ``start``) that tell them apart, so a reader sees whether the value lies inside: ``[1.6, 1.61]``
    around 1.6049 becomes ``[1.600, 1.610]`` with value ``1.605``. Equal numbers stay equal."""
    vals = [lower, value if value is not None else lower, upper]
    for d in range(start, most + 1):
        txt = [f"{v:#.{d}g}".rstrip(".") for v in vals]  # '#': trailing zeros kept, digits line up
        if all((txt[i] != txt[j]) == (vals[i] != vals[j]) for i, j in ((0, 1), (1, 2), (0, 2))):
            break
    a, v, b = txt
    return a, (v if value is not None else ""), b


def _interval_cell(r: ParameterRow) -> str:
    """``[lo, hi]`` with digits that place the identified value, plus why it is unreliable."""
    if r.interval is None:
        return "none: " + (r.interval_method or "not computed")
    lo, _, hi = interval_digits(r.interval[0], r.final, r.interval[1])
    txt = f"[{lo}, {hi}]"
    if not (r.interval[0] <= r.final <= r.interval[1]):
        txt += " — the identified value lies outside (the interval is centred on the least-squares optimum)"
    if not r.reliable:
        txt += "; UNRELIABLE: " + ", ".join(r.unreliable_because)
    if r.consider_interval is not None:
        clo, _, chi = interval_digits(r.consider_interval[0], r.final, r.consider_interval[1])
        txt += f"; consider-widened [{clo}, {chi}] (assumes the {r.caveat} is right)"
    return txt


def point_digits(value: float, other: float, *, start: int = 3, most: int = 12) -> tuple[str, str]:
    """``value`` and ``other`` printed with the same, fewest significant digits (at least ``start``) that
    tell them apart, so a reader sees how far a bias-corrected value moved from the proposer's point:
    0.361936 and 0.361913 from 4 digits are ``0.36194`` and ``0.36191``. Equal numbers print equal."""
    for d in range(start, most + 1):
        a, b = (f"{x:#.{d}g}".rstrip(".") for x in (value, other))
        if (a != b) == (value != other):
            break
    return a, b


def _significant(text: str) -> int:
    """Significant digits of a printed number (``0.0004000`` has 4)."""
    return len(text.lower().split("e")[0].lstrip("+-").replace(".", "").lstrip("0")) or 1


def _squared_unit(unit: str) -> tuple[float, str]:
    """``(factor, unit text)`` a sum of squares in ``unit``² is shown with: metres as mm² (the page shows
    metres as mm), else ``px²``, ``rad²``..."""
    if unit == "m":
        return 1e6, "mm²"
    u = unit_text(unit)
    return 1.0, (f"({u})²" if any(c in u for c in "|/·") else f"{u}²") if u else ""


def bias_correction_note(correction: Mapping[str, Any]) -> str:
    """The sentence above a bias-corrected parameter table (``correction``: ``result.json``'s applied
    ``bias_correction``, :func:`~vid2sid_ros.report.insights.applied_bias_correction`): what the values are
    and the two sums of squared residuals with the bias modelled (unit², metres as mm²)."""
    factor, su = _squared_unit(str(correction.get("unit") or "px"))
    s0, s1 = finite(correction.get("ssr_before")), finite(correction.get("ssr_after"))
    text = ("Values bias-corrected: the identified values are the least-squares optimum with the tracker's bias "
            "modelled (the twin filmed and tracked like the robot), not the proposer's own point, which is shown "
            "beside them (column \"proposer's point\"; both with the digits that tell them apart).")
    if s0 is not None and s1 is not None:
        after, before = (f"{x} {su}".strip() for x in point_digits(s1 * factor, s0 * factor, start=4))
        text += (f" The correction was kept because it lowers the sum of squared residuals with the bias modelled: "
                 f"{before} at the proposer's point, {after} at the corrected one.")
    return text


def _identified_cells(r: ParameterRow) -> tuple[Any, str | None]:
    """The identified value's cell (the digits its interval needs, and those that tell it from the proposer's
    point) and the proposer's point's cell with its unit (None: no bias correction was applied)."""
    shown: Any = r.final
    if r.interval is not None:
        shown = interval_digits(r.interval[0], r.final, r.interval[1])[1]
    if r.proposed is None:
        return shown, None
    unit = unit_text(r.unit)
    if r.proposed == r.final:
        return shown, f"{shown if isinstance(shown, str) else fmt(shown)} {unit}".strip()
    start = max(3, _significant(shown if isinstance(shown, str) else fmt(shown)))
    value, proposed = point_digits(r.final, r.proposed, start=start)
    return value, f"{proposed} {unit}".strip()


def _parameters_html(rows: Sequence[ParameterRow], correction: Mapping[str, Any] | None = None) -> str:
    """The parameter table (and, when the values were bias-corrected, the note above it and the proposer's
    point beside each value)."""
    has_truth = any(r.truth is not None for r in rows)
    corrected = correction is not None  # as the terminal's "bias-corrected" (a point it lacks reads n/a)
    hdr = ["parameter", "kind", "unit", "initial", "identified (bias-corrected)" if corrected else "identified"]
    hdr += (["proposer's point"] if corrected else []) + (["truth (sim2sim)", "error"] if has_truth else [])
    hdr += ["search bounds", "interval (95 %)", "meaning"]
    out, cls = [], []
    for r in rows:
        kind = r.kind + (" (frozen)" if r.frozen else "")
        final, proposed = _identified_cells(r)
        row = [r.name, kind, r.unit, r.initial, final] + ([proposed] if corrected else [])
        if has_truth:
            err = r.rel_error
            row += [r.truth, "n/a (frozen)" if r.frozen else (f"{100 * err:.2f} %" if err is not None else "n/a")]
        row += [f"[{fmt(r.lower)}, {fmt(r.upper)}]" + (f" — at the {r.at_bound} bound" if r.at_bound else ""),
                _interval_cell(r) + ("" if r.truth_inside is None else
                                     ("; contains the truth" if r.truth_inside else "; does NOT contain the truth")),
                r.meaning]
        out.append(row)
        cls.append("bad" if (r.at_bound or (r.interval is not None and not r.reliable)) else "")
    methods = sorted({r.interval_method for r in rows if r.interval is not None and r.interval_method})
    how = ("Intervals: " + "; ".join(methods) + ". " if methods else "")
    note = (f"<p class=\"muted\">{e(how)}±1.96 σ of the Gauss–Newton (linearised least-squares) covariance at "
            "the identified point, cov = s²(JᵀJ)⁻¹ times the residuals' autocorrelation time (Ljung, System "
            "Identification, §9.3); it is local and assumes a converged fit and a right model — a lower bound when "
            "the residual diagnosis reports a misspecification. Digits: as many as it takes to tell the bounds from "
            "the identified value. Rows shaded: unreliable interval or value at a "
            "bound. Kind \"nuisance\": measurement parameters (latency, camera, marker offsets) identified with "
            "the physics, never written into the model. \"n/a\": not computed for this row.</p>")
    head = f"<p class=\"bias-corrected\">{e(bias_correction_note(correction))}</p>" if corrected else ""
    return head + table(hdr, out, row_classes=cls) + note


def _correlation_html(run: RunSummary, uid: str) -> str:
    fid = run.result.get("final_identifiability") or {}
    names, corr = fid.get("names") or [], fid.get("correlation") or []
    if not fid:
        return "<p class=\"muted\">No correlation matrix: the run did not check identifiability at its result " \
               "(final_identifiability off).</p>"
    if len(names) < 2:
        return "<p class=\"muted\">No correlation matrix: only one free parameter.</p>"
    if not corr:
        return "<p class=\"muted\">No correlation matrix: the sensitivity matrix JᵀJ is singular at the result " \
               "(some parameter has no effect on the keypoints).</p>"
    return (figure_html(correlation_figure(names, corr), f"corr-{uid}")
            + "<p class=\"muted\">Correlation of the Gauss–Newton estimates, ρ = cov_ij/√(cov_ii cov_jj), cov ∝ "
              "(JᵀJ)⁻¹ with J the keypoint sensitivity to the normalised parameters. |ρ| near 1: the data constrain "
              "only a combination of the two.</p>")


def _iterations_html(run: RunSummary, open_: bool) -> str:
    rows = []
    for r in run.records:
        notes = "; ".join(r.notes)
        lead, mark, trace = str(r.rationale).partition(" Trace: ")  # the sentences on the moves first, trace folded
        text = (f"<pre>{e(lead)}</pre><details class=\"trace\"><summary>trace</summary><pre>{e(trace)}</pre></details>"
                if mark else f"<pre>{e(r.rationale)}</pre>")
        rows.append(f"<tr><td class=\"num\">{r.iteration}</td><td>{e(r.proposer)}</td>"
                    f"<td class=\"num\">{fmt(r.error_px)}</td><td class=\"num\">{r.rollouts_used}</td>"
                    f"<td class=\"num\">{fmt(r.confidence, 2)}</td><td>{text}"
                    + (f"<div class=\"muted\">notes: {e(notes)}</div>" if notes else "") + "</td></tr>")
    unit = e(_shown_unit(str(run.result.get("unit") or "px")))
    body = (f"<table><tr><th>iter</th><th>proposer</th><th>train MAE [{unit}]</th><th>rollouts</th><th>confidence</th>"
            "<th>rationale</th></tr>" + "\n".join(rows) + "</table>")
    return f"<details{' open' if open_ else ''}><summary>{e(run.label)}: {len(run.records)} iterations " \
           f"(iteration 0 = start point)</summary>{body}</details>"


def _trial_title(run: RunSummary, t, i: int) -> str:
    rig = run.rig.get("name") or "rig"
    kp = ", ".join(t.real.names[:4]) + (f" … ({len(t.real.names)} keypoints)" if len(t.real.names) > 4 else "")
    return f"{rig} — trial {i + 1} '{t.name}' ({t.split}); keypoints {kp}"


def trials_caption(kinds: set[str]) -> str:
    """The trial plots' legend, in the terms of the trials' measurement kinds (image, points, joints)."""
    what = {"image": "image keypoints in px (image y grows downwards: its axis is drawn reversed)",
            "points": "3-D marker positions in mm (mocap)",
            "joints": "joint positions in rad (m for prismatic joints), every joint drawn"}
    meas = "; ".join(what[k] for k in ("image", "points", "joints") if k in kinds)
    return ("Dots: the real measurement — " + meas + "; dashed grey: the twin at the initial values; red: the "
            "calibrated twin; error row: its axis is scaled to the calibrated twin (the initial twin's larger error "
            "runs off the top; its peak is in the row's title); bottom: the commanded excitation (actuator units); "
            "shaded: the holdout (not fitted: predicted from the training fit; a recording split in time is shaded "
            "from the split). Drag to zoom, "
            "double-click to reset.")


def _trials_html(run: RunSummary) -> str:
    if not run.trials:
        return "<p class=\"muted\">No per-trial curves in this run directory (trials.json is written by the " \
               "calibration loop at the end of a run; this run predates it or was interrupted).</p>"
    parts = []
    for i, t in enumerate(run.trials):
        lim = len(t.real.names) if t.real.kind == "joints" else 3
        note = ""
        if len(t.real.names) > lim:
            from .figures import pick_keypoints

            shown = [t.real.names[k] for k in pick_keypoints(t.real.names, lim)]
            note = (f"<p class=\"muted\">Showing keypoints {', '.join(shown)} of {len(t.real.names)}; the error row "
                    "averages all of them.</p>")
        split = "holdout: not fitted, predicted" if t.split == "holdout" else t.split
        parts.append(f"<h3>{e(t.name)} ({e(split)})</h3>" + note
                     + figure_html(trial_figure(t, title=_trial_title(run, t, i), limit=lim), f"trial-{i}"))
        if t.message:
            parts.append(f"<p class=\"warn\">{e(t.message)}</p>")
    return f"<p class=\"muted\">{e(trials_caption({t.real.kind for t in run.trials}))}</p>" + "".join(parts)


def _overlay_html(run: RunSummary) -> str:
    if not run.trials:
        return "<p class=\"muted\">No overlay video: no per-trial curves in this run (trials.json).</p>"
    if not any(t.real.kind == "image" for t in run.trials):
        return ("<p class=\"muted\">No overlay video: the trials measure 3-D points or joint positions, not image "
                "keypoints; the trial plots above compare them.</p>")
    from ..calibration.trial_curves import RENDERS_FILE

    renders = load_renders(run.path / RENDERS_FILE)
    frames, fps, shown = overlay_frames(run.trials, renders)
    path, codec = encode_webm(frames, fps, run.path / "report_media", log_path=run.path / "report.log")
    what = ("Left: the real keypoints (white dots, linked in chain order) "
            + ("on the camera footage" if shown["footage"] else
               "(no camera footage kept in this run: the real trial was not a video, or its frames were not kept)")
            + "; middle: the twin at the initial values; right: the twin at the calibrated values — "
            + ("each rendered through the rig's camera as configured (fitted camera nuisances move the measured "
               "keypoints, not the render), " if shown["renders"] else "(the twin could not be rendered here: "
               "keypoints only), ")
            + "the twin's keypoints as rings over the real dots. "
            + ("Training trials first, then the holdout (labelled, not fitted)." if shown["holdout"]
               else "Training trials only: this run has no holdout trial."))
    if path is None:  # no WebM encoder: a strip of still frames instead of an unplayable file
        import cv2

        idx = np.linspace(0, len(frames) - 1, min(4, len(frames))).astype(int)
        ok, png = cv2.imencode(".png", cv2.cvtColor(np.concatenate([frames[i] for i in idx]), cv2.COLOR_RGB2BGR))
        img = (f"<img alt=\"overlay frames\" src=\"data:image/png;base64,{base64.b64encode(png.tobytes()).decode()}\">"
               if ok else "")
        return (img + f"<p class=\"warn\">No video: this OpenCV build has no WebM (VP9/VP8) encoder; "
                      f"{len(idx)} still frames instead.</p><p class=\"muted\">{e(what)}</p>")
    return video_html([path], f"{what} WebM/{'VP9' if codec == 'VP90' else 'VP8'}, embedded in this file.")


#: the tracking table's row counting the frames in which no keypoint was found
NO_KEYPOINT = "no keypoint found (frame rejected or lost)"


def tracking_rows(trials: Sequence[Any]) -> list[list[Any]]:
    """Per trial and keypoint: ``[trial, split, "<keypoint> tracked", frames, count, share %]`` from the
    real trajectory's validity mask, plus one row per trial counting the frames where no keypoint was
    found (``"no keypoint found (frame rejected or lost)"``: its share is of frames lost, not tracked). A holdout trial counts from its first scored frame
    (a recording split in time is stored as one holdout trial, unscored before the split)."""
    rows = []
    for t in trials:
        v = np.asarray(t.real.valid, bool)
        if t.split == "holdout" and v.ndim == 2 and v.any():  # a time split's holdout: from its first scored
            v = v[int(np.argmax(v.any(axis=1))):]  # frame (the training part before it is unscored, not lost)
        T = int(v.shape[0])
        for k, name in enumerate(t.real.names):
            n = int(v[:, k].sum())
            rows.append([t.name, t.split, f"{name} tracked", T, n, round(100.0 * n / max(T, 1), 1)])
        lost = int((~v.any(axis=1)).sum()) if v.ndim == 2 else 0
        rows.append([t.name, t.split, NO_KEYPOINT, T, lost,
                     round(100.0 * lost / max(T, 1), 1)])
    return rows


def _flat(d: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """A nested mapping as ``[(dotted key, scalar or text)]`` (lists shortened), for an unknown layout."""
    if isinstance(d, Mapping):
        out = []
        for k, v in d.items():
            out += _flat(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(d, (list, tuple)):
        if all(isinstance(x, (int, float)) for x in d) and len(d) <= 8:
            return [(prefix, ", ".join(fmt(x) for x in d))]
        return [(prefix, f"{len(d)} entries")]
    return [(prefix, d)]


def _contact_sheet(run: RunSummary, renders: Mapping[str, np.ndarray], n: int = 6) -> str:
    """Up to ``n`` real frames of the first trial with footage, the tracked keypoints drawn (a PNG)."""
    import cv2

    from .media import _draw_chain, _frame_map, _points  # noqa: PLC2701 - the overlay's own drawing

    for i, t in enumerate(run.trials):
        frames = renders.get(f"{i}_real")
        if frames is None or t.real.kind != "image":
            continue
        to_px, h, _ = _frame_map(t, dict(renders), i, frames.shape[2])
        steps = renders.get(f"{i}_steps")
        row = {int(s): r for r, s in enumerate(t.real.steps if t.real.steps is not None else range(t.real.num_frames))}
        tiles = []
        for j in np.linspace(0, len(frames) - 1, min(n, len(frames))).astype(int):
            img = np.ascontiguousarray(frames[j])
            r = row.get(int(steps[j])) if steps is not None and j < len(steps) else None
            if r is not None:
                _draw_chain(img, _points(t.real, r, to_px), (255, 255, 0), filled=True)
                ok = int(t.real.valid[r].sum())
                cv2.putText(img, f"t={float(t.real.time[r]):.2f} s  {ok}/{t.real.num_keypoints}", (4, h - 6),
                            cv2.FONT_HERSHEY_SIMPLEX, 0.38, (255, 255, 0), 1, cv2.LINE_AA)
            tiles.append(img)
        while len(tiles) % 3:
            tiles.append(np.zeros_like(tiles[0]))
        sheet = np.concatenate([np.concatenate(tiles[k:k + 3], axis=1) for k in range(0, len(tiles), 3)])
        ok, jpg = cv2.imencode(".jpg", cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 80])
        if ok:  # JPEG: camera frames (noise) compress 5-10x better than as PNG
            return (f"<figure><img alt=\"tracked keypoints on the real frames\" src=\"data:image/jpeg;base64,"
                    f"{base64.b64encode(jpg.tobytes()).decode('ascii')}\"><figcaption class=\"muted\">Detections on "
                    f"real frames of '{e(t.name)}' (yellow; count of keypoints found per frame).</figcaption></figure>")
    return ("<p class=\"muted\">No contact sheet of detections: this run kept no camera frames (the real trial was "
            "not a video, or its frames were not kept).</p>")


def _tracking_html(run: RunSummary) -> str:
    if not run.trials:
        return "<p class=\"muted\">No tracking summary: no per-trial curves in this run (trials.json).</p>"
    from ..calibration.trial_curves import RENDERS_FILE

    rows = tracking_rows(run.trials)
    parts = [table(["trial", "split", "frames where", "frames", "count", "share [%]"], rows,
                   row_classes=["bad" if r[5] < 80.0 and r[2] != NO_KEYPOINT else "" for r in rows]),
             "<p class=\"muted\">Share of the trial's frames: where the keypoint was measured (valid) in the real "
             "trial, rows shaded below 80 %; in each trial's last row, where no keypoint was found at all (the "
             "frame rejected by the tracker or lost: it carries no weight in the fit).</p>"]
    given = run.result.get("tracking")
    if isinstance(given, Mapping) and given:
        parts.append("<h3>Tracker report</h3>" + table(["entry", "value"], _flat(given)))
    parts.append(_contact_sheet(run, load_renders(run.path / RENDERS_FILE)))
    return "".join(parts)


#: the design criteria in plain words (calibration.design, calibration.active)
_CRITERIA = {"d_optimal": "D-optimal: the trial that most increases log det of the flagged parameters' information "
                          "matrix (JᵀJ of the noise-scaled keypoint sensitivity)",
             "separation": "separation: the trial whose predictions best tell the tied causes apart after refitting "
                           "(in σ of the measurement noise)",
             "proposer_request": "a proposer's excitation_change, validated against the rig's limits like a design"}


def _design_numbers(rec: Mapping[str, Any]) -> list[str]:
    """The rationale's numbers in plain words: criterion, before → after, what the design targets."""
    crit = str(rec.get("criterion") or "")
    out = [f"Criterion: {_CRITERIA.get(crit, crit or 'not recorded')}."]
    cb, ca = rec.get("condition_before"), rec.get("condition_after")
    sb, sa = rec.get("score_before"), rec.get("score_after")
    if crit == "separation" and sa is not None:
        out.append(f"Predicted separation of the closest pair: {fmt(sb, 3)} σ on the recorded trials → {fmt(sa, 3)} σ "
                   "with the designed trial (3 σ or more: the data can tell them apart).")
    elif cb is not None or ca is not None:
        out.append(f"Condition number of the sensitivity: {fmt(cb, 3)} on the recorded trials → {fmt(ca, 3)} with the "
                   "designed trial (lower: the parameters are better separated).")
        if sb is not None and sa is not None:
            out.append(f"log det of the information matrix: {fmt(sb, 4)} → {fmt(sa, 4)} (natural log).")
    targets = [str(x) for x in (rec.get("flagged") or [])]
    if targets:
        what = "causes" if crit == "separation" else "parameters"
        out.append(f"It targets the {what}: {', '.join(targets)}.")
    if rec.get("rollouts") is not None:
        charged = "" if rec.get("charged", True) else " (after the calibration's budget: not charged to it)"
        out.append(f"Design rollouts: {fmt(rec.get('rollouts'))}{charged}.")
    return out


def _warning_cleared(designs: Sequence[Mapping[str, Any]], i: int, summary: Mapping[str, Any] | None) -> str:
    """Whether the identifiability warning before design ``i`` is gone at the next check (the next design's or
    the final result's)."""
    rec = designs[i]
    if not rec.get("applied"):
        return "n/a (not run)"
    before = rec.get("warning")
    nxt = next((d for d in designs[i + 1:] if isinstance(d, Mapping) and "warning" in d), None)
    if nxt is not None:
        after = nxt.get("warning")
    elif summary is not None and "warning_after" in summary:
        after = summary.get("warning_after")
    else:
        return "not known (no check after it recorded)"
    short = (lambda w: " ".join(str(w).split())[:160])
    if not before:
        return "no warning before it" + (f"; after: {short(after)}" if after else "")
    return "yes: no warning after it" if not after else f"no: {short(after)}"


def _design_rows(dt: DesignedTrials) -> list[list[Any]]:
    designs = [d for d in dt.designs if isinstance(d, Mapping)]
    rows = []
    for i, d in enumerate(designs):
        reason = " ".join(str(d.get("reason") or "").split())
        if d.get("applied"):
            status = "applied: run on the rig" + (f" (trial {d['trial']})" if d.get("trial") else "")
        elif "refused" in reason:
            status = f"refused: {reason}"
        else:
            status = f"not run: {reason or 'no reason recorded'}"
        n = d.get("rollouts")
        charged = n if d.get("charged", True) else f"0 ({fmt(n)} design rollouts after the budget)"
        rows.append([d.get("design", "–"), str(d.get("criterion") or d.get("source") or "–"), status, charged,
                     _warning_cleared(designs, i, dt.summary)])
    return rows


def _shown_design(dt: DesignedTrials) -> Mapping[str, Any] | None:
    """The design the section explains: the last one with a profile (the recommendation, or the last run)."""
    return next((d for d in reversed(dt.designs) if isinstance(d, Mapping) and d.get("profile")), None)


def _design_profile(dt: DesignedTrials, rec: Mapping[str, Any] | None) -> tuple[Any, str]:
    """The designed excitation to plot (the CSV, else built from the record's profile) and a note."""
    if dt.excitation is not None:
        return dt.excitation, "designed_excitation.csv"
    if rec is None:
        return None, ""
    from ..core.excitation import ExcitationError, build_excitation

    lim = rec.get("limits") or {}
    names = lim.get("actuators") or lim.get("actuator_names") or [rec["profile"].get("actuator", "u0")]
    try:
        return build_excitation(dict(rec["profile"]), [str(n) for n in names]), "the record's profile"
    except (ExcitationError, KeyError, TypeError, ValueError) as err:
        return None, f"the record's profile cannot be built: {' '.join(str(err).split())[:200]}"


def _designed_html(dt: DesignedTrials) -> str:
    """The ``designed-trial`` section: rationale and numbers, profile plot, paste-able block, run designs."""
    parts = [f"<p class=\"warn\">{e(x)}</p>" for x in dt.problems]
    rec = _shown_design(dt)
    if rec is not None:
        state = ("run on the rig" if rec.get("applied") else
                 str(rec.get("reason")) if "files" in rec and not rec.get("files") else  # it separates nothing
                 "a recommendation: record this trial on the robot, then add the block below to the rig config's "
                 "trials")
        parts.append(f"<p><b>Design {e(rec.get('design', ''))}</b> ({e(state)}).</p>"
                     + "<ul>" + "".join(f"<li>{e(x)}</li>" for x in _design_numbers(rec)) + "</ul>")
        if rec.get("rationale"):
            parts.append(f"<p class=\"muted\">Rationale as recorded:</p><pre>{e(rec['rationale'])}</pre>")
    exc, src = _design_profile(dt, rec)
    if exc is not None:
        rng = ((rec or {}).get("limits") or {}).get("command_range")
        parts.append(figure_html(designed_profile_figure(exc, rng), "designed-profile")
                     + f"<p class=\"muted\">The designed command per actuator ({e(src)}; {exc.num_steps} samples at "
                       f"{fmt(exc.rate)} Hz, {fmt(exc.num_steps / exc.rate, 3)} s)"
                     + ("; dashed: the rig's command limits the design kept to" if rng else
                        "; the rig's command limits were not recorded with this design") + ".</p>")
    elif src:
        parts.append(f"<p class=\"muted\">No profile plot: {e(src)}.</p>")
    if dt.yaml_text is not None:
        parts.append("<h3>The trial to paste (designed_trial.yaml)</h3><pre>" + e(dt.yaml_text) + "</pre>")
    rows = _design_rows(dt)
    if len(rows) > 1 or any(d.get("applied") or d.get("source") for d in dt.designs if isinstance(d, Mapping)):
        parts.append("<h3>Designs</h3>" + table(["design", "criterion", "applied / refused", "rollouts charged",
                                                 "identifiability warning cleared"], rows))
    if dt.summary is not None and dt.summary.get("rollouts_charged") is not None:
        parts.append(f"<p class=\"muted\">Rollouts charged to the budget in all: "
                     f"{fmt(dt.summary.get('rollouts_charged'))}, of which design rollouts "
                     f"{fmt(dt.summary.get('design_rollouts'))}; designed trials run: "
                     f"{fmt(dt.summary.get('robot_trials'))}.</p>")
    if len(parts) == len(dt.problems):
        parts.append("<p class=\"muted\">No design recorded in the active-learning files.</p>")
    return "".join(parts)


def _designed_section(run: RunSummary) -> str | None:
    """The ``designed-trial`` section, None when the run has no active-learning files; never raises."""
    dt = load_designed_trials(run.path)
    if dt is None:
        return None
    try:
        content = _designed_html(dt)
    except (AttributeError, KeyError, TypeError, ValueError) as err:  # a record of an unexpected layout
        content = (f"<p class=\"warn\">The active-learning records in {e(dt.where.name)} are malformed "
                   f"({e(type(err).__name__)}: {e(' '.join(str(err).split())[:200])}); not shown.</p>")
    return _section("designed-trial", "Designed trial (active learning)", content)


def _methods_html(loaded: Sequence[RunSummary], main: RunSummary, columns: Sequence[str]) -> str:
    u = _shown_unit(str(main.result.get("unit") or "px"))
    hdr = ["method", f"start MAE [{u}]", f"training MAE [{u}]", f"holdout MAE [{u}]", "rollouts", "stopped", "wall [s]"] + \
          [f"{c} [{main.parameters[c].unit}]" for c in columns if c in main.parameters]
    rows = []
    for r in loaded:
        rr = r.result
        start, err = rr.get("initial_mae"), rr.get("training_mae")
        label = r.label + (" (no improvement on the start)" if start is not None and err is not None
                           and err >= start else "")
        rows.append([label, start, err, rr.get("holdout_mae"), rr.get("rollouts"), r.stopped, rr.get("wall_s")]
                    + [(rr.get("values") or {}).get(c) for c in columns if c in main.parameters])
    return table(hdr, rows) + "<p class=\"muted\">n/a holdout: the run had no holdout trial.</p>"


def render_report(out_path: str | Path, runs: Mapping[str, str | Path] | Sequence[str | Path] | str | Path, *,
                  main: str | None = None, title: str | None = None,
                  trajectories: Sequence[TrajectoryPanel] | None = None,
                  videos: Sequence[tuple[str, Sequence[str | Path]]] = (),
                  sections: Sequence[ReportSection] = (), key_numbers: Sequence[tuple[str, str]] = (),
                  comparison_columns: Sequence[str] = ()) -> Path:
    """Write the self-contained HTML report of one or more runs.

    Args:
        out_path: the ``.html`` file to write (folder created).
        runs: run directories — one path, a list, or ``{label: path}``.
        main: label of the main run (default the first): its trials, parameters,
            insights and iterations are shown in full.
        title: page title (default from the rig's name and description).
        trajectories: extra caller panels; default ``trajectories.json`` in the main run dir.
        videos: ``[(caption, [file, ...]), ...]`` embedded as base64 (order = preference).
        sections: extra sections (e.g. physics checks) after the correlation heatmap.
        key_numbers: ``[(label, value text)]`` headline boxes (default: errors, rollouts).
        comparison_columns: parameter names shown in the method comparison table.

    Returns:
        The path written.

    Raises:
        ReportError: no run given, an unknown ``main``, or a run directory that is not a
            finished calibration (names it).
    """
    loaded, m = _loaded_runs(runs, main)
    if trajectories is None and (m.path / "trajectories.json").is_file():
        trajectories = load_trajectories(m.path / "trajectories.json")
    title = title or f"{m.rig.get('name') or 'calibration'}: calibration report"
    res = m.result
    rows = parameter_rows(m)
    found = group_insights(insights(m, rows))
    body = [f"<h1>{e(title)}</h1>",
            f"<p class=\"muted\">vid2sid report generated {e(_dt.datetime.now().strftime('%Y-%m-%d %H:%M'))} from "
            f"run directory {e(shown_run_path(m.path, Path(out_path).parent))}; proposer <b>{e(m.label)}</b>; real trial: {e(res.get('real_source') or '')}</p>"]
    body.append(_section("summary", "Summary", _summary_html(m, rows, found, key_numbers)))
    body.append(_section("insights", f"Insights ({len(found)})", _insights_html(found)))
    body.append(_section("trials", "Trials: real vs initial twin vs calibrated twin", _trials_html(m)))
    ov = _overlay_html(m)
    for caption, files in videos:
        ov += f"<h3>{e(caption.split(':')[0])}</h3>" + video_html([Path(f) for f in files], caption)
    body.append(_section("overlay", "Overlay video", ov))
    body.append(_section("tracking", "Tracking quality", _tracking_html(m)))
    if trajectories:
        parts = []
        for i, p in enumerate(trajectories):
            f1, f2 = panel_figure(p)
            parts.append(figure_html(f1, f"panel-{i}") + (figure_html(f2, f"panel-{i}-derived") if f2 else ""))
        body.append(_section("panels", "Trajectories: real vs calibrated twin", "".join(parts)))
    body.append(_section("parameters", f"Parameters ({m.label})",
                         _parameters_html(rows, applied_bias_correction(res))))
    free_rows = [r for r in rows if not r.frozen]
    body.append(_section("intervals", "Parameter intervals within the search bounds",
                         figure_html(interval_figure(free_rows), "intervals-plot") if free_rows else
                         "<p class=\"muted\">no free parameter</p>"))
    body.append(_section("correlation", "Correlation of the identified parameters", _correlation_html(m, "main")))
    designed = _designed_section(m)
    if designed is not None:
        body.append(designed)
    for i, s in enumerate(sections):
        content = "".join(f"<p>{e(t)}</p>" for t in s.paragraphs) + (table(s.headers, s.rows) if s.headers else "")
        body.append(_section(f"extra-{i}", s.title, content))
    if len(loaded) > 1:
        body.append(_section("methods", "Methods compared (same rollout budget, same start)",
                             _methods_html(loaded, m, comparison_columns)))
    body.append(_section("convergence", "Convergence",
                         "<h3>per iteration</h3>" + figure_html(convergence_iterations_figure(loaded), "conv-iter")
                         + "<h3>per rollout</h3>" + figure_html(convergence_rollouts_figure(loaded), "conv-rollout")
                         + "<p class=\"muted\">Per rollout: every evaluation a proposer paid for (a proposer may run "
                           "many inside one iteration), cumulative over the run.</p>"))
    body.append(_section("iterations", "Iterations: rationale and confidence",
                         "".join(_iterations_html(r, open_=(r is m)) for r in loaded)))
    return _write_page(Path(out_path), title, body)


def _loaded_runs(runs: Mapping[str, str | Path] | Sequence[str | Path] | str | Path,
                 main: str | None) -> tuple[list[RunSummary], RunSummary]:
    """The runs loaded in the order given, and the main one; ReportError on none or an unknown ``main``."""
    if isinstance(runs, (str, Path)):
        runs = [runs]
    items = list(runs.items()) if isinstance(runs, Mapping) else [(None, p) for p in runs]
    if not items:
        raise ReportError("write_report: no run directory given")
    loaded = [load_run(p, label) for label, p in items]
    by_label = {r.label: r for r in loaded}
    if main is not None and main not in by_label:
        raise ReportError(f"write_report: main run {main!r} not among {list(by_label)}")
    return loaded, (by_label[main] if main is not None else loaded[0])


def _summary_html(m: RunSummary, rows: Sequence[ParameterRow], found: Sequence[tuple[Insight, list[Insight]]],
                  key_numbers: Sequence[tuple[str, str]]) -> str:
    """The summary: the rig's description, the stop badge and the headline numbers (errors in mm or px)."""
    res = m.result
    badge, badge_text = stop_badge(m, found)
    desc = str(m.rig.get("description") or "")
    summary = []
    if desc:
        summary.append(f"<p>{e(desc)}</p>")
    summary.append(f"<p class=\"stop {badge}\">{e(badge_text)}</p>")

    def err_text(key: str, unit_key: str = "unit") -> str:  # metres shown in mm
        u = str(res.get(unit_key) or res.get("unit") or "px")
        v = res.get(key)
        return f"{fmt(v * (1000.0 if u == 'm' else 1.0) if v is not None else None)} {_shown_unit(u)}"

    kn = list(key_numbers) or [("training MAE", err_text("training_mae")),
                               ("start MAE", err_text("initial_mae")),
                               ("holdout MAE", err_text("holdout_mae", "holdout_unit")
                                if res.get("holdout_mae") is not None else "n/a (no holdout trial)"),
                               ("rollouts", f"{fmt(res.get('rollouts'))}"
                                + (f" of {m.config['rollout_budget']}" if m.config.get("rollout_budget") else "")),
                               ("iterations", f"{fmt(res.get('iterations'))}"
                                + (f" of {m.config['iterations']}" if m.config.get("iterations") is not None else ""))]
    if m.truth:
        errs = [r.rel_error for r in rows if not r.frozen and r.rel_error is not None]
        if errs and not key_numbers:
            kn.append(("mean parameter error vs truth", f"{100 * float(np.mean(errs)):.2f} %"))
    summary.append("<div class=\"key\">" + "".join(f"<div>{e(k)}<b>{e(v)}</b></div>" for k, v in kn) + "</div>")
    return "".join(summary)


def _write_page(out: Path, title: str, body: list[str]) -> Path:
    """Write the page atomically (folder created), with a warning on top when it is over the size budget."""
    out.parent.mkdir(parents=True, exist_ok=True)
    from ..core.files import atomic_write_text

    page = html_page(title, body)
    if len(page.encode("utf-8")) > REPORT_SIZE_BUDGET:  # said on the page (calibrate says it on the terminal)
        body.insert(0, f'<p class="warn">{e(size_note(len(page.encode("utf-8")), body))}</p>')
        page = html_page(title, body)
    atomic_write_text(out, page)  # never half a page: a full disk leaves the old one (or none)
    return out


def size_note(size: int, body: Sequence[str]) -> str:
    """One line: a report of ``size`` bytes is over :data:`REPORT_SIZE_BUDGET`, and its largest
    sections (the section ids of ``body``, HTML strings) with their sizes in MB."""
    import re

    parts = []
    for html in body:
        m = re.search(r'<section id="([^"]+)"', html)
        if m:
            parts.append((len(html.encode("utf-8")), m.group(1)))
    parts.sort(reverse=True)
    big = ", ".join(f"{sid} {n / 1e6:.2f} MB" for n, sid in parts[:3])
    return (f"This report is {size / 1e6:.2f} MB, over its {REPORT_SIZE_BUDGET / 1e6:g} MB budget: the embedded "
            f"media of many trials do not fit (largest sections: {big}); it opens, but slowly and heavily.")


def shown_run_path(run_dir: str | Path, page_dir: str | Path) -> str:
    """A run directory as a page in ``page_dir`` names it: relative to the page's folder, its own name when
    the page is inside it (never the machine's absolute path, which means nothing to a reader elsewhere)."""
    run, here = Path(run_dir).resolve(), Path(page_dir).resolve()
    try:
        rel = os.path.relpath(run, here)
    except ValueError:  # another drive
        return run.name
    return run.name if rel == "." else rel


def write_report(run_dir: str | Path, out: str | Path | None = None, **options: Any) -> Path:
    """Write ``run_dir/report.html`` (or ``out``) for one finished calibration run.

    Args:
        run_dir: a run directory of :func:`vid2sid_ros.calibration.loop.run_calibration`.
        out: the HTML file (default ``run_dir/report.html``).
        **options: passed to :func:`render_report` (``title``, ``videos``, ``sections``...).

    Returns:
        The path written.

    Raises:
        ReportError: ``run_dir`` is not a finished calibration run (names the missing file).
    """
    run_dir = Path(run_dir)
    return render_report(out or run_dir / "report.html", [run_dir], **options)
