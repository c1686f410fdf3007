"""The report's "Designed trial (active learning)" section: present with a design, absent without, robust to bad files."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DESIGN_FILES = ("designed_trial.yaml", "designed_excitation.csv", "active_learning.jsonl", "active_learning.json")


@pytest.fixture(scope="module")
def recommended(tmp_path_factory):
    """``vid2sid calibrate --active-learning`` on the small hinge rig of bench_active_learning (about 5 s):
    a run directory holding the recommendation, its report and the terminal output."""
    import yaml

    sys.path.insert(0, str(REPO / "bench"))
    import bench_active_learning as bench

    tmp = tmp_path_factory.mktemp("designed")
    (tmp / "hinge.xml").write_text(bench.HINGE_XML)
    cfg = bench.hinge_config()
    cfg["real"] = {"sim2sim": {"noise": "keypoint"}}
    cfg["calibration"]["active_learning"] = {**cfg["calibration"]["active_learning"], "enabled": False}
    (tmp / "hinge.yaml").write_text(yaml.safe_dump(cfg))
    out = tmp / "run"
    p = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "calibrate", str(tmp / "hinge.yaml"),
                        "--active-learning", "--proposer", "least-squares", "--budget", "20", "--iterations", "1",
                        "--out", str(out), "-q"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert p.returncode == 0, p.stderr
    return out, p.stdout


def _section(page: str) -> str | None:
    m = re.search(r'<section id="designed-trial">(.*?)</section>', page, re.S)
    return m.group(1) if m else None


def _copy(run: Path, dest: Path, *, drop: tuple[str, ...] = ()) -> Path:
    shutil.copytree(run, dest, ignore=shutil.ignore_patterns("report.html", "report_media", ".vid2sid.lock", *drop))
    return dest


def test_the_report_shows_the_recommendation_its_numbers_profile_and_block(recommended):
    from vid2sid_ros.report import REPORT_SIZE_BUDGET

    run, _ = recommended
    page = (run / "report.html").read_text(encoding="utf-8")
    sec = _section(page)
    assert sec is not None and "Designed trial (active learning)" in sec
    rec = json.loads((run / "active_learning.jsonl").read_text().splitlines()[-1])
    # the numbers in plain words: criterion, condition number before -> after, the parameters it targets
    assert "Criterion: D-optimal" in sec
    cb, ca = rec["condition_before"], rec["condition_after"]
    assert f"Condition number of the sensitivity: {cb:.3g} on the recorded trials → {ca:.3g}" in sec
    assert "It targets the parameters: " + ", ".join(rec["flagged"]) in sec
    # the profile figure, limits recorded with the design and drawn
    assert 'id="designed-profile"' in sec and "command [actuator units]" in sec and "time [s]" in sec
    assert rec["limits"]["command_range"] == [[-0.3, 0.3]]
    assert "u0 upper limit 0.3" in sec
    # the paste-able block, HTML-escaped, as written
    yaml_text = (run / "designed_trial.yaml").read_text()
    assert "<pre>" + __import__("html").escape(yaml_text) + "</pre>" in sec
    assert "&quot;chirp&quot;" in sec and '"chirp"' not in sec.split("<h3>The trial to paste")[1]
    # a recommendation is not a run design: no table of designs run
    assert "<h3>Designs</h3>" not in sec
    assert (run / "report.html").stat().st_size < REPORT_SIZE_BUDGET


def test_the_terminal_names_both_saved_files_in_one_line(recommended):
    run, stdout = recommended
    lines = [x for x in stdout.splitlines() if "designed_trial.yaml" in x or "designed_excitation.csv" in x]
    assert len(lines) == 1
    assert str(run / "designed_trial.yaml") in lines[0] and str(run / "designed_excitation.csv") in lines[0]


def test_a_rationale_with_markup_is_escaped(recommended, tmp_path):
    from vid2sid_ros.report import write_report

    run = _copy(recommended[0], tmp_path / "run")
    evil = "<script>alert(1)</script> & <b>bold</b>"
    recs = [json.loads(x) for x in (run / "active_learning.jsonl").read_text().splitlines()]
    recs[-1]["rationale"] = evil
    (run / "active_learning.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (run / "designed_trial.yaml").write_text("# " + evil + "\n- name: x\n")
    sec = _section(write_report(run).read_text(encoding="utf-8"))
    assert "<script>alert(1)</script>" not in sec and "<b>bold</b>" not in sec
    assert sec.count("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;") == 2  # rationale, block


def test_no_section_without_a_design(recommended, tmp_path):
    from vid2sid_ros.report import write_report

    run = _copy(recommended[0], tmp_path / "run", drop=DESIGN_FILES)
    page = write_report(run).read_text(encoding="utf-8")
    assert _section(page) is None and "Designed trial" not in page


@pytest.mark.parametrize("name, content, says", [
    ("active_learning.jsonl", '{"design": 1, "crit', "active_learning.jsonl: line 1 is not JSON"),
    ("active_learning.jsonl", "[1, 2]\n", "active_learning.jsonl: line 1 is not a JSON object"),
    ("designed_excitation.csv", "time,u0\n0.0,abc\n", "designed_excitation.csv: not a command profile"),
    ("active_learning.json", "[]", "active_learning.json: expected a JSON object"),
])
def test_a_malformed_file_is_named_in_one_line_and_the_report_is_written(recommended, tmp_path, name, content, says):
    from vid2sid_ros.report import write_report

    run = _copy(recommended[0], tmp_path / "run")
    (run / name).write_text(content)
    sec = _section(write_report(run).read_text(encoding="utf-8"))
    assert sec is not None
    warn = [m for m in re.findall(r'<p class="warn">(.*?)</p>', sec, re.S) if name in m]
    assert len(warn) == 1 and says in warn[0] and "\n" not in warn[0]
    if name != "active_learning.jsonl":  # the other files still show
        assert "Criterion: D-optimal" in sec


def test_a_record_of_an_unexpected_layout_says_so_and_never_breaks_the_report(recommended, tmp_path):
    from vid2sid_ros.report import write_report

    run = _copy(recommended[0], tmp_path / "run")
    (run / "active_learning.jsonl").write_text(json.dumps({"design": 1, "profile": {"kind": "chirp"},
                                                           "criterion": "d_optimal", "flagged": 3}) + "\n")
    page = write_report(run).read_text(encoding="utf-8")
    sec = _section(page)
    assert "are malformed (TypeError" in sec and 'id="summary"' in page


def _designs_run(tmp_path: Path, recommended_run: Path) -> Path:
    """An active calibration's layout: RUN/phase_1 is the last phase's run, the records in RUN."""
    top = tmp_path / "active"
    run = _copy(recommended_run, top / "phase_1", drop=DESIGN_FILES)
    rec = json.loads((recommended_run / "active_learning.jsonl").read_text().splitlines()[-1])
    first = {**rec, "design": 1, "applied": True, "trial": "t1", "trial_file": "active_trial_1.json",
             "rollouts": 12, "warning": "gain and stiffness trade off", "files": None}
    first.pop("charged")
    refused = {"applied": False, "source": "proposer request", "rollouts": 0,
               "reason": "excitation_change of asker at iteration 2 refused: the band is empty after clipping"}
    (top / "active_learning.jsonl").write_text(json.dumps(first) + "\n" + json.dumps(refused) + "\n")
    (top / "active_learning.json").write_text(json.dumps({"rollouts_charged": 60, "design_rollouts": 12,
                                                          "robot_trials": 1, "warning_before": first["warning"],
                                                          "warning_after": None, "designs": [first, refused]}))
    return run


def test_designs_that_were_run_get_a_row_each_with_the_warning_outcome(recommended, tmp_path):
    from vid2sid_ros.report import write_report

    run = _designs_run(tmp_path, recommended[0])
    sec = _section(write_report(run).read_text(encoding="utf-8"))
    rows = re.findall(r"<tr><td class=\"num\">.*?</tr>|<tr><td>.*?</tr>", sec.split("<h3>Designs</h3>")[1], re.S)
    assert len(rows) == 2
    assert "applied: run on the rig (trial t1)" in rows[0] and '<td class="num">12</td>' in rows[0]
    assert "yes: no warning after it" in rows[0]
    assert "refused: excitation_change of asker" in rows[1] and "n/a (not run)" in rows[1]
    assert "Rollouts charged to the budget in all: 60, of which design rollouts 12" in sec
    # no CSV in a run whose designs ran: the profile is built from the record
    assert 'id="designed-profile"' in sec and "the record&#x27;s profile" in sec
    assert "designed_trial.yaml" not in sec


def test_warning_cleared_reads_the_next_check():
    from vid2sid_ros.report.page import _warning_cleared

    designs = [{"applied": True, "warning": "W1"}, {"applied": True, "warning": "W2"}, {"applied": True,
                                                                                       "warning": None}]
    assert _warning_cleared(designs, 0, None) == "no: W2"
    assert _warning_cleared(designs, 1, None) == "yes: no warning after it"
    assert _warning_cleared(designs, 2, {"warning_after": "W3"}) == "no warning before it; after: W3"
    assert _warning_cleared(designs, 2, None) == "not known (no check after it recorded)"
    assert _warning_cleared([{"applied": False, "warning": "W"}], 0, {"warning_after": None}) == "n/a (not run)"


def test_the_designed_trial_pasted_into_the_rig_config_loads(recommended, tmp_path):
    """The saved block, pasted into the rig config's trials as its comment says (its recording's source
    filled in), is a trial the loader accepts: its name was refused ('.' in 'designed_chirp_0.1-4_Hz...')."""
    import yaml

    from vid2sid_ros.rigs import load_rig

    sys.path.insert(0, str(REPO / "bench"))
    import bench_active_learning as bench

    run, _ = recommended
    (entry,) = yaml.safe_load((run / "designed_trial.yaml").read_text())
    entry["source"] = {"sim2sim": {"noise": "keypoint"}}  # the recording of the trial
    (tmp_path / "hinge.xml").write_text(bench.HINGE_XML)
    cfg = bench.hinge_config()
    base = cfg.pop("excitations")["train"][0]
    cfg["trials"] = [{"name": "base", "source": {"sim2sim": {"noise": "keypoint"}}, "excitation": base}, entry]
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump(cfg))
    rig = load_rig(str(tmp_path / "rig.yaml"))
    assert [t.name for t in rig.trials] == ["base", entry["name"]] and entry["name"].startswith("designed_")


def test_a_report_over_its_size_budget_says_so_at_its_top(recommended, tmp_path, monkeypatch):
    """A 12-trial report was 3.7 MB against its 3 MB budget without a word; it now says so and why."""
    import vid2sid_ros.report.page as page_mod
    from vid2sid_ros.report import write_report

    run = _copy(recommended[0], tmp_path / "run")
    page = write_report(run).read_text(encoding="utf-8")
    assert "over its" not in page  # within the budget: nothing said
    monkeypatch.setattr(page_mod, "REPORT_SIZE_BUDGET", 100_000)
    page = write_report(run).read_text(encoding="utf-8")
    warn = re.findall(r'<p class="warn">(This report is [^<]*)</p>', page)
    assert len(warn) == 1 and "over its 0.1 MB budget" in warn[0] and "largest sections: " in warn[0], warn
    assert page.index(warn[0]) < page.index('<section id="summary"')
