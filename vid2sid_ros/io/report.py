"""A calibration report for people: ONE self-contained HTML file.

:func:`write_report` reads one or more calibration run directories written by
:func:`vid2sid_ros.calibration.loop.run_calibration` (``result.json``, ``result.yaml``,
``iterations.jsonl`` via the loop's own loaders) — for any rig: pendulum, finger,
tentacle — and writes a single HTML page that opens in a browser without a server:
every image and video is embedded as a base64 ``data:`` URI.

Contents:

* summary: training and holdout pixel MAE, rollouts, wall time of the main run;
* videos (optional): e.g. the real clip with the calibrated twin drawn over it —
  each as ``<video>`` with one ``<source>`` per file (WebM/VP8 plays in Chromium and
  Firefox, MPEG-4 in others);
* trajectory plots (optional): keypoint x and y (and any derived series, e.g. a
  pendulum's angle) against time, real vs calibrated twin, the train/holdout split
  marked, plus the pixel error against time — from :class:`TrajectoryPanel` objects or
  a ``trajectories.json`` (:func:`save_trajectories`) in the main run directory;
* the parameter table: kind, unit, start, identified value (± Gauss–Newton standard
  deviation when the loop computed one), search bounds, meaning;
* the error convergence plot (best training MAE so far vs rollouts) of every run;
* each iteration's rationale and confidence (main run open, others collapsed);
* a method comparison table when several runs are given;
* free extra sections (tables and paragraphs) supplied by the caller.

Plots use matplotlib's Agg backend (no display). Command line::

    python -m vid2sid_ros.io.report RUN_DIR [RUN_DIR ...] [--out report.html]
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.trajectory import Trajectory

__all__ = ["write_report", "TrajectoryPanel", "ReportSection", "RunSummary", "load_run", "save_trajectories",
           "load_trajectories", "ReportError"]


class ReportError(ValueError):
    """A run directory or report input is unusable (the message names it)."""


@dataclass
class TrajectoryPanel:
    """Real and simulated trajectories of one trial for the plots.

    Attributes:
        label: panel title (e.g. ``"free decay"``).
        real: real keypoints (T, K, 2) px.
        sim: calibrated twin's keypoints, frames paired with ``real`` by step.
        split_time: time (s) where the holdout starts (None: no split marked).
        derived: extra series ``{name: (unit, real (T,), sim (T,))}`` on ``real.time``.
    """

    label: str
    real: Trajectory
    sim: Trajectory
    split_time: float | None = None
    derived: dict[str, tuple[str, np.ndarray, np.ndarray]] = field(default_factory=dict)


@dataclass
class ReportSection:
    """A free section: paragraphs of text and/or one table (all text is HTML-escaped)."""

    title: str
    paragraphs: Sequence[str] = ()
    headers: Sequence[str] = ()
    rows: Sequence[Sequence[Any]] = ()


@dataclass
class RunSummary:
    """What the report needs from one run directory (see :func:`load_run`)."""

    label: str
    path: Path
    result: dict[str, Any]
    records: list[Any]
    parameters: Any  # ParameterSet with nominal = identified values
    rig: dict[str, Any]


def load_run(run_dir: str | Path, label: str | None = None) -> RunSummary:
    """Read a calibration run directory (``result.json``, ``result.yaml``, ``iterations.jsonl``).

    Raises:
        ReportError: the directory has no finished calibration (names the missing file).
    """
    from ..calibration.loop import load_history
    from ..core.parameters import load_parameter_set

    d = Path(run_dir)
    for f in ("result.json", "result.yaml", "run.json"):
        if not (d / f).is_file():
            raise ReportError(f"{d}: not a finished calibration run ({f} missing)")
    try:
        result = json.loads((d / "result.json").read_text())
    except json.JSONDecodeError as err:
        raise ReportError(f"{d / 'result.json'}: not valid JSON: {err}") from None
    records = load_history(d)
    params = load_parameter_set(d / "result.yaml")
    return RunSummary(label or str(result.get("proposer") or d.name), d, result, records, params,
                      dict(result.get("rig") or {}))


# -- trajectories.json -----------------------------------------------------------------
def save_trajectories(path: str | Path, panels: Sequence[TrajectoryPanel]) -> Path:
    """Store panels as JSON next to a run (so the report can be rebuilt later)."""
    out = []
    for p in panels:
        out.append({"label": p.label, "real": p.real.to_dict(), "sim": p.sim.to_dict(), "split_time": p.split_time,
                    "derived": {k: {"unit": u, "real": _nan_list(r), "sim": _nan_list(s)}
                                for k, (u, r, s) in p.derived.items()}})
    path = Path(path)
    path.write_text(json.dumps(out))
    return path


def load_trajectories(path: str | Path) -> list[TrajectoryPanel]:
    """Inverse of :func:`save_trajectories`.

    Raises:
        ReportError: malformed file (names it).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        return [TrajectoryPanel(d["label"], Trajectory.from_dict(d["real"]), Trajectory.from_dict(d["sim"]),
                                d.get("split_time"),
                                {k: (v["unit"], _from_nan_list(v["real"]), _from_nan_list(v["sim"]))
                                 for k, v in (d.get("derived") or {}).items()})
                for d in data]
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ReportError(f"{path}: cannot read trajectories ({type(err).__name__}: {err})") from None


def _nan_list(a: np.ndarray) -> list[float | None]:
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(a, float).ravel()]


def _from_nan_list(v: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if x is None else x for x in v], float)


# -- plots ------------------------------------------------------------------------------
def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_trajectories(panel: TrajectoryPanel) -> bytes:
    """PNG of x(t), y(t) per keypoint, derived series, and the pixel error, real vs sim."""
    from ..core.trajectory import align

    plt = _pyplot()
    real, sim = align(panel.real, panel.sim)
    t = real.time
    K = real.num_keypoints
    rows = 2 * K + len(panel.derived) + 1
    fig, axes = plt.subplots(rows, 1, figsize=(9.5, 1.9 * rows + 0.6), sharex=True, squeeze=False)
    axes = axes[:, 0]
    i = 0
    for k, name in enumerate(real.names):
        for c, axis in enumerate(("x", "y")):
            ax = axes[i]
            ax.plot(t, real.keypoints[:, k, c], ".", ms=2.0, color="0.25", label="real (tracked)")
            ax.plot(t, sim.keypoints[:, k, c], "-", lw=1.0, color="tab:red", label="twin (calibrated)")
            ax.set_ylabel(f"{name} {axis} [px]")
            if axis == "y":
                ax.invert_yaxis()
            i += 1
    for name, (unit, r, s) in panel.derived.items():
        ax = axes[i]
        r, s = np.asarray(r, float), np.asarray(s, float)
        n = min(len(t), len(r), len(s))
        ax.plot(t[:n], r[:n], ".", ms=2.0, color="0.25", label="real")
        ax.plot(t[:n], s[:n], "-", lw=1.0, color="tab:red", label="twin")
        ax.set_ylabel(f"{name} [{unit}]")
        i += 1
    d = np.linalg.norm(real.keypoints - sim.keypoints, axis=2)
    d[~(real.valid & sim.valid)] = np.nan
    ax = axes[i]
    for k, name in enumerate(real.names):
        ax.plot(t, d[:, k], "-", lw=0.8, label=name)
    ax.set_ylabel("error [px]")
    ax.set_xlabel("time [s]")
    for ax in axes:
        ax.grid(alpha=0.3)
        if panel.split_time is not None:
            ax.axvline(panel.split_time, color="tab:blue", ls="--", lw=1)
            ax.axvspan(panel.split_time, t[-1] if len(t) else panel.split_time, color="tab:blue", alpha=0.06)
    axes[0].legend(loc="upper right", fontsize=8, ncol=2)
    title = panel.label + ("  (shaded: holdout, not fitted)" if panel.split_time is not None else "")
    axes[0].set_title(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)


def plot_convergence(runs: Sequence[RunSummary]) -> bytes:
    """PNG: best training MAE so far against rollouts used, one line per run."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for r in runs:
        xs, ys, used, best = [], [], 0, math.inf
        for rec in r.records:
            used += int(rec.rollouts_used)
            if math.isfinite(rec.error_px):
                best = min(best, rec.error_px)
            if math.isfinite(best):
                xs.append(used)
                ys.append(best)
        if xs:
            ax.step(xs, ys, where="post", label=r.label, lw=1.4)
            h = r.result.get("holdout_mae_px")
            if h is not None:
                ax.plot([xs[-1]], [h], marker="*", ms=9, color=ax.lines[-1].get_color(), ls="none")
    ax.set_yscale("log")
    ax.set_xlabel("rollouts used")
    ax.set_ylabel("training MAE [px] (best so far)")
    ax.set_title("convergence (stars: holdout MAE at the end)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


# -- HTML -------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1040px;color:#222;
padding:0 12px}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:3px;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em} th,td{border:1px solid #ccc;padding:3px 7px;
vertical-align:top;text-align:left} th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums}
.key{display:flex;flex-wrap:wrap;gap:10px;margin:.8em 0}.key div{background:#f6f8fa;border:1px solid #ddd;
border-radius:6px;padding:8px 12px}.key b{display:block;font-size:1.35em}
img{max-width:100%} video{width:640px;max-width:100%;background:#000} .muted{color:#666;font-size:.9em}
details{margin:.4em 0} summary{cursor:pointer} pre{white-space:pre-wrap;font-size:.85em;margin:0}
"""

_MIME = {".webm": "video/webm", ".mp4": "video/mp4", ".m4v": "video/mp4", ".ogv": "video/ogg", ".png": "image/png"}


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return str(int(x))
    try:
        v = float(x)
    except (TypeError, ValueError):
        return _e(x)
    if not math.isfinite(v):
        return "–"
    return f"{v:.{digits}g}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in headers) + "</tr>"]
    for row in rows:
        cells = []
        for c in row:
            num = isinstance(c, (int, float, np.floating, np.integer)) and not isinstance(c, bool)
            cells.append(f"<td class=\"num\">{_fmt(c)}</td>" if num else f"<td>{_e(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _video(paths: Sequence[Path], caption: str) -> str:
    sources = []
    for p in paths:
        p = Path(p)
        mime = _MIME.get(p.suffix.lower())
        if mime is None or not p.is_file():
            continue
        sources.append(f'<source type="{mime}" src="data:{mime};base64,{base64.b64encode(p.read_bytes()).decode("ascii")}">')
    if not sources:
        return f'<p class="muted">(video {_e(caption)} not available)</p>'
    return (f"<figure><video controls loop muted playsinline preload=\"auto\">{''.join(sources)}"
            f"Your browser cannot play the embedded video.</video><figcaption class=\"muted\">{_e(caption)}"
            "</figcaption></figure>")


def _parameter_table(run: RunSummary) -> str:
    start = run.records[0].values if run.records else {}
    unc = run.result.get("uncertainty") or {}
    rows = []
    for s in run.parameters.specs:
        ident = s.nominal
        std = unc.get(s.name)
        rows.append([s.name, s.kind + (" (frozen)" if s.frozen else ""), s.unit, start.get(s.name, math.nan), ident,
                     "–" if std is None else f"± {_fmt(std, 2)}", f"[{_fmt(s.lower)}, {_fmt(s.upper)}]", s.meaning])
    return _table(["parameter", "kind", "unit", "start", "identified", "std (Gauss–Newton)", "search bounds",
                   "meaning"], rows)


def _iterations(run: RunSummary, open_: bool) -> str:
    rows = []
    for r in run.records:
        notes = "; ".join(r.notes)
        rows.append(f"<tr><td class=\"num\">{r.iteration}</td><td>{_e(r.proposer)}</td>"
                    f"<td class=\"num\">{_fmt(r.error_px)}</td><td class=\"num\">{r.rollouts_used}</td>"
                    f"<td class=\"num\">{_fmt(r.confidence, 2)}</td><td><pre>{_e(r.rationale)}</pre>"
                    + (f"<div class=\"muted\">notes: {_e(notes)}</div>" if notes else "") + "</td></tr>")
    body = ("<table><tr><th>iter</th><th>proposer</th><th>train MAE [px]</th><th>rollouts</th><th>confidence</th>"
            "<th>rationale</th></tr>" + "\n".join(rows) + "</table>")
    return f"<details{' open' if open_ else ''}><summary>{_e(run.label)}: {len(run.records)} iterations</summary>{body}</details>"


def write_report(out_path: str | Path, runs: Mapping[str, str | Path] | Sequence[str | Path] | str | Path, *,
                 main: str | None = None, title: str | None = None,
                 trajectories: Sequence[TrajectoryPanel] | None = None,
                 videos: Sequence[tuple[str, Sequence[str | Path]]] = (),
                 sections: Sequence[ReportSection] = (), key_numbers: Sequence[tuple[str, str]] = (),
                 comparison_columns: Sequence[str] = ()) -> Path:
    """Write the self-contained HTML report.

    Args:
        out_path: the ``.html`` file to write (folder created).
        runs: run directories — one path, a list, or ``{label: path}``.
        main: label of the main run (default the first): its parameters, iterations and
            trajectories are shown in full.
        title: page title (default from the rig name).
        trajectories: plot panels; default: ``trajectories.json`` in the main run dir if present.
        videos: ``[(caption, [file, ...]), ...]``; each file becomes a ``<source>``
            (order = preference), embedded as base64.
        sections: extra sections after the summary.
        key_numbers: ``[(label, value text)]`` shown as the headline boxes (default:
            training/holdout MAE of the main run).
        comparison_columns: parameter names whose identified values appear in the
            method comparison table.

    Returns:
        The path written.

    Raises:
        ReportError: no run given, an unknown ``main``, or a run directory that is not a
            finished calibration (names it).
    """
    if isinstance(runs, (str, Path)):
        runs = [runs]
    items = list(runs.items()) if isinstance(runs, Mapping) else [(None, p) for p in runs]
    if not items:
        raise ReportError("write_report: no run directory given")
    loaded = [load_run(p, label) for label, p in items]
    by_label = {r.label: r for r in loaded}
    if main is not None and main not in by_label:
        raise ReportError(f"write_report: main run {main!r} not among {list(by_label)}")
    m = by_label[main] if main is not None else loaded[0]
    if trajectories is None and (m.path / "trajectories.json").is_file():
        trajectories = load_trajectories(m.path / "trajectories.json")
    rig_name = m.rig.get("name") or "calibration"
    title = title or f"vid2sid calibration report: {rig_name}"
    res = m.result

    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
             f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{_CSS}</style></head><body>",
             f"<h1>{_e(title)}</h1>",
             f"<p class=\"muted\">generated {_e(_dt.datetime.now().strftime('%Y-%m-%d %H:%M'))} from "
             f"{_e(m.path)}; proposer <b>{_e(m.label)}</b>; stopped: {_e(res.get('stopped', ''))}</p>"]
    if m.rig.get("description"):
        parts.append(f"<p>{_e(m.rig['description'])}</p>")
    kn = list(key_numbers) or [("training MAE", f"{_fmt(res.get('error_px'))} px"),
                               ("holdout MAE", f"{_fmt(res.get('holdout_mae_px'))} px"),
                               ("rollouts", _fmt(res.get("rollouts")))]
    parts.append("<div class=\"key\">" + "".join(f"<div>{_e(k)}<b>{_e(v)}</b></div>" for k, v in kn) + "</div>")

    for caption, files in videos:
        parts.append(f"<h2>{_e(caption.split(':')[0])}</h2>" + _video([Path(f) for f in files], caption))

    if trajectories:
        parts.append("<h2>Trajectories: real vs calibrated twin</h2>")
        for p in trajectories:
            parts.append(_img(plot_trajectories(p), f"trajectories {p.label}"))

    parts.append(f"<h2>Parameters ({_e(m.label)})</h2>")
    parts.append(_parameter_table(m))
    fid = res.get("final_identifiability") or {}
    if fid.get("warning"):
        parts.append(f"<p class=\"muted\">identifiability: {_e(fid['warning'])}</p>")

    for s in sections:
        parts.append(f"<h2>{_e(s.title)}</h2>")
        parts.extend(f"<p>{_e(t)}</p>" for t in s.paragraphs)
        if s.headers:
            parts.append(_table(s.headers, s.rows))

    if len(loaded) > 1:
        parts.append("<h2>Methods compared (same rollout budget, same start)</h2>")
        hdr = ["method", "start MAE [px]", "training MAE [px]", "holdout MAE [px]", "rollouts", "wall [s]"] + \
              [f"{c} [{m.parameters[c].unit}]" for c in comparison_columns if c in m.parameters]
        rows = []
        for r in loaded:
            rr = r.result
            start, err = rr.get("initial_error_px"), rr.get("error_px")
            label = r.label + (" (no improvement on the start)" if start is not None and err is not None
                               and err >= start else "")
            rows.append([label, start, err, rr.get("holdout_mae_px"), rr.get("rollouts"), rr.get("wall_s")]
                        + [(rr.get("values") or {}).get(c) for c in comparison_columns if c in m.parameters])
        parts.append(_table(hdr, rows))

    parts.append("<h2>Convergence</h2>")
    parts.append(_img(plot_convergence(loaded), "convergence"))
    parts.append("<h2>Iterations: rationale and confidence</h2>")
    for r in loaded:
        parts.append(_iterations(r, open_=(r is m)))
    parts.append("</body></html>")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(parts), encoding="utf-8")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m vid2sid_ros.io.report RUN_DIR [...] [--out FILE]``."""
    import argparse

    ap = argparse.ArgumentParser(description="Write a self-contained HTML report of calibration run(s).")
    ap.add_argument("runs", nargs="+", help="run directories (the first is the main run)")
    ap.add_argument("--out", default=None, help="output .html (default: <first run>/report.html)")
    a = ap.parse_args(argv)
    out = a.out or str(Path(a.runs[0]) / "report.html")
    try:
        p = write_report(out, a.runs)
    except ReportError as err:
        print(f"report: {err}")
        return 2
    print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
