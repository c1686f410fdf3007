"""The API key is redacted in every form a service can echo it in."""

from __future__ import annotations

import base64
import urllib.parse

import pytest

from vid2sid_ros.calibration.vlm_common import redact

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
