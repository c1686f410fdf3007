"""The calibration prompt for vision-language proposers, assembled from data.

One :class:`CalibrationPrompt` is built per iteration from the
:class:`~vid2sid_ros.calibration.proposers.proposer.ProposalContext` by :func:`build_prompt`. It
is a tree of small dataclasses (rig, parameters, metrics, history, media, rules) that
renders to titled text sections; the transports (``gemini.py``, ``openai_compat.py``)
turn the same object into their own request format, so both VLM proposers ask the
same question. The answer contract is the pydantic model returned by
:func:`reply_model` (the JSON response schema); the "Reply format" section of the
prompt is rendered from the same model's field descriptions, so the text and the
schema cannot drift apart.

The prompt follows the Vid2Sid paper's reasoning layer (see
``../shared/reference/vid2sid-paper-explainer.txt``): paired sim/real videos, current
parameter values with bounds and physical meaning, error metrics (MAE px, overall and
per keypoint), the iteration history with rationales, and rules. The paper's ablation
switches map to :class:`PromptOptions`: ``video`` (off = text-only mode),
``chain_of_thought`` (an ``analysis`` field written before the values) and
``active_learning`` (an optional ``excitation_change`` request).
"""

from __future__ import annotations

import functools
import io
import json
import math
import mimetypes
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np
from pydantic import BaseModel, Field, create_model

from ....core.trajectory import Trajectory, align, display_unit
from ...objective import measurement_unit
from ..proposer import IterationRecord, ProposalContext

__all__ = [
    "SYSTEM_INSTRUCTION",
    "PromptOptions",
    "ExcitationLimits",
    "ParameterBrief",
    "TrialMetrics",
    "MetricsBrief",
    "HistoryEntry",
    "MediaItem",
    "PromptSection",
    "CalibrationPrompt",
    "build_prompt",
    "reply_model",
    "ParameterValue",
    "ParameterDiagnosis",
    "ExcitationChangeRequest",
    "sample_key_frames",
    "trajectory_plot_png",
]


#: the system message of every VLM request (role and output discipline).
SYSTEM_INSTRUCTION = (
    "You are an expert in robot dynamics and system identification. You compare a real robot with its "
    "simulated twin, from paired videos, keypoint trajectories and error metrics, diagnose which physical "
    "parameters cause the difference, and propose new parameter values with a short physical rationale. "
    "You reply with JSON only, following the requested schema.")


# ----------------------------------------------------------------------------------------
# options
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExcitationLimits:
    """Allowed active-learning requests (``excitation_change``).

    Attributes:
        amplitude_gain: (min, max) multiplicative gain on the excitation amplitude.
        frequency_hz: (min, max) of a requested frequency band in Hz.
    """

    amplitude_gain: tuple[float, float] = (0.25, 4.0)
    frequency_hz: tuple[float, float] = (0.05, 15.0)


@dataclass(frozen=True)
class PromptOptions:
    """What goes into the prompt (the paper's ablation switches and media choices).

    Attributes:
        video: attach the paired sim/real videos (False = the paper's text-only mode;
            no video, no key frames).
        video_roles: which entries of ``context.videos`` to attach, in order.
        key_frames: number of key frames sampled per video and attached as images
            (0 = none). Transports without video input (OpenAI-compatible) use them
            in place of the videos.
        overlay_plot: attach a PNG plot of real vs. sim keypoint trajectories.
        chain_of_thought: ask for a step-by-step ``analysis`` before the values.
        active_learning: allow an ``excitation_change`` request in the reply.
        history_limit: newest history entries shown (the best entry is always kept).
        rationale_chars: rationales of earlier iterations are cut to this length.
        excitation_limits: bounds of an active-learning request.
    """

    video: bool = True
    video_roles: tuple[str, ...] = ("real", "sim")
    key_frames: int = 0
    overlay_plot: bool = True
    chain_of_thought: bool = True
    active_learning: bool = False
    history_limit: int = 10
    rationale_chars: int = 600
    excitation_limits: ExcitationLimits = field(default_factory=ExcitationLimits)

    def __post_init__(self) -> None:
        if self.key_frames < 0:
            raise ValueError(f"PromptOptions.key_frames must be >= 0, got {self.key_frames}")
        if self.history_limit < 0:
            raise ValueError(f"PromptOptions.history_limit must be >= 0, got {self.history_limit}")


# ----------------------------------------------------------------------------------------
# the reply contract (response schema)
# ----------------------------------------------------------------------------------------
class ParameterValue(BaseModel):
    """One proposed value (a list of these, not a dict, so the schema stays closed)."""

    name: str = Field(description="exact parameter name from the Parameters table")
    value: float = Field(description="proposed value in the parameter's unit, inside its bounds")


class ParameterDiagnosis(BaseModel):
    """What the model thinks is wrong with one parameter."""

    name: str = Field(description="exact parameter name")
    diagnosis: str = Field(description="evidence and direction, e.g. 'sim overshoots: damping too low'")


class ExcitationChangeRequest(BaseModel):
    """Active learning: how to change the commanded excitation next time."""

    amplitude_gain: Optional[float] = Field(
        default=None, description="multiply the excitation amplitude by this gain (1 = unchanged)")
    frequency_low_hz: Optional[float] = Field(default=None, description="lower edge of a requested frequency band, Hz")
    frequency_high_hz: Optional[float] = Field(default=None, description="upper edge of a requested frequency band, Hz")
    reason: Optional[str] = Field(default=None, description="why this excitation would be more informative")


_REPLY_FIELDS: dict[str, tuple[Any, Any]] = {
    "analysis": (str, Field(description=(
        "step-by-step reasoning written BEFORE choosing values: what differs between the real and simulated "
        "motion (amplitude, frequency, decay, phase lag, offset, per keypoint), which parameters explain it "
        "physically, and what the history shows"))),
    "parameters": (list[ParameterValue], Field(description=(
        "one entry {name, value} for EVERY free parameter, values in the parameter's unit within its bounds; "
        "repeat the current value to keep a parameter unchanged"))),
    "rationale": (str, Field(description="plain-language reason for this update, 1-4 sentences")),
    "confidence": (float, Field(ge=0.0, le=1.0, description="confidence in [0, 1] that this update reduces the error")),
    "diagnosis": (Optional[list[ParameterDiagnosis]], Field(
        default=None, description="optional per-parameter diagnosis of the sim-to-real discrepancy")),
    "excitation_change": (Optional[ExcitationChangeRequest], Field(
        default=None, description="optional request to change the excitation so the next trial is more informative")),
}


@functools.lru_cache(maxsize=None)
def reply_model(*, chain_of_thought: bool, active_learning: bool) -> type[BaseModel]:
    """The pydantic model used as the JSON response schema.

    Field order matters for chain of thought: ``analysis`` comes first so the model
    writes its reasoning before the numbers. ``excitation_change`` exists only with
    active learning.

    Args:
        chain_of_thought: include the ``analysis`` field.
        active_learning: include the ``excitation_change`` field.

    Returns:
        A pydantic ``BaseModel`` subclass (cached per switch combination), usable as
        ``GenerateContentConfig(response_schema=...)`` or, via ``model_json_schema()``,
        as an OpenAI ``json_schema`` response format.
    """
    names = ["parameters", "rationale", "confidence", "diagnosis"]
    if chain_of_thought:
        names.insert(0, "analysis")
    if active_learning:
        names.append("excitation_change")
    suffix = ("CoT" if chain_of_thought else "") + ("AL" if active_learning else "")
    return create_model(f"CalibrationReply{suffix}", **{n: _REPLY_FIELDS[n] for n in names})


# ----------------------------------------------------------------------------------------
# prompt data
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ParameterBrief:
    """One parameter as the model sees it (values in ``unit``)."""

    name: str
    unit: str
    lower: float
    upper: float
    current: float
    nominal: float
    meaning: str
    scale: str
    kind: str
    frozen: bool


@dataclass(frozen=True)
class TrialMetrics:
    """Per-trial comparison of the current sim against the real trajectory.

    Attributes:
        trial_id: trial/excitation name.
        mae_px: trajectory MAE (px) over samples valid in both.
        per_keypoint: ``{keypoint: (mae px, real motion range px, sim motion range px,
            mean offset x px, mean offset y px)}``; motion range is the diagonal of
            the bounding box of the keypoint's path, offset is sim minus real.
        real_valid_fraction: fraction of real samples tracked (perception quality).
        unit: the trial's measurement unit (``px``; ``m`` for 3-D points, shown in mm;
            ``rad`` for joints); the values above are in it, with one offset per coordinate.
        kind: the trajectory kind (``image``, ``points``, ``joints``).
    """

    trial_id: str
    mae_px: float
    per_keypoint: dict[str, tuple[float, ...]]
    real_valid_fraction: float
    unit: str = "px"
    kind: str = "image"


@dataclass(frozen=True)
class MetricsBrief:
    """Error metrics at the current parameters."""

    error_px: float
    per_keypoint_px: dict[str, float]
    trials: tuple[TrialMetrics, ...]
    failed: bool
    message: str
    unit: str = "px"


@dataclass(frozen=True)
class HistoryEntry:
    """One earlier iteration (values in parameter units)."""

    iteration: int
    proposer: str
    values: dict[str, float]
    error_px: float
    confidence: float
    rationale: str
    best: bool


@dataclass(frozen=True)
class MediaItem:
    """A video or image attached to the prompt.

    Attributes:
        kind: ``"video"`` or ``"image"``.
        role: ``"real"``, ``"sim"``, ``"overlay"``, ``"trajectory_plot"`` or ``"key_frame"``.
        caption: the text placed just before the media in the request.
        mime_type: e.g. ``video/mp4``, ``image/png``, ``image/jpeg``.
        path: file on disk (videos), or None.
        data: in-memory bytes (images), or None.
        time_s: time in the clip (key frames), or None.
    """

    kind: str
    role: str
    caption: str
    mime_type: str
    path: Path | None = None
    data: bytes | None = None
    time_s: float | None = None

    @property
    def size_bytes(self) -> int:
        """Size of the payload in bytes (file size for a path)."""
        if self.data is not None:
            return len(self.data)
        return self.path.stat().st_size if self.path is not None and self.path.is_file() else 0

    def read_bytes(self) -> bytes:
        """The payload bytes.

        Raises:
            FileNotFoundError: when the file is gone.
        """
        if self.data is not None:
            return self.data
        if self.path is None:
            raise FileNotFoundError(f"media item '{self.role}' has neither data nor a path")
        return self.path.read_bytes()


@dataclass(frozen=True)
class PromptSection:
    """A titled block of prompt text."""

    title: str
    body: str

    def render(self) -> str:
        return f"## {self.title}\n{self.body.rstrip()}\n"


@dataclass(frozen=True)
class CalibrationPrompt:
    """Everything a VLM proposer sends for one iteration.

    Attributes:
        iteration: 0-based iteration being proposed.
        iterations_remaining: iterations left including this one.
        rig_name, rig_description: what the rig is.
        rig_facts: other scalar facts about the rig (``key: value`` strings).
        keypoints: keypoint names in trajectory order.
        parameters: free parameters (the model may change these).
        fixed: frozen parameters (context only).
        metrics: current error metrics.
        history: earlier iterations, oldest first (possibly shortened).
        history_omitted: number of history entries left out.
        media: attachments in request order.
        media_notes: what was wanted but could not be attached, and why.
        options: the switches used.
    """

    iteration: int
    iterations_remaining: int
    rig_name: str
    rig_description: str
    rig_facts: tuple[str, ...]
    keypoints: tuple[str, ...]
    parameters: tuple[ParameterBrief, ...]
    fixed: tuple[ParameterBrief, ...]
    metrics: MetricsBrief
    history: tuple[HistoryEntry, ...]
    history_omitted: int
    media: tuple[MediaItem, ...]
    media_notes: tuple[str, ...]
    options: PromptOptions

    @property
    def free_names(self) -> list[str]:
        return [p.name for p in self.parameters]

    @property
    def response_model(self) -> type[BaseModel]:
        """The JSON response schema for these options (see :func:`reply_model`)."""
        return reply_model(chain_of_thought=self.options.chain_of_thought,
                           active_learning=self.options.active_learning)

    def with_media(self, media: Sequence[MediaItem], notes: Sequence[str] = ()) -> "CalibrationPrompt":
        """Copy with a different attachment list (e.g. after a failed upload), notes appended."""
        return replace(self, media=tuple(media), media_notes=self.media_notes + tuple(notes))

    # -- rendering --------------------------------------------------------------------
    def intro(self) -> str:
        """The short text placed before the attachments."""
        return (f"You are calibrating the physics parameters of a simulated twin of the robot rig "
                f"'{self.rig_name}' so that it moves like the real robot under the same commanded "
                f"excitation. Iteration {self.iteration + 1} ({self.iterations_remaining} left including this one). "
                f"The attachments follow, each announced by a caption; the task, data and rules come after them.")

    def sections(self) -> list[PromptSection]:
        """The main prompt text as titled sections (placed after the attachments)."""
        out = [PromptSection("Rig", self._rig_text()),
               PromptSection("Parameters", self._parameter_text()),
               PromptSection("Attachments", self._media_text()),
               PromptSection("Error metrics at the current parameters", self._metrics_text()),
               PromptSection("History of earlier iterations", self._history_text()),
               PromptSection("Rules", self._rules_text()),
               PromptSection("Reply format", self._reply_text())]
        return out

    def render_text(self) -> str:
        """Intro plus all sections, as one string (for logs, reports and text-only transports)."""
        return self.intro() + "\n\n" + "\n".join(s.render() for s in self.sections())

    def _rig_text(self) -> str:
        lines = [f"name: {self.rig_name}"]
        if self.rig_description:
            lines.append(f"description: {self.rig_description}")
        kinds = {t.kind for t in self.metrics.trials} or {"image"}
        if kinds == {"image"}:
            lines.append(f"tracked keypoints (image space, px; x = column, y = row, origin top-left): "
                         f"{', '.join(self.keypoints) if self.keypoints else '(none)'}")
        else:
            what = {"image": "image keypoints (px; x = column, y = row)", "points": "3-D marker positions (mm, "
                    "x, y, z in the world frame, z up)", "joints": "joint coordinates (rad or m)"}
            lines.append("measurements: " + "; ".join(what[k] for k in ("image", "points", "joints") if k in kinds)
                         + f"; keypoints: {', '.join(self.keypoints) if self.keypoints else '(none)'}")
        lines.extend(self.rig_facts)
        return "\n".join(lines)

    def _parameter_text(self) -> str:
        head = "| name | unit | lower | upper | current | nominal | scale | kind | physical meaning |\n|---|---|---|---|---|---|---|---|---|"
        rows = [f"| {p.name} | {_unit(p.unit)} | {_g(p.lower)} | {_g(p.upper)} | {_g(p.current)} | {_g(p.nominal)} | "
                f"{p.scale} | {p.kind} | {p.meaning or '-'} |" for p in self.parameters]
        text = "Free parameters (you may change these):\n" + head + "\n" + "\n".join(rows)
        if self.fixed:
            text += "\n\nFixed parameters (context only, do not propose them):\n" + "\n".join(
                f"- {p.name} = {_g(p.current)} {_unit(p.unit)}" + (f": {p.meaning}" if p.meaning else "")
                for p in self.fixed)
        text += ("\n\n'log' scale means the parameter spans orders of magnitude: think in ratios "
                 "(x0.5, x2) rather than differences.")
        return text

    def _media_text(self) -> str:
        lines = [f"- {m.kind} ({m.role}): {m.caption}" for m in self.media] or ["- none (text-only mode)"]
        lines += [f"- not attached: {n}" for n in self.media_notes]
        return "\n".join(lines)

    def _metrics_text(self) -> str:
        m = self.metrics
        f, u = display_unit(m.unit)
        what = ("in noise units: each trial's error divided by its measurement noise" if m.unit == "sigma"
                else "mean Euclidean keypoint error over training trials")
        lines = [f"overall trajectory MAE: {_g(f * m.error_px)} {u} ({what})"]
        if m.failed:
            lines.append(f"WARNING: the simulation at the current parameters failed: {m.message or 'no message'}")
        if m.per_keypoint_px:
            lines.append(f"per keypoint MAE ({u}): " + ", ".join(f"{k} {_g(f * v)}" for k, v in m.per_keypoint_px.items()))
        for t in m.trials:
            tf, tu = display_unit(t.unit)
            lines.append(f"\ntrial '{t.trial_id}': MAE {_g(tf * t.mae_px)} {tu}, real keypoints tracked in "
                         f"{100 * t.real_valid_fraction:.0f} % of samples")
            axes = {"image": ("x", "y"), "points": ("x", "y", "z"), "joints": ("q",)}.get(t.kind, ("x", "y"))
            cols = ["keypoint", f"MAE {tu}", f"real motion range {tu}", f"sim motion range {tu}",
                    f"mean offset sim-real {axes[0]} {tu}", *(f"{a} {tu}" for a in axes[1:])]
            lines.append("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
            for k, vals in t.per_keypoint.items():
                lines.append(f"| {k} | " + " | ".join(_g(tf * v) for v in vals) + " |")
        return "\n".join(lines)

    def _history_text(self) -> str:
        if not self.history:
            return "none yet (this is the first proposal)."
        lines = []
        if self.history_omitted:
            lines.append(f"({self.history_omitted} older iteration(s) omitted)")
        for h in self.history:
            vals = ", ".join(f"{k}={_g(v)}" for k, v in h.values.items())
            lines.append(f"- iteration {h.iteration + 1} [{h.proposer}]{' (BEST so far)' if h.best else ''}: "
                         f"MAE {_g(display_unit(self.metrics.unit)[0] * h.error_px)} {display_unit(self.metrics.unit)[1]}, "
                         f"confidence {h.confidence:.2f}; values: {vals}; "
                         f"rationale: {h.rationale or '-'}")
        return "\n".join(lines)

    def _rules_text(self) -> str:
        o = self.options
        rules = [
            "Propose a value for every free parameter, using the exact names from the Parameters table.",
            "Stay inside [lower, upper] for every parameter; values outside are clamped and recorded as a mistake.",
            "Change only what the evidence (videos, plots, metrics, history) supports; keep the current value "
            "for parameters you have no evidence about. Prefer a few well-founded changes over changing everything.",
            "Reason physically: e.g. oscillation frequency relates to stiffness and inertia, decay rate to damping "
            "and friction, steady-state offset to stiffness, gravity and gains, amplitude to actuator gain, "
            "stiffness and damping.",
            "Use the history: if a change made the error worse, revert or move the other way; do not repeat a "
            "combination already tried. The best iteration so far is marked.",
            "Do not make the twin move less just to reduce pixel error; it must reproduce the real motion.",
            "Give a confidence in [0, 1]: low when the evidence is ambiguous or perception is poor.",
        ]
        if o.chain_of_thought:
            rules.append("Think step by step: fill 'analysis' with your observations and reasoning first, "
                         "then choose the values.")
        else:
            rules.append("Answer directly with the values and a short rationale (no separate analysis).")
        if o.active_learning:
            g, f = o.excitation_limits.amplitude_gain, o.excitation_limits.frequency_hz
            rules.append(f"You may request an excitation change ('excitation_change') when the current motion "
                         f"cannot separate the parameters: amplitude_gain in [{_g(g[0])}, {_g(g[1])}], "
                         f"frequency band within [{_g(f[0])}, {_g(f[1])}] Hz. Leave it empty otherwise.")
        return "\n".join(f"{i + 1}. {r}" for i, r in enumerate(rules))

    def _reply_text(self) -> str:
        model = self.response_model
        lines = ["Reply with ONE JSON object (no prose around it) with these fields, in this order:"]
        for name, info in model.model_fields.items():
            req = "required" if info.is_required() else "optional"
            lines.append(f"- {name} ({req}): {info.description}")
        example = [{"name": p.name, "value": float(f"{p.current:.6g}")} for p in self.parameters[:2]]
        lines.append(f"'parameters' is a list of objects, e.g. {json.dumps(example)}, not a name -> value map.")
        return "\n".join(lines)


def _unit(unit: str) -> str:
    return "(dimensionless)" if unit.strip() in ("", "1", "-") else unit


def _g(x: float) -> str:
    """Compact number formatting (6 significant digits; 'nan'/'inf' spelled out)."""
    try:
        xf = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(xf):
        return "nan"
    if math.isinf(xf):
        return "inf" if xf > 0 else "-inf"
    return f"{xf:.6g}"


# ----------------------------------------------------------------------------------------
# building
# ----------------------------------------------------------------------------------------
_CAPTIONS = {
    "real": "REAL robot, video of the training excitation (the target motion).",
    "sim": "SIMULATED twin at the CURRENT parameters, same excitation and camera.",
    "overlay": "side-by-side / overlay of real and simulated motion, same excitation.",
}


def build_prompt(context: ProposalContext, options: PromptOptions | None = None) -> CalibrationPrompt:
    """Assemble the prompt for one iteration from the proposal context.

    Args:
        context: the loop's proposal context (parameters, current values and metrics,
            real trajectories, history, videos, rig description).
        options: media and ablation switches; defaults to :class:`PromptOptions()`.

    Returns:
        The prompt. Videos are referenced by path (never read here); the trajectory
        plot and key frames are rendered into memory (PNG / JPEG bytes). Anything
        wanted but unavailable (missing video file, unreadable clip) is listed in
        ``media_notes`` instead of raising.
    """
    o = options or PromptOptions()
    ps = context.parameters
    current = {**ps.nominal(), **{k: float(v) for k, v in context.current.items() if k in ps}}

    def brief(s) -> ParameterBrief:
        return ParameterBrief(s.name, s.unit, s.lower, s.upper, current[s.name], s.nominal, s.meaning,
                              s.scale, s.kind, s.frozen)

    free = tuple(brief(s) for s in ps if not s.frozen)
    fixed = tuple(brief(s) for s in ps if s.frozen)

    rig = dict(context.rig or {})
    keypoints = tuple(rig.get("keypoints") or (context.real[0].names if context.real else ()))
    facts = tuple(f"{k}: {v}" for k, v in rig.items()
                  if k not in ("name", "description", "keypoints") and isinstance(v, (str, int, float, bool)))

    ev = context.current_eval
    trials = tuple(_trial_metrics(r, s) for r, s in zip(context.real, ev.sim))
    metrics = MetricsBrief(float(ev.error_px), dict(ev.per_keypoint_px), trials, bool(ev.failed), ev.message,
                           measurement_unit(list(context.real)))

    history, omitted = _history(context.history, ps.free_names, o)

    media: list[MediaItem] = []
    notes: list[str] = []
    if o.video:
        for role in o.video_roles:
            path = (context.videos or {}).get(role)
            if path is None:
                notes.append(f"{role} video: not provided by the calibration loop")
                continue
            path = Path(path)
            if not path.is_file():
                notes.append(f"{role} video: file not found ({path.name})")
                continue
            media.append(MediaItem("video", role, _CAPTIONS.get(role, f"{role} video."),
                                   mimetypes.guess_type(path.name)[0] or "video/mp4", path=path))
        if o.key_frames:
            media.extend(_key_frame_items(context.videos or {}, o, notes))
    if o.overlay_plot and context.real and ev.sim:
        try:
            png = trajectory_plot_png(context.real[0], ev.sim[0])
            r0 = context.real[0]
            caption = (f"keypoint x(t) and y(t) in px for trial '{r0.trial_id}': solid = real, dashed = simulated at "
                       "the current parameters (y axis inverted: image rows)." if r0.kind == "image" else
                       f"{'3-D marker x, y, z (mm)' if r0.kind == 'points' else 'joint coordinates'} over time for "
                       f"trial '{r0.trial_id}': solid = real, dashed = simulated at the current parameters.")
            media.append(MediaItem("image", "trajectory_plot", caption, "image/png", data=png))
        except Exception as err:  # a plotting problem must not stop calibration
            notes.append(f"trajectory plot: could not be drawn ({type(err).__name__}: {err})")

    return CalibrationPrompt(
        iteration=int(context.iteration), iterations_remaining=int(context.iterations_remaining),
        rig_name=str(rig.get("name") or ps.rig or "rig"), rig_description=str(rig.get("description") or ""),
        rig_facts=facts, keypoints=keypoints, parameters=free, fixed=fixed, metrics=metrics,
        history=history, history_omitted=omitted, media=tuple(media), media_notes=tuple(notes), options=o)


def _trial_metrics(real: Trajectory, sim: Trajectory) -> TrialMetrics:
    """Per-trial MAE, motion range and mean offset per keypoint (see :class:`TrialMetrics`)."""
    a, b = align(real, sim)
    per: dict[str, tuple[float, ...]] = {}
    errs = []
    D = a.keypoints.shape[2]
    for k, n in enumerate(a.names):
        ra, sb = a.keypoints[:, k], b.keypoints[:, k]
        both = a.valid[:, k] & b.valid[:, k]
        e = float(np.mean(np.linalg.norm(ra[both] - sb[both], axis=1))) if both.any() else float("nan")
        errs.append(np.linalg.norm(ra[both] - sb[both], axis=1))
        off = np.mean(sb[both] - ra[both], axis=0) if both.any() else np.full(D, np.nan)
        per[n] = (e, _motion_range(ra[a.valid[:, k]]), _motion_range(sb[b.valid[:, k]]), *map(float, off))
    allerr = np.concatenate(errs) if errs else np.zeros(0)
    frac = float(real.valid.mean()) if real.valid.size else 0.0
    return TrialMetrics(real.trial_id or sim.trial_id or "?", float(allerr.mean()) if allerr.size else float("nan"),
                        per, frac, real.unit_label, real.kind)


def _motion_range(xy: np.ndarray) -> float:
    """Diagonal of the bounding box of a path, in its unit; NaN when empty. ``xy`` shape (N, D)."""
    if xy.shape[0] == 0:
        return float("nan")
    return float(np.linalg.norm(xy.max(axis=0) - xy.min(axis=0)))


def _history(records: Sequence[IterationRecord], free_names: Sequence[str],
             o: PromptOptions) -> tuple[tuple[HistoryEntry, ...], int]:
    recs = list(records)
    if not recs or o.history_limit == 0:
        return (), len(recs)
    errs = [r.error_px if r.error_px is not None and math.isfinite(r.error_px) else math.inf for r in recs]
    best = int(np.argmin(errs)) if any(math.isfinite(e) for e in errs) else -1
    keep = set(range(max(0, len(recs) - o.history_limit), len(recs)))
    if best >= 0 and best not in keep:
        keep.discard(min(keep))
        keep.add(best)
    entries = []
    for i in sorted(keep):
        r = recs[i]
        rat = (r.rationale or "").strip().replace("\n", " ")
        if len(rat) > o.rationale_chars:
            rat = rat[: o.rationale_chars - 3] + "..."
        vals = {n: float(r.values[n]) for n in free_names if n in r.values}
        entries.append(HistoryEntry(int(r.iteration), r.proposer, vals, float(r.error_px), float(r.confidence),
                                    rat, i == best))
    return tuple(entries), len(recs) - len(entries)


# ----------------------------------------------------------------------------------------
# media helpers
# ----------------------------------------------------------------------------------------
def sample_key_frames(path: str | Path, count: int, *, max_side: int = 512) -> list[tuple[float, np.ndarray]]:
    """Evenly spaced frames of a video file.

    Args:
        path: video file (any format OpenCV reads).
        count: number of frames wanted (>= 1); fewer are returned for short clips.
        max_side: frames are downscaled so that the longer side is at most this (px).

    Returns:
        ``[(time_s, frame)]`` with frame shape (H, W, 3) uint8 RGB, time from the
        clip's frame rate (30 fps assumed when the file does not say).

    Raises:
        ValueError: when the file cannot be opened or holds no frame.
    """
    import cv2

    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            raise ValueError(f"cannot open video {path}")
        n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0) or 30.0
        if n <= 0:  # container without a frame count: count the frames first (none kept), then pick
            while cap.grab():
                n += 1
            cap.release()
            cap = cv2.VideoCapture(str(path))
        picked = []
        if n > 0:
            idx = np.unique(np.linspace(0, n - 1, min(count, n)).round().astype(int))
            picked, want, i = [], set(idx.tolist()), 0
            while want and i < n:
                ok, f = cap.read()
                if not ok:
                    break
                if i in want:
                    picked.append((i, f))
                    want.discard(i)
                i += 1
        if not picked:
            raise ValueError(f"video {path} holds no readable frame")
        out = []
        for i, f in picked:
            h, w = f.shape[:2]
            s = min(1.0, max_side / max(h, w))
            if s < 1.0:
                f = cv2.resize(f, (max(1, round(w * s)), max(1, round(h * s))), interpolation=cv2.INTER_AREA)
            out.append((i / fps, cv2.cvtColor(f, cv2.COLOR_BGR2RGB)))
        return out
    finally:
        cap.release()


def _encode_jpeg(rgb: np.ndarray, quality: int = 85) -> bytes:
    import cv2

    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return buf.tobytes()


def _key_frame_items(videos: Mapping[str, Path], o: PromptOptions, notes: list[str]) -> list[MediaItem]:
    """Key frames as JPEG images; real and sim frames of the same instant side by side."""
    sampled: dict[str, list[tuple[float, np.ndarray]]] = {}
    for role in o.video_roles:
        p = videos.get(role)
        if p is None or not Path(p).is_file():
            continue
        try:
            sampled[role] = sample_key_frames(p, o.key_frames)
        except ValueError as err:
            notes.append(f"{role} key frames: {err}")
    if not sampled:
        return []
    roles = list(sampled)
    n = min(len(v) for v in sampled.values())
    items = []
    for j in range(n):
        t = sampled[roles[0]][j][0]
        imgs = [sampled[r][j][1] for r in roles]
        h = min(im.shape[0] for im in imgs)
        row = np.concatenate([im[:h] for im in imgs], axis=1)
        label = " | ".join(f"{'left' if i == 0 else ('right' if i == len(roles) - 1 else 'middle')} = {r}"
                           for i, r in enumerate(roles)) if len(roles) > 1 else roles[0]
        items.append(MediaItem("image", "key_frame", f"key frame {j + 1}/{n} at t = {t:.2f} s ({label}).",
                               "image/jpeg", data=_encode_jpeg(row), time_s=t))
    return items


def trajectory_plot_png(real: Trajectory, sim: Trajectory, *, max_keypoints: int = 4, dpi: int = 80) -> bytes:
    """PNG of real (solid) vs. sim (dashed) keypoint x(t), y(t), one row per keypoint.

    Args:
        real, sim: trajectories of the same trial (aligned by command step here).
        max_keypoints: at most this many keypoints are drawn (the first ones).
        dpi: resolution; the figure is 8 x (1.6 per row) inches.

    Returns:
        PNG bytes. Invalid samples are drawn as gaps.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    a, b = align(real, sim)
    names = a.names[:max_keypoints]
    fig = Figure(figsize=(8.0, 1.2 + 1.6 * len(names)), dpi=dpi)
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(names), 2, squeeze=False, sharex=True)
    f, u = display_unit(a.unit_label)
    labs = {"image": ("x", "y"), "points": ("x", "y", "z"), "joints": ("q",)}[a.kind]
    if len(labs) != 2:  # 3-D points / joints: as many columns as coordinates
        fig.clear()
        axes = fig.subplots(len(names), len(labs), squeeze=False, sharex=True)
    for k, n in enumerate(names):
        for c, lab in enumerate(labs):
            ax = axes[k][c]
            ax.plot(a.time, f * a.keypoints[:, k, c], "-", color="tab:blue", lw=1.4, label="real")
            ax.plot(a.time, f * b.keypoints[:, k, c], "--", color="tab:orange", lw=1.4, label="sim")
            ax.set_ylabel(f"{n} {lab} [{a.units[k] if a.kind == 'joints' else u}]", fontsize=8)
            ax.tick_params(labelsize=7)
            if c == 1 and a.kind == "image":
                ax.invert_yaxis()
    for ax in axes[-1]:
        ax.set_xlabel("time [s]", fontsize=8)
    axes[0][0].legend(fontsize=7, loc="upper right")
    fig.suptitle(f"trial {a.trial_id or b.trial_id}: real (solid) vs sim (dashed)", fontsize=9)
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.3 / fig.get_figheight() + 0.05, top=0.9, wspace=0.3,
                        hspace=0.15)  # fixed layout: tight_layout would draw the figure twice
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
