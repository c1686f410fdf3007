"""OpenAI-compatible VLM proposer without network: a recording transport stands in for the server."""

from __future__ import annotations

import base64
import io
import json
import logging
import urllib.error
from email.message import Message

import cv2
import numpy as np
import pytest

from vid2sid_ros.calibration.objective import TrialObjective
from vid2sid_ros.calibration.proposers.proposer import Proposal, ProposalContext
from vid2sid_ros.calibration.proposers.vlm import openai_compat
from vid2sid_ros.calibration.proposers.vlm.common import VLMProposalError
from vid2sid_ros.calibration.proposers.vlm.openai_compat import (HTTPStatusError, OpenAICompatibleProposer,
                                                                 urllib_transport)
from vid2sid_ros.sim.toy import make_rig

TRUTH = {"stiffness": 0.8, "damping": 0.05, "gain": 0.5}
SECRET = "sk-SENTINEL-openai-0123456789abcdef"


@pytest.fixture(scope="module")
def toy():
    rig = make_rig()
    twin = rig.make_twin()
    twin.set_parameters(TRUTH)
    real = [twin.rollout(e).trajectory for e in rig.excitations["train"]]
    ev, _ = TrialObjective(rig.make_twin(), rig.excitations["train"], real).evaluate(rig.parameters.nominal())
    return rig, real, ev


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    """Two short synthetic clips (a moving disc), 12 frames of 64 x 48 px."""
    d = tmp_path_factory.mktemp("oa")
    out = {}
    for role, colour in (("real", (0, 0, 255)), ("sim", (0, 255, 0))):
        path = d / f"{role}.mp4"
        w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 30.0, (64, 48))
        for t in range(12):
            f = np.zeros((48, 64, 3), np.uint8)
            cv2.circle(f, (8 + 4 * t, 24), 5, colour, -1)
            w.write(f)
        w.release()
        out[role] = path
    return out


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _context(toy, videos=None):
    rig, real, ev = toy
    return ProposalContext(parameters=rig.parameters, current=dict(ev.values), current_eval=ev, real=real,
                           iteration=1, iterations_remaining=4, videos=videos or {},
                           rig={"name": rig.name, "description": rig.description})


def _answer(params, confidence=0.6, usage=None):
    content = json.dumps({"analysis": "faster in real", "parameters": [{"name": k, "value": v} for k, v in params.items()],
                          "rationale": "stiffer spring", "confidence": confidence})
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}],
                       "usage": usage or {"prompt_tokens": 900, "completion_tokens": 300,
                                          "completion_tokens_details": {"reasoning_tokens": 200}}}).encode()


class Transport:
    """Records requests; answers from a script of bytes or exceptions."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []

    def __call__(self, url, body, headers, timeout_s):
        self.requests.append({"url": url, "body": json.loads(body), "headers": dict(headers), "timeout": timeout_s})
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


def test_request_has_schema_key_frames_and_prompt(toy, videos):
    tr = Transport([_answer(TRUTH)])
    p = OpenAICompatibleProposer(base_url="http://127.0.0.1:8000/v1/", model="qwen2.5-vl-7b", transport=tr,
                                 key_frames=3, overlay_plot=False, timeout_s=42.0, deadline_s=60.0)
    assert p.wants_video
    prop = p.propose(_context(toy, videos))
    assert prop.values == pytest.approx(TRUTH) and prop.rationale == "stiffer spring"
    (req,) = tr.requests
    # the per-request timeout (42 s) fits in the 60 s iteration deadline, so it is kept
    assert req["url"] == "http://127.0.0.1:8000/v1/chat/completions" and req["timeout"] == 42.0
    assert "Authorization" not in req["headers"]
    body = req["body"]
    assert body["model"] == "qwen2.5-vl-7b" and body["temperature"] == 0.2
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["properties"]["parameters"]["type"] == "array"
    assert list(fmt["json_schema"]["schema"]["properties"])[0] == "analysis"
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    images = [c["image_url"]["url"] for c in user["content"] if c["type"] == "image_url"]
    assert len(images) == 3 and all(u.startswith("data:image/jpeg;base64,") for u in images)
    frame = cv2.imdecode(np.frombuffer(base64.b64decode(images[0].split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
    assert frame.shape == (48, 128, 3)  # real | sim side by side
    assert not any(c["type"] not in ("text", "image_url") for c in user["content"])
    text = user["content"][-1]["text"]
    k = toy[0].parameters["stiffness"]
    assert f"| stiffness | {k.unit} | {k.lower:.6g} | {k.upper:.6g} |" in text
    # usage: reasoning tokens are part of completion_tokens in the OpenAI format
    assert prop.extra["usage"] == {"prompt_tokens": 900, "output_tokens": 100, "thinking_tokens": 200,
                                   "total_tokens": 1200, "calls": 1}
    assert prop.extra["cost_usd"] is None and prop.extra["model"] == "qwen2.5-vl-7b"


def test_text_only_json_object_and_shared_validation(toy, videos):
    tr = Transport([_answer({"stiffness": 50.0, "damping": 0.05, "gain": 0.5}, confidence=-1)])
    p = OpenAICompatibleProposer(transport=tr, video=False, overlay_plot=False, response_format="json_object",
                                 price_input_per_mtok=1.0, price_output_per_mtok=2.0, temperature=None)
    assert not p.wants_video
    prop = p.propose(_context(toy, videos))
    body = tr.requests[0]["body"]
    assert body["response_format"] == {"type": "json_object"} and "temperature" not in body
    assert all(c["type"] == "text" for c in body["messages"][1]["content"])
    k = toy[0].parameters["stiffness"]
    assert prop.values["stiffness"] == k.upper and prop.confidence == 0.0
    assert any(f"'stiffness': 50 {k.unit} outside" in n for n in prop.notes)
    assert prop.extra["cost_usd"] == pytest.approx((900 * 1.0 + 300 * 2.0) / 1e6)


def test_retry_after_then_success_and_reask(toy):
    tr = Transport([HTTPStatusError(429, "busy", retry_after_s=3.0),
                    json.dumps({"choices": [{"message": {"content": "I think stiffness should go up."}}]}).encode(),
                    _answer(TRUTH)])
    sleeps = []
    p = OpenAICompatibleProposer(transport=tr, video=False, overlay_plot=False, sleep=sleeps.append)
    prop = p.propose(_context(toy))
    assert sleeps == [3.0] and prop.values == pytest.approx(TRUTH) and prop.extra["reasks"] == 1
    third = tr.requests[2]["body"]["messages"]
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user"]
    assert third[2]["content"] == "I think stiffness should go up."
    assert "not a JSON object" in third[3]["content"]


def test_server_down_fallback_and_key_never_recorded(toy, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)

    class Fixed:
        name = "fixed"

        def propose(self, context):
            return Proposal(values=dict(TRUTH), rationale="offline", confidence=0.2)

    err = HTTPStatusError(503, f"overloaded; your key {SECRET} is fine")
    tr = Transport([err, err, ConnectionRefusedError("connection refused")])
    p = OpenAICompatibleProposer(transport=tr, video=False, overlay_plot=False, sleep=lambda s: None, max_retries=2,
                                 fallback=Fixed())
    with caplog.at_level(logging.DEBUG):
        prop = p.propose(_context(toy))
    assert tr.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert prop.rationale == "offline" and "gave up after 3 attempt(s)" in prop.extra["fallback"]["reason"]
    dumped = json.dumps({"notes": prop.notes, "extra": prop.extra})
    assert "503" in dumped and SECRET not in dumped and SECRET not in caplog.text
    tr = Transport([HTTPStatusError(404, "no such model")])
    with pytest.raises(VLMProposalError, match="non-retryable error.*HTTP 404"):
        OpenAICompatibleProposer(transport=tr, video=False, overlay_plot=False).propose(_context(toy))


def test_urllib_transport_maps_http_errors(monkeypatch):
    hdrs = Message()
    hdrs["Retry-After"] = "5"

    def fake_urlopen(req, timeout):
        assert req.full_url == "http://127.0.0.1:9/v1/chat/completions" and timeout == 1.5
        assert req.get_header("Content-type") == "application/json"
        raise urllib.error.HTTPError(req.full_url, 429, "Too Many Requests", hdrs, io.BytesIO(b'{"error": "slow"}'))

    monkeypatch.setattr(openai_compat.urllib.request, "urlopen", fake_urlopen)
    with pytest.raises(HTTPStatusError) as info:
        urllib_transport("http://127.0.0.1:9/v1/chat/completions", b"{}", {"Content-Type": "application/json"}, 1.5)
    assert info.value.code == 429 and info.value.retry_after_s == 5.0 and "slow" in info.value.body


def test_config_errors():
    with pytest.raises(ValueError, match="response_format must be one of"):
        OpenAICompatibleProposer(response_format="xml")
    with pytest.raises(ValueError, match="base_url must start with http"):
        OpenAICompatibleProposer(base_url="localhost:8000")
    with pytest.raises(TypeError, match="takes no api_key"):
        OpenAICompatibleProposer(api_key="k")
