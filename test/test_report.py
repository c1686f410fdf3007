"""The HTML report: one self-contained file per run, generic over rigs, every section present.

Runs are made here on the toy rig (a torsion-spring arm, not a pendulum) so the report is
tested on a model other than the shipped rigs; the headless-browser check of finger,
tentacle, benchmark and demo reports is test/test_report_browser.py.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import subprocess
import sys
from html.parser import HTMLParser

import numpy as np
import pytest

from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.core.trajectory import Trajectory
from vid2sid_ros.core.trial import RealTrial
from vid2sid_ros.io.video import write_video
from vid2sid_ros.report import (SECTION_IDS, ReportError, ReportSection, TrajectoryPanel, insights, load_run,
                                load_trajectories, parameter_rows, render_report, run_summary_lines,
                                save_trajectories, write_benchmark_report, write_report)
from vid2sid_ros.report.figures import error_axis_top, holdout_span, interval_figure
from vid2sid_ros.report.insights import Insight, go_on_advice
from vid2sid_ros.report.page import group_insights, interval_digits, stop_badge, tracking_rows, trials_caption

WEBM_MAGIC = b"\x1a\x45\xdf\xa3"  # EBML header


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        if data.strip():
            self.text.append(data.strip())

    def find(self, tag: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag]


def _parse(path) -> tuple[str, _Collector]:
    doc = path.read_text(encoding="utf-8")
    p = _Collector()
    p.feed(doc)
    return doc, p


def _toy_real(factor: float = 1.3):
    from vid2sid_ros.sim.toy import make_rig

    rig = make_rig()
    twin = rig.make_twin()
    truth = rig.parameters.complete({n: rig.parameters[n].nominal * factor for n in rig.parameters.free_names})
    twin.set_parameters(truth)
    real = RealTrial([twin.rollout(e).trajectory for e in rig.excitations["train"]], rig.excitations["train"],
                     [twin.rollout(e).trajectory for e in rig.excitations["holdout"]], rig.excitations["holdout"],
                     source="toy stand-in", truth={n: truth[n] for n in rig.parameters.free_names})
    return rig, real


@pytest.fixture(scope="module")
def toy_runs(tmp_path_factory):
    """A converged reasoner run (with truth saved, as `vid2sid calibrate` does on sim2sim)
    and a budget-stopped random run."""
    rig, real = _toy_real()
    base = tmp_path_factory.mktemp("runs")
    runs = {}
    for name, iters, budget in (("reasoner", 8, 80), ("random", 20, 6)):
        rd = base / name
        rd.mkdir()
        real.save(rd / "real_trial.json")
        runs[name] = (rd, run_calibration(rig, real, make_proposer(name, **({"seed": 1} if name == "random" else {})),
                                          CalibrationConfig(iterations=iters, rollout_budget=budget), rd))
    return runs, real


def test_converged_run_stops_early_and_confidence_never_rises_without_evidence(toy_runs):
    runs, _ = toy_runs
    rd, res = runs["reasoner"]
    assert res.stopped == "converged" and res.iterations < 8
    last = res.history[-1]
    assert last.extra.get("converged") is True
    for prev, rec in zip(res.history[1:], res.history[2:]):
        if not rec.extra.get("evaluations"):  # nothing evaluated: no new evidence
            assert rec.confidence <= prev.confidence
    lines = run_summary_lines(rd)
    assert lines[0].startswith("stopped: converged after") and "NOT converged" not in lines[0]


def test_write_report_has_every_section_with_plotly_inlined_once(toy_runs):
    runs, real = toy_runs
    rd, res = runs["reasoner"]
    out = write_report(rd)
    assert out == rd / "report.html"
    doc, p = _parse(out)
    ids = [a.get("id") for a in p.find("section")]
    assert all(s in ids for s in SECTION_IDS), ids
    assert doc.count("Plotly.newPlot") >= 3 + len(res.history) * 0  # trials, intervals, heatmap, convergence x2
    # the bundle once, gzip-compressed (not per figure), and it is plotly.js
    gz = re.findall(r'<script type="application/gzip-base64" id="vid2sid-plotly-gz">([^<]*)</script>', doc)
    assert len(gz) == 1 and len(re.findall(r"plotly\.js v\d", gzip.decompress(base64.b64decode(gz[0])).decode())) == 1
    assert "plotly.js v" not in doc  # not inlined a second time uncompressed
    for tag, attrs in p.tags:  # offline: nothing fetched
        for k in ("src", "href"):
            if k in attrs:
                assert attrs[k].startswith("data:"), (tag, attrs[k][:60])
    # one plot per trial (train and holdout), holdout shaded
    assert sum(1 for a in p.find("div") if a.get("id", "").startswith("trial-")) == len(real.train) + len(real.holdout)
    assert sum(1 for t in p.text if t.endswith("(holdout: not fitted, predicted)")) == len(real.holdout)
    assert "holdout (not fitted)" in doc  # the shading's label
    # overlay video: one embedded WebM (VP9 or VP8, both play in Chromium and Firefox), no MPEG-4 Part 2
    # fallback (Chromium cannot play it); it shows the twin's renders, training and holdout
    srcs = p.find("source")
    assert [s["type"] for s in srcs] == ["video/webm"]
    assert base64.b64decode(srcs[0]["src"].split(",", 1)[1])[:4] == WEBM_MAGIC
    cap = " ".join(p.text)
    assert "rendered through the rig's camera" in cap and "then the holdout" in cap
    # parameter table: truth and error columns on a sim2sim run, every parameter listed
    assert "truth (sim2sim)" in p.text and "error" in p.text
    assert all(n in p.text for n in load_run(rd).parameters.names)
    assert "Insights (0)" in p.text
    # integer ticks on the rollout/iteration axes
    assert doc.count('"tickformat":"d"') >= 2


def test_budget_stopped_run_says_so_and_marks_intervals_unreliable(toy_runs):
    runs, _ = toy_runs
    rd, res = runs["random"]
    assert "budget" in res.stopped
    run = load_run(rd)
    found = insights(run)
    assert found[0].kind == "unconverged" and "budget" in found[0].title
    rows = [r for r in parameter_rows(run) if not r.frozen]
    assert rows and all(not r.reliable for r in rows)
    assert all("budget" in " ".join(r.unreliable_because) for r in rows)
    out = write_report(rd)
    doc, p = _parse(out)
    title = next(t for t in p.text if t.startswith("Insights ("))
    # the count is of insights as listed: the residual diagnosis's findings fold under its first line
    assert int(title[len("Insights ("):-1]) == len(group_insights(found)) >= 1
    assert len(p.find("li")) - sum(len(sub) for _, sub in group_insights(found)) == len(group_insights(found))
    assert "NOT converged" in doc and "UNRELIABLE" in doc
    lines = run_summary_lines(rd, report=out, resume_command="vid2sid calibrate --resume --out X")
    assert "NOT converged" in lines[0] and "budget" in lines[0]
    assert any("UNRELIABLE" in ln for ln in lines) and lines[-1] == f"report: {out}"
    assert "continue this run" not in " ".join(lines)
    helps, _ = go_on_advice(run)  # more iterations and budget when it was still improving, else why not
    assert any(("larger --budget" in ln) if helps else ("will not help" in ln or "unlikely to help" in ln)
               for ln in lines), lines
    run.result["stopped"] = "interrupted"
    assert "continue this run: vid2sid calibrate --resume --out X" in run_summary_lines(
        run, resume_command="vid2sid calibrate --resume --out X")


def test_at_bound_and_correlated_insights(toy_runs):
    runs, _ = toy_runs
    run = load_run(runs["reasoner"][0])
    s = run.parameters["stiffness"]
    run.parameters = run.parameters.with_nominal({"stiffness": s.upper})
    run.result["final_identifiability"] = {"names": ["stiffness", "damping"], "correlation": [[1, 0.99], [0.99, 1]],
                                           "weak_directions": [{"singular_value": 0.01,
                                                                "combination": {"stiffness": 0.7, "damping": -0.7}}]}
    found = {i.kind: i for i in insights(run)}
    assert "stiffness is at its upper bound" in found["at_bound"].title
    assert "correlated" in found and "poorly_identifiable" in found
    row = next(r for r in parameter_rows(run) if r.name == "stiffness")
    assert row.at_bound == "upper" and not row.reliable


def test_the_start_points_identifiability_warning_is_an_insight(toy_runs):
    """The warning the check at the start point printed during the run was missing from the report's Insights."""
    runs, _ = toy_runs
    run = load_run(runs["reasoner"][0])
    warn = "poorly identifiable parameters (condition number 154): gain's effect cannot be measured reliably"
    run.result["identifiability"] = {"names": ["stiffness"], "weak_directions": [{"combination": {"gain": 1.0}}],
                                     "warning": warn}
    run.result["final_identifiability"] = {"names": ["stiffness"], "weak_directions": [], "warning": None}
    (start,) = [i for i in insights(run) if i.kind == "start_identifiability"]
    assert start.title == f"At the start point: {warn}" and start.severity == "info"
    assert "found no poorly identifiable combination" in start.detail
    run.result.pop("final_identifiability")
    (start,) = [i for i in insights(run) if i.kind == "start_identifiability"]
    assert start.severity == "warning" and start.detail == "No check ran at the result."
    # the terminal prints it once, in the summary (the run itself sends IdentifiabilityWarnings to run.log)
    assert [ln for ln in run_summary_lines(run, width=1000) if warn in ln] == [f"warning: At the start point: {warn}"]


def test_render_report_compares_runs_with_caller_sections_and_videos(toy_runs, tmp_path):
    runs, real = toy_runs
    frames = np.zeros((12, 48, 64, 3), np.uint8)
    frames[:, 10:30, 20:40, 0] = 200
    webm = write_video(tmp_path / "clip.webm", frames, 10.0, codec="VP80")
    tr = real.train[0]
    sim = Trajectory(tr.time, tr.keypoints + 1.5, tr.valid, tr.names, "sim", tr.trial_id)
    panel = TrajectoryPanel("step response", tr, sim, split_time=float(tr.time[len(tr.time) // 2]),
                            derived={"angle": ("rad", np.sin(tr.time), np.sin(tr.time) + 0.01)})
    save_trajectories(tmp_path / "trajectories.json", [panel])
    out = render_report(tmp_path / "r.html", {k: v[0] for k, v in runs.items()}, main="reasoner",
                        trajectories=load_trajectories(tmp_path / "trajectories.json"),
                        videos=[("clip: real vs twin", [webm])],
                        sections=[ReportSection("Check <b>escaped</b>", ["a < b & c"], ["x", "y"], [["row", 1.5]])],
                        comparison_columns=["stiffness"])
    doc, p = _parse(out)
    ids = [a.get("id") for a in p.find("section")]
    assert "methods" in ids and "panels" in ids and "extra-0" in ids
    assert "<b>escaped</b>" not in doc and "Check <b>escaped</b>" in p.text
    assert len(p.find("video")) == 2  # the run's overlay + the caller's clip
    with pytest.raises(ReportError, match="main run"):
        render_report(tmp_path / "x.html", {k: v[0] for k, v in runs.items()}, main="gemini")


def test_bad_input_names_the_file(toy_runs, tmp_path):
    with pytest.raises(ReportError, match="not a finished calibration run"):
        write_report(tmp_path)
    rd = runs_copy = tmp_path / "copy"
    import shutil

    shutil.copytree(toy_runs[0]["reasoner"][0], runs_copy)
    (rd / "trials.json").write_text('{"trials": [{"name": 1}]}')
    with pytest.raises(ReportError, match=r"trials\.json: trials\[0\]"):
        write_report(rd)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ReportError, match="bad.json"):
        load_trajectories(tmp_path / "bad.json")
    proc = subprocess.run([sys.executable, "-m", "vid2sid_ros.report", str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not a finished calibration run" in proc.stderr


def test_benchmark_report_tables_distributions_and_spread(tmp_path):
    from vid2sid_ros.benchmark.run import run_benchmark

    run_benchmark("toy", ["reasoner", "random"], 2, budget=12, iterations=3,
                  out=tmp_path / "b2", progress=False)
    out = write_benchmark_report(tmp_path / "b2")
    doc, p = _parse(out)
    ids = [a.get("id") for a in p.find("section")]
    for s in ("summary", "insights", "methods", "per-parameter", "seeds", "distributions"):
        assert s in ids
    assert "–" not in doc.split("<body>", 1)[1]  # no unexplained dash
    md = (tmp_path / "b2" / "results.md").read_text()
    assert "–" not in md and "over 2 seeds" in md and "± = standard deviation over seeds" in md
    assert "n/a (1 seed)" not in doc
    res = json.loads((tmp_path / "b2" / "results.json").read_text())
    for m, r in res["methods"].items():  # one wording of the detection cell in results.md and report.html
        cell = f"none injected; false alarms {r['false_alarms']}/2"
        assert f"| {cell} |" in md and f"<td>{cell}</td>" in doc, (m, cell)
    one = dict(res, per_seed=res["per_seed"][:1], seeds=res["seeds"][:1],
               methods={m: dict(v, seeds=1) for m, v in res["methods"].items()})
    (tmp_path / "b1").mkdir()
    (tmp_path / "b1" / "results.json").write_text(json.dumps(one))
    doc1, _ = _parse(write_benchmark_report(tmp_path / "b1"))
    assert "n/a (1 seed)" in doc1 and "one seed only" in doc1
    proc = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "report", str(tmp_path / "b2")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("report.html")


def test_detection_cell_wording_is_pinned():
    """results.md and report.html used to word this cell differently ("no misspecification" / "none present",
    "not tested" / "not tested (no --misspecify)"); one function now builds it for both."""
    from vid2sid_ros.benchmark.run import detection_cell, latency_error_cell

    assert detection_cell({"seeds": 5, "detected": {"latency": 4, "frozen": 0}}) == "latency 4/5, frozen 0/5"
    assert detection_cell({"seeds": 3, "false_alarms": 1}) == "none injected; false alarms 1/3"
    assert detection_cell({"seeds": 3}) == "not tested (no --misspecify)"
    assert latency_error_cell({"latency_error_frames": {"mean": 0.1234, "max": 0.5}}) == "0.123 (max 0.500)"
    assert latency_error_cell({}) == "n/a (latency not free)"
    # latency fitted on an unmodified rig (the /work/nu double pendulum): not "not free" (was)
    assert latency_error_cell({"latency_free": 2}) == "n/a (latency fitted, none injected)"
    assert latency_error_cell({"latency_free": 0}) == "n/a (latency not free)"


def test_measurement_nuisances_are_parameter_specs_and_a_bad_entry_names_it(toy_runs, tmp_path):
    """result.yaml's nuisance: entries load as core ParameterSpecs (kind nuisance; was a look-alike class of the
    report's own that accepted any value), so a malformed entry is one ReportError naming the file and entry."""
    import shutil

    import yaml

    from vid2sid_ros.core.parameters import ParameterSpec

    runs, _ = toy_runs
    rd = tmp_path / "run"
    shutil.copytree(runs["reasoner"][0], rd)
    run = load_run(rd)
    doc = yaml.safe_load((rd / "result.yaml").read_text())
    (lat,) = [s for s in run.nuisance if s.name == "latency"]
    assert isinstance(lat, ParameterSpec) and lat.kind == "nuisance" and lat.unit == "s"
    assert (lat.lower, lat.upper, lat.nominal) == (doc["nuisance"]["latency"]["lower"],
                                                   doc["nuisance"]["latency"]["upper"],
                                                   doc["nuisance"]["latency"]["value"])
    row = next(r for r in parameter_rows(run) if r.name == "latency")
    assert row.kind == "nuisance" and row.final == lat.nominal and not row.frozen
    doc["nuisance"]["latency"]["upper"] = doc["nuisance"]["latency"]["lower"]  # an empty range
    (rd / "result.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ReportError, match=r"result\.yaml: nuisance\.latency: parameter 'latency': expected lower < upper"):
        load_run(rd)


def test_results_md_says_latency_was_fitted_when_it_was_free_but_not_injected():
    """A sim2sim benchmark with the latency nuisance free and no latency injected said "n/a (latency not free)"
    in results.md (the /work/nu double pendulum): the summary now counts the seeds that fitted it."""
    from types import SimpleNamespace

    from vid2sid_ros.benchmark.run import _summarise, format_results_markdown

    rig = SimpleNamespace(name="toy", parameters=SimpleNamespace(free_names=["k"]))

    def rec(seed, nuisance):
        return {"method": "m", "seed": seed, "rel_error": {"k": 0.1}, "mean_rel_error": 0.1, "holdout_mae_px": 1.0,
                "train_mae_px": 1.0, "rollouts": 10, "iterations": 2, "wall_s": 1.0, "false_alarm": False,
                "nuisance": nuisance}

    fitted = _summarise(rig, ["m"], [{"seed": s, "methods": {"m": rec(s, {"latency": 0.004})}} for s in (0, 1)],
                        10, 2, "keypoint", (0.15, 0.85), 1.0)
    assert fitted["methods"]["m"]["latency_free"] == 2
    assert "| n/a (latency fitted, none injected) |" in format_results_markdown(fitted)
    frozen = _summarise(rig, ["m"], [{"seed": 0, "methods": {"m": rec(0, {})}}], 10, 2, "keypoint", (0.15, 0.85), 1.0)
    assert "| n/a (latency not free) |" in format_results_markdown(frozen)


def test_an_identified_value_outside_its_interval_is_explained_in_the_terminal(toy_runs):
    """The 95 % interval is centred on the optimum once the tracker's bias is modelled, which can leave
    the identified value outside it; the summary must say so (was: 'damping = 0.0411 95 % [0.04655,
    0.05935]' with no word why)."""
    runs, _ = toy_runs
    rd, _res = runs["reasoner"]
    run = load_run(rd)
    name = next(r.name for r in parameter_rows(run) if not r.frozen)
    final = next(r.final for r in parameter_rows(run) if r.name == name)
    run.result["intervals"] = {name: {"lower": 1.1 * final, "upper": 1.3 * final, "centre": 1.2 * final,
                                      "method": "95 %, Gauss–Newton at the least-squares optimum"}}
    line = next(ln for ln in run_summary_lines(run, width=400) if ln.strip().startswith(f"{name} ="))
    assert f"(centred on {1.2 * final:.4g}, the optimum once the tracker's bias is modelled" in line
    run.result["intervals"][name].update(lower=0.9 * final, upper=1.3 * final)   # inside: nothing added
    line = next(ln for ln in run_summary_lines(run, width=400) if ln.strip().startswith(f"{name} ="))
    assert "centred on" not in line
    # what the loop states now: the interval extended to the value, the centre and the reason in its note
    note = f"the least-squares optimum with the tracker's bias modelled is {1.2 * final:.4g}; the interval is extended"
    run.result["intervals"][name].update(lower=final, upper=1.3 * final, kind="two-sided", note=note)
    lines = run_summary_lines(run, width=200)
    line = next(ln for ln in lines if ln.strip().startswith(f"{name} ="))
    assert f"[{final:.4g}, {1.3 * final:.4g}]†" in line  # a mark on the row, the note's text once in the header
    head = next(ln for ln in lines if ln.startswith("identified parameters"))
    assert "† the least-squares optimum with the tracker's bias modelled; the interval is extended" in head


def test_interval_digits_tell_the_bounds_from_the_value():
    # "[1.6, 1.61]" around 1.6049 cannot show the value inside: enough digits must
    lo, v, hi = interval_digits(1.60012, 1.6049, 1.60987)
    assert (lo, v, hi) == ("1.600", "1.605", "1.610")
    assert float(lo) < float(v) < float(hi)
    assert interval_digits(2.0, 3.0, 4.0) == ("2.00", "3.00", "4.00")
    lo, v, hi = interval_digits(0.99999991, 0.99999995, 0.99999999)
    assert float(lo) < float(v) < float(hi)


def test_residual_findings_count_as_one_insight_and_the_badge_agrees(toy_runs):
    items = [Insight("residual", "Residual diagnosis: the model is probably wrong"),
             Insight("residual", "Residual diagnosis: periodic residual at 2 Hz"),
             Insight("residual", "Residual diagnosis: drift"),
             Insight("correlated", "a and b are correlated (ρ = +0.990)")]
    groups = group_insights(items)
    assert [(g.kind, len(sub)) for g, sub in groups] == [("residual", 2), ("correlated", 0)]
    runs, _ = toy_runs
    run = load_run(runs["reasoner"][0])
    assert run.converged
    assert stop_badge(run, [])[0] == "good"
    cls, text = stop_badge(run, groups)  # converged beside "model is probably wrong": not green
    assert cls == "bad" and "put the result in doubt" in text


def test_holdout_shading_and_error_scale():
    t = np.linspace(0.0, 10.0, 101)
    scored = t >= 6.0  # a recording split in time: the holdout trial is unscored before the split
    assert holdout_span(t, "holdout", None, scored) == (6.0, 10.0)  # only the held-out part is shaded
    assert holdout_span(t, "holdout", None, np.ones(101, bool)) == (0.0, 10.0)  # a whole holdout trial
    assert holdout_span(t, "train", 6.0) == (6.0, 10.0)  # only the part after the split
    assert holdout_span(t, "train", 12.0) is None and holdout_span(t, "train", -1.0) is None
    cal = np.full(50, 2.0)
    cal[10] = np.nan
    top, ini = error_axis_top(cal, np.full(50, 60.0))
    assert top == pytest.approx(2.4) and ini == pytest.approx(60.0)  # scaled to the calibrated residual
    assert error_axis_top(cal, np.full(50, 1.0))[1] is None


def test_captions_fit_joint_and_mocap_trials():
    joints = trials_caption({"joints"})
    assert "image y" not in joints and "rad" in joints and "every joint" in joints
    assert "mm" in trials_caption({"points"}) and "image y" not in trials_caption({"points"})
    assert "image y grows downwards" in trials_caption({"image"})


def test_every_joint_is_drawn_for_joint_trials():
    from vid2sid_ros.report.figures import trial_figure
    from vid2sid_ros.report.run import TrialCurves

    T, K = 40, 5
    q = np.cumsum(np.full((T, K, 1), 0.01), axis=0)
    real = Trajectory(np.arange(T) / 20.0, q, np.ones((T, K), bool), tuple(f"j{k}" for k in range(K)), "real",
                      kind="joints", unit="rad")
    fig = trial_figure(TrialCurves("chirp", "train", None, real, None, real), title="arm")
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert [f"j{k} position [rad]" for k in range(K)] == titles[:K]


def test_interval_bar_is_visible_when_narrower_than_its_marker(toy_runs):
    runs, _ = toy_runs
    rows = [r for r in parameter_rows(load_run(runs["reasoner"][0])) if not r.frozen and r.interval is not None]
    assert rows
    fig = interval_figure(rows)
    bars = [tr for tr in fig["data"] if (tr.get("error_x") or {}).get("array") is not None]
    assert len(bars) == len(rows) and all(b["error_x"]["width"] >= 5 and b["error_x"]["thickness"] >= 2 for b in bars)


def test_tracking_rows_count_tracked_and_lost_frames():
    from vid2sid_ros.report.run import TrialCurves

    T = 10
    valid = np.ones((T, 2), bool)
    valid[:3, 1] = False  # the tip lost in 3 frames
    valid[5] = False  # one frame rejected: no keypoint at all
    real = Trajectory(np.arange(T) / 10.0, np.zeros((T, 2, 2)), valid, ("base", "tip"), "real")
    rows = tracking_rows([TrialCurves("chirp", "train", None, real, None, None)])
    # was "(no keypoint: frame rejected or lost) | 252 | 0 | 0 %" under "tracked [%]": read as 0 % tracked
    assert rows == [["chirp", "train", "base tracked", 10, 9, 90.0], ["chirp", "train", "tip tracked", 10, 6, 60.0],
                    ["chirp", "train", "no keypoint found (frame rejected or lost)", 10, 1, 10.0]]
    # a time split's holdout trial: the training part before the split is unscored, not lost
    hv = np.ones((T, 2), bool)
    hv[:4] = False
    hv[7, 0] = False
    held = Trajectory(np.arange(T) / 10.0, np.zeros((T, 2, 2)), hv, ("base", "tip"), "real")
    rows = tracking_rows([TrialCurves("chirp_holdout", "holdout", None, held, None, None)])
    assert rows[:2] == [["chirp_holdout", "holdout", "base tracked", 6, 5, 83.3],
                        ["chirp_holdout", "holdout", "tip tracked", 6, 6, 100.0]]
    assert rows[2][4] == 0


def test_a_twin_that_cannot_render_leaves_no_renders_and_says_why(tmp_path):
    from vid2sid_ros.calibration.objective import TrialObjective
    from vid2sid_ros.calibration.trial_curves import render_trials

    rig, real = _toy_real()
    twin = rig.make_twin()
    obj = TrialObjective(twin, real.train_excitations, real.train, rig.parameters)
    ok_path, spent, why = render_trials([("train", obj)], rig.parameters.complete({}), rig.parameters.complete({}),
                                        tmp_path / "r.npz")
    assert ok_path == tmp_path / "r.npz" and spent == 2 * len(real.train) and why == ""
    with np.load(ok_path) as z:
        assert z["0_initial"].shape[2] == 200 and z["0_initial"].shape == z["0_calibrated"].shape
        assert len(z["0_size"]) == 2 and len(z["0_steps"]) == len(z["0_initial"]) <= 100

    def no_gl(exc, *, render=False):
        raise RuntimeError("no OpenGL context")

    twin.rollout = no_gl
    path, spent, why = render_trials([("train", obj)], {}, {}, tmp_path / "none.npz")
    assert path is None and spent == 0 and "no OpenGL context" in why and not (tmp_path / "none.npz").exists()


def test_footage_of_a_time_split_recording_reaches_its_holdout_part():
    from types import SimpleNamespace

    from vid2sid_ros.calibration.trial_curves import _footage

    T = 20
    kp = np.zeros((T, 1, 2))
    train = Trajectory(np.arange(10) / 10.0, kp[:10], np.ones((10, 1), bool), ("tip",), "real", "clip_train",
                       np.arange(10), {"trial": "clip"})
    hold = Trajectory(np.arange(T) / 10.0, kp, np.ones((T, 1), bool), ("tip",), "real", "clip_holdout",
                      np.arange(T), {"trial": "clip"})
    thumbs = np.arange(10, dtype=np.uint8)[:, None, None, None] * np.ones((10, 4, 6, 3), np.uint8)  # every 2nd row
    objectives = [("train", SimpleNamespace(real=[train])), ("holdout", SimpleNamespace(real=[hold]))]
    info = {"clip": {"frame_every": 2, "frame_scale": 0.5}}
    frames, idx, scale = _footage(hold, np.array([0, 5, 19]), objectives, {"clip_train": thumbs}, info)
    assert frames is thumbs and idx.tolist() == [0, 2, 9] and scale == 0.5
    assert _footage(hold, np.arange(T), objectives, {"clip_train": thumbs},
                    {"clip": {**info["clip"], "retimed": True}}) is None  # slots are not video rows
    assert _footage(hold, np.array([25]), objectives, {"clip_train": thumbs}, info) is None  # beyond the frames


def test_a_failed_residual_diagnosis_is_an_insight_that_says_so_without_its_traceback():
    """Regression: a diagnosis that raised left ``findings`` empty and ``misspecified`` None, and its dict was
    dumped key by key (traceback included) or, in the suite, counted as a quiet "none"."""
    from vid2sid_ros.report.insights import _residual_items

    diag = {"misspecified": None, "kinds": [], "findings": [], "failed": True,
            "summary": "residual diagnosis failed: AttributeError: boom", "text": "...",
            "traceback": "Traceback (most recent call last): ..."}
    (line,) = _residual_items(diag)
    assert line.startswith("residual diagnosis failed: AttributeError: boom: the parameters were not checked")
    assert "Traceback" not in line
