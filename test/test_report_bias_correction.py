"""The report says when the parameter values were bias-corrected, as the terminal does.

A calibration whose twin is filmed like the robot moves its estimate to the least-squares optimum with
the tracker's bias modelled (``result.json: bias_correction``, applied). The terminal printed
"identified parameters, bias-corrected"; the report's parameter table showed the corrected values with
no word that they were not the proposer's point. It now says so, shows the proposer's own point beside
each corrected value (with its unit) and the two sums of squares; nothing when no correction was applied
or when the run (older code) has no ``bias_correction``.

The real run is the finger's sim2sim stand-in (filmed by the rig's own camera model), 3 iterations,
20 rollouts, through ``vid2sid calibrate`` as a user runs it.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vid2sid_ros.report import load_run, parameter_rows, render_report, run_summary_lines
from vid2sid_ros.report.page import bias_correction_note, point_digits

REPO = Path(__file__).resolve().parents[1]
NOTE_HEAD = ("Values bias-corrected: the identified values are the least-squares optimum with the tracker's bias "
             "modelled (the twin filmed and tracked like the robot), not the proposer's own point, which is shown "
             "beside them (column \"proposer's point\"; both with the digits that tell them apart).")


@pytest.fixture(scope="module")
def finger_run(tmp_path_factory) -> Path:
    """A finished finger calibration with its report (``vid2sid calibrate``, 3 iterations, 20 rollouts)."""
    out = tmp_path_factory.mktemp("finger") / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    done = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "calibrate", "--rig", "finger", "--iterations",
                           "3", "--budget", "20", "--out", str(out), "--quiet"], cwd=out.parent, env=env,
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _rows_of(doc: str) -> dict[str, list[str]]:
    """The parameter table's rows by parameter name (cell texts, HTML unescaped), and its header as ``""``."""
    sec = doc[doc.index('<section id="parameters"'):]
    sec = sec[:sec.index("</section>")]
    table = sec[sec.index("<table>"):sec.index("</table>")]
    out = {}
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S):
        cells = [html.unescape(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", tr, re.S)]
        out["" if "<th>" in tr else cells[0]] = cells
    return out


def _significant(text: str) -> int:
    return len(text.lower().split("e")[0].lstrip("+-").replace(".", "").lstrip("0"))


def _section_text(doc: str) -> str:
    sec = doc[doc.index('<section id="parameters"'):]
    return html.unescape(sec[:sec.index("</section>")])


def _copy_without_media(run: Path, dest: Path, bias_correction) -> Path:
    """The run's files a report needs (no trials.json, no renders: no video to encode), with result.json's
    ``bias_correction`` replaced (``...``: removed, as in a run from older code)."""
    dest.mkdir()
    for name in ("result.json", "result.yaml", "run.json", "iterations.jsonl", "real_trial.json"):
        shutil.copy(run / name, dest / name)
    shutil.copytree(run / "proposer_state", dest / "proposer_state")
    res = json.loads((dest / "result.json").read_text())
    if bias_correction is ...:
        res.pop("bias_correction", None)
    else:
        res["bias_correction"] = bias_correction
    (dest / "result.json").write_text(json.dumps(res))
    return dest


def test_point_digits_tell_a_corrected_value_from_the_proposers_point():
    assert point_digits(0.361936062323065, 0.3619125146652817, start=4) == ("0.36194", "0.36191")
    assert point_digits(11.92230509353145, 11.937182493278739, start=4) == ("11.92", "11.94")
    assert point_digits(0.0004, 0.0004) == ("0.000400", "0.000400")  # equal numbers print equal
    assert point_digits(1.807665035094691, 3.0040762365700893, start=4) == ("1.808", "3.004")


def test_the_note_names_both_sums_of_squares_in_the_measurement_unit():
    bc = {"applied": True, "ssr_before": 3.0040762365700893, "ssr_after": 1.807665035094691, "unit": "px"}
    assert bias_correction_note(bc) == NOTE_HEAD + (
        " The correction was kept because it lowers the sum of squared residuals with the bias modelled: "
        "3.004 px² at the proposer's point, 1.808 px² at the corrected one.")
    # metres are shown as mm on the page, so their squares as mm²; sums that round alike get the digits to differ
    bc = {"applied": True, "ssr_before": 2.0e-6, "ssr_after": 1.99999e-6, "unit": "m"}
    assert bias_correction_note(bc).endswith("2.00000 mm² at the proposer's point, 1.99999 mm² at the corrected one.")
    assert bias_correction_note({"applied": True, "unit": "px"}) == NOTE_HEAD  # sums not computed: not invented


def test_the_finger_report_says_its_values_are_bias_corrected_beside_the_proposers_point(finger_run):
    res = json.loads((finger_run / "result.json").read_text())
    bc = res["bias_correction"]
    assert bc["applied"] is True, bc.get("reason")  # the finger's stand-in is filmed by the rig's own camera model
    assert bc["values"] == res["values"] and bc["ssr_after"] < bc["ssr_before"]
    doc = (finger_run / "report.html").read_text(encoding="utf-8")
    assert bias_correction_note(bc) in _section_text(doc)
    rows = _rows_of(doc)
    head = rows[""]
    at = head.index("identified (bias-corrected)")
    assert head[at + 1] == "proposer's point"
    for r in parameter_rows(load_run(finger_run)):
        cells = rows[r.name]
        before, after = bc["before"][r.name], bc["values"][r.name]
        assert r.final == pytest.approx(after, rel=1e-12) and r.proposed == pytest.approx(before, rel=1e-12)
        shown, proposed = cells[at], cells[at + 1]
        assert proposed.endswith(" " + r.unit), (r.name, proposed)  # with its unit
        number = proposed.removesuffix(" " + r.unit)
        if before == after:  # frozen (or not moved): the same text
            assert number == shown
            continue
        # both are the two points rounded to the same digits, and the digits tell them apart
        d = _significant(shown)
        assert _significant(number) == d and number != shown, (r.name, shown, number)
        assert (shown, number) == (f"{after:#.{d}g}".rstrip("."), f"{before:#.{d}g}".rstrip(".")), r.name
    # the terminal says the same
    head_line = next(ln for ln in run_summary_lines(finger_run, width=300) if ln.startswith("identified parameters"))
    assert head_line.startswith("identified parameters, bias-corrected")


def test_a_crafted_correction_is_shown_with_the_exact_values(finger_run, tmp_path):
    res = json.loads((finger_run / "result.json").read_text())
    values = dict(res["values"])
    before = {**values, "joint_stiffness": values["joint_stiffness"] * 1.01, "latency": 0.002}
    bc = {"applied": True, "values": values, "before": before, "ssr_before": 12.5, "ssr_after": 7.25, "unit": "px",
          "rollouts": 2, "reason": ""}
    run = _copy_without_media(finger_run, tmp_path / "crafted", bc)
    doc = render_report(run / "report.html", [run]).read_text(encoding="utf-8")
    text = _section_text(doc)
    assert NOTE_HEAD + (" The correction was kept because it lowers the sum of squared residuals with the bias "
                        "modelled: 12.50 px² at the proposer's point, 7.250 px² at the corrected one.") in text
    rows = _rows_of(doc)
    at = rows[""].index("identified (bias-corrected)")
    k = rows["joint_stiffness"]
    a, b = point_digits(values["joint_stiffness"], before["joint_stiffness"], start=4)
    assert (k[at], k[at + 1]) == (a, b + " N·m/rad")
    assert rows["latency"][at + 1] == f"{point_digits(values['latency'], 0.002, start=3)[1]} s"
    assert rows["joint_armature"][at + 1] == "0.0004 kg·m^2"  # frozen: the same point, as the identified cell
    assert rows["joint_armature"][at] == "0.0004"


@pytest.mark.parametrize("bias_correction", [..., {"applied": False, "values": {}, "before": {}, "ssr_before": 2.0,
                                                   "ssr_after": 3.0, "unit": "px", "reason": "not lower"}])
def test_no_correction_or_an_older_run_shows_no_word_of_it(finger_run, tmp_path, bias_correction):
    run = _copy_without_media(finger_run, tmp_path / "plain", bias_correction)
    doc = render_report(run / "report.html", [run]).read_text(encoding="utf-8")
    text = _section_text(doc)
    assert "bias-corrected" not in text and "proposer's point" not in text and "sum of squared residuals" not in text
    head = _rows_of(doc)[""]
    assert "identified" in head and "proposer's point" not in head
    assert all(r.proposed is None for r in parameter_rows(load_run(run)))
    line = next(ln for ln in run_summary_lines(run, width=300) if ln.startswith("identified parameters"))
    assert not line.startswith("identified parameters, bias-corrected")
