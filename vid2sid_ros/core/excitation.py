"""Commanded excitation profiles.

An :class:`Excitation` is a sampled command stream: ``values`` of shape (T, A) at a
fixed ``rate`` (Hz), one column per actuator, sent identically to the real rig and
the twin (one ``ExcitationCommand`` message per row). Profiles are built from small
config dicts so that rigs can name *training* and *holdout* sets in YAML::

    excitations:
      train:
        - {kind: step, amplitude: 0.6, t_step: 0.2, duration: 2.0}
        - {kind: chirp, amplitude: 0.5, f0: 0.3, f1: 3.0, duration: 3.0}
      holdout:
        - {kind: multisine, amplitude: 0.5, frequencies: [0.4, 1.1, 2.3], duration: 3.0, seed: 3}

Common keys: ``duration`` (s), ``rate`` (Hz, default 30), ``offset`` (added to every
sample), ``name`` (default derived from kind), ``actuators`` (list of names; default
the rig's), ``ramp_from`` and ``ramp_duration`` (s): a lead-in of ``round(ramp_duration x
rate)`` samples going linearly from ``ramp_from`` (one command per actuator, the command the
robot holds before the trial) to the profile's first command, so that no step of the trial
is faster than a robot's rate limit. Values are in the actuator's units (the rig states whether that is a
normalised control in [-1, 1] or SI force/torque).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .files import file_problem
from .names import did_you_mean

__all__ = ["Excitation", "ExcitationError", "build_excitation", "build_excitation_sets", "EXCITATION_KINDS", "linear_chirp"]


class ExcitationError(ValueError):
    """An excitation config or file is malformed (message names the field or file)."""


@dataclass(frozen=True)
class Excitation:
    """A sampled command stream.

    Attributes:
        name: identifier, e.g. ``"chirp_0.3-3Hz"``.
        rate: command rate in Hz; sample ``k`` is applied during ``[k/rate, (k+1)/rate)``.
        values: commands, shape (T, A), actuator units.
        actuator_names: A names.
        meta: the config that produced it (for reports and replay).

    Raises:
        ExcitationError: on a non-positive rate, a non-finite value, or a shape mismatch.
    """

    name: str
    rate: float
    values: np.ndarray
    actuator_names: tuple[str, ...] = ("u0",)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        v = np.asarray(self.values, dtype=float)
        if v.ndim == 1:
            v = v[:, None]
        if v.ndim != 2 or v.shape[0] == 0:
            raise ExcitationError(f"excitation '{self.name}': values must have shape (T, A) with T > 0, got {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ExcitationError(f"excitation '{self.name}': values contain NaN or inf")
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ExcitationError(f"excitation '{self.name}': rate must be > 0 Hz, got {self.rate}")
        names = tuple(self.actuator_names)
        if len(names) != v.shape[1]:
            raise ExcitationError(
                f"excitation '{self.name}': {v.shape[1]} value columns but {len(names)} actuator names {names}")
        v.setflags(write=False)
        object.__setattr__(self, "values", v)
        object.__setattr__(self, "actuator_names", names)

    @property
    def num_steps(self) -> int:
        """T, the number of command steps."""
        return int(self.values.shape[0])

    @property
    def period(self) -> float:
        """Command period in s (1 / rate)."""
        return 1.0 / self.rate

    @property
    def duration(self) -> float:
        """T / rate, in s."""
        return self.num_steps / self.rate

    @property
    def time(self) -> np.ndarray:
        """Start time of each command step, shape (T,), s."""
        return np.arange(self.num_steps) / self.rate

    def scaled(self, gain: float, name: str | None = None) -> "Excitation":
        """Copy with every value multiplied by ``gain`` (active-learning amplitude change)."""
        return Excitation(name or f"{self.name}_x{gain:g}", self.rate, self.values * gain,
                          self.actuator_names, {**self.meta, "gain": gain})


#: upper limit on the samples of one profile (~3.8 days at 30 Hz); a longer one is a typo
MAX_STEPS = 10_000_000


def _label(cfg: Mapping[str, Any]) -> str:
    return f"excitation {cfg.get('name') or cfg.get('kind')}"


def _num(cfg: Mapping[str, Any], key: str, default: float) -> float:
    """``cfg[key]`` as a finite float (YAML 1.1 reads ``1e-3`` as a string: accepted).

    Raises:
        ExcitationError: naming the excitation and the key when it is not a finite number.
    """
    v = cfg.get(key, default)
    try:
        if isinstance(v, bool):
            raise TypeError
        x = float(v)
    except (TypeError, ValueError):
        raise ExcitationError(f"{_label(cfg)}: '{key}' must be a number, got {v!r}") from None
    if not math.isfinite(x):
        raise ExcitationError(f"{_label(cfg)}: '{key}' must be finite, got {v!r}")
    return x


def _rate(cfg: Mapping[str, Any]) -> float:
    rate = _num(cfg, "rate", 30.0)
    if rate <= 0:
        raise ExcitationError(f"{_label(cfg)}: 'rate' must be > 0 Hz, got {rate:g}")
    return rate


def _t(cfg: Mapping[str, Any]) -> np.ndarray:
    duration = _num(cfg, "duration", 3.0)
    rate = _rate(cfg)
    if duration <= 0:
        raise ExcitationError(f"{_label(cfg)}: 'duration' must be > 0 s, got {duration:g}")
    steps = int(round(duration * rate))
    if steps < 1:
        raise ExcitationError(f"{_label(cfg)}: duration {duration:g} s at {rate:g} Hz gives no command step "
                              f"(needs duration >= {0.5 / rate:g} s)")
    if steps > MAX_STEPS:
        raise ExcitationError(f"{_label(cfg)}: duration {duration:g} s at {rate:g} Hz is {steps} command steps; "
                              f"at most {MAX_STEPS} are supported")
    return np.arange(steps) / rate


def _sine(cfg):
    t = _t(cfg)
    return _num(cfg, "amplitude", 0.5) * np.sin(2 * np.pi * _num(cfg, "frequency", 1.0) * t + _num(cfg, "phase", 0.0))


def linear_chirp(t: np.ndarray, f0: float, t1: float, f1: float, phi_deg: float = 0.0) -> np.ndarray:
    """``cos(2π (f0 t + ½ β t²) + φ)`` with ``β = (f1 − f0) / t1``: a linear chirp, instantaneous frequency
    ``f0 + β t`` Hz at time ``t`` s, shape of ``t``.

    The arithmetic of ``scipy.signal.chirp(t, f0, t1, f1, method="linear", phi=phi_deg)`` step by step (bit for
    bit the same values): importing ``scipy.signal`` costs more CPU than a short calibration's rollouts.
    """
    t = np.asarray(t)
    f0, t1, f1 = float(f0), float(t1), float(f1)
    beta = (f1 - f0) / t1
    phase = 2 * np.pi * (f0 * t + 0.5 * beta * t * t)
    return np.cos(phase + np.deg2rad(phi_deg))


def _chirp(cfg):
    # Linear chirp, instantaneous frequency f0 + (f1 - f0) t / duration (scipy.signal.chirp, method='linear').
    t = _t(cfg)
    dur = t[-1] if len(t) > 1 else 1.0
    return _num(cfg, "amplitude", 0.5) * linear_chirp(t, _num(cfg, "f0", 0.2), dur, _num(cfg, "f1", 3.0), -90)


def _step(cfg):
    t = _t(cfg)
    v = np.where(t >= _num(cfg, "t_step", 0.1), _num(cfg, "amplitude", 0.5), 0.0)
    if "t_release" in cfg:
        v = np.where(t >= _num(cfg, "t_release", 0.0), 0.0, v)
    return v


def _multisine(cfg):
    t = _t(cfg)
    raw = cfg.get("frequencies", [0.5, 1.3, 2.7])
    try:
        if isinstance(raw, (str, bytes, Mapping)):
            raise TypeError
        freqs = np.asarray(raw, dtype=float)
    except (TypeError, ValueError):
        raise ExcitationError(f"{_label(cfg)}: 'frequencies' must be a list of numbers (Hz), got {raw!r}") from None
    if freqs.ndim != 1 or freqs.size == 0 or not np.all(np.isfinite(freqs)):
        raise ExcitationError(f"{_label(cfg)}: 'frequencies' must be a non-empty list of finite numbers (Hz), "
                              f"got {raw!r}")
    seed = cfg.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ExcitationError(f"{_label(cfg)}: 'seed' must be an integer >= 0, got {seed!r}")
    rng = np.random.default_rng(seed)
    phases = rng.uniform(0, 2 * np.pi, size=freqs.shape)
    s = np.sin(2 * np.pi * freqs[None, :] * t[:, None] + phases[None, :]).sum(axis=1)
    peak = np.max(np.abs(s)) or 1.0
    return _num(cfg, "amplitude", 0.5) * s / peak


def _csv(cfg):
    """(values (T, A), actuator column names, rate Hz or None) of a CSV profile.

    The header names the columns; a ``time``/``t`` column (s) is optional. With one, it
    must increase uniformly (every step within 1 % of the median): its span gives the rate,
    ``(T - 1) / (t[-1] - t[0])``, exact for times rounded to a few decimals, or must match
    ``rate`` (1 %).
    """
    if not str(cfg.get("path") or "").strip():
        raise ExcitationError("excitation csv: no 'path' given; expected the CSV file of the commands")
    path = Path(cfg["path"])
    why = file_problem(path)
    if why:  # missing, or a FIFO / directory / device (never opened)
        raise ExcitationError(f"excitation csv: {why}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ExcitationError(f"{path}: not a UTF-8 text CSV ({err.reason} at byte {err.start})") from None
    if not text.strip():
        raise ExcitationError(f"{path}: the file is empty; expected a header row and at least one data row")
    header = [h.strip() for h in text.splitlines()[0].split(",")]
    numeric = []
    for h in header:
        try:
            float(h)
            numeric.append(h)
        except ValueError:
            pass
    if numeric:
        raise ExcitationError(f"{path}: the first row {header} holds numbers; expected a header row naming the "
                              "columns (e.g. 'time,flexor')")
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = np.genfromtxt(path, delimiter=",", names=True, dtype=float, encoding="utf-8")
    except ValueError as err:
        raise ExcitationError(f"{path}: not a numeric CSV with a header row: {err}") from None
    data = np.atleast_1d(data)  # a single data row parses as a 0-d record
    if data.dtype.names is None or len(data) == 0:
        raise ExcitationError(f"{path}: expected a header row and at least one data row")
    cols = [c for c in data.dtype.names if c not in ("time", "t")]
    if not cols:
        raise ExcitationError(f"{path}: no actuator columns (only a time column)")
    arr = np.column_stack([np.atleast_1d(data[c]) for c in cols])
    if not np.all(np.isfinite(arr)):
        bad = int(np.argwhere(~np.isfinite(arr))[0][0])
        raise ExcitationError(f"{path}: non-numeric or missing value in data row {bad + 1}")
    rate = None
    tcol = next((c for c in ("time", "t") if c in data.dtype.names), None)
    if tcol is not None and len(data) >= 2:
        t = np.atleast_1d(data[tcol]).astype(float)
        if not np.all(np.isfinite(t)):
            raise ExcitationError(f"{path}: non-numeric or missing time in data row "
                                  f"{int(np.argwhere(~np.isfinite(t))[0][0]) + 1}")
        dt = np.diff(t)
        if np.any(dt <= 0):
            row = int(np.argwhere(dt <= 0)[0][0]) + 2
            raise ExcitationError(f"{path}: column '{tcol}' must increase strictly; data row {row} "
                                  f"({t[row - 1]:g} s) is not after row {row - 1} ({t[row - 2]:g} s)")
        step = float(np.median(dt))
        if np.max(np.abs(dt - step)) > 0.01 * step:
            raise ExcitationError(f"{path}: column '{tcol}' is not uniformly spaced (steps from {dt.min():g} to "
                                  f"{dt.max():g} s); resample the commands to a fixed rate")
        # the rate from the whole span, not the median step: times printed with a few decimals
        # (0.033333 at 30 Hz) would give 30.0003 Hz, which no 30 fps recording matches
        rate = (len(t) - 1) / float(t[-1] - t[0])
        if "rate" in cfg:
            given = _rate(cfg)
            if abs(given - rate) > 0.01 * given:
                raise ExcitationError(f"{path}: column '{tcol}' is sampled at {rate:g} Hz but the config says "
                                      f"rate {given:g} Hz")
            rate = given
    return arr, cols, rate


EXCITATION_KINDS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "sine": _sine, "chirp": _chirp, "step": _step, "multisine": _multisine, "csv": _csv,
}


_COMMON_KEYS = frozenset({"kind", "name", "duration", "rate", "offset", "actuator", "ramp_from", "ramp_duration"})
_KIND_KEYS: dict[str, frozenset[str]] = {
    "sine": frozenset({"amplitude", "frequency", "phase"}),
    "chirp": frozenset({"amplitude", "f0", "f1"}),
    "step": frozenset({"amplitude", "t_step", "t_release"}),
    "multisine": frozenset({"amplitude", "frequencies", "seed"}),
    "csv": frozenset({"path"}),
}


def build_excitation(cfg: Mapping[str, Any], actuator_names: Sequence[str] = ("u0",)) -> Excitation:
    """Build one :class:`Excitation` from a config dict (see module docstring).

    Args:
        cfg: ``{"kind": "sine"|"chirp"|"step"|"multisine"|"csv", ...}``.
        actuator_names: names of the rig's actuators; single-column profiles are
            applied to the first actuator and zero on the others unless
            ``cfg["actuator"]`` names another.

    Raises:
        ExcitationError: unknown kind (lists valid kinds), bad numbers or file.
    """
    if not isinstance(cfg, Mapping):
        raise ExcitationError(f"excitation config must be a mapping, got {type(cfg).__name__}")
    kind = cfg.get("kind")
    if kind not in EXCITATION_KINDS:
        raise ExcitationError(f"unknown excitation kind {kind!r}{did_you_mean(kind, EXCITATION_KINDS)}; "
                              f"valid kinds: {', '.join(EXCITATION_KINDS)}")
    allowed = _COMMON_KEYS | _KIND_KEYS[kind]
    unknown = sorted(k for k in cfg if k not in allowed)
    if unknown:
        raise ExcitationError(
            f"excitation {kind}: unknown key(s) {unknown}{did_you_mean(unknown[0], allowed)}; expected keys: "
            f"{', '.join(sorted(allowed))}")
    out = EXCITATION_KINDS[kind](cfg)
    names = list(actuator_names)
    if kind == "csv":
        values, cols, csv_rate = out
        names = cols
        rate = csv_rate if csv_rate is not None else _rate(cfg)
    else:
        col = np.asarray(out, dtype=float) + _num(cfg, "offset", 0.0)
        values = np.zeros((col.shape[0], len(names)))
        target = cfg.get("actuator", names[0])
        if target not in names:
            raise ExcitationError(f"excitation {kind}: actuator {target!r} not in {names}")
        values[:, names.index(target)] = col
        rate = _rate(cfg)
    if "ramp_from" in cfg or "ramp_duration" in cfg:
        values = _with_ramp(cfg, values, rate)
    name = cfg.get("name") or _default_name(cfg)
    if not isinstance(name, str):
        raise ExcitationError(f"{_label(cfg)}: 'name' must be a string, got {name!r}")
    return Excitation(name=name, rate=rate, values=values, actuator_names=tuple(names), meta=dict(cfg))


def _with_ramp(cfg: Mapping[str, Any], values: np.ndarray, rate: float) -> np.ndarray:
    """``values`` (T, A) after the lead-in ramp of ``ramp_from`` / ``ramp_duration`` (module docstring):
    ``m = round(ramp_duration x rate)`` samples ``u_from + (u_0 − u_from) i / (m + 1)``, i = 1..m.

    Raises:
        ExcitationError: one key without the other, ``ramp_from`` not one finite number per actuator,
            or a negative duration.
    """
    if "ramp_from" not in cfg or "ramp_duration" not in cfg:
        raise ExcitationError(f"{_label(cfg)}: 'ramp_from' and 'ramp_duration' go together (the command held "
                              "before the trial and the lead-in's length, s)")
    raw = cfg["ramp_from"]
    try:
        if isinstance(raw, (str, bytes, Mapping)) or any(isinstance(v, bool) for v in raw):
            raise TypeError
        start = np.asarray(raw, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ExcitationError(f"{_label(cfg)}: 'ramp_from' must be a list of numbers, got {raw!r}") from None
    if start.size != values.shape[1] or not np.all(np.isfinite(start)):
        raise ExcitationError(f"{_label(cfg)}: 'ramp_from' must hold {values.shape[1]} finite number(s) (one per "
                              f"actuator), got {raw!r}")
    dur = _num(cfg, "ramp_duration", 0.0)
    if dur < 0:
        raise ExcitationError(f"{_label(cfg)}: 'ramp_duration' must be >= 0 s, got {dur:g}")
    m = int(round(dur * rate))
    frac = (np.arange(1, m + 1) / (m + 1))[:, None]
    return np.vstack([start[None, :] + (values[0] - start)[None, :] * frac, values])


def _default_name(cfg: Mapping[str, Any]) -> str:
    k = cfg["kind"]
    if k == "sine":
        return f"sine_{cfg.get('frequency', 1.0):g}Hz"
    if k == "chirp":
        return f"chirp_{cfg.get('f0', 0.2):g}-{cfg.get('f1', 3.0):g}Hz"
    if k == "step":
        return f"step_{cfg.get('amplitude', 0.5):g}"
    if k == "multisine":
        return f"multisine_s{cfg.get('seed', 0)}"
    return Path(str(cfg.get("path", "excitation"))).stem


def build_excitation_sets(cfg: Mapping[str, Any], actuator_names: Sequence[str] = ("u0",)) -> dict[str, list[Excitation]]:
    """Build named sets (``train``, ``holdout``, ...) from ``{set_name: [cfg, ...]}``.

    Raises:
        ExcitationError: naming the set and index of a bad entry.
    """
    if not isinstance(cfg, Mapping):
        raise ExcitationError(f"excitations must be a mapping {{set name: [profiles]}} (e.g. train, holdout), "
                              f"got {type(cfg).__name__}")
    sets: dict[str, list[Excitation]] = {}
    for set_name, entries in cfg.items():
        if not isinstance(entries, list):
            raise ExcitationError(f"excitation set '{set_name}' must be a list of profiles")
        out = []
        for i, e in enumerate(entries):
            try:
                out.append(build_excitation(e, actuator_names))
            except ExcitationError as err:
                raise ExcitationError(f"excitations.{set_name}[{i}]: {err}") from None
        names = [e.name for e in out]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:  # trials are identified by excitation name (trial ids, resume signatures, reports)
            raise ExcitationError(f"excitations.{set_name}: duplicate excitation name(s) {dup}; give each "
                                  "profile a distinct 'name'")
        sets[set_name] = out
    return sets
