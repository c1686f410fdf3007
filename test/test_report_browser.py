"""Reports as a reader opens them: headless Chromium, offline, every section of the report present.

Three reports are made here — a tentacle calibration stopped at its budget (unconverged), a finger
calibration that converged (and a screenshot of it: the README's picture, written to
``$VID2SID_README_PICTURE`` when that is set, as ``make readme-picture`` does) and a
sim2sim benchmark — and each is opened in
Debian's ``chromium`` (``apt-get install -y chromium``; tools/setup_env.sh installs it when
running as root). A page fails on a console error or uncaught exception, an image that does
not decode, a video that does not decode its first frame, a plotly figure that did not draw,
or a missing section. The probe itself is checked on a page broken on purpose. The finger
calibration's report is opened the same way by test/test_bringup_calibrate.py (the ROS graph
calibrating the finger by itself), the demo's by test/test_pendulum.py (the demo on a short
clip of the real video).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers.browser import README_PICTURE_SOURCE, chromium, png_text, probe_page, screenshot, tag_png  # noqa: E402

from vid2sid_ros.cli import main  # noqa: E402
from vid2sid_ros.report import REPORT_SIZE_BUDGET, SECTION_IDS  # noqa: E402

pytestmark = pytest.mark.skipif(chromium() is None, reason="chromium is not installed and cannot be installed here "
                                                           "(not root): apt-get install -y chromium")


def _assert_clean(found: dict, sections) -> None:
    assert found["errors"] == [] and found["stderr_errors"] == [], found["errors"] + found["stderr_errors"]
    assert all(v["ok"] for v in found["videos"]), found["videos"]
    assert all(i["ok"] for i in found["images"]), found["images"]
    assert found["plots"] and all(p["ok"] for p in found["plots"]), found["plots"]
    missing = [s for s in sections if s not in found["sections"]]
    assert not missing, (missing, found["sections"])


def test_probe_catches_a_broken_page(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><head><title>x</title></head><body><section id='a'></section>"
                    "<video><source type='video/webm' src='data:video/webm;base64,GkXfo5+BAUKGgQE='></video>"
                    "<img alt='nothing' src='data:image/png;base64,iVBORw0KGgo='>"
                    "<script>console.error('boom')</script></body></html>")
    found = probe_page(page, tmp_path)
    assert any("boom" in e for e in found["errors"])
    assert found["videos"] and not found["videos"][0]["ok"]
    assert found["images"] and not found["images"][0]["ok"]
    assert found["sections"] == ["a"]


def test_unconverged_tentacle_says_so_in_terminal_and_report(tmp_path, capsys):
    cfg = tmp_path / "tentacle.yaml"
    # a small tentacle (8 elements, one 1.5 s training trial) so the test stays fast; the budget of 8
    # rollouts runs out before the reasoner converges
    cfg.write_text("rig: tentacle\n"
                   "rig_options:\n  geometry: {n_elements: 8}\n  num_keypoints: 5\n  excitations:\n"
                   "    train: [{kind: step, name: train_step, amplitude: 0.8, t_step: 0.1, t_release: 0.6, "
                   "duration: 1.5, rate: 30.0}]\n"
                   "    holdout: [{kind: sine, name: holdout_sine, amplitude: 0.5, frequency: 1.0, duration: 1.0, "
                   "rate: 30.0}]\n"
                   "real: {sim2sim: {seed: 0, noise: keypoint}}\n"
                   "calibration: {iterations: 10, rollout_budget: 8, identifiability: false}\n")
    out = tmp_path / "tentacle"
    assert main(["calibrate", str(cfg), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    summary = text[text.index("\nstopped:"):]
    assert summary.splitlines()[1].startswith("stopped: budget") and "NOT converged" in summary.splitlines()[1]
    line = next(ln for ln in summary.splitlines() if ln.strip().startswith("damping_constant ="))
    assert "UNRELIABLE" in line or "in interval" in line, line
    doc = (out / "report.html").read_text()
    assert "stopped at its rollout budget without converging" in doc and "UNRELIABLE" in doc
    assert (out / "report.html").stat().st_size <= REPORT_SIZE_BUDGET  # its media inside the one file
    found = probe_page(out / "report.html", tmp_path)
    _assert_clean(found, SECTION_IDS)
    # the overlay video reached a playable state (HAVE_CURRENT_DATA or more) and is the WebM one
    assert [v["readyState"] >= 2 and v["src"].startswith("data:video/webm") for v in found["videos"]] == [True]
    # every figure drew: trials (train and holdout), intervals, convergence x2 at least
    assert len(found["plots"]) >= 5


def test_converged_finger_report_is_the_readme_picture(tmp_path, capsys):
    """A successful calibration of a robot (the finger, sim2sim, converged in a few iterations), as the
    README shows it: the report says converged and names its run directory, never the machine's path."""
    cfg = tmp_path / "finger.yaml"
    cfg.write_text("rig: finger\nreal: {sim2sim: {seed: 0, noise: keypoint}}\n"
                   "calibration: {iterations: 10, rollout_budget: 100, identifiability: false, diagnosis: false}\n")
    out = tmp_path / "calibrate_finger"
    assert main(["calibrate", str(cfg), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "\nstopped: converged after" in text, text
    import json

    assert json.loads((out / "result.json").read_text())["stopped"] == "converged"
    doc = (out / "report.html").read_text()
    assert str(tmp_path) not in doc and "from run directory calibrate_finger;" in doc
    _assert_clean(probe_page(out / "report.html", tmp_path), SECTION_IDS)
    # the page as a reader sees it (kept in the test's folder; look at it when the report changes). It is
    # the README's picture: `make readme-picture` runs this test with VID2SID_README_PICTURE set to it.
    png = tag_png(screenshot(out / "report.html", tmp_path / "report.png", tmp_path), README_PICTURE_SOURCE)
    import cv2

    img = cv2.imread(str(png))
    assert img is not None and img.shape[1] >= 1000 and img.std() > 10  # not a blank page
    assert png_text(png)["Source"] == README_PICTURE_SOURCE
    if os.environ.get("VID2SID_README_PICTURE"):
        shutil.copyfile(png, os.environ["VID2SID_README_PICTURE"])


def test_benchmark_report_in_chromium(tmp_path):
    out = tmp_path / "bench"
    assert main(["benchmark", "sim2sim", "--rig", "toy", "--methods", "reasoner,random",
                 "--seeds", "2", "--budget", "12", "--iterations", "3", "--out", str(out), "--no-progress"]) == 0
    assert (out / "report.html").is_file()
    _assert_clean(probe_page(out / "report.html", tmp_path),
                  ("summary", "insights", "methods", "per-parameter", "seeds", "distributions"))
