"""Gemini in the loop: the Vid2Sid VLM calibrator (``google-genai`` SDK).

:class:`GeminiProposer` sends the paired real/sim videos (inline when small, through
the Files API when large), a real-vs-sim trajectory plot, the parameter table with
bounds and meanings, the error metrics and the history of earlier proposals (see
:mod:`~vid2sid_ros.calibration.proposers.vlm.prompt`), and asks for a JSON reply constrained by a
response schema (``response_mime_type="application/json"``, ``response_schema=``
a pydantic model). The reply is validated in one place shared with the
OpenAI-compatible proposer (:mod:`~vid2sid_ros.calibration.proposers.vlm.common`).

The API key is read by the SDK from ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` (the SDK
prefers ``GOOGLE_API_KEY`` when both are set); it is never accepted as an argument,
never stored by this module and scrubbed from every error text it records.

Typical use::

    from vid2sid_ros.calibration.proposers.vlm.gemini import make_gemini_or_fallback
    proposer = make_gemini_or_fallback(fallback="reasoner", model="gemini-2.5-pro", video=True)

Ablation switches of the paper: ``video`` (False = text-only), ``chain_of_thought``,
``active_learning`` and ``thinking_budget`` (``types.ThinkingConfig``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..proposer import Proposer
from .common import (
    ReplyError,
    ReplyProblem,
    RetryPolicy,
    ServiceUnavailableError,
    TokenUsage,
    VLMProposer,
    parse_reply_json,
    redact,
)
from .prompt import SYSTEM_INSTRUCTION, CalibrationPrompt, ExcitationLimits, MediaItem, PromptOptions

__all__ = [
    "GeminiProposer",
    "GeminiConfig",
    "MissingAPIKeyError",
    "ModelPrice",
    "DEFAULT_PRICES",
    "PRICE_SOURCE",
    "api_key_present",
    "make_gemini_or_fallback",
    "estimate_cost_usd",
    "ReplayClient",
    "ReplayExhausted",
    "RecordingClient",
]

log = logging.getLogger(__name__)

_KEY_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


class MissingAPIKeyError(RuntimeError):
    """No Gemini API key in the environment. ``str(err)`` is one line for the CLI."""

    def __init__(self) -> None:
        super().__init__("gemini: no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) in the environment, "
                         "or add '--fallback reasoner' to calibrate offline")


def api_key_present() -> bool:
    """True when a Gemini key is set (or Vertex AI is selected via ``GOOGLE_GENAI_USE_VERTEXAI``)."""
    if os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").strip().lower() in ("1", "true"):
        return True
    return any(os.environ.get(v, "").strip() for v in _KEY_VARS)


# ----------------------------------------------------------------------------------------
# prices
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelPrice:
    """Price of one model in USD per million tokens.

    Thinking tokens are billed as output tokens. Prompts longer than
    ``long_threshold_tokens`` are billed at the ``*_long`` rates where they exist.
    """

    input: float
    output: float
    input_long: float | None = None
    output_long: float | None = None
    long_threshold_tokens: int = 200_000

    def cost(self, prompt_tokens: int, output_tokens: int) -> float:
        """USD for one request: ``prompt_tokens`` in, ``output_tokens`` (incl. thinking) out."""
        long = prompt_tokens > self.long_threshold_tokens
        pin = self.input_long if long and self.input_long is not None else self.input
        pout = self.output_long if long and self.output_long is not None else self.output
        return (prompt_tokens * pin + output_tokens * pout) / 1e6


#: Source of :data:`DEFAULT_PRICES`: paid tier, standard (not batch) rates for
#: text/image/video input. Check and override (``GeminiConfig.prices``) before relying
#: on the figures for budgeting; they change.
PRICE_SOURCE = "https://ai.google.dev/gemini-api/docs/pricing (paid tier, standard rates, as listed 2025-09)"

#: USD per 1M tokens; see :data:`PRICE_SOURCE`.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gemini-2.5-pro": ModelPrice(input=1.25, output=10.0, input_long=2.50, output_long=15.0),
    "gemini-2.5-flash": ModelPrice(input=0.30, output=2.50),
    "gemini-2.5-flash-lite": ModelPrice(input=0.10, output=0.40),
    "gemini-2.0-flash": ModelPrice(input=0.10, output=0.40),
}


def _price_for(model: str, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """Exact name, else the longest table entry that prefixes it (``gemini-2.5-pro-preview-...``)."""
    m = model.split("/")[-1]
    if m in prices:
        return prices[m]
    hits = [k for k in prices if m.startswith(k)]
    return prices[max(hits, key=len)] if hits else None


def estimate_cost_usd(model: str, prompt_tokens: int, output_tokens: int, thinking_tokens: int = 0,
                      prices: Mapping[str, ModelPrice] | None = None) -> float | None:
    """Estimated USD cost of token counts for ``model``; None when the model has no price."""
    p = _price_for(model, DEFAULT_PRICES if prices is None else prices)
    return None if p is None else p.cost(int(prompt_tokens), int(output_tokens) + int(thinking_tokens))


# ----------------------------------------------------------------------------------------
# configuration
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GeminiConfig:
    """Settings of :class:`GeminiProposer` (there is deliberately no API key field).

    Attributes:
        model: Gemini model name.
        video: attach the paired videos (False = text-only ablation).
        video_roles: which ``context.videos`` entries to send, in order.
        key_frames: key frames per video also attached as JPEG images (0 = none).
        overlay_plot: attach the real-vs-sim trajectory plot (PNG).
        chain_of_thought: ask for an ``analysis`` field before the values.
        active_learning: allow and return ``excitation_change`` requests.
        history_limit: newest history entries in the prompt.
        thinking_budget: ``ThinkingConfig(thinking_budget=...)`` tokens; None = model
            default, -1 = dynamic, 0 = off (Flash models only; 2.5 Pro cannot turn
            thinking off).
        temperature: sampling temperature, None = model default.
        media_resolution: ``"low"``, ``"medium"``, ``"high"`` or None (default);
            lower resolution costs fewer tokens per video frame.
        video_fps: frames per second the model samples from each video (None = API
            default of 1 fps); dynamics faster than ~0.5 Hz need more.
        timeout_s: per-request HTTP timeout, s (also capped by the time left before
            ``deadline_s``).
        deadline_s: total time one iteration may spend on the service, s (every
            attempt, backoff sleep and re-ask; uploads included); then the fallback.
        retry_every: after the service failed in an iteration, later iterations use the
            fallback at once; the service is tried again every this many iterations.
        base_url: API endpoint override (an HTTP proxy or gateway); None = the SDK's
            default (or ``GOOGLE_GEMINI_BASE_URL``).
        max_retries, initial_backoff_s, max_backoff_s: exponential backoff on 408/429/5xx
            and transport errors.
        max_reasks: follow-up requests after an unusable reply.
        max_reply_chars: longest reply text parsed, characters (a longer one is unusable: re-asked,
            then the fallback).
        inline_max_bytes: videos whose total size is at most this are sent inline
            (``Part.from_bytes``); larger ones go through the Files API. The API caps a
            whole inline request at 20 MB and inline bytes travel base64-encoded (x4/3),
            so 14 MB of video leaves room for the images and text.
        upload_timeout_s, upload_poll_s: wait for uploaded files to become ACTIVE.
        prices: price table override (model -> :class:`ModelPrice`); None = defaults.
    """

    model: str = "gemini-2.5-pro"
    video: bool = True
    video_roles: tuple[str, ...] = ("real", "sim")
    key_frames: int = 0
    overlay_plot: bool = True
    chain_of_thought: bool = True
    active_learning: bool = False
    history_limit: int = 10
    thinking_budget: int | None = None
    temperature: float | None = None
    media_resolution: str | None = None
    video_fps: float | None = None
    timeout_s: float = 180.0
    deadline_s: float = 30.0
    retry_every: int = 3
    base_url: str | None = None
    max_retries: int = 4
    initial_backoff_s: float = 2.0
    max_backoff_s: float = 60.0
    max_reasks: int = 2
    max_reply_chars: int = 1_000_000
    inline_max_bytes: int = 14 * 1024 * 1024
    upload_timeout_s: float = 300.0
    upload_poll_s: float = 2.0
    prices: Mapping[str, ModelPrice] | None = None
    excitation_limits: ExcitationLimits = field(default_factory=ExcitationLimits)

    def __post_init__(self) -> None:
        if self.media_resolution not in (None, "low", "medium", "high"):
            raise ValueError(f"GeminiConfig.media_resolution must be low|medium|high or None, "
                             f"got {self.media_resolution!r}")
        if self.timeout_s <= 0 or self.upload_timeout_s <= 0:
            raise ValueError("GeminiConfig.timeout_s and upload_timeout_s must be > 0 s")
        if self.base_url is not None and not str(self.base_url).startswith(("http://", "https://")):
            raise ValueError(f"GeminiConfig.base_url must start with http:// or https://, got {self.base_url!r}")
        if self.thinking_budget is not None and self.thinking_budget < -1:
            raise ValueError(f"GeminiConfig.thinking_budget must be >= -1 or None, got {self.thinking_budget}")

    def prompt_options(self) -> PromptOptions:
        return PromptOptions(video=self.video, video_roles=tuple(self.video_roles), key_frames=self.key_frames,
                             overlay_plot=self.overlay_plot, chain_of_thought=self.chain_of_thought,
                             active_learning=self.active_learning, history_limit=self.history_limit,
                             excitation_limits=self.excitation_limits)

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(max_retries=self.max_retries, initial_delay_s=self.initial_backoff_s,
                           max_delay_s=self.max_backoff_s)


# ----------------------------------------------------------------------------------------
# the proposer
# ----------------------------------------------------------------------------------------
class GeminiProposer(VLMProposer):
    """Gemini as a calibration proposer (``name = "gemini"``).

    Args:
        config: settings; keyword ``overrides`` replace single fields
            (``GeminiProposer(model="gemini-2.5-flash", video=False)``).
        client: a ``google.genai.Client``-like object (``.models.generate_content``,
            ``.files.upload/get/delete``); built from the environment when None.
        fallback: proposer (or registry name, e.g. ``"reasoner"``) used when the key
            is missing or the service keeps failing; None = raise instead.
        sleep, clock: time functions (tests inject fakes).

    Raises:
        MissingAPIKeyError: no key in the environment, no ``client`` and no fallback.
        TypeError: on an unknown override (listing the valid ones) or an ``api_key``
            argument (keys come from the environment only).
    """

    name = "gemini"

    def __init__(self, config: GeminiConfig | None = None, *, client: Any = None,
                 fallback: Proposer | str | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, **overrides: Any):
        if "api_key" in overrides:
            raise TypeError("GeminiProposer takes no api_key: set GEMINI_API_KEY or GOOGLE_API_KEY in the environment")
        cfg = config or GeminiConfig()
        if overrides:
            valid = {f.name for f in dataclasses.fields(GeminiConfig)}
            bad = sorted(set(overrides) - valid)
            if bad:
                raise TypeError(f"GeminiProposer: unknown option(s) {bad}; valid: {', '.join(sorted(valid))}")
            cfg = dataclasses.replace(cfg, **overrides)
        self.config = cfg
        super().__init__(options=cfg.prompt_options(), max_reasks=cfg.max_reasks, retry=cfg.retry_policy(),
                         fallback=fallback, sleep=sleep, deadline_s=cfg.deadline_s, retry_every=cfg.retry_every,
                         clock=clock, max_reply_chars=cfg.max_reply_chars)
        self._files: dict[tuple[str, int, int], Any] = {}  # (path, size, mtime_ns) -> types.File
        self._client = client
        if client is None:
            if api_key_present():
                self._client = self._make_client()
            elif fallback is None:
                raise MissingAPIKeyError()
            else:
                self.unavailable_reason = "no API key (GEMINI_API_KEY / GOOGLE_API_KEY unset)"

    def __repr__(self) -> str:  # never shows the client (it holds the key)
        return f"GeminiProposer(model={self.config.model!r}, video={self.config.video}, " \
               f"chain_of_thought={self.config.chain_of_thought}, active_learning={self.config.active_learning})"

    @property
    def model_name(self) -> str:
        return self.config.model

    def _make_client(self) -> Any:
        from google import genai
        from google.genai import types

        # api_key=None: the SDK reads GOOGLE_API_KEY / GEMINI_API_KEY itself. No
        # retry_options: the SDK does not retry on its own, RetryPolicy does (within the deadline).
        kw: dict[str, Any] = {"timeout": int(self.config.timeout_s * 1000)}
        if self.config.base_url:
            kw["base_url"] = self.config.base_url
        return genai.Client(http_options=types.HttpOptions(**kw))

    # -- request building ----------------------------------------------------------------
    def generation_config(self, prompt: CalibrationPrompt, timeout_s: float | None = None) -> Any:
        """The ``types.GenerateContentConfig`` of a request (schema, thinking, timeout).

        ``timeout_s``: this attempt's HTTP timeout, s (default ``config.timeout_s``).
        """
        from google.genai import types

        c = self.config
        timeout_ms = max(1, int(round((c.timeout_s if timeout_s is None else timeout_s) * 1000)))
        http: dict[str, Any] = {"timeout": timeout_ms}
        if c.base_url:
            http["base_url"] = c.base_url
        kw: dict[str, Any] = {
            "system_instruction": SYSTEM_INSTRUCTION,
            "response_mime_type": "application/json",
            "response_schema": prompt.response_model,
            "http_options": types.HttpOptions(**http),
        }
        if c.thinking_budget is not None:
            kw["thinking_config"] = types.ThinkingConfig(thinking_budget=int(c.thinking_budget))
        if c.temperature is not None:
            kw["temperature"] = float(c.temperature)
        if c.media_resolution is not None:
            kw["media_resolution"] = f"MEDIA_RESOLUTION_{c.media_resolution.upper()}"
        return types.GenerateContentConfig(**kw)

    def contents(self, prompt: CalibrationPrompt, turns: Sequence[tuple[str, str]] = ()) -> list[Any]:
        """The ``contents`` of a request: the prompt turn, then (reply, feedback) turns."""
        from google.genai import types

        parts = [types.Part(text=prompt.intro())]
        for m in prompt.media:
            parts.append(types.Part(text=f"[{m.kind}: {m.role}] {m.caption}"))
            parts.append(self._media_part(m))
        parts.append(types.Part(text="\n".join(s.render() for s in prompt.sections())))
        out = [types.Content(role="user", parts=parts)]
        for reply, feedback in turns:
            out.append(types.Content(role="model", parts=[types.Part(text=reply)]))
            out.append(types.Content(role="user", parts=[types.Part(text=feedback)]))
        return out

    def _media_part(self, m: MediaItem) -> Any:
        from google.genai import types

        f = self._files.get(_file_key(m.path)) if (m.kind == "video" and m.path is not None) else None
        if f is not None:
            part = types.Part.from_uri(file_uri=f.uri, mime_type=f.mime_type or m.mime_type)
        else:
            part = types.Part.from_bytes(data=m.read_bytes(), mime_type=m.mime_type)
        if m.kind == "video" and self.config.video_fps is not None:
            part = part.model_copy(update={"video_metadata": types.VideoMetadata(fps=float(self.config.video_fps))})
        return part

    # -- transport hooks -----------------------------------------------------------------
    def _prepare_media(self, prompt: CalibrationPrompt, events: list[dict[str, Any]]) -> CalibrationPrompt:
        videos = [m for m in prompt.media if m.kind == "video"]
        if not videos or sum(m.size_bytes for m in videos) <= self.config.inline_max_bytes:
            return prompt
        kept, notes = [], []
        for m in prompt.media:
            if m.kind != "video":
                kept.append(m)
                continue
            try:
                self._upload(m, events)
                kept.append(m)
            except ServiceUnavailableError as err:
                notes.append(f"{m.role} video: upload failed ({err}); continuing without it")
        return prompt.with_media(kept, notes)

    def _upload(self, m: MediaItem, events: list[dict[str, Any]]) -> Any:
        """Upload one video through the Files API and wait until it is ACTIVE (cached by path, size, mtime).

        Raises:
            ServiceUnavailableError: upload failed, processing FAILED, or not ACTIVE
                within ``upload_timeout_s``.
        """
        from google.genai import types

        key = _file_key(m.path)
        if key in self._files:
            return self._files[key]
        c = self.config
        f = self.run_with_retries(
            lambda t: self._client.files.upload(
                file=str(m.path), config=types.UploadFileConfig(
                    mime_type=m.mime_type, display_name=f"vid2sid-{m.role}",
                    http_options=types.HttpOptions(timeout=max(1, int(t * 1000))))),
            c.timeout_s, classify=self._classify, what="gemini files.upload", events=events)
        deadline = self._clock() + c.upload_timeout_s
        if self._deadline is not None:
            deadline = min(deadline, self._deadline)
        while True:
            state = _state_name(getattr(f, "state", None))
            if state == "ACTIVE":
                break
            if state == "FAILED":
                raise ServiceUnavailableError(f"gemini files: processing of the {m.role} video failed: "
                                              f"{redact(getattr(f, 'error', '') or '')}")
            if self._clock() >= deadline:
                raise ServiceUnavailableError(f"gemini files: {m.role} video not ACTIVE after {c.upload_timeout_s:g} s "
                                              f"(state {state})")
            self._sleep(c.upload_poll_s)
            name = f.name
            f = self.run_with_retries(lambda t: self._client.files.get(name=name), c.timeout_s,
                                      classify=self._classify, what="gemini files.get", events=events)
        self._files[key] = f
        return f

    def _send(self, prompt: CalibrationPrompt, turns: Sequence[tuple[str, str]], usage: TokenUsage,
              events: list[dict[str, Any]]) -> str | None:
        contents = self.contents(prompt, turns)
        resp = self.run_with_retries(
            lambda t: self._client.models.generate_content(model=self.config.model, contents=contents,
                                                           config=self.generation_config(prompt, t)),
            self.config.timeout_s, classify=self._classify, what="gemini generate_content", events=events)
        um = getattr(resp, "usage_metadata", None)
        usage.add(getattr(um, "prompt_token_count", None), getattr(um, "candidates_token_count", None),
                  getattr(um, "thoughts_token_count", None))
        text = _response_text(resp)
        if text is None:
            raise ReplyError([ReplyProblem(f"no text in the reply ({_why_empty(resp)})", True)])
        finish = _finish_reason(resp)
        if finish not in ("STOP", "FINISH_REASON_UNSPECIFIED", "STATE_UNSPECIFIED"):
            try:
                parse_reply_json(text, max_chars=self.max_reply_chars)
            except ReplyError as err:
                raise ReplyError([ReplyProblem(f"reply cut short (finish reason {finish}): {err}", True)]) from None
        return text

    def _cost_usd(self, usage: TokenUsage) -> float | None:
        return estimate_cost_usd(self.config.model, usage.prompt_tokens, usage.output_tokens, usage.thinking_tokens,
                                 self.config.prices)

    def _usage_extra(self, usage: TokenUsage, events: list[dict[str, Any]], t0: float) -> dict[str, Any]:
        out = super()._usage_extra(usage, events, t0)
        out["price_source"] = PRICE_SOURCE if self.config.prices is None else "GeminiConfig.prices"
        out["thinking_budget"] = self.config.thinking_budget
        return out

    def _classify(self, err: BaseException) -> tuple[bool, int | None, float | None]:
        """``(retryable, code, server delay hint s)`` for an exception from the SDK."""
        from google.genai import errors

        if isinstance(err, errors.APIError):
            code = int(err.code) if isinstance(err.code, int) else None
            return (code in self.retry.retry_codes), code, _retry_delay_hint(err.details)
        if isinstance(err, _transient_exceptions()):
            return True, None, None
        return False, None, None

    def close(self) -> None:
        """Delete files this proposer uploaded (best effort; they also expire after 48 h)."""
        for f in list(self._files.values()):
            try:
                self._client.files.delete(name=f.name)
            except Exception as err:  # cleanup must never raise
                log.info("gemini: could not delete uploaded file: %s", redact(err))
        self._files.clear()


def make_gemini_or_fallback(fallback: Proposer | str | None = "reasoner", **kwargs: Any) -> GeminiProposer:
    """Build the Gemini proposer; without an API key, one that proposes with ``fallback``.

    Every iteration proposed by the fallback says so in ``Proposal.notes`` and
    ``Proposal.extra["fallback"]`` (the loop copies both into ``iterations.jsonl``).
    The fallback is also used when the service keeps failing.

    Args:
        fallback: proposer or registry name; None = no fallback.
        **kwargs: :class:`GeminiConfig` fields, or ``client``/``sleep``/``clock``.

    Raises:
        MissingAPIKeyError: no key and ``fallback`` is None.
    """
    p = GeminiProposer(fallback=fallback, **kwargs)
    if p.unavailable_reason is not None:
        name = fallback if isinstance(fallback, str) else getattr(fallback, "name", "fallback")
        log.warning("gemini: %s; calibrating offline with '%s'", p.unavailable_reason, name)
    return p


# ----------------------------------------------------------------------------------------
# offline replay (tests, demos without a key)
# ----------------------------------------------------------------------------------------
class ReplayExhausted(RuntimeError):
    """The replay session has no recorded answer left for a request."""


class ReplayClient:
    """A ``google.genai.Client`` stand-in that replays a recorded session, offline.

    The session is JSON (see ``test/data/gemini/*.json``)::

        {"model": "gemini-2.5-pro",
         "files": {"polls_until_active": 1},
         "steps": [
           {"response": {<GenerateContentResponse in REST wire format>}},
           {"error": {"code": 429, "body": {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", ...}}}},
           ...]}

    Each ``models.generate_content`` call consumes the next step: a ``response`` is
    parsed with the SDK's own ``types.GenerateContentResponse.model_validate``; an
    ``error`` is raised through ``google.genai.errors.APIError.raise_error`` (so a 429
    is a real ``ClientError``, a 503 a real ``ServerError``). Every call's keyword
    arguments (real SDK ``Content``/``GenerateContentConfig`` objects) are kept in
    ``calls`` / ``uploads`` for inspection. ``files.upload`` returns a PROCESSING
    ``types.File`` that turns ACTIVE after ``polls_until_active`` ``files.get`` calls.

    Args:
        session: the parsed session dict, or a path to the JSON file.

    Raises:
        ValueError: on a malformed session (names the step).
    """

    def __init__(self, session: Mapping[str, Any] | str | Path):
        import json

        if not isinstance(session, Mapping):
            session = json.loads(Path(session).read_text())
        steps = session.get("steps")
        if not isinstance(steps, list):
            raise ValueError("replay session: 'steps' must be a list")
        for i, st in enumerate(steps):
            if not isinstance(st, Mapping) or len(set(st) & {"response", "error"}) != 1:
                raise ValueError(f"replay session: steps[{i}] must hold exactly one of 'response' or 'error'")
        self._steps = list(steps)
        self._polls = int((session.get("files") or {}).get("polls_until_active", 1))
        self.calls: list[dict[str, Any]] = []
        self.uploads: list[dict[str, Any]] = []
        self.gets: list[str] = []
        self.deleted: list[str] = []
        self._files: dict[str, list[Any]] = {}
        self.models = _ReplayModels(self)
        self.files = _ReplayFiles(self)

    @property
    def remaining(self) -> int:
        """Recorded steps not yet consumed."""
        return len(self._steps)

    def _next(self, kwargs: dict[str, Any]) -> Any:
        from google.genai import errors, types

        self.calls.append(kwargs)
        if not self._steps:
            raise ReplayExhausted(f"replay session exhausted after {len(self.calls) - 1} call(s)")
        st = self._steps.pop(0)
        if "error" in st:
            e = st["error"]
            errors.APIError.raise_error(int(e["code"]), e.get("body", {}), None)
        return types.GenerateContentResponse.model_validate(st["response"])


class RecordingClient:
    """Wraps a real ``google.genai.Client`` and saves every answer as a replay session.

    ``GeminiProposer(client=RecordingClient(genai.Client(), "session.json"))`` runs
    against the service and writes, after each ``generate_content`` call, the session
    file that :class:`ReplayClient` replays offline. Error bodies are redacted
    (:func:`~vid2sid_ros.calibration.proposers.vlm.common.redact`) before they are written; the
    key itself is never part of a response. ``files`` calls pass through unrecorded
    (the replay fakes the Files API).

    Args:
        client: the real client (or any client-like object).
        path: the session JSON to write (overwritten).
        model: model name stored in the session header.
    """

    def __init__(self, client: Any, path: str | Path, *, model: str = ""):
        self._client = client
        self.path = Path(path)
        self.session: dict[str, Any] = {"model": model, "files": {"polls_until_active": 1}, "steps": []}
        self.models = _RecordingModels(self)
        self.files = client.files

    def _save(self) -> None:
        import json

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.session, indent=1) + "\n")


class _RecordingModels:
    def __init__(self, owner: RecordingClient):
        self._owner = owner

    def generate_content(self, **kwargs: Any) -> Any:
        import json

        from google.genai import errors

        o = self._owner
        try:
            resp = o._client.models.generate_content(**kwargs)
        except errors.APIError as err:
            body = json.loads(redact(json.dumps(err.details, default=str)))
            o.session["steps"].append({"error": {"code": int(err.code), "body": body}})
            o._save()
            raise
        dumped = resp.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"sdk_http_response"})
        o.session["steps"].append({"response": json.loads(redact(json.dumps(dumped)))})
        o._save()
        return resp


class _ReplayModels:
    def __init__(self, owner: ReplayClient):
        self._owner = owner

    def generate_content(self, **kwargs: Any) -> Any:
        return self._owner._next(kwargs)


class _ReplayFiles:
    def __init__(self, owner: ReplayClient):
        self._owner = owner

    def upload(self, *, file: Any, config: Any = None) -> Any:
        from google.genai import types

        o = self._owner
        o.uploads.append({"file": file, "config": config})
        name = f"files/replay-{len(o.uploads)}"
        mime = getattr(config, "mime_type", None) or "video/mp4"
        states = ["PROCESSING"] * o._polls + ["ACTIVE"]
        o._files[name] = states
        return types.File(name=name, uri=f"https://generativelanguage.googleapis.com/v1beta/{name}",
                          mime_type=mime, state=states[0])

    def get(self, *, name: str, config: Any = None) -> Any:
        from google.genai import types

        o = self._owner
        o.gets.append(name)
        states = o._files.get(name)
        if states is None:
            from google.genai import errors

            errors.APIError.raise_error(404, {"error": {"code": 404, "message": f"{name} not found",
                                                        "status": "NOT_FOUND"}}, None)
        if len(states) > 1:
            states.pop(0)
        return types.File(name=name, uri=f"https://generativelanguage.googleapis.com/v1beta/{name}",
                          mime_type="video/mp4", state=states[0])

    def delete(self, *, name: str, config: Any = None) -> None:
        self._owner.deleted.append(name)
        self._owner._files.pop(name, None)


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------
def _file_key(path: Path | None) -> tuple[str, int, int]:
    if path is None:
        return ("", 0, 0)
    st = Path(path).stat()
    return (str(Path(path).resolve()), int(st.st_size), int(st.st_mtime_ns))


def _state_name(state: Any) -> str:
    s = getattr(state, "value", state)
    return str(s or "STATE_UNSPECIFIED").upper()


def _response_text(resp: Any) -> str | None:
    """Concatenated non-thought text of the first candidate, or None."""
    try:
        cands = getattr(resp, "candidates", None) or []
        if not cands or cands[0].content is None or not cands[0].content.parts:
            return None
        texts = [p.text for p in cands[0].content.parts if getattr(p, "text", None) and not getattr(p, "thought", False)]
        return "".join(texts) if texts else None
    except (AttributeError, IndexError, TypeError):
        return None


def _finish_reason(resp: Any) -> str:
    cands = getattr(resp, "candidates", None) or []
    return _state_name(getattr(cands[0], "finish_reason", None)) if cands else "STATE_UNSPECIFIED"


def _why_empty(resp: Any) -> str:
    fb = getattr(resp, "prompt_feedback", None)
    if fb is not None and getattr(fb, "block_reason", None):
        return f"prompt blocked: {_state_name(fb.block_reason)}"
    cands = getattr(resp, "candidates", None) or []
    if cands and getattr(cands[0], "finish_reason", None):
        return f"finish reason {_state_name(cands[0].finish_reason)}"
    return "no candidates"


_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)s\s*$")


def _retry_delay_hint(details: Any) -> float | None:
    """``RetryInfo.retryDelay`` (e.g. ``"17s"``) from a Google API error body, in s."""
    try:
        err = details.get("error", details) if isinstance(details, dict) else {}
        for d in err.get("details", []) or []:
            if isinstance(d, dict) and str(d.get("@type", "")).endswith("google.rpc.RetryInfo"):
                m = _DURATION.match(str(d.get("retryDelay", "")))
                if m:
                    return float(m.group(1))
    except AttributeError:
        return None
    return None


def _transient_exceptions() -> tuple[type[BaseException], ...]:
    """Network-level errors worth retrying: timeouts, connection errors (httpx, httpx2)."""
    out: list[type[BaseException]] = [TimeoutError, ConnectionError]
    import importlib

    for mod in ("httpx", "httpx2"):
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        out.extend(c for c in (getattr(m, "TimeoutException", None), getattr(m, "TransportError", None)) if c)
    return tuple(out)
