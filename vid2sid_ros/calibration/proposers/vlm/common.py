"""What the VLM proposers share: reply validation, retries, secret redaction, fallback.

Both :mod:`~vid2sid_ros.calibration.proposers.vlm.gemini` and
:mod:`~vid2sid_ros.calibration.proposers.vlm.openai_compat` are thin transports over
:class:`VLMProposer`, which owns the one propose flow:

1. build the prompt (:func:`~vid2sid_ros.calibration.proposers.vlm.prompt.build_prompt`);
2. let the transport attach media (upload, inline, key frames) — a media failure
   drops the media and is noted, it does not stop the iteration;
3. send, retrying transient service errors (429, 5xx, timeouts) with exponential
   backoff (:class:`RetryPolicy`), all within ONE total deadline per iteration
   (``deadline_s``, default 30 s: every attempt, backoff sleep and re-ask of the
   iteration; each attempt runs in a daemon thread that is abandoned when the deadline
   passes, so a server that accepts the connection and never answers costs at most
   ``deadline_s``);
4. validate the reply (:func:`validate_reply`): unknown names are dropped, missing
   names keep their current value, NaN is rejected, out-of-bound values are clamped,
   confidence is clamped to [0, 1]. Unusable replies (not JSON, no ``parameters``,
   non-finite values, unknown names) are re-asked with the list of problems, at most
   ``max_reasks`` times; after that the repaired reply is used if there is one;
5. return a :class:`~vid2sid_ros.calibration.proposers.proposer.Proposal` whose ``notes`` say
   what was repaired and whose ``extra`` carries model, token usage, estimated cost,
   retries and re-asks.

When the API key is missing or the service keeps failing, the proposal comes from
the fallback proposer (the offline ``reasoner`` by default, built lazily through
``calibration.proposers.make_proposer``) and ``extra["fallback"]`` records why.

Circuit breaker: once the service has failed in an iteration (retries or deadline
exhausted), the following iterations go straight to the fallback without a request;
every ``retry_every`` iterations after the failure the service is tried once more
(logged at WARNING either way). The breaker's state is recorded in each iteration's
``extra["service"]`` (``{"proposer", "state": ok|failed|skipped|refused, "failed_at",
"retry_at", ...}``) and re-read from ``context.history``, so a resumed run makes the
same decisions as an uninterrupted one.

Secrets: API keys are read from the environment by the transports only; every
error text that reaches a log, a note or ``extra`` passes through :func:`redact`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ....core.parameters import ParameterSet
from ..proposer import Proposal, ProposalContext, Proposer
from ..rationale import truncate_text
from .prompt import CalibrationPrompt, PromptOptions, build_prompt

__all__ = [
    "SECRET_ENV_VARS",
    "register_secret_env",
    "redact",
    "ReplyError",
    "ReplyProblem",
    "ValidatedReply",
    "parse_reply_json",
    "validate_reply",
    "reask_message",
    "RetryPolicy",
    "ServiceUnavailableError",
    "VLMProposalError",
    "TokenUsage",
    "VLMProposer",
    "DeadlineExceeded",
    "call_with_deadline",
]

log = logging.getLogger(__name__)

#: longest reply text parsed, characters (longer replies are unusable: re-asked, then the fallback)
MAX_REPLY_CHARS = 1_000_000
#: longest rationale (and chain-of-thought text) kept from a reply, characters (the rest is cut, marked)
MAX_RATIONALE_CHARS = 20000

#: environment variables whose values are never written anywhere.
SECRET_ENV_VARS: tuple[str, ...] = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY")

# Google API keys are "AIza" + 35 URL-safe characters; also scrub ?key=... query strings,
# "Bearer ..." headers and x-goog-api-key header dumps.
_SECRET_PATTERNS = (
    re.compile(r"AIza[0-9A-Za-z_\-]{35,}"),
    re.compile(r"(?i)([?&](?:key|api_key)=)[^&\s'\"]+"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}"),
    re.compile(r"(?i)((?:x-goog-api-key|api[_-]?key|authorization)['\"]?\s*[:=]\s*['\"]?)[^'\"\s,}]{6,}"),
)


#: shortest run of a secret's characters (in any of its forms) that is redacted where it appears alone
SECRET_FRAGMENT = 8


def _secret_forms(sec: str) -> set[str]:
    """The forms a service can echo a secret in: itself, URL-encoded, hex, and base64 (standard and
    URL-safe) at each of the three byte alignments it can have inside a longer encoded text
    (only the characters that depend on the secret's bytes alone)."""
    import base64
    import urllib.parse

    forms = {sec, urllib.parse.quote(sec, safe=""), urllib.parse.quote_plus(sec, safe="")}
    raw = sec.encode("utf-8")
    forms |= {raw.hex(), raw.hex().upper()}  # a hex dump of the request or the error body
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        for k in range(3):  # k bytes of other data before the secret in the encoded text
            e = enc(b"\0" * k + raw).decode("ascii")
            start = (0, 2, 3)[k]  # the first characters mix in the bytes before the secret
            end = ((k + len(raw)) // 3) * 4  # the last group mixes in the bytes after it
            forms.add(e[start:end])
    return {f for f in forms if f}


def _redact_secret(s: str, sec: str) -> str:
    """``s`` with every form of ``sec`` and every run of >= :data:`SECRET_FRAGMENT` characters
    of one of its forms (a prefix, a suffix, a cut-off echo) replaced by ``[REDACTED]``."""
    if len(sec) < SECRET_FRAGMENT:
        return s.replace(sec, "[REDACTED]")
    covered = bytearray(len(s))
    for form in _secret_forms(sec):
        if len(form) < SECRET_FRAGMENT:
            continue
        for j in range(len(form) - SECRET_FRAGMENT + 1):
            gram = form[j:j + SECRET_FRAGMENT]
            i = s.find(gram)
            while i >= 0:
                covered[i:i + SECRET_FRAGMENT] = b"\1" * SECRET_FRAGMENT
                i = s.find(gram, i + 1)
    if not any(covered):
        return s
    out, i = [], 0
    while i < len(s):
        if covered[i]:
            while i < len(s) and covered[i]:
                i += 1
            out.append("[REDACTED]")
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


#: environment variables a configured proposer reads its key from (``api_key_env``), beside SECRET_ENV_VARS
_REGISTERED_SECRET_VARS: set[str] = set()


def register_secret_env(name: str) -> None:
    """Redact the value of environment variable ``name`` too, from now on in this process: a
    proposer configured to read its key from a variable of the user's choosing
    (``proposer_options.api_key_env``) registers it, so every :func:`redact` call knows it."""
    if isinstance(name, str) and name.strip():
        _REGISTERED_SECRET_VARS.add(name.strip())


def redact(text: object, extra_secrets: Sequence[str] = ()) -> str:
    """``str(text)`` with API keys removed.

    Removes the current values of :data:`SECRET_ENV_VARS`, of the variables a proposer
    registered (:func:`register_secret_env`) and of ``extra_secrets`` wherever they occur, in
    every form a service can echo them in (exact, any run of :data:`SECRET_FRAGMENT` or more of
    their characters such as a prefix, URL-encoded, hex, base64 standard or URL-safe at any
    alignment), plus anything shaped like a Google API
    key, a ``key=`` query parameter or an ``Authorization``/``x-goog-api-key`` header value.
    """
    s = str(text)
    names = list(SECRET_ENV_VARS) + sorted(_REGISTERED_SECRET_VARS)
    secrets = [os.environ.get(v, "") for v in names] + list(extra_secrets)
    s = _SECRET_PATTERNS[0].sub("[REDACTED]", s)  # key-shaped text first: a fragment cut out would hide its shape
    for pat in _SECRET_PATTERNS[1:]:
        s = pat.sub(lambda m: m.group(1) + "[REDACTED]", s)
    for sec in sorted({x for x in secrets if x and len(x) >= 4}, key=len, reverse=True):
        s = _redact_secret(s, sec)
    return s


# ----------------------------------------------------------------------------------------
# reply validation (one place for every VLM transport)
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplyProblem:
    """One thing wrong with a reply.

    Attributes:
        message: what was wrong, naming the field/parameter.
        reask: True when the reply should be asked again (if re-asks remain);
            False when a repair (clamp, keep current value) is enough.
    """

    message: str
    reask: bool


class ReplyError(ValueError):
    """A reply that cannot be used at all (not JSON, no parameter values).

    Attributes:
        problems: the :class:`ReplyProblem` list found before giving up.
    """

    def __init__(self, problems: Sequence[ReplyProblem]):
        self.problems = list(problems)
        super().__init__("; ".join(p.message for p in self.problems))


@dataclass
class ValidatedReply:
    """A reply after validation and repair.

    Attributes:
        values: a value for every free parameter, inside bounds (parameter units).
        rationale, confidence: as replied (confidence clamped to [0, 1]).
        diagnosis: ``{name: text}`` for known names.
        excitation_change: validated active-learning request, or None.
        analysis: the chain-of-thought text ("" when absent).
        problems: everything repaired or rejected.
    """

    values: dict[str, float]
    rationale: str
    confidence: float
    diagnosis: dict[str, str] = field(default_factory=dict)
    excitation_change: dict[str, float] | None = None
    analysis: str = ""
    problems: list[ReplyProblem] = field(default_factory=list)

    @property
    def wants_reask(self) -> bool:
        return any(p.reask for p in self.problems)


_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*(.*?)\s*```\s*$", re.S)


def parse_reply_json(text: str | None, *, max_chars: int = MAX_REPLY_CHARS) -> dict[str, Any]:
    """Parse a model reply into a JSON object.

    Accepts a bare JSON object, one wrapped in a Markdown code fence, or one embedded
    in prose (the outermost ``{...}``). A reply longer than ``max_chars`` is not parsed;
    one the parser cannot take (nesting past the recursion limit) is unusable like any
    other malformed reply.

    Raises:
        ReplyError: if the text is empty, too long, or holds no JSON object.
    """
    if text is None or not str(text).strip():
        raise ReplyError([ReplyProblem("the reply was empty", True)])
    if len(str(text)) > max_chars:
        raise ReplyError([ReplyProblem(f"the reply is {len(str(text)):,} characters, over the limit of "
                                       f"{max_chars:,} (max_reply_chars); not parsed", True)])
    s = str(text).strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1)
    candidates = [s]
    i, j = s.find("{"), s.rfind("}")
    if 0 <= i < j and (i, j) != (0, len(s) - 1):
        candidates.append(s[i:j + 1])
    last_err = None
    for c in candidates:
        try:
            obj = json.loads(c)
        except (ValueError, RecursionError) as err:  # RecursionError: e.g. 100 000 nested '['
            last_err = err if not isinstance(err, RecursionError) else "nested too deeply to parse"
            continue
        if isinstance(obj, dict):
            return obj
        last_err = f"top-level JSON is a {type(obj).__name__}, expected an object"
    raise ReplyError([ReplyProblem(f"the reply is not a JSON object ({last_err})", True)])


def _as_float(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return None
    return None


def validate_reply(text: str | None, parameters: ParameterSet, current: Mapping[str, float], *,
                   options: PromptOptions | None = None, max_chars: int = MAX_REPLY_CHARS,
                   max_rationale_chars: int = MAX_RATIONALE_CHARS) -> ValidatedReply:
    """Validate and repair a reply against the parameter specification.

    Rules (each violation becomes a :class:`ReplyProblem`):

    - ``parameters`` must be a list of ``{name, value}`` (a ``{name: value}`` dict is
      accepted and noted);
    - unknown or frozen names are dropped (re-ask);
    - non-numeric, NaN or infinite values keep the current value (re-ask);
    - values outside ``[lower, upper]`` are clamped (repair only);
    - free parameters not mentioned keep their current value (repair only);
    - ``confidence`` is clamped to [0, 1]; missing -> 0.5 (repair only);
    - ``excitation_change`` is kept only with ``options.active_learning``; gains and
      frequencies are clamped to ``options.excitation_limits``.

    Args:
        text: the raw reply text.
        parameters: the rig's parameter specification.
        current: current values ``{name: value}`` (missing ones fall back to nominal).
        options: prompt options (active learning switch and limits).
        max_chars: longest reply parsed (characters). max_rationale_chars: longest
            rationale kept; a longer one is cut and marked ``[truncated: N characters]``.

    Returns:
        The repaired reply with every problem listed.

    Raises:
        ReplyError: when nothing usable is in the reply (not JSON, no ``parameters``
            field, or not a single valid free-parameter value).
    """
    o = options or PromptOptions()
    obj = parse_reply_json(text, max_chars=max_chars)
    problems: list[ReplyProblem] = []
    base = {**parameters.nominal(), **{k: float(v) for k, v in current.items() if k in parameters}}
    values = _reply_values(obj, parameters, base, problems)
    missing = [n for n in parameters.free_names if n not in values]
    if missing:
        problems.append(ReplyProblem(f"no value for {', '.join(missing)}; kept current value(s)", False))
    out_values = {n: values.get(n, base[n]) for n in parameters.free_names}
    rationale = _reply_rationale(obj, max_rationale_chars, problems)
    conf = _reply_confidence(obj, problems)
    diagnosis = _reply_diagnosis(obj, parameters, problems)
    exc = _validate_excitation(obj.get("excitation_change"), o, problems)
    analysis = obj.get("analysis") if isinstance(obj.get("analysis"), str) else ""
    if o.chain_of_thought and not analysis:
        problems.append(ReplyProblem("no 'analysis' given although chain of thought was requested", False))
    return ValidatedReply(out_values, rationale.strip(), float(conf), diagnosis, exc, analysis or "", problems)


def _reply_values(obj: Mapping[str, Any], parameters: ParameterSet, base: Mapping[str, float],
                  problems: list[ReplyProblem]) -> dict[str, float]:
    """The reply's valid free-parameter values, clamped to their bounds; ReplyError when there is none."""
    free = parameters.free_names
    raw = obj.get("parameters")
    if isinstance(raw, Mapping):
        problems.append(ReplyProblem("'parameters' was a {name: value} object instead of a list of {name, value}",
                                     False))
        raw = [{"name": k, "value": v} for k, v in raw.items()]
    if not isinstance(raw, list):
        raise ReplyError([ReplyProblem("the reply has no 'parameters' list of {name, value} entries", True)])

    values: dict[str, float] = {}
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or "name" not in entry:
            problems.append(ReplyProblem(f"parameters[{i}] is not a {{name, value}} object: {str(entry)[:80]}", True))
            continue
        name = str(entry["name"]).strip()
        if name not in parameters:
            problems.append(ReplyProblem(f"unknown parameter '{name}' ignored (valid: {', '.join(free)})", True))
            continue
        if parameters[name].frozen:
            problems.append(ReplyProblem(f"parameter '{name}' is fixed; its proposed value was ignored", True))
            continue
        if name in values:
            problems.append(ReplyProblem(f"parameter '{name}' given twice; the first value was kept", False))
            continue
        v = _as_float(entry.get("value"))
        if v is None or not math.isfinite(v):
            problems.append(ReplyProblem(
                f"parameter '{name}': value {entry.get('value')!r} is not a finite number; kept current "
                f"{base[name]:.6g}", True))
            continue
        spec = parameters[name]
        c = spec.clip(v)
        if c != v:
            problems.append(ReplyProblem(
                f"parameter '{name}': {v:.6g} {spec.unit} outside [{spec.lower:.6g}, {spec.upper:.6g}]; "
                f"clamped to {c:.6g}", False))
        values[name] = c
    if not values:
        raise ReplyError(problems + [ReplyProblem("no valid value for any free parameter", True)])
    return values


def _reply_rationale(obj: Mapping[str, Any], max_chars: int, problems: list[ReplyProblem]) -> str:
    """The reply's rationale ("" when missing), cut to ``max_chars`` characters."""
    rationale = obj.get("rationale")
    if not isinstance(rationale, str) or not rationale.strip():
        problems.append(ReplyProblem("no rationale given", False))
        return ""
    if len(rationale.strip()) > max_chars:
        problems.append(ReplyProblem(f"rationale of {len(rationale.strip()):,} characters cut to "
                                     f"{max_chars:,}", False))
        return truncate_text(rationale.strip(), max_chars)
    return rationale


def _reply_confidence(obj: Mapping[str, Any], problems: list[ReplyProblem]) -> float:
    """The reply's confidence clamped to [0, 1]; 0.5 when it is not a number."""
    conf = _as_float(obj.get("confidence"))
    if conf is None or not math.isfinite(conf):
        problems.append(ReplyProblem(f"confidence {obj.get('confidence')!r} is not a number; set to 0.5", False))
        return 0.5
    if not 0.0 <= conf <= 1.0:
        problems.append(ReplyProblem(f"confidence {conf:.3g} outside [0, 1]; clamped", False))
        return min(max(conf, 0.0), 1.0)
    return conf


def _reply_diagnosis(obj: Mapping[str, Any], parameters: ParameterSet, problems: list[ReplyProblem]) -> dict[str, str]:
    """The reply's per-parameter diagnoses ``{name: text}`` (list or mapping form; unknown names dropped)."""
    diagnosis: dict[str, str] = {}
    raw_diag = obj.get("diagnosis")
    if isinstance(raw_diag, Mapping):
        raw_diag = [{"name": k, "diagnosis": v} for k, v in raw_diag.items()]
    if isinstance(raw_diag, list):
        for d in raw_diag:
            if isinstance(d, Mapping) and str(d.get("name", "")) in parameters and d.get("diagnosis"):
                diagnosis[str(d["name"])] = str(d["diagnosis"])
    elif raw_diag is not None:
        problems.append(ReplyProblem("'diagnosis' is not a list of {name, diagnosis}; ignored", False))
    return diagnosis


def _validate_excitation(raw: Any, o: PromptOptions, problems: list[ReplyProblem]) -> dict[str, float] | None:
    if raw is None or raw == {}:
        return None
    if not o.active_learning:
        problems.append(ReplyProblem("excitation_change ignored: active learning is off", False))
        return None
    if not isinstance(raw, Mapping):
        problems.append(ReplyProblem("excitation_change is not an object; ignored", False))
        return None
    lim = o.excitation_limits
    out: dict[str, float] = {}
    g = _as_float(raw.get("amplitude_gain"))
    if g is not None and math.isfinite(g):
        c = min(max(g, lim.amplitude_gain[0]), lim.amplitude_gain[1])
        if c != g:
            problems.append(ReplyProblem(f"excitation amplitude_gain {g:.3g} clamped to {c:.3g}", False))
        if c != 1.0:
            out["amplitude_gain"] = c
    lo, hi = _as_float(raw.get("frequency_low_hz")), _as_float(raw.get("frequency_high_hz"))
    if lo is not None or hi is not None:
        f0, f1 = lim.frequency_hz
        lo = f0 if lo is None or not math.isfinite(lo) else min(max(lo, f0), f1)
        hi = f1 if hi is None or not math.isfinite(hi) else min(max(hi, f0), f1)
        if lo < hi:
            out["frequency_low_hz"], out["frequency_high_hz"] = lo, hi
        else:
            problems.append(ReplyProblem(f"excitation frequency band [{lo:.3g}, {hi:.3g}] Hz is empty; ignored", False))
    return out or None


def reask_message(problems: Sequence[ReplyProblem], free_names: Sequence[str]) -> str:
    """The follow-up user message asking the model to fix its reply."""
    items = "\n".join(f"- {p.message}" for p in problems)
    return ("Your previous reply could not be used as it was:\n" + items +
            "\nReply again with ONE JSON object following the Reply format, with a finite value inside the "
            f"bounds for each of: {', '.join(free_names)}.")


# ----------------------------------------------------------------------------------------
# retries
# ----------------------------------------------------------------------------------------
class ServiceUnavailableError(RuntimeError):
    """The model service kept failing (retries exhausted, or a non-retryable error).

    The message is already redacted. ``attempts`` is the number of calls made.
    """

    def __init__(self, message: str, attempts: int = 0, code: int | None = None, retryable: bool = True):
        super().__init__(message)
        self.attempts = attempts
        self.code = code
        #: False when the service refused the request itself (4xx other than 408/429):
        #: asking again later with the same key and request will not help.
        self.retryable = retryable


class VLMProposalError(RuntimeError):
    """A VLM proposer could not produce a proposal and no fallback is configured."""


class DeadlineExceeded(TimeoutError):
    """A service call did not finish before the iteration's deadline (retryable: a timeout)."""


def call_with_deadline(fn: Callable[[], Any], timeout_s: float, what: str = "request") -> Any:
    """``fn()`` run in a daemon thread, waited for at most ``timeout_s`` seconds.

    The transports' own timeouts bound each socket operation, not a whole request (a
    server that trickles bytes, or a proxy that holds the connection, can outlast them);
    this bounds the wall time. A call still running at the deadline is abandoned: its
    thread is a daemon and ends with its own socket timeout, which the callers set to
    the same remaining time.

    Args:
        fn: the call (no arguments).
        timeout_s: wall-time limit, s (> 0).
        what: label for the error message.

    Returns:
        ``fn()``'s result.

    Raises:
        DeadlineExceeded: ``fn`` had not returned after ``timeout_s``.
        Exception: whatever ``fn`` raised, re-raised in the caller's thread.
    """
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = err

    t = threading.Thread(target=target, name=f"vid2sid-{what}", daemon=True)
    t.start()
    t.join(max(float(timeout_s), 0.0))
    if t.is_alive():
        raise DeadlineExceeded(f"{what}: no answer within {timeout_s:.3g} s (iteration deadline)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff for transient service errors.

    The delay before retry ``k`` (0-based) is ``min(max_delay_s, initial_delay_s *
    exp_base**k)``, or the server's ``RetryInfo.retryDelay`` when it asks for longer
    (still capped at ``max_delay_s``). Retryable HTTP codes follow the google-genai
    SDK's own list (``_api_client._RETRY_HTTP_STATUS_CODES``: 408, 429, 500, 502, 503, 504).

    Attributes:
        max_retries: retries after the first attempt (0 = try once).
        initial_delay_s, max_delay_s, exp_base: backoff shape, seconds.
        retry_codes: HTTP status codes that are retried.
    """

    max_retries: int = 4
    initial_delay_s: float = 2.0
    max_delay_s: float = 60.0
    exp_base: float = 2.0
    retry_codes: tuple[int, ...] = (408, 429, 500, 502, 503, 504)

    def delay(self, retry_index: int, server_hint_s: float | None = None) -> float:
        d = min(self.max_delay_s, self.initial_delay_s * self.exp_base ** retry_index)
        if server_hint_s is not None and math.isfinite(server_hint_s):
            d = min(self.max_delay_s, max(d, server_hint_s))
        return float(d)

    def run(self, fn: Callable[[], Any], *, classify: Callable[[BaseException], tuple[bool, int | None, float | None]],
            sleep: Callable[[float], None], what: str, events: list[dict[str, Any]] | None = None,
            deadline: float | None = None, clock: Callable[[], float] = time.monotonic) -> Any:
        """Call ``fn`` until it succeeds, retrying what ``classify`` calls transient.

        Args:
            fn: the call.
            classify: ``err -> (retryable, http code or None, server delay hint s or None)``.
            sleep: the sleep function (injected in tests).
            what: label for logs and errors (e.g. ``"gemini generate_content"``).
            events: if given, one ``{"attempt", "code", "error", "delay_s"}`` dict per
                failed attempt is appended (redacted).
            deadline: ``clock()`` time after which no attempt starts and no backoff
                sleep is begun that would end later (None = retries only).
            clock: monotonic clock in s (tests inject a fake with ``sleep``).

        Returns:
            ``fn()``'s result.

        Raises:
            ServiceUnavailableError: after ``max_retries`` retries, when the deadline
                leaves no time for the next attempt, or at once on a non-retryable
                error (message redacted, original chained).
        """
        attempt = 0
        while True:
            if deadline is not None and clock() >= deadline:
                raise ServiceUnavailableError(f"{what}: iteration deadline reached before attempt {attempt + 1}",
                                              attempts=attempt)
            try:
                return fn()
            except Exception as err:  # classified below; nothing escapes unredacted
                retryable, code, hint = classify(err)
                msg = redact(f"{type(err).__name__}: {err}")[:400]
                if events is not None:
                    events.append({"attempt": attempt + 1, "code": code, "error": msg})
                if not retryable or attempt >= self.max_retries:
                    why = "gave up after %d attempt(s)" % (attempt + 1) if retryable else "non-retryable error"
                    raise ServiceUnavailableError(f"{what}: {why}: {msg}", attempts=attempt + 1, code=code,
                                                  retryable=retryable) from None
                d = self.delay(attempt, hint)
                if deadline is not None and clock() + d >= deadline:
                    raise ServiceUnavailableError(
                        f"{what}: gave up after {attempt + 1} attempt(s), the next retry ({d:.3g} s away) would pass "
                        f"the iteration deadline: {msg}", attempts=attempt + 1, code=code) from None
                if events is not None:
                    events[-1]["delay_s"] = d
                log.warning("%s failed (attempt %d/%d, %s); retrying in %.1f s", what, attempt + 1,
                            self.max_retries + 1, msg, d)
                sleep(d)
                attempt += 1


# ----------------------------------------------------------------------------------------
# token usage
# ----------------------------------------------------------------------------------------
@dataclass
class TokenUsage:
    """Token counts summed over the calls of one iteration."""

    prompt_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    calls: int = 0

    def add(self, prompt: int | None, output: int | None, thinking: int | None) -> None:
        self.prompt_tokens += int(prompt or 0)
        self.output_tokens += int(output or 0)
        self.thinking_tokens += int(thinking or 0)
        self.calls += 1

    def to_dict(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "thinking_tokens": self.thinking_tokens,
                "total_tokens": self.prompt_tokens + self.output_tokens + self.thinking_tokens, "calls": self.calls}


# ----------------------------------------------------------------------------------------
# the shared proposer flow
# ----------------------------------------------------------------------------------------
class VLMProposer:
    """Base class of VLM proposers: prompt -> send -> validate -> (re-ask) -> Proposal.

    Subclasses set ``name`` and implement :meth:`_prepare_media` (optional),
    :meth:`_send` and :meth:`_cost_usd` (optional).

    Args:
        options: prompt/ablation switches.
        max_reasks: follow-up requests after an unusable reply (bounded).
        retry: backoff policy for transient service errors.
        fallback: proposer used when this one is unavailable or keeps failing: a
            :class:`Proposer`, a registry name (``"reasoner"``, built lazily via
            ``calibration.proposers.make_proposer``), or None to raise instead.
        sleep: sleep function for backoff (tests inject a recorder).
        deadline_s: total time one iteration may spend on the service (every attempt,
            backoff and re-ask), s; after it the iteration uses the fallback.
        retry_every: after a failed iteration, the service is skipped (fallback at once)
            until this many iterations have passed, then tried again (>= 1).
        clock: monotonic clock, s (tests inject a fake together with ``sleep``).
        max_reply_chars: longest reply parsed (characters, default :data:`MAX_REPLY_CHARS`);
            a longer one is an unusable reply (re-asked, then the fallback).

    Raises:
        ValueError: ``max_reasks`` < 0, ``deadline_s`` not > 0, ``retry_every`` < 1.
    """

    name: str = "vlm"

    def __init__(self, *, options: PromptOptions, max_reasks: int = 2, retry: RetryPolicy | None = None,
                 fallback: Proposer | str | None = None, sleep: Callable[[float], None] = time.sleep,
                 deadline_s: float = 30.0, retry_every: int = 3, clock: Callable[[], float] = time.monotonic,
                 max_reply_chars: int = MAX_REPLY_CHARS):
        if max_reasks < 0:
            raise ValueError(f"max_reasks must be >= 0, got {max_reasks}")
        if isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float)) or not (
                math.isfinite(deadline_s) and deadline_s > 0):
            raise ValueError(f"deadline_s must be a number > 0 (s), got {deadline_s!r}")
        if isinstance(retry_every, bool) or not isinstance(retry_every, int) or retry_every < 1:
            raise ValueError(f"retry_every must be an integer >= 1 (iterations), got {retry_every!r}")
        if isinstance(max_reply_chars, bool) or not isinstance(max_reply_chars, int) or max_reply_chars < 1:
            raise ValueError(f"max_reply_chars must be an integer >= 1 (characters), got {max_reply_chars!r}")
        self.max_reply_chars = int(max_reply_chars)
        self.deadline_s = float(deadline_s)
        self.retry_every = int(retry_every)
        self._clock = clock
        self._deadline: float | None = None
        self._failed_at: tuple[int, str] | None = None  # (iteration, reason) of the last service failure
        self.options = options
        self.max_reasks = int(max_reasks)
        self.retry = retry or RetryPolicy()
        self._fallback_spec = fallback
        self._fallback: Proposer | None = fallback if (fallback is not None and not isinstance(fallback, str)) else None
        self._sleep = sleep
        #: why the service cannot be used at all (e.g. missing key); None when usable.
        self.unavailable_reason: str | None = None

    # -- interface -----------------------------------------------------------------------
    @property
    def wants_video(self) -> bool:
        """True when the loop should render videos for this proposer."""
        return bool(self.options.video) and self.unavailable_reason is None

    @property
    def model_name(self) -> str:
        return ""

    def propose(self, context: ProposalContext) -> Proposal:
        """One proposal (see the module docstring for the flow).

        Raises:
            VLMProposalError: when the service is unavailable or the replies stay
                unusable and no fallback is configured (message redacted).
        """
        if self.unavailable_reason is not None:
            return self._use_fallback(context, self.unavailable_reason,
                                      {"service": {"proposer": self.name, "state": "refused"}})
        it = int(context.iteration)
        failed = self._last_failure(context)
        if failed is not None and it - failed[0] < self.retry_every:
            retry_at = failed[0] + self.retry_every
            log.warning("%s: skipping the service in iteration %d (it failed in iteration %d); next try in "
                        "iteration %d", self.name, it, failed[0], retry_at)
            reason = (f"service failed in iteration {failed[0]} ({failed[1][:200]}); not asked again before "
                      f"iteration {retry_at}")
            return self._use_fallback(context, reason, {"service": {
                "proposer": self.name, "state": "skipped", "failed_at": failed[0], "retry_at": retry_at}})
        if failed is not None:
            log.warning("%s: trying the service again in iteration %d (it failed in iteration %d)", self.name, it,
                        failed[0])
        t0 = self._clock()
        self._deadline = t0 + self.deadline_s
        usage = TokenUsage()
        events: list[dict[str, Any]] = []
        extra: dict[str, Any] = {"proposed_by": self.name, "model": self.model_name}
        try:
            prompt = build_prompt(context, self.options)
            prompt = self._prepare_media(prompt, events)
            extra["media"] = [f"{m.kind}:{m.role}" for m in prompt.media]
            reply, notes, reasks = self._ask(prompt, context, usage, events)
        except (ServiceUnavailableError, ReplyError) as err:
            extra.update(self._usage_extra(usage, events, t0))
            reason = redact(err)
            if isinstance(err, ServiceUnavailableError) and not err.retryable:
                # e.g. an invalid key (400/401/403): later iterations go straight to the fallback
                self.unavailable_reason = f"service refused an earlier request ({reason})"
                extra["service"] = {"proposer": self.name, "state": "refused", "error": reason[:400]}
            elif isinstance(err, ServiceUnavailableError):
                self._failed_at = (it, reason)
                extra["service"] = {"proposer": self.name, "state": "failed", "failed_at": it,
                                    "retry_at": it + self.retry_every, "error": reason[:400]}
                log.warning("%s: service failed in iteration %d; the fallback proposes until iteration %d, then "
                            "the service is tried again", self.name, it, it + self.retry_every)
            else:  # the service answered, the replies were unusable: not a service failure
                self._failed_at = None
                extra["service"] = {"proposer": self.name, "state": "ok"}
            return self._use_fallback(context, reason, extra)
        finally:
            self._deadline = None
        self._failed_at = None
        extra["service"] = {"proposer": self.name, "state": "ok"}
        extra.update(self._usage_extra(usage, events, t0))
        extra["reasks"] = reasks
        if reply.analysis:
            extra["analysis"] = truncate_text(reply.analysis, MAX_RATIONALE_CHARS)
        notes = [f"{self.name}: {n}" for n in notes]
        notes += [f"{self.name}: media not attached: {n}" for n in prompt.media_notes]
        return Proposal(values=reply.values, rationale=reply.rationale, confidence=reply.confidence,
                        excitation_change=reply.excitation_change if self.options.active_learning else None,
                        diagnosis=reply.diagnosis, notes=notes, extra=extra)

    def _last_failure(self, context: ProposalContext) -> tuple[int, str] | None:
        """(iteration, reason) of the newest service failure not followed by a success, or None.

        Read from ``context.history`` (records' ``extra["service"]``), so a resumed run
        decides as the uninterrupted one did; this instance's memory covers callers
        that pass no history.
        """
        found: tuple[int, str] | None = None
        for rec in reversed(list(context.history)):
            svc = rec.extra.get("service") if isinstance(rec.extra, Mapping) else None
            if not isinstance(svc, Mapping) or svc.get("proposer") != self.name:
                continue
            if svc.get("state") == "ok":
                break
            if svc.get("state") in ("failed", "skipped") and isinstance(svc.get("failed_at"), int):
                err = rec.extra.get("fallback", {}).get("reason", "") if isinstance(rec.extra.get("fallback"),
                                                                                     Mapping) else ""
                found = (int(svc["failed_at"]), str(svc.get("error") or err))
                break
        mem = self._failed_at
        if mem is not None and (found is None or mem[0] > found[0]) and mem[0] < int(context.iteration):
            found = mem
        return found

    # -- deadline ------------------------------------------------------------------------
    def remaining_s(self, default_s: float) -> float:
        """Time a request may take now: ``min(default_s, time left before the deadline)``, s.

        Raises:
            DeadlineExceeded: the iteration's deadline has passed (a timeout: transient,
                so the service is retried in a later iteration, not given up for good).
        """
        if self._deadline is None:
            return float(default_s)
        left = self._deadline - self._clock()
        if left <= 0:
            raise DeadlineExceeded(f"{self.name}: iteration deadline of {self.deadline_s:g} s reached")
        return float(min(default_s, left))

    def call_service(self, fn: Callable[[float], Any], default_timeout_s: float, what: str) -> Any:
        """``fn(timeout_s)`` bounded by the iteration's deadline (see :func:`call_with_deadline`).

        ``fn`` gets the per-attempt timeout (``min(default_timeout_s, time left)``) to
        hand to its HTTP client; the call is also abandoned at the deadline.
        """
        timeout = self.remaining_s(default_timeout_s)
        if self._deadline is None:
            return fn(timeout)
        return call_with_deadline(lambda: fn(timeout), timeout, what)

    def run_with_retries(self, fn: Callable[[float], Any], default_timeout_s: float, *,
                         classify: Callable[[BaseException], tuple[bool, int | None, float | None]], what: str,
                         events: list[dict[str, Any]]) -> Any:
        """:meth:`RetryPolicy.run` of :meth:`call_service` within the iteration's deadline."""
        return self.retry.run(lambda: self.call_service(fn, default_timeout_s, what), classify=classify,
                              sleep=self._sleep, what=what, events=events, deadline=self._deadline,
                              clock=self._clock)

    # -- steps ---------------------------------------------------------------------------
    def _ask(self, prompt: CalibrationPrompt, context: ProposalContext, usage: TokenUsage,
             events: list[dict[str, Any]]) -> tuple[ValidatedReply, list[str], int]:
        """Send, validate, re-ask up to ``max_reasks`` times; returns (reply, notes, re-asks)."""
        turns: list[tuple[str, str]] = []  # (model reply, our feedback)
        notes: list[str] = []
        best: ValidatedReply | None = None
        last_error: ReplyError | None = None
        for k in range(self.max_reasks + 1):
            text: str | None = None
            try:
                text = self._send(prompt, turns, usage, events)
                reply = validate_reply(text, context.parameters, context.current, options=self.options,
                                       max_chars=self.max_reply_chars)
            except ReplyError as err:
                last_error = err
                notes.append(f"reply {k + 1} unusable: {redact(err)}")
                problems = err.problems
            else:
                best = reply
                if not reply.wants_reask or k == self.max_reasks:
                    notes += [f"reply {k + 1}: {p.message}" for p in reply.problems]
                    return reply, notes, k
                notes.append(f"reply {k + 1} re-asked: " + "; ".join(p.message for p in reply.problems if p.reask))
                problems = reply.problems
            if k < self.max_reasks:
                # an empty model turn is rejected by some APIs: keep a placeholder
                turns.append((text if text and text.strip() else "(no usable reply)",
                              reask_message(problems, prompt.free_names)))
        if best is not None:
            notes += [f"used repaired reply: {p.message}" for p in best.problems]
            return best, notes, self.max_reasks
        raise last_error if last_error is not None else ReplyError([ReplyProblem("no reply", True)])

    def _prepare_media(self, prompt: CalibrationPrompt, events: list[dict[str, Any]]) -> CalibrationPrompt:
        """Transport hook: upload/inline media; return the prompt with the media it could attach."""
        return prompt

    def _send(self, prompt: CalibrationPrompt, turns: Sequence[tuple[str, str]], usage: TokenUsage,
              events: list[dict[str, Any]]) -> str | None:
        """Transport hook: one request (with retries); returns the reply text, adds usage.

        ``turns`` are earlier (model reply, feedback) pairs of this iteration, to be sent
        as a multi-turn conversation after the prompt. Raise :class:`ServiceUnavailableError`
        when the service keeps failing, :class:`ReplyError` when the reply holds no text
        (blocked, truncated).
        """
        raise NotImplementedError

    def _cost_usd(self, usage: TokenUsage) -> float | None:
        """Transport hook: estimated cost of ``usage`` in USD, or None when unknown."""
        return None

    def _usage_extra(self, usage: TokenUsage, events: list[dict[str, Any]], t0: float) -> dict[str, Any]:
        cost = self._cost_usd(usage)
        out: dict[str, Any] = {"usage": usage.to_dict(), "cost_usd": None if cost is None else round(cost, 6),
                               "service_wall_s": round(self._clock() - t0, 3), "deadline_s": self.deadline_s}
        if events:
            out["service_errors"] = events
        return out

    # -- fallback ------------------------------------------------------------------------
    def fallback_proposer(self) -> Proposer | None:
        """The fallback proposer (built on first use), or None when none is configured."""
        if self._fallback is None and isinstance(self._fallback_spec, str):
            from .. import make_proposer  # lazy: the registry imports this module

            self._fallback = make_proposer(self._fallback_spec)
        return self._fallback

    def _use_fallback(self, context: ProposalContext, reason: str, extra: dict[str, Any]) -> Proposal:
        fb = self.fallback_proposer()
        if fb is None:
            raise VLMProposalError(f"{self.name}: {reason}")
        log.warning("%s unavailable (%s); proposing with fallback '%s'", self.name, reason, fb.name)
        p = fb.propose(context)
        p.notes = [f"{self.name} unavailable ({reason}); proposal made by fallback '{fb.name}'"] + list(p.notes)
        merged = dict(extra)
        merged.update(p.extra)
        merged["proposed_by"] = fb.name
        merged["fallback"] = {"from": self.name, "to": fb.name, "reason": reason}
        p.extra = merged
        return p
