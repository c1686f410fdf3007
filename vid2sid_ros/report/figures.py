"""Interactive plots of the report (plotly figures as plain JSON; the page inlines plotly.js once).

Every builder returns a figure as plotly.js reads it, plain dicts and lists:
``{"data": [trace, ...], "layout": {...}}`` (long numeric series as float32 typed arrays
``{"dtype": "f4", "bdata": base64}``, plotly's ``"plotly_white"`` template in the layout);
:func:`figure_html` turns one into a ``<div>`` that needs the plotly.js bundle on the page (see
:mod:`vid2sid_ros.report.page`). Building and writing a figure imports nothing of plotly.py.
Axes carry units; integer quantities (iterations, rollouts) get integer ticks; log axes are
labelled with plain numbers.
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..core.trajectory import Trajectory, align
from .insights import ParameterRow
from .run import RunSummary, TrajectoryPanel, TrialCurves

__all__ = ["figure_html", "trial_figure", "holdout_span", "error_axis_top", "panel_figure", "interval_figure",
           "correlation_figure",
           "convergence_iterations_figure", "convergence_rollouts_figure", "distribution_figure",
           "pick_keypoints", "designed_profile_figure", "subplot_layout", "template"]

REAL = "#222222"
INITIAL = "#8c8c8c"
CALIBRATED = "#d62728"
HOLDOUT = "rgba(31,119,180,0.10)"
_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
#: plotly's "RdBu_r" colour scale, as plotly writes it into a figure
_RDBU_R = [[0.0, "rgb(5,48,97)"], [0.1, "rgb(33,102,172)"], [0.2, "rgb(67,147,195)"], [0.3, "rgb(146,197,222)"],
           [0.4, "rgb(209,229,240)"], [0.5, "rgb(247,247,247)"], [0.6, "rgb(253,219,199)"],
           [0.7, "rgb(244,165,130)"], [0.8, "rgb(214,96,77)"], [0.9, "rgb(178,24,43)"], [1.0, "rgb(103,0,31)"]]

#: every figure's look: plotly's "plotly_white" template, kept as plotly writes it (package data)
_TEMPLATE_FILE = Path(__file__).with_name("plotly_white.json")
_TEMPLATE: dict | None = None


def template() -> dict:
    """plotly's ``"plotly_white"`` template as a figure's ``layout.template`` (``{"data": ..., "layout": ...}``),
    read once from the package's ``plotly_white.json``; the same dict every call (do not modify it)."""
    global _TEMPLATE
    if _TEMPLATE is None:
        _TEMPLATE = json.loads(_TEMPLATE_FILE.read_text(encoding="utf-8"))["template"]
    return _TEMPLATE


def _figure(data: Sequence[dict] = ()) -> dict:
    """An empty figure: ``data`` and a layout with the report's template."""
    return {"data": list(data), "layout": {"template": template()}}


def _typed(values: np.ndarray, dtype: str = "f4") -> dict:
    """``values`` as plotly.js's typed-array spec (``dtype`` ``"f4"``: float32, 7 digits, half the bytes of
    float64), the form plotly.py writes numpy arrays in; a 2-D array carries its shape."""
    a = np.ascontiguousarray(values, dtype="<" + dtype)
    spec = {"dtype": dtype, "bdata": base64.b64encode(a.tobytes()).decode("ascii")}
    if a.ndim > 1:
        spec["shape"] = ", ".join(str(n) for n in a.shape)
    return spec


def _series(values: Any) -> Any:
    """A trace's x or y: a numpy array as a float32 typed array, anything else as given."""
    return _typed(values) if isinstance(values, np.ndarray) else values


def _scatter(x: Any, y: Any, **kw: Any) -> dict:
    return {"type": "scatter", "x": _series(x), "y": _series(y), **kw}


def _axis_suffix(row: int) -> str:
    return "" if row == 1 else str(row)


def _on_row(trace: dict, row: int) -> dict:
    """``trace`` drawn in subplot ``row`` (1 = top) of a :func:`subplot_layout` grid."""
    trace["xaxis"], trace["yaxis"] = f"x{_axis_suffix(row)}", f"y{_axis_suffix(row)}"
    return trace


def _axis(layout: dict, xy: str, row: int = 1) -> dict:
    """``layout``'s x or y axis (``xy``) of subplot ``row`` (created when missing)."""
    return layout.setdefault(f"{xy}axis{_axis_suffix(row)}", {})


def _clamp_unit(v: float) -> float:
    """A domain end within float rounding of [0, 1] put on it (as plotly's make_subplots does)."""
    return 0.0 if -0.01 < v < 0.0 else 1.0 if 1.0 < v < 1.01 else v


def subplot_layout(rows: int, *, vertical_spacing: float | None = None, row_heights: Sequence[float] | None = None,
                   titles: Sequence[str] = ()) -> dict:
    """The layout plotly's ``make_subplots(rows=rows, cols=1, shared_xaxes=True, ...)`` makes, as plain JSON.

    Args:
        rows: subplots stacked top (row 1) to bottom; every x axis matches the bottom one, whose tick labels
            are the only ones shown.
        vertical_spacing: gap between rows, a fraction of the plot height (default 0.5 / rows with
            titles, else 0.3 / rows).
        row_heights: (rows,) relative heights, top first (default equal).
        titles: a title above each row (``""``: none), as annotations in row order.

    Returns:
        ``{"xaxis": ..., "yaxis": ..., "xaxis2": ..., "annotations": [...]}``: axis domains in [0, 1]
        (fractions of the plot area) and anchors; the traces of row ``r`` go on axes ``x{r}``/``y{r}``.
    """
    spacing = (0.5 if titles else 0.3) / rows if vertical_spacing is None else vertical_spacing
    if row_heights is None:
        heights = [(1.0 - spacing * (rows - 1)) / rows] * rows
    else:  # bottom first, as make_subplots sums them
        cum = float(sum(row_heights))
        heights = list(reversed([(1.0 - spacing * (rows - 1)) * (h / cum) for h in row_heights]))
    layout: dict[str, Any] = {}
    notes = []
    bottom = f"x{_axis_suffix(rows)}"
    for r in range(rows):  # r = 0: the top row
        k = rows - 1 - r  # rows below it
        y0 = sum(heights[:k]) + k * spacing
        domain = [_clamp_unit(y0), _clamp_unit(y0 + heights[-1 - r])]
        s = _axis_suffix(r + 1)
        layout[f"xaxis{s}"] = {"domain": [0.0, 1.0], "anchor": f"y{s}"}
        layout[f"yaxis{s}"] = {"domain": domain, "anchor": f"x{s}"}
        if r < rows - 1:
            layout[f"xaxis{s}"].update(matches=bottom, showticklabels=False)
        if r < len(titles) and titles[r]:
            notes.append({"y": domain[1], "xref": "paper", "x": 0.5, "yref": "paper", "text": titles[r],
                          "showarrow": False, "font": {"size": 16}, "xanchor": "center", "yanchor": "bottom"})
    layout["annotations"] = notes
    return layout


def _vline(fig: dict, x: float, line: dict, text: str | None = None) -> None:
    """A vertical line over the whole plot at ``x`` (plotly's ``add_vline``), ``text`` at its top right."""
    lay = fig["layout"]
    lay.setdefault("shapes", []).append({"type": "line", "x0": x, "x1": x, "xref": "x", "y0": 0, "y1": 1,
                                         "yref": "y domain", "line": line})
    if text is not None:
        lay.setdefault("annotations", []).append({"showarrow": False, "text": text, "x": x, "xanchor": "left",
                                                  "xref": "x", "y": 1, "yanchor": "top", "yref": "y domain"})


def _hline(fig: dict, y: float, line: dict, text: str, top: bool) -> None:
    """A horizontal line across the plot at ``y`` (plotly's ``add_hline``), ``text`` at its left end, above
    (``top``) or below it."""
    lay = fig["layout"]
    lay.setdefault("shapes", []).append({"type": "line", "x0": 0, "x1": 1, "xref": "x domain", "y0": y, "y1": y,
                                         "yref": "y", "line": line})
    lay.setdefault("annotations", []).append({"showarrow": False, "text": text, "x": 0, "xanchor": "left",
                                              "xref": "x domain", "y": y, "yanchor": "bottom" if top else "top",
                                              "yref": "y"})


class _Encoder(json.JSONEncoder):
    """JSON as plotly.py writes a figure: numpy arrays as typed arrays, numpy scalars as numbers."""

    def default(self, o: Any) -> Any:
        if isinstance(o, np.ndarray):
            return _typed(o)
        if isinstance(o, np.generic):
            return o.item()
        return super().default(o)


def _script_json(obj: Any) -> str:
    """``obj`` as compact JSON safe inside a ``<script>``: ``<``, ``>`` and ``/`` escaped (no ``</script>``),
    non-ASCII escaped (no U+2028 line break in a script), a non-finite number as null (JSON has none; plotly.js
    reads null as a gap; NaN inside a typed array stays NaN)."""
    text = json.dumps(obj, cls=_Encoder, separators=(",", ":"))
    if "NaN" in text or "Infinity" in text:  # maybe inside a string or base64 data: re-parsed, only numbers change
        text = json.dumps(json.loads(text, parse_constant=lambda _: None), separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("/", "\\u002f")


def _css_size(value: Any) -> str:
    return f"{value}px" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def figure_html(fig: dict, div_id: str) -> str:
    """The figure (``{"data": [...], "layout": {...}}``, plotly JSON) as an HTML ``<div>`` sized by its layout's
    height and width (pixels; default the page's width); its script draws it once the page's
    ``window.vid2sidPlotly`` resolves (see :func:`vid2sid_ros.report.page.html_page`)."""
    layout = fig.get("layout", {})
    look = layout.get("template", {}).get("layout", {})
    width = _css_size(layout.get("width", look.get("width", "100%")))
    height = _css_size(layout.get("height", look.get("height", "100%")))
    div = html.escape(div_id, quote=True)
    js_id = _script_json(div_id)
    return (f'<div style="height:{height}; width:{width};"><div id="{div}" class="plotly-graph-div" '
            f'style="height:100%; width:100%;"></div><script>window.vid2sidPlotly.then(() => {{'
            f'if (document.getElementById({js_id})) {{Plotly.newPlot({js_id}, {_script_json(fig.get("data", []))}, '
            f'{_script_json(layout)}, {{"displaylogo": false, "responsive": true}});}}}});</script></div>')


def _integer_axis(n_max: int) -> dict:
    return {"tickformat": "d", "dtick": max(1, math.ceil(max(n_max, 1) / 12)), "rangemode": "tozero"}


def pick_keypoints(names: Sequence[str], limit: int = 3) -> list[int]:
    """Indices of at most ``limit`` keypoints spread over the chain (first, middle, last)."""
    K = len(names)
    if K <= limit:
        return list(range(K))
    return sorted({int(round(i * (K - 1) / (limit - 1))) for i in range(limit)})


def _pair(real: Trajectory, sim: Trajectory | None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(time of real, sim keypoints on real's steps or None, error (T, K) px or None)."""
    if sim is None:
        return real.time, None, None
    r, s = align(real, sim)
    kp = np.full_like(real.keypoints, np.nan)
    idx = {int(st): i for i, st in enumerate(real.steps if real.steps is not None else range(real.num_frames))}
    rows = [idx[int(st)] for st in (r.steps if r.steps is not None else range(r.num_frames))]
    sk = np.where(s.valid[..., None], s.keypoints, np.nan)
    kp[rows] = sk
    err = np.linalg.norm(np.where(real.valid[..., None], real.keypoints, np.nan) - kp, axis=2)
    return real.time, kp, err


def coordinate_axes(traj: Trajectory) -> list[tuple[str, bool]]:
    """``[(axis name, reversed), ...]`` per coordinate of ``traj``'s kind: image x/y (y grows
    downwards, drawn reversed), points x/y/z, joints one value."""
    kind = getattr(traj, "kind", "image")
    if kind == "points":
        return [("x", False), ("y", False), ("z", False)]
    if kind == "joints":
        return [("position", False)]
    return [("x", False), ("y", True)]


def _scale(unit: str) -> float:
    return 1000.0 if unit == "m" else 1.0  # metres are drawn in mm


def _shown_unit(unit: str) -> str:
    return "mm" if unit == "m" else unit


def holdout_span(t: np.ndarray, split: str, split_time: float | None,
                 scored: np.ndarray | None = None) -> tuple[float, float] | None:
    """The time span (s) to shade as holdout (None: nothing to shade).

    A holdout trial is shaded from its first scored frame (``scored``: (T,) bool, a real keypoint
    measured there): a recording split in time is stored as one holdout trial whose training part
    is unscored, so only the held-out part is shaded. A training trial is shaded after
    ``split_time`` when that lies inside it.
    """
    if len(t) < 2:
        return None
    if split == "holdout":
        if scored is None or not np.any(scored):
            return None
        return float(t[int(np.argmax(scored))]), float(t[-1])
    if split_time is None or not (float(t[0]) < float(split_time) < float(t[-1])):
        return None
    return float(split_time), float(t[-1])


def error_axis_top(calibrated: np.ndarray | None, initial: np.ndarray | None) -> tuple[float, float | None] | None:
    """``(axis top, initial twin's max or None)`` for the error panel: 1.2 × the calibrated twin's
    99th-percentile error (so its residual is legible), the initial twin's max when it runs
    above that; None when there is no calibrated error to scale to."""
    if calibrated is None or not np.isfinite(calibrated).any():
        return None
    top = 1.2 * float(np.nanpercentile(calibrated, 99))
    if not top > 0:
        return None
    ini = float(np.nanmax(initial)) if initial is not None and np.isfinite(initial).any() else None
    return top, (ini if ini is not None and ini > top else None)


def trial_figure(trial: TrialCurves, *, title: str, split_time: float | None = None,
                 limit: int | None = None) -> dict:
    """Per trial: every coordinate of up to ``limit`` keypoints (default 3 image or 3-D points,
    every joint of a joint-space trial; real dots, initial twin dashed, calibrated twin solid),
    the error of both twins (axis scaled to the calibrated twin), and the commanded excitation
    underneath; the holdout part of a trial split at ``split_time`` is shaded.

    Returns:
        The figure (plotly JSON): one subplot per shown coordinate (metres drawn in mm), then the error
        and the command subplots, x axes shared (time, s).
    """
    real = trial.real
    if limit is None:
        limit = len(real.names) if real.kind == "joints" else 3
    ks = pick_keypoints(real.names, limit)
    t, ini, ini_err = _pair(real, trial.initial)
    _, cal, cal_err = _pair(real, trial.calibrated)
    axes = coordinate_axes(real)
    D = len(axes)
    units = list(real.units)
    n_rows = D * len(ks) + 2
    titles = [f"{real.names[k]} {a} [{_shown_unit(units[k])}]" for k in ks for a, _ in axes] + \
        [f"{'joint' if real.kind == 'joints' else 'keypoint'} error, mean over "
         f"{'joints' if real.kind == 'joints' else 'keypoints'} [{_shown_unit(real.unit_label)}]",
         "commanded excitation"]
    fig = _figure()
    layout = fig["layout"]
    layout.update(subplot_layout(n_rows, vertical_spacing=0.025, row_heights=[1.0] * (D * len(ks)) + [0.9, 0.9],
                                 titles=titles))
    legend: set[str] = set()

    def add(row: int, x: Any, y: Any, name: str, **kw: Any) -> None:
        fig["data"].append(_on_row(_scatter(x, y, name=name, legendgroup=name, showlegend=name not in legend, **kw),
                                   row))
        legend.add(name)

    row = 1
    for k in ks:
        f = _scale(units[k])
        for c, (_, flip) in enumerate(axes):
            yr = np.where(real.valid[:, k], real.keypoints[:, k, c], np.nan) * f
            add(row, t, yr, "real (measured)", mode="markers", marker={"size": 3, "color": REAL})
            if ini is not None:
                add(row, t, ini[:, k, c] * f, "initial twin", mode="lines", line={"color": INITIAL, "dash": "dash",
                                                                                 "width": 1.2})
            if cal is not None:
                add(row, t, cal[:, k, c] * f, "calibrated twin", mode="lines",
                    line={"color": CALIBRATED, "width": 1.5})
            if flip:
                _axis(layout, "y", row)["autorange"] = "reversed"  # image y grows downwards
            row += 1
    _error_row(fig, add, row, t, ini_err, cal_err, real.unit_label)
    row += 1
    if trial.excitation is not None:
        fig["data"] += _command_traces(trial.excitation, row)
    span = holdout_span(t, trial.split, split_time, real.valid.any(axis=1))
    if span is not None:  # one shape over every panel (the x axes are shared)
        layout.setdefault("shapes", []).append({"type": "rect", "xref": "x", "yref": "paper", "x0": span[0],
                                                "x1": span[1], "y0": 0, "y1": 1, "fillcolor": HOLDOUT,
                                                "line": {"width": 0}, "layer": "below"})
        layout["annotations"].append({"x": span[0], "xref": "x", "y": 1, "yref": "paper",
                                      "text": "holdout (not fitted)", "showarrow": False, "xanchor": "left",
                                      "yanchor": "top"})
    _axis(layout, "x", n_rows)["title"] = {"text": "time [s]"}
    layout.update(title={"text": title, "font": {"size": 14}}, height=170 * n_rows + 120,
                  margin={"l": 60, "r": 20, "t": 70, "b": 40},
                  legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"})
    return fig


def _error_row(fig: dict, add: Any, row: int, t: np.ndarray, ini_err: np.ndarray | None,
               cal_err: np.ndarray | None, unit: str) -> None:
    """The error subplot ``row`` of :func:`trial_figure`: each twin's mean error over the keypoints valid in
    both ((T, K) errors in ``unit``; metres drawn in mm), the axis scaled to the calibrated twin's residual
    (its title says where the initial twin's larger error runs off the top)."""
    means = {}
    for err, name, color, dash in ((ini_err, "initial twin", INITIAL, "dash"),
                                   (cal_err, "calibrated twin", CALIBRATED, None)):
        if err is not None:
            ok = np.isfinite(err)
            mean = np.where(ok.any(axis=1), np.where(ok, err, 0.0).sum(axis=1) / np.maximum(ok.sum(axis=1), 1),
                            np.nan) * _scale(unit)  # mean over the keypoints valid in both
            means[name] = mean
            line = {"color": color, "width": 1.2} if dash is None else {"color": color, "dash": dash, "width": 1.2}
            add(row, t, mean, name, mode="lines", line=line)
    top = error_axis_top(means.get("calibrated twin"), means.get("initial twin"))
    if top is not None:  # scaled to the calibrated residual; the initial twin's larger error runs off the top
        _axis(fig["layout"], "y", row)["range"] = [0.0, top[0]]
        if top[1] is not None:
            fig["layout"]["annotations"][row - 1]["text"] += (f" — scaled to the calibrated twin; the initial twin's "
                                                              f"(dashed) reaches {top[1]:.3g}")


def _command_traces(exc: Any, row: int | None = None) -> list[dict]:
    """One step line per actuator of ``exc`` (an Excitation: values (T, A) in actuator units at ``rate`` Hz)
    over time (s), on subplot ``row`` (None: a single plot)."""
    te = np.arange(exc.num_steps) / exc.rate
    out = []
    for a, an in enumerate(exc.actuator_names):
        tr = _scatter(te, exc.values[:, a], name=f"command {an}", mode="lines",
                      line={"shape": "hv", "width": 1.2, "color": _PALETTE[a % len(_PALETTE)]})
        out.append(tr if row is None else _on_row(tr, row))
    return out


def panel_figure(panel: TrajectoryPanel) -> tuple[dict, dict | None]:
    """A caller-made panel (e.g. the demo's): x/y per keypoint, derived series and the
    pixel error, real vs calibrated twin, the holdout part shaded.

    Returns:
        ``(trajectory figure, derived-series figure or None)``, plotly JSON; the second has one subplot per
        derived series (its unit on the title), time (s) shared.
    """
    tc = TrialCurves(panel.label, "train", None, panel.real, None, panel.sim)
    fig = trial_figure(tc, title=panel.label, split_time=panel.split_time)
    if not panel.derived:
        return fig, None
    t = panel.real.time
    n_rows = len(panel.derived)
    extra = _figure()
    layout = extra["layout"]
    layout.update(subplot_layout(n_rows, titles=[f"{n} [{u}]" for n, (u, _, _) in panel.derived.items()]))
    for i, (name, (unit, r, s)) in enumerate(panel.derived.items(), start=1):
        n = min(len(t), len(r), len(s))
        extra["data"] += [_on_row(_scatter(t[:n], np.asarray(r, float)[:n], mode="markers", name=f"real {name}",
                                           marker={"size": 3, "color": REAL}), i),
                          _on_row(_scatter(t[:n], np.asarray(s, float)[:n], mode="lines", name=f"twin {name}",
                                           line={"color": CALIBRATED}), i)]
    if panel.split_time is not None and len(t):  # one shaded span per subplot, over its height
        layout["shapes"] = [{"type": "rect", "x0": panel.split_time, "x1": float(t[-1]),
                             "xref": f"x{_axis_suffix(i)}", "y0": 0, "y1": 1, "yref": f"y{_axis_suffix(i)} domain",
                             "fillcolor": HOLDOUT, "line": {"width": 0}, "layer": "below"}
                            for i in range(1, n_rows + 1)]
    _axis(layout, "x", n_rows)["title"] = {"text": "time [s]"}
    layout.update(height=220 * n_rows + 80, margin={"l": 60, "r": 20, "t": 40, "b": 40})
    return fig, extra


def interval_figure(rows: Sequence[ParameterRow]) -> dict:
    """Per free parameter, its position inside the search bounds (0 = lower, 1 = upper, log
    or linear as the spec says): initial value, identified value with its interval
    (orange = unreliable), truth when known. Hover shows SI values with units.

    Returns:
        The figure (plotly JSON); x is the position in the bounds (dimensionless, 0…1).
    """
    free = [r for r in rows if not r.frozen and math.isfinite(r.lower) and math.isfinite(r.upper)
            and r.upper > r.lower]
    fig = _figure()

    def u(r: ParameterRow, v: float | None) -> float | None:
        if v is None or not math.isfinite(v):
            return None
        if r.scale == "log":
            if v <= 0:
                return 0.0
            return (math.log(v) - math.log(r.lower)) / (math.log(r.upper) - math.log(r.lower))
        return (v - r.lower) / (r.upper - r.lower)

    names = [r.name for r in free]
    for r in free:
        c = CALIBRATED if r.reliable else "#ff7f0e"
        if r.interval is not None:
            lo, hi = u(r, r.interval[0]), u(r, r.interval[1])
            if lo is None or hi is None:
                continue
            # the bar with end caps, drawn around its midpoint: a narrow interval (under the marker) still
            # shows its caps; the caps are pinned inside the plotted range with the bar clipped there
            mid = 0.5 * (lo + hi)
            fig["data"].append(_scatter([mid], [r.name], mode="markers", marker={"size": 1, "color": c},
                                        error_x={"type": "data", "symmetric": False, "array": [hi - mid],
                                                 "arrayminus": [mid - lo], "color": c, "thickness": 3, "width": 7},
                                        showlegend=False, hovertext=f"{r.name}: {r.interval_text()} {r.unit}",
                                        hoverinfo="text"))
    fig["data"].append(_scatter([u(r, r.initial) for r in free], names, mode="markers", name="initial",
                                marker={"symbol": "circle-open", "size": 10, "color": INITIAL},
                                hovertext=[f"initial {r.initial:.4g} {r.unit}" if r.initial is not None else ""
                                           for r in free], hoverinfo="text"))
    fig["data"].append(_scatter([u(r, r.final) for r in free], names, mode="markers",
                                name="identified (bar: 95 % interval; orange = unreliable)",
                                marker={"size": 9,
                                        "color": [CALIBRATED if r.reliable else "#ff7f0e" for r in free]},
                                hovertext=[f"identified {r.final:.4g} {r.unit}; {r.interval_text()}" for r in free],
                                hoverinfo="text"))
    if any(r.truth is not None for r in free):
        fig["data"].append(_scatter([u(r, r.truth) for r in free], names, mode="markers", name="truth (sim2sim)",
                                    marker={"symbol": "x", "size": 10, "color": "#2ca02c"},
                                    hovertext=[f"truth {r.truth:.4g} {r.unit}" if r.truth is not None else ""
                                               for r in free], hoverinfo="text"))
    fig["layout"].update(xaxis={"range": [-0.05, 1.05], "zeroline": False,
                                "title": {"text": "position within the search bounds (0 = lower, 1 = upper; "
                                                  "log-scaled parameters on a log scale)"}},
                         height=90 + 42 * max(len(free), 1), margin={"l": 170, "r": 20, "t": 30, "b": 50},
                         legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"})
    for x in (0.0, 1.0):
        _vline(fig, x, {"color": "#999", "dash": "dot", "width": 1})
    return fig


def designed_profile_figure(exc, command_range=None) -> dict:
    """The designed command profile per actuator over time, its command limits as dashed lines.

    Args:
        exc: the designed :class:`~vid2sid_ros.core.excitation.Excitation` (values (T, A) in actuator units,
            rate Hz; time = step / rate, s).
        command_range: (A,) ``(lower, upper)`` per actuator in actuator units, or None (not recorded).

    Returns:
        The figure (plotly JSON).
    """
    fig = _figure(_command_traces(exc))
    for a, an in enumerate(exc.actuator_names):
        colour = _PALETTE[a % len(_PALETTE)]
        if command_range is not None and a < len(command_range):
            for k, v in enumerate(command_range[a]):
                if v is not None and math.isfinite(float(v)):
                    _hline(fig, float(v), {"dash": "dash", "width": 1, "color": colour},
                           f"{an} {'lower' if k == 0 else 'upper'} limit {float(v):.3g}", top=bool(k))
    fig["layout"].update(xaxis={"title": {"text": "time [s]"}}, yaxis={"title": {"text": "command [actuator units]"}},
                         height=300, margin={"l": 60, "r": 20, "t": 30, "b": 40},
                         legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"})
    return fig


def correlation_figure(names: Sequence[str], corr: Sequence[Sequence[float]]) -> dict:
    """Heatmap of the identified parameters' correlation matrix ((n, n), −1 … 1), values printed.

    Returns:
        The figure (plotly JSON), first parameter at the top.
    """
    z = np.asarray(corr, float)
    fig = _figure([{"type": "heatmap", "z": _typed(z, "f8"), "x": list(names), "y": list(names), "zmin": -1,
                    "zmax": 1, "colorscale": _RDBU_R, "text": [[f"{v:+.2f}" for v in row] for row in z],
                    "texttemplate": "%{text}", "colorbar": {"title": {"text": "ρ"}}}])
    n = len(names)
    fig["layout"].update(height=160 + 46 * n, width=260 + 60 * n, margin={"l": 160, "r": 20, "t": 30, "b": 120},
                         yaxis={"autorange": "reversed"})
    return fig


def _log_axis(values: Sequence[float]) -> dict:
    v = [x for x in values if x is not None and math.isfinite(x) and x > 0]
    if len(v) >= 2 and max(v) / min(v) > 20:
        return {"type": "log", "tickformat": ".3~g", "exponentformat": "none"}
    return {"type": "linear", "tickformat": ".3~g"}


def _run_unit(runs: Sequence[RunSummary]) -> str:
    return str(runs[0].result.get("unit") or "px") if runs else "px"


def _best_so_far(ys: Sequence[float | None]) -> list[float | None]:
    """The running minimum of ``ys`` (None before the first number; None entries skipped)."""
    best, b = [], math.inf
    for y in ys:
        if y is not None:
            b = min(b, y)
        best.append(b if math.isfinite(b) else None)
    return best


def convergence_iterations_figure(runs: Sequence[RunSummary]) -> dict:
    """Training MAE per iteration (markers) and best so far (line), integer iteration ticks.

    Returns:
        The figure (plotly JSON); y in the runs' error unit, log-scaled when it spans over 20×.
    """
    fig = _figure()
    all_y, n_max = [], 1
    for i, r in enumerate(runs):
        col = _PALETTE[i % len(_PALETTE)]
        it = [rec.iteration for rec in r.records]
        err = [rec.error_px if math.isfinite(rec.error_px) else None for rec in r.records]
        all_y += [e for e in err if e is not None]
        n_max = max(n_max, max(it) if it else 1)
        fig["data"] += [_scatter(it, err, mode="markers", name=f"{r.label}: this iteration",
                                 marker={"color": col, "size": 7, "symbol": "circle-open"}),
                        _scatter(it, _best_so_far(err), mode="lines", name=f"{r.label}: best so far",
                                 line={"color": col, "shape": "hv"})]
    fig["layout"].update(xaxis={"title": {"text": "iteration (0 = start point)"}, **_integer_axis(n_max)},
                         yaxis={"title": {"text": f"training MAE [{_run_unit(runs)}]"}, **_log_axis(all_y)},
                         height=360, margin={"l": 60, "r": 20, "t": 30, "b": 50})
    return fig


def _evaluations(run: RunSummary) -> tuple[list[int], list[float | None], list[int], int]:
    """``(cumulative rollouts, training MAE or None, iteration)`` per evaluation a run paid for, and the
    rollouts paid in all."""
    xs, ys, its, used = [], [], [], 0
    for rec in run.records:
        evals = rec.extra.get("evaluations") or []
        if evals:
            for e in evals:
                used += int(e.get("rollouts") or 0)
                y = e.get("error_px")
                xs.append(used)
                ys.append(float(y) if y is not None and math.isfinite(float(y)) else None)
                its.append(rec.iteration)
        else:
            used += int(rec.rollouts_used)
            if rec.rollouts_used:
                xs.append(used)
                ys.append(rec.error_px if math.isfinite(rec.error_px) else None)
                its.append(rec.iteration)
    return xs, ys, its, used


def convergence_rollouts_figure(runs: Sequence[RunSummary]) -> dict:
    """Every evaluation's training MAE against the cumulative rollouts paid (integer ticks),
    best so far as a step line; iteration boundaries marked; holdout MAE as a star.

    Returns:
        The figure (plotly JSON); y in the runs' error unit, log-scaled when it spans over 20×.
    """
    fig = _figure()
    all_y, n_max = [], 1
    unit = _run_unit(runs)
    for i, r in enumerate(runs):
        col = _PALETTE[i % len(_PALETTE)]
        xs, ys, its, used = _evaluations(r)
        all_y += [y for y in ys if y is not None]
        n_max = max(n_max, used)
        fig["data"] += [_scatter(xs, ys, mode="markers", name=f"{r.label}: evaluation",
                                 marker={"color": col, "size": 5, "opacity": 0.6}, customdata=its,
                                 hovertemplate="rollout %{x}<br>%{y:.4g} " + unit
                                 + "<br>iteration %{customdata}<extra></extra>"),
                        _scatter(xs, _best_so_far(ys), mode="lines", name=f"{r.label}: best so far",
                                 line={"color": col, "shape": "hv"})]
        h = r.result.get("holdout_mae")
        same_unit = (r.result.get("holdout_unit") or r.result.get("unit")) == r.result.get("unit")
        if h is not None and xs and same_unit:  # a holdout in another unit is not drawn on this axis
            fig["data"].append(_scatter([xs[-1]], [h], mode="markers", name=f"{r.label}: holdout MAE at the end",
                                        marker={"symbol": "star", "size": 13, "color": col}))
            all_y.append(float(h))
    budget = runs[0].config.get("rollout_budget") if runs else None
    if budget:
        _vline(fig, float(budget), {"color": "#999", "dash": "dot"}, "budget")
        n_max = max(n_max, int(budget))
    fig["layout"].update(xaxis={"title": {"text": "rollouts paid (cumulative)"}, **_integer_axis(n_max)},
                         yaxis={"title": {"text": f"training MAE [{unit}]"}, **_log_axis(all_y)},
                         height=380, margin={"l": 60, "r": 20, "t": 30, "b": 50})
    return fig


def distribution_figure(groups: dict[str, Sequence[float]], *, y_title: str, percent: bool = False) -> dict:
    """Box plot with every point shown: one box per method (e.g. per-seed errors); ``percent``: values
    are fractions, drawn ×100.

    Returns:
        The figure (plotly JSON); non-finite values are left out.
    """
    fig = _figure()
    all_y = []
    for i, (name, ys) in enumerate(groups.items()):
        v = [float(y) * (100 if percent else 1) for y in ys if y is not None and math.isfinite(float(y))]
        all_y += v
        fig["data"].append({"type": "box", "y": v, "name": name, "boxpoints": "all", "jitter": 0.3, "pointpos": 0,
                            "marker": {"color": _PALETTE[i % len(_PALETTE)]}, "boxmean": True})
    fig["layout"].update(yaxis={"title": {"text": y_title}, **_log_axis(all_y)}, height=380, showlegend=False,
                         margin={"l": 60, "r": 20, "t": 30, "b": 50})
    return fig
