"""A VLM proposer for any OpenAI-compatible ``/chat/completions`` server.

Lets a lab run the calibrator against a local vision-language model (vLLM, llama.cpp
server, Ollama, LM Studio, ...) or any hosted OpenAI-compatible endpoint. The prompt,
the reply schema and the validation are the same as Gemini's
(:mod:`~vid2sid_ros.calibration.proposers.vlm.prompt`, :mod:`~vid2sid_ros.calibration.proposers.vlm.common`);
only the transport differs:

- plain HTTP with ``urllib.request`` (no extra dependency), JSON body;
- videos are sent as key frames: real and sim frames of the same instant side by side,
  base64 JPEG ``image_url`` parts (chat/completions has no standard video input),
  plus the real-vs-sim trajectory plot (PNG);
- structured output via ``response_format`` = ``{"type": "json_schema", ...}`` (the
  pydantic reply model's JSON schema), ``{"type": "json_object"}``, or none, since
  servers differ in what they support;
- ``OPENAI_API_KEY`` (or the variable named by ``api_key_env``) is optional and sent
  as a bearer token when set; it is never logged or recorded.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..proposer import Proposer
from .common import (
    ReplyError,
    ReplyProblem,
    RetryPolicy,
    TokenUsage,
    VLMProposer,
    register_secret_env,
)
from .prompt import SYSTEM_INSTRUCTION, CalibrationPrompt, ExcitationLimits, MediaItem, PromptOptions

__all__ = ["OpenAICompatibleProposer", "OpenAICompatConfig", "HTTPStatusError", "urllib_transport"]

_RESPONSE_FORMATS = ("json_schema", "json_object", "none")


class HTTPStatusError(RuntimeError):
    """A non-2xx HTTP answer: ``code`` (int), ``body`` (text, cut), ``retry_after_s`` (or None)."""

    def __init__(self, code: int, body: str, retry_after_s: float | None = None):
        super().__init__(f"HTTP {code}: {body[:300]}")
        self.code = int(code)
        self.body = body
        self.retry_after_s = retry_after_s


#: largest HTTP answer read, bytes (the reply text inside it is capped again by ``max_reply_chars``)
MAX_RESPONSE_BYTES = 16 * 1024 * 1024


def urllib_transport(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> bytes:
    """POST ``body`` to ``url`` with ``urllib.request``; returns the response body.

    Raises:
        HTTPStatusError: on a non-2xx status (with ``Retry-After`` parsed when numeric).
        TimeoutError / ConnectionError / urllib.error.URLError: network problems.
    """
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - URL is user configuration
            return resp.read(MAX_RESPONSE_BYTES + 1)  # never a whole 200 MB answer in memory: cut, then refused
    except urllib.error.HTTPError as err:
        try:
            text = err.read().decode("utf-8", "replace")
        except Exception:  # body unreadable: keep the status
            text = ""
        ra = err.headers.get("Retry-After") if err.headers else None
        try:
            hint = float(ra) if ra is not None else None
        except ValueError:
            hint = None
        raise HTTPStatusError(err.code, text, hint) from None


@dataclass(frozen=True)
class OpenAICompatConfig:
    """Settings of :class:`OpenAICompatibleProposer`.

    Attributes:
        base_url: server root including the API version, e.g. ``http://localhost:8000/v1``;
            requests go to ``{base_url}/chat/completions``.
        model: model name as the server knows it.
        video: send key frames of the paired videos (False = text-only ablation).
        video_roles: which ``context.videos`` entries to sample.
        key_frames: key frames per video (each image shows real and sim side by side).
        overlay_plot, chain_of_thought, active_learning, history_limit: as for Gemini.
        response_format: ``json_schema`` (schema-constrained), ``json_object`` or ``none``.
        temperature: sampling temperature (None = server default).
        max_tokens: reply token cap (None = server default).
        image_detail: OpenAI ``detail`` hint (``low``, ``high``, ``auto``) or None.
        timeout_s: per-request timeout, s (local models can be slow); capped by the time
            left before ``deadline_s``.
        deadline_s: total time one iteration may spend on the server, s (every attempt,
            backoff sleep and re-ask); then the fallback proposes.
        retry_every: after the server failed in an iteration, later iterations use the
            fallback at once; the server is tried again every this many iterations.
        max_retries, initial_backoff_s, max_backoff_s: backoff on 408/429/5xx and network errors.
        max_reasks: follow-up requests after an unusable reply.
        max_reply_chars: longest reply text parsed, characters (a longer one is unusable: re-asked,
            then the fallback).
        api_key_env: environment variable holding an optional bearer token.
        price_input_per_mtok, price_output_per_mtok: USD per 1M tokens for the cost
            estimate (None = no estimate, e.g. a local server).
    """

    base_url: str = "http://localhost:8000/v1"
    model: str = "local-vlm"
    video: bool = True
    video_roles: tuple[str, ...] = ("real", "sim")
    key_frames: int = 6
    overlay_plot: bool = True
    chain_of_thought: bool = True
    active_learning: bool = False
    history_limit: int = 10
    response_format: str = "json_schema"
    temperature: float | None = 0.2
    max_tokens: int | None = None
    image_detail: str | None = None
    timeout_s: float = 300.0
    deadline_s: float = 30.0
    retry_every: int = 3
    max_retries: int = 4
    initial_backoff_s: float = 2.0
    max_backoff_s: float = 60.0
    max_reasks: int = 2
    max_reply_chars: int = 1_000_000
    api_key_env: str = "OPENAI_API_KEY"
    price_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None
    excitation_limits: ExcitationLimits = field(default_factory=ExcitationLimits)

    def __post_init__(self) -> None:
        if self.response_format not in _RESPONSE_FORMATS:
            raise ValueError(f"OpenAICompatConfig.response_format must be one of {_RESPONSE_FORMATS}, "
                             f"got {self.response_format!r}")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"OpenAICompatConfig.base_url must start with http:// or https://, got {self.base_url!r}")
        if self.timeout_s <= 0:
            raise ValueError(f"OpenAICompatConfig.timeout_s must be > 0 s, got {self.timeout_s}")

    def prompt_options(self) -> PromptOptions:
        return PromptOptions(video=self.video, video_roles=tuple(self.video_roles),
                             key_frames=self.key_frames if self.video else 0, overlay_plot=self.overlay_plot,
                             chain_of_thought=self.chain_of_thought, active_learning=self.active_learning,
                             history_limit=self.history_limit, excitation_limits=self.excitation_limits)


class OpenAICompatibleProposer(VLMProposer):
    """VLM proposer over an OpenAI-compatible chat/completions endpoint (``name = "openai-compatible"``).

    Args:
        config: settings; keyword ``overrides`` replace single fields.
        transport: ``(url, body bytes, headers, timeout_s) -> response body bytes``;
            default :func:`urllib_transport` (tests inject a recorder).
        fallback: proposer or registry name used when the server keeps failing.
        sleep, clock: sleep function for backoff and monotonic clock (tests inject fakes).

    Raises:
        TypeError: on an unknown override or an ``api_key`` argument.
    """

    name = "openai-compatible"

    def __init__(self, config: OpenAICompatConfig | None = None, *,
                 transport: Callable[[str, bytes, dict[str, str], float], bytes] | None = None,
                 fallback: Proposer | str | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, **overrides: Any):
        if "api_key" in overrides:
            raise TypeError("OpenAICompatibleProposer takes no api_key: set the variable named by api_key_env")
        cfg = config or OpenAICompatConfig()
        if overrides:
            valid = {f.name for f in dataclasses.fields(OpenAICompatConfig)}
            bad = sorted(set(overrides) - valid)
            if bad:
                raise TypeError(f"OpenAICompatibleProposer: unknown option(s) {bad}; valid: {', '.join(sorted(valid))}")
            cfg = dataclasses.replace(cfg, **overrides)
        self.config = cfg
        register_secret_env(cfg.api_key_env)  # a key in a variable of the user's choosing is redacted too
        super().__init__(options=cfg.prompt_options(), max_reasks=cfg.max_reasks,
                         retry=RetryPolicy(max_retries=cfg.max_retries, initial_delay_s=cfg.initial_backoff_s,
                                           max_delay_s=cfg.max_backoff_s),
                         fallback=fallback, sleep=sleep, deadline_s=cfg.deadline_s, retry_every=cfg.retry_every,
                         clock=clock, max_reply_chars=cfg.max_reply_chars)
        self._transport = transport or urllib_transport

    def __repr__(self) -> str:
        return f"OpenAICompatibleProposer(base_url={self.config.base_url!r}, model={self.config.model!r})"

    @property
    def model_name(self) -> str:
        return self.config.model

    @property
    def url(self) -> str:
        return self.config.base_url.rstrip("/") + "/chat/completions"

    # -- request building ----------------------------------------------------------------
    def request_body(self, prompt: CalibrationPrompt, turns: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
        """The chat/completions JSON body (messages, response_format, sampling)."""
        c = self.config
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt.intro()}]
        for m in prompt.media:
            if m.kind != "image":
                continue
            content.append({"type": "text", "text": f"[{m.kind}: {m.role}] {m.caption}"})
            content.append(self._image_part(m))
        content.append({"type": "text", "text": "\n".join(s.render() for s in prompt.sections())})
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_INSTRUCTION},
                                          {"role": "user", "content": content}]
        for reply, feedback in turns:
            messages.append({"role": "assistant", "content": reply})
            messages.append({"role": "user", "content": feedback})
        body: dict[str, Any] = {"model": c.model, "messages": messages}
        if c.response_format == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "calibration_reply", "schema": prompt.response_model.model_json_schema(), "strict": False}}
        elif c.response_format == "json_object":
            body["response_format"] = {"type": "json_object"}
        if c.temperature is not None:
            body["temperature"] = float(c.temperature)
        if c.max_tokens is not None:
            body["max_tokens"] = int(c.max_tokens)
        return body

    def _image_part(self, m: MediaItem) -> dict[str, Any]:
        url = f"data:{m.mime_type};base64," + base64.b64encode(m.read_bytes()).decode("ascii")
        img: dict[str, Any] = {"url": url}
        if self.config.image_detail:
            img["detail"] = self.config.image_detail
        return {"type": "image_url", "image_url": img}

    def _headers(self) -> dict[str, str]:
        import os

        h = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.config.api_key_env, "").strip()
        if key:
            h["Authorization"] = f"Bearer {key}"
        return h

    # -- transport hooks -----------------------------------------------------------------
    def _prepare_media(self, prompt: CalibrationPrompt, events: list[dict[str, Any]]) -> CalibrationPrompt:
        """Videos are represented by their key frames; the video files themselves are not sent."""
        videos = [m for m in prompt.media if m.kind == "video"]
        if not videos:
            return prompt
        frames = sum(1 for m in prompt.media if m.role == "key_frame")
        notes = [] if frames else ["videos: chat/completions takes no video and no key frames were sampled"]
        return prompt.with_media([m for m in prompt.media if m.kind != "video"], notes)

    def _send(self, prompt: CalibrationPrompt, turns: Sequence[tuple[str, str]], usage: TokenUsage,
              events: list[dict[str, Any]]) -> str | None:
        data = json.dumps(self.request_body(prompt, turns)).encode("utf-8")
        raw = self.run_with_retries(lambda t: self._transport(self.url, data, self._headers(), t),
                                    self.config.timeout_s, classify=self._classify,
                                    what=f"{self.name} POST {self.url}", events=events)
        if isinstance(raw, (bytes, str)) and len(raw) > max(MAX_RESPONSE_BYTES, 4 * self.max_reply_chars):
            raise ReplyError([ReplyProblem(f"server answer over {max(MAX_RESPONSE_BYTES, 4 * self.max_reply_chars):,} "
                                           "bytes; not parsed", True)])
        try:
            resp = json.loads(raw)
        except (ValueError, TypeError, RecursionError) as err:
            what = "nested too deeply to parse" if isinstance(err, RecursionError) else err
            raise ReplyError([ReplyProblem(f"server answer is not JSON ({what})", True)]) from None
        u = (resp.get("usage") or {}) if isinstance(resp, dict) else {}
        completion = int(u.get("completion_tokens") or 0)
        reasoning = int(((u.get("completion_tokens_details") or {}).get("reasoning_tokens")) or 0)
        usage.add(u.get("prompt_tokens"), max(0, completion - reasoning), reasoning)
        try:
            msg = resp["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise ReplyError([ReplyProblem("server answer has no choices[0].message", True)]) from None
        text = msg.get("content")
        if isinstance(text, list):  # some servers return content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        if not text:
            fr = resp["choices"][0].get("finish_reason")
            raise ReplyError([ReplyProblem(f"no text in the reply (finish reason {fr})", True)])
        return str(text)

    def _classify(self, err: BaseException) -> tuple[bool, int | None, float | None]:
        if isinstance(err, HTTPStatusError):
            return err.code in self.retry.retry_codes, err.code, err.retry_after_s
        if isinstance(err, (TimeoutError, socket.timeout, ConnectionError, urllib.error.URLError)):
            return True, None, None
        return False, None, None

    def _cost_usd(self, usage: TokenUsage) -> float | None:
        c = self.config
        if c.price_input_per_mtok is None or c.price_output_per_mtok is None:
            return None
        return (usage.prompt_tokens * c.price_input_per_mtok
                + (usage.output_tokens + usage.thinking_tokens) * c.price_output_per_mtok) / 1e6
