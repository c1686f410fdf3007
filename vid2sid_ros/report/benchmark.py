"""The benchmark report: per-method and per-seed tables, error distributions, spread explained.

:func:`write_benchmark_report` reads ``BENCH_DIR/results.json``
(:func:`vid2sid_ros.benchmark.run.run_benchmark`) and writes
``BENCH_DIR/report.html`` (sections ``summary``, ``insights``, ``methods``,
``per-parameter``, ``seeds``, ``distributions``, ``runs``). The spread of a method is the
standard deviation over seeds of its per-seed mean relative parameter error; with one
seed there is none and the table says so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from .figures import distribution_figure, figure_html
from .page import _section, e, fmt, html_page, table
from .run import ReportError, stop_kind

__all__ = ["write_benchmark_report"]


def _scaled(x: Any, f: float) -> Any:
    return None if x is None else float(x) * f


def _pct(x: Any) -> str:
    return "n/a" if x is None or not math.isfinite(float(x)) else f"{100 * float(x):.2f} %"


def write_benchmark_report(bench_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the HTML report of a sim2sim benchmark directory.

    Raises:
        ReportError: ``results.json`` missing or malformed (names it and the key).
    """
    d = Path(bench_dir)
    path = d / "results.json"
    if not path.is_file():
        raise ReportError(f"{d}: not a benchmark directory (results.json missing)")
    try:
        res = json.loads(path.read_text(encoding="utf-8"))
        methods: Mapping[str, Any] = res["methods"]
        per_seed = list(res["per_seed"])
        free = list(res["free_parameters"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise ReportError(f"{path}: not a benchmark result ({type(err).__name__}: {err})") from None
    from ..benchmark.run import detection_cell, error_columns, latency_error_cell  # one wording (results.md)
    from ..benchmark.sweep import cell_keys_current

    methods = {m: cell_keys_current(r) for m, r in methods.items()}  # results of earlier versions: *_px keys
    f, lu, hf, lhu = error_columns({"methods": methods})

    n_seeds = len(per_seed)
    order = sorted(methods, key=lambda m: methods[m].get("mean_rel_param_error", math.inf))
    title = f"sim2sim benchmark: {res.get('rig', '?')} — {len(order)} methods, {n_seeds} seed(s)"
    body = [f"<h1>{e(title)}</h1>"]
    body.append(_section("summary", "Summary", (
        f"<p>{n_seeds} seed(s) ({', '.join(map(str, res.get('seeds', [])))}); budget {e(res.get('budget_rollouts'))} "
        f"rollouts and {e(res.get('iterations'))} iterations per calibration; noise: {e(res.get('noise'))}.</p>"
        f"<p class=\"muted\">Protocol: {e(res.get('protocol', ''))}.</p>")))
    found = []
    budget_stops = {}
    for s in per_seed:
        for m, r in s.get("methods", {}).items():
            if stop_kind(str(r.get("stopped", ""))) == "budget":
                budget_stops.setdefault(m, []).append(s["seed"])
    for m, seeds in budget_stops.items():
        found.append(f"{m} stopped at its rollout budget without converging on seed(s) {seeds}")
    for s in per_seed:
        if s.get("identifiability_warning"):
            found.append(f"seed {s['seed']}: {s['identifiability_warning']}")
    if n_seeds == 1:
        found.append("one seed only: no spread over seeds can be given (std shown as n/a)")
    body.append(_section("insights", f"Insights ({len(found)})",
                         "<ul class=\"insights\">" + "".join(f"<li class=\"warn\">{e(f)}</li>" for f in found)
                         + "</ul>" if found else "<p class=\"ok\">Nothing to flag.</p>"))
    rows = []
    for m in order:
        r = methods[m]
        spread = (_pct(r.get("std_rel_param_error_over_seeds")) if int(r.get("seeds", n_seeds)) > 1
                  else "n/a (1 seed)")
        rows.append([m, _pct(r.get("mean_rel_param_error")), _pct(r.get("median_rel_param_error")), spread,
                     _scaled(r.get("holdout_mae"), hf), _scaled(r.get("train_mae"), f), r.get("rollouts"),
                     r.get("iterations"),
                     r.get("wall_s"), r.get("seeds"), detection_cell(r), latency_error_cell(r)])
    body.append(_section("methods", "Per method (mean over seeds)", table(
        ["method", "mean rel. parameter error", "median", "spread (std over seeds)", f"holdout MAE [{lhu}]",
         f"training MAE [{lu}]", "rollouts", "iterations", "wall [s]", "seeds", "misspecification detected",
         "latency error [frames]"], rows)
        + "<p class=\"muted\">Mean relative parameter error: mean over free parameters and seeds of |θ − θ*|/|θ*|. "
          "Spread: standard deviation over seeds of each seed's mean error (population std); it needs at least two "
          "seeds. Holdout n/a: the rig has no holdout excitation or every holdout rollout failed.</p>"))
    pp = [[m] + [_pct(methods[m].get("per_parameter", {}).get(n)) for n in free] for m in order]
    body.append(_section("per-parameter", "Mean relative error per parameter", table(["method"] + free, pp)))
    seed_rows = []
    for s in per_seed:
        cells = []
        for m in order:
            r = s.get("methods", {}).get(m)
            cells.append(f"{_pct(r['mean_rel_error'])} ({stop_kind(str(r.get('stopped', '')))})" if r else
                         "not run")
        seed_rows.append([s["seed"]] + cells)
    body.append(_section("seeds", "Per seed: mean relative parameter error (stop reason)",
                         table(["seed"] + order, seed_rows)))
    dist = {m: [s["methods"][m]["mean_rel_error"] for s in per_seed if m in s.get("methods", {})] for m in order}
    hold = {m: [_scaled(cell_keys_current(s["methods"][m]).get("holdout_mae"), hf) for s in per_seed
                if m in s.get("methods", {})] for m in order}
    body.append(_section("distributions", "Error distributions over seeds",
                         "<h3>mean relative parameter error per seed [%]</h3>"
                         + figure_html(distribution_figure(dist, y_title="mean relative parameter error [%]",
                                                           percent=True), "dist-param")
                         + f"<h3>holdout MAE per seed [{e(lhu)}]</h3>"
                         + figure_html(distribution_figure(hold, y_title=f"holdout MAE [{lhu}]"), "dist-holdout")
                         + "<p class=\"muted\">Box: quartiles, line: median, dashed: mean; every seed is a dot.</p>"))
    runs = []
    for s in per_seed:
        for m in order:
            rd = d / f"seed_{s['seed']}" / m
            if (rd / "report.html").is_file():
                runs.append([s["seed"], m, str(rd / "report.html")])
            elif rd.is_dir():
                runs.append([s["seed"], m, f"{rd} (no report yet: vid2sid report {rd})"])
    body.append(_section("runs", "Run directories", table(["seed", "method", "report"], runs) if runs else
                         "<p class=\"muted\">no per-run directories</p>"))
    out = Path(out) if out else d / "report.html"
    from ..core.files import atomic_write_text

    atomic_write_text(out, html_page(title, body))
    return out
