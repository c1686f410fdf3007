"""The HTML report: one self-contained file, generic over rigs, renders in a headless browser."""

from __future__ import annotations

import base64
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.core.trajectory import Trajectory
from vid2sid_ros.io.report import ReportError, ReportSection, TrajectoryPanel, load_trajectories, \
    save_trajectories, write_report
from vid2sid_ros.io.video import write_video

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WEBM_MAGIC = b"\x1a\x45\xdf\xa3"  # EBML header


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self._stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in ("img", "source", "meta", "br"):
            self._stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self._stack:
            while self._stack and self._stack.pop() != tag:
                pass

    def handle_data(self, data):
        if data.strip():
            self.text.append(data.strip())

    def find(self, tag: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag]


@pytest.fixture(scope="module")
def toy_runs(tmp_path_factory):
    """Two small calibrations of the toy rig (not a pendulum: the report must be generic)."""
    from vid2sid_ros.calibration.observation import RealTrial
    from vid2sid_ros.sim.toy import make_rig

    rig = make_rig()
    twin = rig.make_twin()
    truth = {n: rig.parameters[n].nominal * 1.3 for n in rig.parameters.free_names}
    twin.set_parameters(truth)
    real = RealTrial([twin.rollout(e).trajectory for e in rig.excitations["train"]], rig.excitations["train"],
                     [twin.rollout(e).trajectory for e in rig.excitations["holdout"]], rig.excitations["holdout"])
    base = tmp_path_factory.mktemp("runs")
    runs = {}
    for name, budget in (("reasoner", 14), ("random", 6)):
        rd = base / name
        run_calibration(rig, real, make_proposer(name, **({"seed": 1} if name == "random" else {})),
                        CalibrationConfig(iterations=3, rollout_budget=budget, identifiability=False,
                                          final_identifiability=name == "reasoner"), rd)
        runs[name] = rd
    return runs, real


@pytest.fixture(scope="module")
def report(toy_runs, tmp_path_factory):
    runs, real = toy_runs
    d = tmp_path_factory.mktemp("report")
    frames = np.zeros((12, 48, 64, 3), np.uint8)
    frames[:, 10:30, 20:40, 0] = 200
    webm = write_video(d / "clip.webm", frames, 10.0, codec="VP80")
    mp4 = write_video(d / "clip.mp4", frames, 10.0, codec="mp4v")
    tr = real.train[0]
    sim = Trajectory(tr.time, tr.keypoints + 1.5, tr.valid, tr.names, "sim", tr.trial_id)
    panel = TrajectoryPanel("step response", tr, sim, split_time=float(tr.time[len(tr.time) // 2]),
                            derived={"angle": ("rad", np.sin(tr.time), np.sin(tr.time) + 0.01)})
    save_trajectories(runs["reasoner"] / "trajectories.json", [panel])
    out = write_report(d / "report.html", runs, main="reasoner", videos=[("overlay: real vs twin", [webm, mp4])],
                       sections=[ReportSection("Check <b>escaped</b>", ["a < b & c"], ["x", "y"], [["row", 1.5]])],
                       comparison_columns=["stiffness"])
    return out, runs


def _decode(uri: str, mime: str) -> bytes:
    prefix = f"data:{mime};base64,"
    assert uri.startswith(prefix), uri[:40]
    return base64.b64decode(uri[len(prefix):], validate=True)


def test_report_is_self_contained_with_embedded_png_and_video(report):
    out, runs = report
    doc = out.read_text(encoding="utf-8")
    p = _Collector()
    p.feed(doc)
    # structure
    assert [a for t, a in p.tags if t == "title"] and p.tags[0][0] == "html"
    h2 = [t for t in p.text if t in ("Parameters (reasoner)", "Convergence", "Iterations: rationale and confidence",
                                      "Methods compared (same rollout budget, same start)",
                                      "Trajectories: real vs calibrated twin", "Check <b>escaped</b>")]
    assert len(h2) == 6, p.text[:40]
    assert "<b>escaped</b>" not in doc  # caller text is escaped, not injected
    # every resource is embedded: no external src/href
    for tag, attrs in p.tags:
        for k in ("src", "href"):
            if k in attrs:
                assert attrs[k].startswith("data:"), (tag, attrs[k][:60])
    imgs = p.find("img")
    assert len(imgs) == 2  # trajectories + convergence
    for a in imgs:
        png = _decode(a["src"], "image/png")
        assert png[:8] == PNG_MAGIC and len(png) > 5_000
    sources = p.find("source")
    assert [s["type"] for s in sources] == ["video/webm", "video/mp4"]
    assert _decode(sources[0]["src"], "video/webm")[:4] == WEBM_MAGIC
    mp4 = _decode(sources[1]["src"], "video/mp4")
    assert mp4[4:8] == b"ftyp"
    # the parameter table lists every parameter of the toy spec, the comparison both runs
    from vid2sid_ros.core.parameters import load_parameter_set

    names = load_parameter_set(runs["reasoner"] / "result.yaml").names
    assert all(n in p.text for n in names)
    assert "random" in p.text and "rationale" in p.text


def test_report_of_a_bare_run_dir_and_bad_input(toy_runs, tmp_path):
    runs, _ = toy_runs
    out = write_report(tmp_path / "r.html", runs["random"])  # no trajectories, no video: still a report
    p = _Collector()
    p.feed(out.read_text())
    assert len(p.find("img")) == 1 and not p.find("video")
    with pytest.raises(ReportError, match="not a finished calibration run"):
        write_report(tmp_path / "x.html", tmp_path)
    with pytest.raises(ReportError, match="main run"):
        write_report(tmp_path / "x.html", runs, main="gemini")
    panels = load_trajectories(runs["reasoner"] / "trajectories.json")
    assert panels[0].label == "step response" and "angle" in panels[0].derived
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ReportError, match="bad.json"):
        load_trajectories(tmp_path / "bad.json")


@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                    reason="chromium is not installed (apt-get install -y chromium); the HTML structure and "
                           "embedded media are still checked by test_report_is_self_contained...")
def test_report_renders_in_headless_chromium(report, tmp_path):
    out, _ = report
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    shot = tmp_path / "shot.png"
    proc = subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--screenshot={shot}", "--window-size=1000,1400", out.resolve().as_uri()],
                          capture_output=True, text=True, timeout=90)
    assert shot.is_file(), proc.stderr[-2000:]
    import cv2

    img = cv2.imread(str(shot))
    assert img.shape[:2] == (1400, 1000)
    grey = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    assert (grey < 100).mean() > 0.01  # text and plots were drawn, not a blank page
    assert (grey > 200).mean() > 0.3  # on a light background
