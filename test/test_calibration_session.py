"""calibration.session: the calibrator node's request logic without ROS (trial choice, resume point, notes)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from vid2sid_ros.calibration.session import SessionRequestError, choose_trials, result_notes, session_start


def test_choose_trials_latest_all_and_named():
    assert choose_trials("", ["a", "b", "c"], {"a", "b", "c"}, "latest") == ["c"]
    assert choose_trials("", ["a", "b", "c"], {"a", "b", "c"}, "all") == ["a", "b", "c"]
    assert choose_trials("d", ["a"], {"a", "d"}, "latest") == ["d"]  # a designed trial may be named


def test_choose_trials_refusals_name_the_trial_and_what_exists():
    with pytest.raises(SessionRequestError, match=r"no real trajectory for trial 'x'; trials with one: a, b"):
        choose_trials("x", ["a", "b"], {"a", "b"}, "latest")
    with pytest.raises(SessionRequestError, match="no real trajectory yet"):
        choose_trials("", [], set(), "all")


def test_session_start_fresh_keeps_only_calibrated_names(tmp_path):
    at = session_start(tmp_path / "s", {"k": 2.0, "other": 1.0}, {"k", "c"})
    assert (at.resume, at.done, at.fresh, at.start) == (False, 0, True, {"k": 2.0})
    assert at.start_file == tmp_path / "s" / "session_start.json"


def test_session_start_resume_reads_the_saved_start(tmp_path, monkeypatch):
    run = tmp_path / "s"
    run.mkdir()
    (run / "run.json").write_text("{}")
    (run / "session_start.json").write_text(json.dumps({"k": 3.5}))
    import vid2sid_ros.calibration.loop as loop

    monkeypatch.setattr(loop, "load_history", lambda d: [object()] * 4)  # iteration 0 + 3 proposals
    at = session_start(run, {"k": 9.0}, {"k"})
    assert (at.resume, at.done, at.fresh, at.start) == (True, 3, False, {"k": 3.5})


def _result(**kw):
    last = SimpleNamespace(notes=kw.pop("notes", []))
    base = dict(history=[None, None, last], error_px=1.5, initial_error_px=4.0, unit="px", stopped="budget",
                status="ok", best_proposer="reasoner", best_iteration=2, diagnosis=None)
    return SimpleNamespace(**{**base, **kw})


def test_result_notes_order():
    notes = result_notes(_result(notes=["n1", "n2"], best_proposer="random", diagnosis={"text": "latency"}),
                         "reasoner")
    assert notes[0] == "latency"
    assert notes[1].startswith("best of 2 iteration(s): 1.5") and "stopped: budget" in notes[1]
    assert notes[2] == "best values proposed by 'random' (iteration 2)"
    assert notes[3] == "n1; n2"
    failed = result_notes(_result(status="no_proposal"), "reasoner")
    assert failed[0] == "status no_proposal: no proposal was made, nothing was calibrated" and len(failed) == 2
