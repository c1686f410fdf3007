"""``vid2sid calibrate --proposer gemini`` without an API key: one line, or offline with ``--fallback``."""

from __future__ import annotations

import json

import pytest

from vid2sid_ros.cli import main

CONFIG = """\
rig: toy
real:
  sim2sim: {truth: {stiffness: 0.8, damping: 0.05, gain: 0.5}, noise: none}
calibration: {iterations: 1, rollout_budget: null, identifiability: false, final_identifiability: false}
proposer_options: {overlay_plot: false}
"""


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch):
    for v in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(v, raising=False)


def test_missing_key_is_one_line_then_fallback_carries_on(tmp_path, capsys):
    cfg = tmp_path / "toy.yaml"
    cfg.write_text(CONFIG)
    rc = main(["calibrate", str(cfg), "--proposer", "gemini", "--out", str(tmp_path / "nokey"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip().count("\n") == 0 and "GEMINI_API_KEY" in err and "--fallback reasoner" in err
    assert "Traceback" not in err

    out_dir = tmp_path / "offline"
    rc = main(["calibrate", str(cfg), "--proposer", "gemini", "--fallback", "reasoner", "--out", str(out_dir)])
    out = capsys.readouterr().out
    assert rc == 0
    (rec,) = [json.loads(line) for line in (out_dir / "iterations.jsonl").read_text().splitlines()]
    assert rec["extra"]["fallback"] == {"from": "gemini", "to": "reasoner",
                                        "reason": "no API key (GEMINI_API_KEY / GOOGLE_API_KEY unset)"}
    assert rec["extra"]["proposed_by"] == "reasoner" and rec["error_px"] < 5.0
    assert out.count("proposal made by fallback 'reasoner'") == 1  # the note, once
    assert "iter  1/1  error" in out and "(by fallback 'reasoner')" in out
