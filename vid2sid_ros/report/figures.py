"""Interactive plots of the report (plotly figures; the page inlines plotly.js once).

Every builder returns a :class:`plotly.graph_objects.Figure`; :func:`figure_html` turns
one into a ``<div>`` that needs the plotly.js bundle on the page (see
:mod:`vid2sid_ros.report.page`). Axes carry units; integer quantities (iterations,
rollouts) get integer ticks; log axes are labelled with plain numbers.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Sequence

import numpy as np

from ..core.trajectory import Trajectory, align
from .insights import ParameterRow
from .run import RunSummary, TrajectoryPanel, TrialCurves

__all__ = ["figure_html", "trial_figure", "holdout_span", "error_axis_top", "panel_figure", "interval_figure",
           "correlation_figure",
           "convergence_iterations_figure", "convergence_rollouts_figure", "distribution_figure",
           "pick_keypoints", "designed_profile_figure"]

REAL = "#222222"
INITIAL = "#8c8c8c"
CALIBRATED = "#d62728"
HOLDOUT = "rgba(31,119,180,0.10)"
_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


def _go():
    import plotly.graph_objects as go

    return go


#: every figure's look (plotly's white template)
TEMPLATE = "plotly_white"
#: :data:`TEMPLATE` looked up once (see :func:`_default_template`)
_TEMPLATE_OBJECT = None


def _figure(*args: Any, **kwargs: Any):
    """``_figure(*args, **kwargs)`` with the report's :data:`TEMPLATE`, given as plotly's default template while
    the figure is built: plotly assigns a default template without validating it (about 0.5 ms), where
    ``update_layout(template=...)`` validates the whole template again for every figure (about 14 ms). The JSON
    written is the same."""
    with _default_template():
        return _go().Figure(*args, **kwargs)


def _subplots(**kwargs: Any):
    """``plotly.subplots.make_subplots(**kwargs)`` with the report's :data:`TEMPLATE` (see :func:`_figure`)."""
    from plotly.subplots import make_subplots

    with _default_template():
        return make_subplots(**kwargs)


@contextlib.contextmanager
def _default_template():
    """:data:`TEMPLATE` as plotly's default template inside the block, the caller's default restored after it."""
    import plotly.io as pio

    global _TEMPLATE_OBJECT
    if _TEMPLATE_OBJECT is None:  # plotly validates and deep-copies a template on every lookup by name (~50 ms)
        _TEMPLATE_OBJECT = pio.templates[TEMPLATE]
    old = pio.templates.default
    pio.templates.default = _TEMPLATE_OBJECT
    try:
        yield
    finally:
        pio.templates.default = old


def figure_html(fig, div_id: str) -> str:
    """The figure as an HTML ``<div>``; its script waits for the page's ``window.vid2sidPlotly``
    (see :func:`vid2sid_ros.report.page.html_page`)."""
    import plotly.io as pio

    for tr in fig.data:  # float32 (7 digits; plotly writes typed arrays): half the bytes of float64
        for attr in ("x", "y"):
            v = getattr(tr, attr, None)
            if isinstance(v, np.ndarray) and v.dtype == np.float64:
                setattr(tr, attr, v.astype(np.float32))
    div = pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id,
                      config={"displaylogo": False, "responsive": True})
    # the page inflates plotly.js asynchronously (report.page.html_page): draw once it is there
    head, sep, rest = div.partition("<script>")
    script, sep2, tail = rest.partition("</script>")
    if not (sep and sep2):
        return div
    return f"{head}<script>window.vid2sidPlotly.then(() => {{{script}}});</script>{tail}"


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


def trial_figure(trial: TrialCurves, *, title: str, split_time: float | None = None, limit: int | None = None):
    """Per trial: every coordinate of up to ``limit`` keypoints (default 3 image or 3-D points,
    every joint of a joint-space trial; real dots, initial twin dashed, calibrated twin solid),
    the error of both twins (axis scaled to the calibrated twin), and the commanded excitation
    underneath; the holdout part of a trial split at ``split_time`` is shaded."""

    go = _go()
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
    heights = [1.0] * (D * len(ks)) + [0.9, 0.9]
    titles = [f"{real.names[k]} {a} [{_shown_unit(units[k])}]" for k in ks for a, _ in axes] + \
        [f"{'joint' if real.kind == 'joints' else 'keypoint'} error, mean over "
         f"{'joints' if real.kind == 'joints' else 'keypoints'} [{_shown_unit(real.unit_label)}]",
         "commanded excitation"]
    fig = _subplots(rows=n_rows, cols=1, shared_xaxes=True, vertical_spacing=0.025, row_heights=heights,
                        subplot_titles=titles)
    legend = set()

    def add(row, x, y, name, **kw):
        fig.add_trace(go.Scatter(x=x, y=y, name=name, legendgroup=name, showlegend=name not in legend, **kw),
                      row=row, col=1)
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
                fig.update_yaxes(autorange="reversed", row=row, col=1)  # image y grows downwards
            row += 1
    means = {}
    for err, name, color, dash in ((ini_err, "initial twin", INITIAL, "dash"),
                                   (cal_err, "calibrated twin", CALIBRATED, None)):
        if err is not None:
            ok = np.isfinite(err)
            mean = np.where(ok.any(axis=1), np.where(ok, err, 0.0).sum(axis=1) / np.maximum(ok.sum(axis=1), 1),
                            np.nan) * _scale(real.unit_label)  # mean over the keypoints valid in both
            means[name] = mean
            add(row, t, mean, name, mode="lines", line={"color": color, "dash": dash, "width": 1.2})
    top = error_axis_top(means.get("calibrated twin"), means.get("initial twin"))
    if top is not None:  # scaled to the calibrated residual; the initial twin's larger error runs off the top
        fig.update_yaxes(range=[0.0, top[0]], row=row, col=1)
        if top[1] is not None:
            fig.layout.annotations[D * len(ks)].text += (f" — scaled to the calibrated twin; the initial twin's "
                                                         f"(dashed) reaches {top[1]:.3g}")
    row += 1
    if trial.excitation is not None:
        exc = trial.excitation
        te = np.arange(exc.num_steps) / exc.rate
        for a, an in enumerate(exc.actuator_names):
            fig.add_trace(go.Scatter(x=te, y=exc.values[:, a], name=f"command {an}", mode="lines",
                                     line={"shape": "hv", "width": 1.2, "color": _PALETTE[a % len(_PALETTE)]}),
                          row=row, col=1)
    span = holdout_span(t, trial.split, split_time, real.valid.any(axis=1))
    if span is not None:  # one shape over every panel (the x axes are shared); add_vrect makes one per panel,
        # each through plotly's validation: a second of CPU on a 10-panel figure
        fig.add_shape(type="rect", xref="x", yref="paper", x0=span[0], x1=span[1], y0=0, y1=1,
                      fillcolor=HOLDOUT, line_width=0, layer="below")
        fig.add_annotation(x=span[0], xref="x", y=1, yref="paper", text="holdout (not fitted)", showarrow=False,
                           xanchor="left", yanchor="top")
    fig.update_xaxes(title_text="time [s]", row=n_rows, col=1)
    fig.update_layout(title={"text": title, "font": {"size": 14}}, height=170 * n_rows + 120,
                      margin={"l": 60, "r": 20, "t": 70, "b": 40},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"})
    return fig


def panel_figure(panel: TrajectoryPanel):
    """A caller-made panel (e.g. the demo's): x/y per keypoint, derived series and the
    pixel error, real vs calibrated twin, the holdout part shaded."""
    tc = TrialCurves(panel.label, "train", None, panel.real, None, panel.sim)
    fig = trial_figure(tc, title=panel.label, split_time=panel.split_time)
    if panel.derived:

        go = _go()
        t = panel.real.time
        extra = _subplots(rows=len(panel.derived), cols=1, shared_xaxes=True,
                              subplot_titles=[f"{n} [{u}]" for n, (u, _, _) in panel.derived.items()])
        for i, (name, (unit, r, s)) in enumerate(panel.derived.items(), start=1):
            n = min(len(t), len(r), len(s))
            extra.add_trace(go.Scatter(x=t[:n], y=np.asarray(r, float)[:n], mode="markers", name=f"real {name}",
                                       marker={"size": 3, "color": REAL}), row=i, col=1)
            extra.add_trace(go.Scatter(x=t[:n], y=np.asarray(s, float)[:n], mode="lines", name=f"twin {name}",
                                       line={"color": CALIBRATED}), row=i, col=1)
        if panel.split_time is not None and len(t):
            extra.add_vrect(x0=panel.split_time, x1=float(t[-1]), fillcolor=HOLDOUT, line_width=0, layer="below")
        extra.update_xaxes(title_text="time [s]", row=len(panel.derived), col=1)
        extra.update_layout(height=220 * len(panel.derived) + 80,
                            margin={"l": 60, "r": 20, "t": 40, "b": 40})
        return fig, extra
    return fig, None


def interval_figure(rows: Sequence[ParameterRow]):
    """Per free parameter, its position inside the search bounds (0 = lower, 1 = upper, log
    or linear as the spec says): initial value, identified value with its interval
    (orange = unreliable), truth when known. Hover shows SI values with units."""
    go = _go()
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
            fig.add_trace(go.Scatter(x=[mid], y=[r.name], mode="markers", marker={"size": 1, "color": c},
                                     error_x={"type": "data", "symmetric": False, "array": [hi - mid],
                                              "arrayminus": [mid - lo], "color": c, "thickness": 3, "width": 7},
                                     showlegend=False, hovertext=f"{r.name}: {r.interval_text()} {r.unit}",
                                     hoverinfo="text"))
    fig.add_trace(go.Scatter(x=[u(r, r.initial) for r in free], y=names, mode="markers", name="initial",
                             marker={"symbol": "circle-open", "size": 10, "color": INITIAL},
                             hovertext=[f"initial {r.initial:.4g} {r.unit}" if r.initial is not None else ""
                                        for r in free], hoverinfo="text"))
    fig.add_trace(go.Scatter(x=[u(r, r.final) for r in free], y=names, mode="markers",
                             name="identified (bar: 95 % interval; orange = unreliable)",
                             marker={"size": 9, "color": [CALIBRATED if r.reliable else "#ff7f0e" for r in free]},
                             hovertext=[f"identified {r.final:.4g} {r.unit}; {r.interval_text()}" for r in free],
                             hoverinfo="text"))
    if any(r.truth is not None for r in free):
        fig.add_trace(go.Scatter(x=[u(r, r.truth) for r in free], y=names, mode="markers", name="truth (sim2sim)",
                                 marker={"symbol": "x", "size": 10, "color": "#2ca02c"},
                                 hovertext=[f"truth {r.truth:.4g} {r.unit}" if r.truth is not None else ""
                                            for r in free], hoverinfo="text"))
    fig.update_xaxes(range=[-0.05, 1.05], title_text="position within the search bounds (0 = lower, 1 = upper; "
                                                     "log-scaled parameters on a log scale)", zeroline=False)
    fig.update_layout(height=90 + 42 * max(len(free), 1),
                      margin={"l": 170, "r": 20, "t": 30, "b": 50},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"})
    for x in (0.0, 1.0):
        fig.add_vline(x=x, line={"color": "#999", "dash": "dot", "width": 1})
    return fig


def designed_profile_figure(exc, command_range=None):
    """The designed command profile per actuator over time, its command limits as dashed lines.

    Args:
        exc: the designed :class:`~vid2sid_ros.core.excitation.Excitation` (values (T, A) in actuator units,
            rate Hz; time = step / rate, s).
        command_range: (A,) ``(lower, upper)`` per actuator in actuator units, or None (not recorded).
    """
    go = _go()
    fig = _figure()
    te = np.arange(exc.num_steps) / exc.rate
    for a, an in enumerate(exc.actuator_names):
        colour = _PALETTE[a % len(_PALETTE)]
        fig.add_trace(go.Scatter(x=te, y=exc.values[:, a], name=f"command {an}", mode="lines",
                                 line={"shape": "hv", "width": 1.2, "color": colour}))
        if command_range is not None and a < len(command_range):
            for k, v in enumerate(command_range[a]):
                if v is not None and math.isfinite(float(v)):
                    fig.add_hline(y=float(v), line={"dash": "dash", "width": 1, "color": colour},
                                  annotation_text=f"{an} {'lower' if k == 0 else 'upper'} limit {float(v):.3g}",
                                  annotation_position="top left" if k else "bottom left")
    fig.update_xaxes(title_text="time [s]")
    fig.update_yaxes(title_text="command [actuator units]")
    fig.update_layout(height=300, margin={"l": 60, "r": 20, "t": 30, "b": 40},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"})
    return fig


def correlation_figure(names: Sequence[str], corr: Sequence[Sequence[float]]):
    """Heatmap of the identified parameters' correlation matrix (−1 … 1), values printed."""
    go = _go()
    z = np.asarray(corr, float)
    fig = _figure(go.Heatmap(z=z, x=list(names), y=list(names), zmin=-1, zmax=1, colorscale="RdBu_r",
                               text=[[f"{v:+.2f}" for v in row] for row in z], texttemplate="%{text}",
                               colorbar={"title": {"text": "ρ"}}))
    n = len(names)
    fig.update_layout(height=160 + 46 * n, width=260 + 60 * n,
                      margin={"l": 160, "r": 20, "t": 30, "b": 120})
    fig.update_yaxes(autorange="reversed")
    return fig


def _log_axis(values: Sequence[float]) -> dict:
    v = [x for x in values if x is not None and math.isfinite(x) and x > 0]
    if len(v) >= 2 and max(v) / min(v) > 20:
        return {"type": "log", "tickformat": ".3~g", "exponentformat": "none"}
    return {"type": "linear", "tickformat": ".3~g"}


def _run_unit(runs: Sequence[RunSummary]) -> str:
    return str(runs[0].result.get("unit") or "px") if runs else "px"


def convergence_iterations_figure(runs: Sequence[RunSummary]):
    """Training MAE per iteration (markers) and best so far (line), integer iteration ticks."""
    go = _go()
    fig = _figure()
    all_y, n_max = [], 1
    for i, r in enumerate(runs):
        col = _PALETTE[i % len(_PALETTE)]
        it = [rec.iteration for rec in r.records]
        err = [rec.error_px if math.isfinite(rec.error_px) else None for rec in r.records]
        best, b = [], math.inf
        for e in err:
            if e is not None:
                b = min(b, e)
            best.append(b if math.isfinite(b) else None)
        all_y += [e for e in err if e is not None]
        n_max = max(n_max, max(it) if it else 1)
        fig.add_trace(go.Scatter(x=it, y=err, mode="markers", name=f"{r.label}: this iteration",
                                 marker={"color": col, "size": 7, "symbol": "circle-open"}))
        fig.add_trace(go.Scatter(x=it, y=best, mode="lines", name=f"{r.label}: best so far",
                                 line={"color": col, "shape": "hv"}))
    fig.update_xaxes(title_text="iteration (0 = start point)", **_integer_axis(n_max))
    fig.update_yaxes(title_text=f"training MAE [{_run_unit(runs)}]", **_log_axis(all_y))
    fig.update_layout(height=360, margin={"l": 60, "r": 20, "t": 30, "b": 50})
    return fig


def convergence_rollouts_figure(runs: Sequence[RunSummary]):
    """Every evaluation's training MAE against the cumulative rollouts paid (integer ticks),
    best so far as a step line; iteration boundaries marked; holdout MAE as a star."""
    go = _go()
    fig = _figure()
    all_y, n_max = [], 1
    for i, r in enumerate(runs):
        col = _PALETTE[i % len(_PALETTE)]
        xs, ys, its, used = [], [], [], 0
        for rec in r.records:
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
        best, b = [], math.inf
        for y in ys:
            if y is not None:
                b = min(b, y)
            best.append(b if math.isfinite(b) else None)
        all_y += [y for y in ys if y is not None]
        n_max = max(n_max, used)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=f"{r.label}: evaluation",
                                 marker={"color": col, "size": 5, "opacity": 0.6},
                                 customdata=its, hovertemplate="rollout %{x}<br>%{y:.4g} " + _run_unit(runs)
                                 + "<br>iteration %{customdata}"
                                                               "<extra></extra>"))
        fig.add_trace(go.Scatter(x=xs, y=best, mode="lines", name=f"{r.label}: best so far",
                                 line={"color": col, "shape": "hv"}))
        h = r.result.get("holdout_mae")
        same_unit = (r.result.get("holdout_unit") or r.result.get("unit")) == r.result.get("unit")
        if h is not None and xs and same_unit:  # a holdout in another unit is not drawn on this axis
            fig.add_trace(go.Scatter(x=[xs[-1]], y=[h], mode="markers", name=f"{r.label}: holdout MAE at the end",
                                     marker={"symbol": "star", "size": 13, "color": col}))
            all_y.append(float(h))
    budget = runs[0].config.get("rollout_budget") if runs else None
    if budget:
        fig.add_vline(x=float(budget), line={"color": "#999", "dash": "dot"}, annotation_text="budget")
        n_max = max(n_max, int(budget))
    fig.update_xaxes(title_text="rollouts paid (cumulative)", **_integer_axis(n_max))
    fig.update_yaxes(title_text=f"training MAE [{_run_unit(runs)}]", **_log_axis(all_y))
    fig.update_layout(height=380, margin={"l": 60, "r": 20, "t": 30, "b": 50})
    return fig


def distribution_figure(groups: dict[str, Sequence[float]], *, y_title: str, percent: bool = False):
    """Box plot with every point shown: one box per method (e.g. per-seed errors)."""
    go = _go()
    fig = _figure()
    all_y = []
    for i, (name, ys) in enumerate(groups.items()):
        v = [float(y) * (100 if percent else 1) for y in ys if y is not None and math.isfinite(float(y))]
        all_y += v
        fig.add_trace(go.Box(y=v, name=name, boxpoints="all", jitter=0.3, pointpos=0,
                             marker={"color": _PALETTE[i % len(_PALETTE)]}, boxmean=True))
    fig.update_yaxes(title_text=y_title, **_log_axis(all_y))
    fig.update_layout(height=380, showlegend=False,
                      margin={"l": 60, "r": 20, "t": 30, "b": 50})
    return fig
