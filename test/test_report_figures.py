"""The report's figures are plain plotly JSON: every one is a figure plotly's own validator accepts, the subplot
grids are the ones plotly's make_subplots makes, the page's scripts carry them safely, and writing a report
imports nothing of plotly.py (its object machinery cost more CPU than the rest of a small report)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.core.trajectory import Trajectory
from vid2sid_ros.report import figures as F
from vid2sid_ros.report.insights import parameter_rows
from vid2sid_ros.report.run import TrajectoryPanel, TrialCurves, load_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """A finished toy calibration (truth saved) as a run directory."""
    from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
    from vid2sid_ros.calibration.proposers import make_proposer
    from vid2sid_ros.core.trial import RealTrial
    from vid2sid_ros.sim.toy import make_rig

    rig = make_rig()
    twin = rig.make_twin()
    truth = rig.parameters.complete({n: rig.parameters[n].nominal * 1.3 for n in rig.parameters.free_names})
    twin.set_parameters(truth)
    real = RealTrial([twin.rollout(e).trajectory for e in rig.excitations["train"]], rig.excitations["train"],
                     [twin.rollout(e).trajectory for e in rig.excitations["holdout"]], rig.excitations["holdout"],
                     source="toy stand-in", truth={n: truth[n] for n in rig.parameters.free_names})
    rd = tmp_path_factory.mktemp("run")
    real.save(rd / "real_trial.json")
    run_calibration(rig, real, make_proposer("reasoner"),
                    CalibrationConfig(iterations=2, rollout_budget=30, identifiability=False, diagnosis=False), rd)
    return rd


def _every_figure(run_dir: Path) -> dict[str, dict]:
    """One figure of every builder and variant (image, 3-D point and joint trials, holdout shading, a panel
    with derived series, command limits, NaN correlations, log and linear axes)."""
    rng = np.random.default_rng(0)
    T = 60
    t = np.arange(T) / 30.0
    kp = rng.normal(200, 20, (T, 3, 2))
    valid = np.ones((T, 3), bool)
    valid[5, 1] = False
    img = Trajectory(t, kp, valid, ("a", "b", "c"), "real")
    img_sim = Trajectory(t, kp + rng.normal(0, 1, kp.shape), np.ones((T, 3), bool), ("a", "b", "c"), "sim")
    pts = Trajectory(t, rng.normal(0.1, 0.01, (T, 2, 3)), np.ones((T, 2), bool), ("m0", "m1"), "real",
                     kind="points", unit="m")
    q = np.cumsum(np.full((T, 4, 1), 0.01), axis=0)
    joints = Trajectory(t, q, np.ones((T, 4), bool), tuple(f"j{k}" for k in range(4)), "real", kind="joints",
                        unit="rad")
    exc = Excitation("designed", 30.0, rng.normal(size=(T, 2)), ("m1", "m2"))
    panel = TrajectoryPanel("step", img, img_sim, split_time=1.0,
                            derived={"angle": ("rad", rng.normal(size=T), rng.normal(size=T)),
                                     "speed": ("rad/s", rng.normal(size=T), rng.normal(size=T))})
    run = load_run(run_dir)
    figs = {"image": F.trial_figure(TrialCurves("chirp", "train", exc, img, img_sim, img_sim), title="image",
                                    split_time=1.2),
            "points": F.trial_figure(TrialCurves("mocap", "holdout", None, pts, pts, pts), title="points"),
            "joints": F.trial_figure(TrialCurves("arm", "train", exc, joints, None, joints), title="joints"),
            "profile": F.designed_profile_figure(exc, [(-1.0, 1.0), (None, 2.0)]),
            "corr": F.correlation_figure(["p", "q", "r"], [[1, 0.5, np.nan], [0.5, 1, -0.2], [np.nan, -0.2, 1]]),
            "intervals": F.interval_figure([r for r in parameter_rows(run) if not r.frozen]),
            "conv-iter": F.convergence_iterations_figure([run]),
            "conv-rollout": F.convergence_rollouts_figure([run]),
            "dist": F.distribution_figure({"a": [0.1, 0.2, float("nan")], "b": [0.5, 30.0]}, y_title="e [%]",
                                          percent=True)}
    figs["panel"], figs["panel-derived"] = F.panel_figure(panel)
    return figs


def test_every_figure_is_a_figure_plotly_validates(toy_run):
    go = pytest.importorskip("plotly.graph_objects")
    for name, fig in _every_figure(toy_run).items():
        assert set(fig) == {"data", "layout"} and fig["layout"]["template"] == F.template(), name
        json.dumps(fig, cls=F._Encoder)  # plain JSON (numpy arrays only as typed-array specs)
        checked = go.Figure(fig)  # raises ValueError on any property plotly does not know or a bad value
        assert len(checked.data) == len(fig["data"]), name
    with pytest.raises(ValueError, match="markr"):  # the check does check
        go.Figure({"data": [{"type": "scatter", "markr": {}}]})


def test_the_template_is_plotlys_white_template():
    pio = pytest.importorskip("plotly.io")
    from plotly.io.json import to_json_plotly

    assert F.template() == json.loads(to_json_plotly(pio.templates["plotly_white"].to_plotly_json()))


@pytest.mark.parametrize("rows, kw", [(1, {}), (2, {"titles": ["a", "b"]}), (3, {}),
                                      (8, {"vertical_spacing": 0.025, "row_heights": [1.0] * 6 + [0.9, 0.9],
                                           "titles": [f"t{i}" for i in range(8)]}),
                                      (5, {"vertical_spacing": 0.025, "row_heights": [1.0] * 3 + [0.9, 0.9],
                                           "titles": ["x", "", "z", "w", "v"]})])
def test_subplot_layout_is_what_make_subplots_makes(rows, kw):
    subplots = pytest.importorskip("plotly.subplots")
    titles = kw.get("titles")
    ref = subplots.make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=kw.get("vertical_spacing"),
                                 row_heights=kw.get("row_heights"), subplot_titles=titles).layout.to_plotly_json()
    got = F.subplot_layout(rows, vertical_spacing=kw.get("vertical_spacing"), row_heights=kw.get("row_heights"),
                           titles=titles or ())
    ref.pop("template", None)
    ref.setdefault("annotations", [])
    assert json.loads(json.dumps(got)) == json.loads(json.dumps(ref))  # domains bit for bit


def _new_plot_args(script: str, div_id: str) -> tuple[list, dict]:
    """The data and layout a figure's script hands to ``Plotly.newPlot``."""
    dec = json.JSONDecoder()
    i = re.search(r"Plotly\.newPlot\(", script).end()
    got_id, i = dec.raw_decode(script, i)
    assert got_id == div_id
    data, i = dec.raw_decode(script, script.index(",", i) + 2)
    layout, _ = dec.raw_decode(script, script.index(",", i) + 2)
    return data, layout


def test_figure_html_draws_once_plotly_is_there_and_is_safe_in_a_script():
    y = np.array([1.5, np.nan, 3.25])
    fig = {"data": [F._scatter(np.arange(3.0), y, name="a</script><b>")],
           "layout": {"title": {"text": "x < y & \u2028"}, "height": 200, "shapes": [{"x0": float("nan")}]}}
    div = F.figure_html(fig, "fig-1")
    assert div.startswith('<div style="height:200px; width:100%;"><div id="fig-1" class="plotly-graph-div"')
    script = re.search(r"<script>(.*)</script></div>$", div, re.S).group(1)
    assert script.startswith("window.vid2sidPlotly.then(() => {") and "</" not in script and "\u2028" not in script
    data, layout = _new_plot_args(script, "fig-1")
    assert data[0]["name"] == "a</script><b>" and layout["title"]["text"] == "x < y & \u2028"
    assert layout["shapes"][0]["x0"] is None  # NaN outside a typed array: null (a gap), never invalid JSON
    spec = data[0]["y"]
    assert spec["dtype"] == "f4"
    got = np.frombuffer(base64.b64decode(spec["bdata"]), "<f4")
    np.testing.assert_array_equal(got, y.astype(np.float32))  # float32, NaN kept as NaN in the typed array


def test_writing_a_report_imports_nothing_of_plotly_py(toy_run, tmp_path):
    """plotly.graph_objects' classes, validation and template copies cost a report ~0.4 CPU s on first use;
    the page reads plotly.js from the installed package's file without importing it."""
    code = ("import json, sys\nfrom pathlib import Path\nfrom vid2sid_ros.report import write_report\n"
            f"write_report(Path({str(toy_run)!r}), Path({str(tmp_path / 'r.html')!r}))\n"
            "print(json.dumps(sorted(m for m in sys.modules if m == 'plotly' or m.startswith('plotly.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    mods = json.loads(out.stdout.strip().splitlines()[-1])
    assert "plotly.graph_objects" not in mods and "plotly.subplots" not in mods and "plotly.io" not in mods
    assert mods == []  # not even plotly itself
    doc = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert doc.count("Plotly.newPlot(") >= 4 and doc.count("window.vid2sidPlotly.then(") == doc.count("Plotly.newPlot(")
