"""A full 3-iteration calibration of the toy arm with Gemini replayed from a recorded session.

No network: ``test/data/gemini/toy_session.json`` holds the service's answers (SDK
``GenerateContentResponse`` wire format, a 429 error body). The session includes a reply
cut off at MAX_TOKENS (re-asked), a 429 RESOURCE_EXHAUSTED (retried after the server's
RetryInfo delay) and an out-of-bounds value (clamped). A sentinel API key sits in the
environment throughout and must not appear in logs, output or any file of the run.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers.vlm.gemini import (GeminiProposer, ReplayClient, estimate_cost_usd,
                                                          make_gemini_or_fallback)
from vid2sid_ros.sim.toy import make_rig

DATA = Path(__file__).parent / "data" / "gemini"
TRUTH = {"stiffness": 0.8, "damping": 0.05, "gain": 0.5}
SENTINEL = "AIzaSENTINEL-loop-key-0123456789abcdefXYZ"


def _grep_run_dir(run_dir: Path, needle: str) -> list[str]:
    return [str(p) for p in run_dir.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.fixture(scope="module")
def toy_trial():
    rig = make_rig()
    return rig, make_sim2sim_trial(rig, TRUTH, noise="none")


def test_three_iteration_calibration_from_recorded_session(toy_trial, tmp_path, monkeypatch, caplog, capsys):
    monkeypatch.setenv("GEMINI_API_KEY", SENTINEL)
    rig, real = toy_trial
    client = ReplayClient(DATA / "toy_session.json")
    sleeps: list[float] = []
    g = GeminiProposer(client=client, sleep=sleeps.append, thinking_budget=4096, overlay_plot=False)
    cfg = CalibrationConfig(iterations=3, rollout_budget=None, identifiability=False, final_identifiability=False)
    run_dir = tmp_path / "run"
    with caplog.at_level(logging.DEBUG, logger="vid2sid_ros"), caplog.at_level(logging.DEBUG, logger="google_genai"):
        result = run_calibration(rig, real, g, cfg, run_dir)

    # the whole recorded session was consumed: 2 calls (re-ask), 2 calls (429 + retry), 1 call
    assert client.remaining == 0 and len(client.calls) == 5 and sleeps == [2.0]
    recs = [json.loads(line) for line in (run_dir / "iterations.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in recs] == [1, 2, 3] and {r["proposer"] for r in recs} == {"gemini"}

    r1, r2, r3 = recs
    free = lambda r: {k: r["values"][k] for k in TRUTH}  # noqa: E731 - records hold every parameter
    assert free(r1) == pytest.approx({"stiffness": 0.7, "damping": 0.03, "gain": 0.45})
    assert any("reply cut short (finish reason MAX_TOKENS)" in n for n in r1["notes"])
    assert r1["extra"]["reasks"] == 1 and r1["extra"]["usage"]["calls"] == 2
    assert r1["extra"]["usage"]["prompt_tokens"] == 5210 + 5420
    assert r1["extra"]["usage"]["thinking_tokens"] == 1900 + 2450
    assert r1["extra"]["cost_usd"] == pytest.approx(
        estimate_cost_usd("gemini-2.5-pro", 5210 + 5420, 64 + 310, 1900 + 2450), abs=1e-6)
    assert r1["extra"]["thinking_budget"] == 4096 and r1["extra"]["model"] == "gemini-2.5-pro"
    assert set(r1["extra"]["diagnosis"]) == {"stiffness", "gain", "damping"}
    # the measured sentences lead (one per parameter moved, with the numbers); the model's own words follow
    lead, _, own = r1["rationale"].partition(" Trace: ")
    assert lead.startswith("Raising stiffness 0.4 N·m/rad → 0.7 N·m/rad (+75.0 %). Raising damping")
    assert f"The training MAE went {result.initial_error_px:.3f} px → {r1['error_px']:.3f} px" in lead
    assert own.startswith("Raise stiffness") and r1["confidence"] == 0.6

    d = rig.parameters["damping"]
    assert d.upper < 0.35 and r2["values"]["damping"] == d.upper  # the recorded reply proposed 0.35
    assert any(f"'damping': 0.35 {d.unit} outside [{d.lower:.6g}, {d.upper:.6g}]; clamped to {d.upper:.6g}" in n
               for n in r2["notes"])
    assert [e["code"] for e in r2["extra"]["service_errors"]] == [429] and r2["extra"]["reasks"] == 0

    assert free(r3) == pytest.approx(TRUTH) and r3["error_px"] < 1e-9
    assert result.values["stiffness"] == pytest.approx(0.8) and result.error_px < 1e-9
    assert result.initial_error_px > 5.0 and r1["error_px"] < result.initial_error_px

    # each request carried bounds, metrics and the history with earlier rationales
    first_text = client.calls[0]["contents"][0].parts[-1].text
    assert f"| damping | {d.unit} | {d.lower:.6g} | {d.upper:.6g} |" in first_text
    assert f"overall trajectory MAE: {result.initial_error_px:.6g} px" in first_text
    last_text = client.calls[4]["contents"][0].parts[-1].text
    assert "Much more damping to kill the residual ringing" in last_text and f"damping={d.upper:.6g}" in last_text
    assert f"MAE {r2['error_px']:.6g} px" in last_text
    # the loop rendered the paired videos; they went inline (small) as video/mp4 parts
    vids = r1["extra"]["videos"]
    parts = client.calls[0]["contents"][0].parts
    inline = [pt.inline_data for pt in parts if pt.inline_data is not None]
    assert [b.mime_type for b in inline] == ["video/mp4", "video/mp4"]
    assert inline[0].data == Path(vids["real"]).read_bytes() and inline[1].data == Path(vids["sim"]).read_bytes()
    assert r1["extra"]["media"] == ["video:real", "video:sim"]
    # the re-ask went out as a conversation after the truncated reply
    assert [c.role for c in client.calls[1]["contents"]] == ["user", "model", "user"]

    # the key never leaks: logs, console, every file of the run
    out = capsys.readouterr()
    for text in (caplog.text, out.out, out.err):
        assert SENTINEL not in text
    assert _grep_run_dir(run_dir, SENTINEL) == []
    assert (run_dir / "result.yaml").is_file()


def test_refused_key_falls_back_to_reasoner_and_never_leaks(toy_trial, tmp_path, monkeypatch, caplog, capsys):
    """The SDK's error message quotes the key; the run must carry on with the reasoner and record why."""
    monkeypatch.setenv("GEMINI_API_KEY", SENTINEL)
    rig, real = toy_trial
    body = {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                      "message": f"API key not valid. Please pass a valid API key. (key={SENTINEL})",
                      "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                                   "metadata": {"key": SENTINEL}}]}}
    client = ReplayClient({"steps": [{"error": {"code": 400, "body": body}}]})
    g = make_gemini_or_fallback(fallback="reasoner", client=client, overlay_plot=False)
    # the fallback reasoner converges in iteration 1; keep going to see iteration 2 skip the refused service
    cfg = CalibrationConfig(iterations=2, rollout_budget=None, identifiability=False, final_identifiability=False,
                            stop_when_converged=False)
    run_dir = tmp_path / "run"
    with caplog.at_level(logging.DEBUG, logger="vid2sid_ros"), caplog.at_level(logging.DEBUG, logger="google_genai"):
        result = run_calibration(rig, real, g, cfg, run_dir)
    assert len(client.calls) == 1  # the refused request is not repeated
    recs = [json.loads(line) for line in (run_dir / "iterations.jsonl").read_text().splitlines()]
    # the record names the proposer that made the proposal (issue 12 item 2), the requested one beside it
    assert [r["proposer"] for r in recs] == ["reasoner", "reasoner"]
    assert all(r["extra"]["requested_proposer"] == "gemini" for r in recs)
    for r in recs:
        assert r["extra"]["proposed_by"] == "reasoner" and r["extra"]["fallback"]["to"] == "reasoner"
        assert any("fallback 'reasoner'" in n for n in r["notes"]) and r["rationale"]
    assert "400 INVALID_ARGUMENT" in recs[0]["extra"]["fallback"]["reason"]
    assert recs[1]["extra"]["fallback"]["reason"].startswith("service refused an earlier request")
    assert result.error_px < result.initial_error_px  # the offline reasoner carried the calibration on
    from vid2sid_ros.report import write_report

    report = write_report(run_dir)  # rationales, notes, videos of the run
    html = report.read_text()
    assert "[REDACTED]" in html  # the scrubbed error message is shown, not the key
    # the iteration table names the proposer that proposed (issue 12 item 2), not the requested one
    assert '<td class="num">1</td><td>reasoner</td>' in html and '<td class="num">2</td><td>reasoner</td>' in html
    out = capsys.readouterr()
    for text in (caplog.text, out.out, out.err):
        assert SENTINEL not in text
    assert "[REDACTED]" in caplog.text
    assert _grep_run_dir(run_dir, SENTINEL) == [] and _grep_run_dir(run_dir, "AIzaSENTINEL") == []
