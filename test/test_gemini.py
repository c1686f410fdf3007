"""GeminiProposer without network: requests built with the real SDK types, replies from SDK types.

The model is replaced by :class:`~vid2sid_ros.calibration.proposers.vlm.gemini.ReplayClient` (recorded
responses parsed by ``types.GenerateContentResponse``, errors raised as the SDK's own
``ClientError``/``ServerError``) or, in one test, by the real ``google.genai.Client``
talking to an in-process ``httpx2.MockTransport``.
"""

from __future__ import annotations

import json
import logging
import math

import pytest
from google.genai import errors, types

from vid2sid_ros.calibration.objective import TrialObjective
from vid2sid_ros.calibration.proposers.proposer import IterationRecord, Proposal, ProposalContext
from vid2sid_ros.calibration.proposers.vlm.common import VLMProposalError, redact
from vid2sid_ros.calibration.proposers.vlm.gemini import (
    DEFAULT_PRICES,
    GeminiProposer,
    MissingAPIKeyError,
    RecordingClient,
    ReplayClient,
    estimate_cost_usd,
    make_gemini_or_fallback,
)
from vid2sid_ros.sim.toy import make_rig

TRUTH = {"stiffness": 0.8, "damping": 0.05, "gain": 0.5}
SENTINEL = "AIzaSENTINEL-do-not-leak-0123456789abcdefXYZ"


@pytest.fixture(scope="module")
def toy():
    rig = make_rig()
    twin = rig.make_twin()
    twin.set_parameters(TRUTH)
    real = [twin.rollout(e).trajectory for e in rig.excitations["train"]]
    ev, _ = TrialObjective(rig.make_twin(), rig.excitations["train"], real).evaluate(rig.parameters.nominal())
    return rig, real, ev


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch):
    for v in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(v, raising=False)


def _videos(tmp_path, size=2048):
    """Stand-in mp4 files: the proposer only reads and forwards their bytes."""
    out = {}
    for role in ("real", "sim"):
        p = tmp_path / f"{role}.mp4"
        p.write_bytes(bytes([len(role)]) * size)
        out[role] = p
    return out


def _context(toy, videos=None, history=()):
    rig, real, ev = toy
    return ProposalContext(parameters=rig.parameters, current=dict(ev.values), current_eval=ev, real=real,
                           history=list(history), iteration=len(history), iterations_remaining=3,
                           videos=videos or {}, rig={"name": rig.name, "description": rig.description})


def _reply(params, *, rationale="sim too soft", confidence=0.7, analysis="sim oscillates slower", **more):
    return json.dumps({"analysis": analysis, "parameters": [{"name": k, "value": v} for k, v in params.items()],
                       "rationale": rationale, "confidence": confidence, **more})


def _resp(text, prompt=1200, out=150, thoughts=800):
    """A response built from the SDK's own types, as the service would return it."""
    return {"response": types.GenerateContentResponse(
        candidates=[types.Candidate(content=types.Content(role="model", parts=[types.Part(text=text)]),
                                    finish_reason=types.FinishReason.STOP)],
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=prompt, candidates_token_count=out, thoughts_token_count=thoughts),
    ).model_dump(mode="json", by_alias=True, exclude_none=True)}


def _err(code, message="quota exceeded", retry_delay=None):
    body = {"error": {"code": code, "message": message, "status": "RESOURCE_EXHAUSTED" if code == 429 else "ERR"}}
    if retry_delay:
        body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}]
    return {"error": {"code": code, "body": body}}


class _Sleeps(list):
    def __call__(self, s):
        self.append(s)


class _FixedProposer:
    """Offline fallback used where the reasoner is not the point of the test."""

    name = "fixed"

    def propose(self, context):
        return Proposal(values=dict(TRUTH), rationale="fixed fallback", confidence=0.1, notes=["fixed note"])


def test_request_uses_sdk_types_schema_video_and_thinking(toy, tmp_path):
    client = ReplayClient({"steps": [_resp(_reply(TRUTH))]})
    g = GeminiProposer(client=client, thinking_budget=2048, temperature=0.3, overlay_plot=False, video_fps=4.0)
    assert g.wants_video
    hist = [IterationRecord(0, "gemini", dict(toy[2].values), toy[2].error_px, {}, "gain looks low", 0.4, 2, 1.0)]
    p = g.propose(_context(toy, _videos(tmp_path), hist))
    assert p.values == pytest.approx(TRUTH) and p.rationale == "sim too soft" and p.confidence == 0.7
    (call,) = client.calls
    assert call["model"] == "gemini-2.5-pro"
    cfg = call["config"]
    assert isinstance(cfg, types.GenerateContentConfig)
    assert cfg.response_mime_type == "application/json"
    assert list(cfg.response_schema.model_fields)[:2] == ["analysis", "parameters"]
    assert cfg.thinking_config == types.ThinkingConfig(thinking_budget=2048)
    # the per-request timeout (180 s) is capped by the time left of the 30 s iteration deadline
    assert 25_000 <= cfg.http_options.timeout <= 30_000 and cfg.temperature == 0.3
    (content,) = call["contents"]
    assert isinstance(content, types.Content) and content.role == "user"
    videos = [pt for pt in content.parts if pt.inline_data is not None]
    assert [v.inline_data.mime_type for v in videos] == ["video/mp4", "video/mp4"]
    assert videos[0].inline_data.data == bytes([4]) * 2048 and videos[0].video_metadata.fps == 4.0
    text = "\n".join(pt.text for pt in content.parts if pt.text)
    k = toy[0].parameters["stiffness"]
    assert f"| stiffness | {k.unit} | {k.lower:.6g} | {k.upper:.6g} |" in text and "gain looks low" in text
    assert text.index("[video: real]") < text.index("## Parameters")  # media before the task text
    assert p.extra["media"] == ["video:real", "video:sim"]
    # usage and cost from usage_metadata; cost from the documented price table
    assert p.extra["usage"] == {"prompt_tokens": 1200, "output_tokens": 150, "thinking_tokens": 800,
                                "total_tokens": 2150, "calls": 1}
    assert p.extra["cost_usd"] == pytest.approx((1200 * 1.25 + 950 * 10.0) / 1e6)


def test_text_only_mode_sends_no_video(toy, tmp_path):
    client = ReplayClient({"steps": [_resp(_reply(TRUTH, analysis=None))]})
    g = GeminiProposer(client=client, video=False, chain_of_thought=False, overlay_plot=False)
    assert not g.wants_video
    p = g.propose(_context(toy, _videos(tmp_path)))
    parts = client.calls[0]["contents"][0].parts
    assert all(pt.inline_data is None and pt.file_data is None for pt in parts)
    assert "none (text-only mode)" in parts[-1].text
    assert "analysis" not in client.calls[0]["config"].response_schema.model_fields
    assert client.calls[0]["config"].thinking_config is None
    assert p.values == pytest.approx(TRUTH) and "analysis" not in p.extra


def test_large_videos_go_through_files_api_with_polling(toy, tmp_path):
    client = ReplayClient({"files": {"polls_until_active": 2}, "steps": [_resp(_reply(TRUTH))] * 2})
    sleeps = _Sleeps()
    g = GeminiProposer(client=client, inline_max_bytes=1000, overlay_plot=False, sleep=sleeps, upload_poll_s=0.5)
    vids = _videos(tmp_path, size=4096)
    g.propose(_context(toy, vids))
    assert [u["config"].mime_type for u in client.uploads] == ["video/mp4", "video/mp4"]
    assert client.gets == ["files/replay-1", "files/replay-1", "files/replay-2", "files/replay-2"]
    assert sleeps == [0.5] * 4
    parts = client.calls[0]["contents"][0].parts
    uris = [pt.file_data.file_uri for pt in parts if pt.file_data is not None]
    assert uris == ["https://generativelanguage.googleapis.com/v1beta/files/replay-1",
                    "https://generativelanguage.googleapis.com/v1beta/files/replay-2"]
    assert not any(pt.inline_data is not None for pt in parts)
    g.propose(_context(toy, vids))  # unchanged files are not uploaded again
    assert len(client.uploads) == 2
    g.close()
    assert client.deleted == ["files/replay-1", "files/replay-2"]


def test_upload_timeout_drops_video_and_carries_on(toy, tmp_path):
    now = [0.0]

    def sleep(s):
        now[0] += s

    client = ReplayClient({"files": {"polls_until_active": 1000}, "steps": [_resp(_reply(TRUTH))]})
    g = GeminiProposer(client=client, inline_max_bytes=10, overlay_plot=False, sleep=sleep, clock=lambda: now[0],
                       upload_timeout_s=6.0, upload_poll_s=2.0)
    p = g.propose(_context(toy, _videos(tmp_path)))
    assert p.values == pytest.approx(TRUTH)
    assert any("real video: upload failed" in n and "not ACTIVE after 6 s" in n for n in p.notes)
    assert all(pt.file_data is None for pt in client.calls[0]["contents"][0].parts)


def test_validation_clamps_reasks_and_records(toy):
    rig = toy[0]
    bad_then_good = [
        _resp("Sure! Here are my thoughts: the sim is too soft."),                       # not JSON -> re-ask
        _resp(_reply({"stiffness": float("nan"), "damping": 0.05, "spring": 3.0})),       # NaN + unknown -> re-ask
        _resp(_reply({"stiffness": 7.5, "damping": 0.05}, confidence=1.7)),               # clamp, missing gain
    ]
    client = ReplayClient({"steps": bad_then_good})
    g = GeminiProposer(client=client, video=False, overlay_plot=False, max_reasks=2)
    ctx = _context(toy)
    p = g.propose(ctx)
    k = rig.parameters["stiffness"]
    assert 7.5 > k.upper  # the recorded reply is out of bounds
    assert p.values == {"stiffness": k.upper, "damping": 0.05, "gain": ctx.current["gain"]}
    assert p.confidence == 1.0 and p.extra["reasks"] == 2
    notes = "\n".join(p.notes)
    assert "reply 1 unusable: the reply is not a JSON object" in notes
    assert "unknown parameter 'spring' ignored" in notes and "'stiffness': value nan is not a finite number" in notes
    assert f"'stiffness': 7.5 {k.unit} outside [{k.lower:.6g}, {k.upper:.6g}]; clamped to {k.upper:.6g}" in notes
    assert "no value for gain; kept current value(s)" in notes
    # the re-ask is a multi-turn conversation: bad reply as model turn, problems as user turn
    third = client.calls[2]["contents"]
    assert [c.role for c in third] == ["user", "model", "user", "model", "user"]
    assert "unknown parameter 'spring'" in third[4].parts[0].text
    assert p.extra["usage"]["calls"] == 3 and p.extra["usage"]["prompt_tokens"] == 3600
    assert set(p.values) == set(rig.parameters.free_names)


def test_unusable_replies_exhaust_reasks_then_fallback(toy):
    client = ReplayClient({"steps": [_resp("not json")] * 2})
    g = GeminiProposer(client=client, video=False, overlay_plot=False, max_reasks=1)
    with pytest.raises(VLMProposalError, match="not a JSON object"):
        g.propose(_context(toy))
    client = ReplayClient({"steps": [_resp("{}"), _resp('{"parameters": "none"}')]})
    g = GeminiProposer(client=client, video=False, overlay_plot=False, max_reasks=1, fallback=_FixedProposer())
    p = g.propose(_context(toy))
    assert p.values == TRUTH and p.rationale == "fixed fallback"
    assert p.extra["fallback"]["from"] == "gemini" and p.extra["proposed_by"] == "fixed"
    assert "no 'parameters' list" in p.extra["fallback"]["reason"] and p.extra["usage"]["calls"] == 2


def test_429_backoff_uses_sdk_client_error_and_retry_info(toy):
    client = ReplayClient({"steps": [_err(429, retry_delay="7s"), _err(503), _resp(_reply(TRUTH))]})
    sleeps = _Sleeps()
    g = GeminiProposer(client=client, video=False, overlay_plot=False, sleep=sleeps, initial_backoff_s=1.0)
    p = g.propose(_context(toy))
    assert p.values == pytest.approx(TRUTH)
    assert sleeps == [7.0, 2.0]  # server's RetryInfo, then 1 s * 2**1
    assert [e["code"] for e in p.extra["service_errors"]] == [429, 503]
    assert "ClientError: 429 RESOURCE_EXHAUSTED" in p.extra["service_errors"][0]["error"]
    # the replay raises the SDK's real classes
    with pytest.raises(errors.ClientError) as info:
        ReplayClient({"steps": [_err(429)]}).models.generate_content(model="m", contents="x")
    assert info.value.code == 429


def test_service_keeps_failing_falls_back_non_retryable_at_once(toy):
    sleeps = _Sleeps()
    client = ReplayClient({"steps": [_err(500)] * 3})
    g = GeminiProposer(client=client, video=False, overlay_plot=False, sleep=sleeps, max_retries=2,
                       fallback=_FixedProposer())
    p = g.propose(_context(toy))
    assert len(client.calls) == 3 and sleeps == [2.0, 4.0]
    assert "gave up after 3 attempt(s)" in p.extra["fallback"]["reason"] and p.notes[-1] == "fixed note"
    client = ReplayClient({"steps": [_err(400, "bad schema")]})
    g = GeminiProposer(client=client, video=False, overlay_plot=False, sleep=sleeps, fallback=_FixedProposer())
    p = g.propose(_context(toy))
    assert len(client.calls) == 1 and "non-retryable error" in p.extra["fallback"]["reason"]
    # a refused request (bad key, bad request) is not repeated in later iterations
    p = g.propose(_context(toy))
    assert len(client.calls) == 1 and p.extra["fallback"]["reason"].startswith("service refused an earlier request")
    assert not g.wants_video


def test_active_learning_switch(toy):
    req = {"amplitude_gain": 9.0, "frequency_low_hz": 0.5, "frequency_high_hz": 4.0, "reason": "excite resonance"}
    on = GeminiProposer(client=ReplayClient({"steps": [_resp(_reply(TRUTH, excitation_change=req))]}),
                        video=False, overlay_plot=False, active_learning=True)
    p = on.propose(_context(toy))
    assert p.excitation_change == {"amplitude_gain": 4.0, "frequency_low_hz": 0.5, "frequency_high_hz": 4.0}
    assert any("amplitude_gain 9 clamped to 4" in n for n in p.notes)
    off = GeminiProposer(client=ReplayClient({"steps": [_resp(_reply(TRUTH, excitation_change=req))]}),
                         video=False, overlay_plot=False, active_learning=False)
    p = off.propose(_context(toy))
    assert p.excitation_change is None and any("active learning is off" in n for n in p.notes)


def test_missing_key_one_line_error_and_fallback(toy, caplog):
    with pytest.raises(MissingAPIKeyError) as info:
        GeminiProposer()
    msg = str(info.value)
    assert "\n" not in msg and "GEMINI_API_KEY" in msg and "--fallback reasoner" in msg
    with pytest.raises(MissingAPIKeyError):
        make_gemini_or_fallback(fallback=None)
    with caplog.at_level(logging.WARNING):
        g = make_gemini_or_fallback(fallback=_FixedProposer())
    assert "calibrating offline with 'fixed'" in caplog.text
    assert not g.wants_video
    p = g.propose(_context(toy))
    assert p.values == TRUTH
    assert p.extra["fallback"] == {"from": "gemini", "to": "fixed",
                                   "reason": "no API key (GEMINI_API_KEY / GOOGLE_API_KEY unset)"}
    with pytest.raises(TypeError, match="takes no api_key"):
        GeminiProposer(api_key="x")
    with pytest.raises(TypeError, match="unknown option"):
        GeminiProposer(client=ReplayClient({"steps": []}), modle="gemini-2.5-flash")


def test_key_in_sdk_error_is_redacted(toy, monkeypatch, caplog, capsys):
    monkeypatch.setenv("GEMINI_API_KEY", SENTINEL)
    steps = [_err(503, f"backend rejected https://x/v1beta?key={SENTINEL}"), _err(403, f"API key {SENTINEL} invalid")]
    g = GeminiProposer(client=ReplayClient({"steps": steps}), video=False, overlay_plot=False, sleep=lambda s: None,
                       fallback=_FixedProposer())
    with caplog.at_level(logging.DEBUG):
        p = g.propose(_context(toy))
    out = capsys.readouterr()
    dumped = json.dumps({"notes": p.notes, "extra": p.extra}, default=str)
    assert "403" in dumped and "[REDACTED]" in dumped
    for text in (dumped, caplog.text, out.out, out.err, repr(g)):
        assert SENTINEL not in text and "AIzaSENTINEL" not in text
    assert redact("x-goog-api-key: AIzaSyA1234567890123456789012345678901234") == "x-goog-api-key: [REDACTED]"
    assert redact('{"key": "AIzaSyA1234567890123456789012345678901234"}') == '{"key": "[REDACTED]"}'
    assert redact("GET /v1beta/models?key=abc123xyz&alt=json") == "GET /v1beta/models?key=[REDACTED]&alt=json"


def test_real_sdk_client_over_mock_transport(toy, monkeypatch, caplog):
    """The real google.genai.Client serialises our request; a 429 from the wire is retried."""
    httpx2 = pytest.importorskip("httpx2", reason="google-genai's HTTP client; needed for an offline transport")
    from google import genai

    monkeypatch.setenv("GEMINI_API_KEY", SENTINEL)
    seen = []
    answers = [(429, {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}),
               (200, json.loads(json.dumps(_resp(_reply(TRUTH))["response"])))]

    def handler(request):
        seen.append((request.headers.get("x-goog-api-key"), json.loads(request.content)))
        code, body = answers.pop(0)
        return httpx2.Response(code, json=body)

    client = genai.Client(http_options=types.HttpOptions(
        httpx_client=httpx2.Client(transport=httpx2.MockTransport(handler))))
    sleeps = _Sleeps()
    g = GeminiProposer(client=client, thinking_budget=128, overlay_plot=False, video=False, sleep=sleeps)
    with caplog.at_level(logging.DEBUG):
        p = g.propose(_context(toy))
    assert p.values == pytest.approx(TRUTH) and sleeps == [2.0] and len(seen) == 2
    key, body = seen[1]
    assert key == SENTINEL  # the SDK sends it; we never see or store it
    gen = body["generationConfig"]
    assert gen["responseMimeType"] == "application/json"
    schema = gen["responseSchema"]
    assert schema["properties"]["parameters"]["type"] == "ARRAY"
    assert schema["properties"]["parameters"]["items"]["required"] == ["name", "value"]
    assert schema["properties"]["confidence"]["maximum"] == 1.0
    assert gen["thinkingConfig"] == {"thinking_budget": 128} or gen["thinkingConfig"] == {"thinkingBudget": 128}
    assert "stiffness" in body["contents"][0]["parts"][-1]["text"]
    assert SENTINEL not in caplog.text and SENTINEL not in json.dumps(p.extra, default=str)


def test_recording_client_writes_a_replayable_redacted_session(toy, monkeypatch, tmp_path):
    httpx2 = pytest.importorskip("httpx2", reason="google-genai's HTTP client; needed for an offline transport")
    from google import genai

    monkeypatch.setenv("GEMINI_API_KEY", SENTINEL)
    answers = [(503, {"error": {"code": 503, "message": f"overloaded (key={SENTINEL})", "status": "UNAVAILABLE"}}),
               (200, _resp(_reply(TRUTH))["response"])]

    def handler(request):
        code, body = answers.pop(0)
        return httpx2.Response(code, json=body)

    client = genai.Client(http_options=types.HttpOptions(httpx_client=httpx2.Client(
        transport=httpx2.MockTransport(handler))))
    path = tmp_path / "recorded.json"
    rec = GeminiProposer(client=RecordingClient(client, path, model="gemini-2.5-pro"), video=False,
                         overlay_plot=False, sleep=lambda s: None).propose(_context(toy))
    saved = path.read_text()
    assert SENTINEL not in saved and "overloaded (key=[REDACTED])" in saved
    replay = ReplayClient(path)
    again = GeminiProposer(client=replay, video=False, overlay_plot=False, sleep=lambda s: None).propose(_context(toy))
    assert replay.remaining == 0 and again.values == rec.values == pytest.approx(TRUTH)
    assert again.extra["usage"] == rec.extra["usage"] and again.extra["service_errors"][0]["code"] == 503


def test_price_table():
    assert estimate_cost_usd("gemini-2.5-pro", 100_000, 10_000) == pytest.approx(0.1 * 1.25 + 0.01 * 10.0)
    assert estimate_cost_usd("gemini-2.5-pro", 300_000, 100_000) == pytest.approx(0.3 * 2.5 + 0.1 * 15.0)
    assert estimate_cost_usd("models/gemini-2.5-flash-lite-preview", 1_000_000, 1_000_000) == pytest.approx(0.5)
    assert estimate_cost_usd("gemini-2.5-flash", 0, 500_000, 500_000) == pytest.approx(2.5)
    assert estimate_cost_usd("some-local-model", 10, 10) is None
    assert set(DEFAULT_PRICES) >= {"gemini-2.5-pro", "gemini-2.5-flash"}
    assert math.isclose(DEFAULT_PRICES["gemini-2.5-pro"].cost(200_001, 0), 200_001 * 2.5 / 1e6)
