"""The API key is redacted in every form a service can echo it in."""

from __future__ import annotations

import base64
import urllib.parse

import pytest

from vid2sid_ros.calibration.proposers.vlm.common import redact

KEY = "sk-live_9fQ2xZr7Lm4pT8vW1yB3nC6dE0gH5jK/+="  # '/', '+', '=' make the URL and base64 forms differ


@pytest.fixture(autouse=True)
def key_in_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


@pytest.mark.parametrize("echo", [
    KEY,
    KEY[:12],  # a prefix (a truncated error body)
    KEY[:8],
    KEY[-10:],  # a suffix
    urllib.parse.quote(KEY, safe=""),
    urllib.parse.quote_plus(KEY),
] + [enc(pre + KEY.encode()).decode()[len(pre) * 2:] for enc in (base64.b64encode, base64.urlsafe_b64encode)
     for pre in (b"", b"a", b"ab", b"abc")])
def test_every_form_of_the_key_is_redacted(echo):
    text = f'HTTP 401: {{"error": "invalid key {echo} in request", "id": 7}}'
    out = redact(text)
    assert "[REDACTED]" in out and out.startswith("HTTP 401") and "in request" in out
    for n in range(8, len(echo) + 1):  # no run of 8 characters of the echo survives
        assert not any(echo[i:i + n] in out for i in range(len(echo) - n + 1))


def test_ordinary_text_is_left_alone():
    text = "the training MAE went 13.077 -> 8.706 px; stiffness 0.465 N*m/rad"
    assert redact(text) == text


def test_a_key_in_a_variable_named_by_api_key_env_is_redacted(monkeypatch):
    """Was: only GEMINI_API_KEY / GOOGLE_API_KEY / OPENAI_API_KEY were redacted; a key the user keeps in
    another variable (``proposer_options.api_key_env``) reached the terminal, run.log, result.json,
    iterations.jsonl and the report whole and in base64."""
    import base64

    from vid2sid_ros.calibration.proposers.vlm.common import redact
    from vid2sid_ros.calibration.proposers.vlm.openai_compat import OpenAICompatibleProposer

    key = "sk-FAKEkey1234567890abcdefSECRET"
    monkeypatch.setenv("LAB_VLM_TOKEN", key)
    echo = f"401: Incorrect API key provided: {key}. b64 {base64.b64encode(key.encode()).decode()} hex {key.encode().hex()}"
    OpenAICompatibleProposer(api_key_env="LAB_VLM_TOKEN", base_url="http://127.0.0.1:9/v1", model="m")
    out = redact(echo)
    assert "FAKEkey" not in out and base64.b64encode(key.encode()).decode()[:12] not in out
    assert key.encode().hex()[:16] not in out and out.count("[REDACTED]") >= 3
