"""Physics and nuisance parameter specifications.

A :class:`ParameterSpec` carries everything a calibrator needs to know about one
parameter: its SI unit, bounds, nominal value, a one-line physical meaning and the
simulator field it writes (for example ``dof_damping[1]`` in MuJoCo). A
:class:`ParameterSet` is the ordered collection the optimisers see as a vector.

Specs are stored as YAML (see ``vid2sid_ros/sim/models/finger_parameters.yaml``)::

    rig: finger
    parameters:
      - name: pip_stiffness
        unit: N*m/rad
        lower: 0.02
        upper: 0.6
        nominal: 0.15
        meaning: passive rotational stiffness of the PIP joint
        target: jnt_stiffness[1]
        scale: log          # optional: linear (default) or log
        kind: physics       # optional: physics (default) or nuisance
        frozen: false       # optional

The normalised coordinate ``u in [0, 1]^n`` (linear or log between the bounds) is
what black-box optimisers and the identifiability analysis work in; the design
follows MuJoCo's ``python/mujoco/sysid`` parameter objects, with the unit added.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from .names import did_you_mean

__all__ = [
    "SPEC_FIELDS",
    "draw_ground_truth",
    "ParameterSpec",
    "ParameterSet",
    "ParameterSpecError",
    "load_parameter_set",
    "relative_parameter_error",
]

_SCALES = ("linear", "log")
_KINDS = ("physics", "nuisance")
_REQUIRED = ("name", "unit", "lower", "upper", "nominal")
_OPTIONAL = ("meaning", "target", "scale", "kind", "frozen")
#: the fields of one parameter entry (required first)
SPEC_FIELDS = _REQUIRED + _OPTIONAL


class ParameterSpecError(ValueError):
    """A parameter specification (file or dict) is malformed.

    The message names the source (file or ``<dict>``), the entry and the field, and
    says what was expected.
    """


@dataclass(frozen=True)
class ParameterSpec:
    """One identifiable parameter.

    Attributes:
        name: unique identifier, ``snake_case`` (e.g. ``pip_stiffness``).
        unit: SI unit string (e.g. ``N*m/rad``, ``N*m*s/rad``, ``m``, ``px``).
        lower: lower bound, in ``unit``.
        upper: upper bound, in ``unit``; strictly greater than ``lower``.
        nominal: starting value for calibration, in ``unit``, inside the bounds.
        meaning: one-line physical meaning, used in rationales and prompts.
        target: simulator field(s) written, e.g. ``dof_damping[1]``; a rig may
            interpret several comma-separated targets (shared parameters).
        scale: ``"linear"`` or ``"log"``; how the normalised coordinate maps to the
            value. ``log`` requires ``lower > 0``.
        kind: ``"physics"`` or ``"nuisance"`` (camera/measurement parameters such
            as pixel scale or time offset, kept apart from physics).
        frozen: a frozen parameter keeps its nominal value and is not calibrated.

    Raises:
        ParameterSpecError: on bound order, nominal outside bounds, unknown scale
            or kind, or a non-finite number.
    """

    name: str
    unit: str
    lower: float
    upper: float
    nominal: float
    meaning: str = ""
    target: str = ""
    scale: str = "linear"
    kind: str = "physics"
    frozen: bool = False

    def __post_init__(self) -> None:
        where = f"parameter '{self.name}'"
        for attr in ("lower", "upper", "nominal"):
            v = getattr(self, attr)
            if isinstance(v, str):  # PyYAML (YAML 1.1) reads "1e-3" as a string
                try:
                    v = float(v)
                except ValueError:
                    pass
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ParameterSpecError(f"{where}: field '{attr}' must be a finite number, got {v!r}")
            object.__setattr__(self, attr, float(v))
        if not self.lower < self.upper:
            raise ParameterSpecError(
                f"{where}: expected lower < upper, got lower={self.lower} upper={self.upper}")
        if not self.lower <= self.nominal <= self.upper:
            raise ParameterSpecError(
                f"{where}: nominal {self.nominal} is outside [{self.lower}, {self.upper}]")
        if self.scale not in _SCALES:
            raise ParameterSpecError(f"{where}: scale must be one of {_SCALES}, got {self.scale!r}"
                                     + did_you_mean(self.scale, _SCALES, cutoff=0.5))
        if self.scale == "log" and self.lower <= 0:
            raise ParameterSpecError(f"{where}: scale 'log' needs lower > 0, got {self.lower}")
        if self.kind not in _KINDS:
            raise ParameterSpecError(f"{where}: kind must be one of {_KINDS}, got {self.kind!r}"
                                     + did_you_mean(self.kind, _KINDS, cutoff=0.5))
        if not isinstance(self.frozen, bool):  # a quoted "false" would otherwise freeze the parameter
            raise ParameterSpecError(f"{where}: field 'frozen' must be true or false, got {self.frozen!r}")
        for attr in ("unit", "meaning", "target"):  # rationales, prompts and the twin read them as text
            if not isinstance(getattr(self, attr), str):
                raise ParameterSpecError(
                    f"{where}: field '{attr}' must be a string, got {type(getattr(self, attr)).__name__} "
                    f"{getattr(self, attr)!r}")

    # -- normalised coordinates -------------------------------------------------
    def to_unit(self, value: float) -> float:
        """Map a value (in ``unit``) to the normalised coordinate in [0, 1].

        Values outside the bounds map outside [0, 1] (no clipping).
        """
        if self.scale == "log":
            value = max(float(value), 1e-300)
            return (math.log(value) - math.log(self.lower)) / (math.log(self.upper) - math.log(self.lower))
        return (float(value) - self.lower) / (self.upper - self.lower)

    def from_unit(self, u: float) -> float:
        """Inverse of :meth:`to_unit`; ``u`` is clipped to [0, 1] first."""
        u = min(max(float(u), 0.0), 1.0)
        if self.scale == "log":
            return float(math.exp(math.log(self.lower) + u * (math.log(self.upper) - math.log(self.lower))))
        return float(self.lower + u * (self.upper - self.lower))

    def clip(self, value: float) -> float:
        """Clamp ``value`` into ``[lower, upper]``."""
        return float(min(max(float(value), self.lower), self.upper))

    def describe(self, value: float | None = None) -> str:
        """Human-readable one-liner: name, value, unit, bounds and meaning."""
        v = self.nominal if value is None else value
        return (f"{self.name} = {v:.6g} {self.unit} (bounds [{self.lower:.6g}, {self.upper:.6g}])"
                + (f": {self.meaning}" if self.meaning else ""))


@dataclass(frozen=True)
class ParameterSet:
    """Ordered, named collection of :class:`ParameterSpec`.

    The *free* parameters (not frozen) form the vector optimisers work on; the
    vector order is the order of :attr:`free_names`.

    Raises:
        ParameterSpecError: on duplicate names or an empty set.
    """

    specs: tuple[ParameterSpec, ...]
    rig: str = ""
    source: str = "<dict>"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.specs:
            raise ParameterSpecError(f"{self.source}: 'parameters' must list at least one parameter")
        seen: set[str] = set()
        for s in self.specs:
            if s.name in seen:
                raise ParameterSpecError(f"{self.source}: duplicate parameter name '{s.name}'")
            seen.add(s.name)
        object.__setattr__(self, "_by_name", {s.name: s for s in self.specs})  # name -> spec (not a field)

    # -- lookup -----------------------------------------------------------------
    def __iter__(self) -> Iterator[ParameterSpec]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    def __contains__(self, name: object) -> bool:
        try:
            return name in self._by_name
        except TypeError:  # unhashable: no parameter's name
            return False

    def __getitem__(self, name: str) -> ParameterSpec:
        try:
            return self._by_name[name]
        except (KeyError, TypeError):
            pass
        raise KeyError(f"unknown parameter '{name}'; valid names: {', '.join(self.names)}")

    @property
    def names(self) -> list[str]:
        """All parameter names, in spec order."""
        return [s.name for s in self.specs]

    @property
    def free(self) -> list[ParameterSpec]:
        """Specs that are calibrated (not frozen)."""
        return [s for s in self.specs if not s.frozen]

    @property
    def free_names(self) -> list[str]:
        return [s.name for s in self.free]

    def nominal(self) -> dict[str, float]:
        """Nominal values of all parameters, ``{name: value}`` in their units."""
        return {s.name: s.nominal for s in self.specs}

    def with_frozen(self, frozen: Iterable[str] = (), free: Iterable[str] | None = None) -> "ParameterSet":
        """Copy with a different frozen/free split.

        Args:
            frozen: names to freeze.
            free: if given, exactly these names are free and all others frozen.

        Raises:
            ParameterSpecError: on an unknown name.
        """
        frozen = set(frozen)
        free_set = None if free is None else set(free)
        for n in frozen | (free_set or set()):
            if n not in self:
                raise ParameterSpecError(f"{self.source}: unknown parameter '{n}'; valid: {', '.join(self.names)}")
        specs = []
        for s in self.specs:
            fz = (s.name not in free_set) if free_set is not None else (s.frozen or s.name in frozen)
            specs.append(replace(s, frozen=fz))
        return replace(self, specs=tuple(specs))

    def with_nominal(self, values: Mapping[str, float]) -> "ParameterSet":
        """Copy whose nominal values are replaced by ``values`` (clipped to bounds)."""
        self.check_names(values, require_all=False)
        return replace(self, specs=tuple(
            replace(s, nominal=s.clip(values[s.name])) if s.name in values else s for s in self.specs))

    # -- validation and vectors -----------------------------------------------------
    def check_names(self, values: Mapping[str, float], *, require_all: bool = True) -> None:
        """Check keys of ``values`` against the spec.

        Raises:
            ParameterSpecError: naming unknown keys, and (``require_all``) missing ones.
        """
        unknown = [k for k in values if k not in self]
        if unknown:
            raise ParameterSpecError(
                f"unknown parameter(s) {unknown}; valid names: {', '.join(self.names)}")
        if require_all:
            missing = [n for n in self.names if n not in values]
            if missing:
                raise ParameterSpecError(f"missing parameter(s) {missing}")

    def complete(self, values: Mapping[str, float]) -> dict[str, float]:
        """All parameters: ``values`` where given, nominal elsewhere (unknown keys raise)."""
        self.check_names(values, require_all=False)
        out = self.nominal()
        out.update({k: float(v) for k, v in values.items()})
        return out

    def clip(self, values: Mapping[str, float]) -> dict[str, float]:
        """Clamp each given value into its bounds; returns a new dict."""
        return {k: self[k].clip(v) for k, v in values.items()}

    def to_unit_vector(self, values: Mapping[str, float]) -> np.ndarray:
        """Free parameters of ``values`` as a normalised vector, shape (n_free,)."""
        return np.array([s.to_unit(values[s.name]) for s in self.free], dtype=float)

    def from_unit_vector(self, u: Sequence[float], base: Mapping[str, float] | None = None) -> dict[str, float]:
        """Inverse of :meth:`to_unit_vector`; frozen parameters come from ``base`` or nominal.

        Raises:
            ValueError: if ``len(u)`` differs from the number of free parameters.
        """
        u = np.asarray(u, dtype=float).ravel()
        free = self.free
        if u.shape[0] != len(free):
            raise ValueError(f"expected a vector of {len(free)} free parameters, got shape {u.shape}")
        out = self.complete(base or {})
        for s, ui in zip(free, u):
            out[s.name] = s.from_unit(ui)
        return out

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) of the free parameters, each shape (n_free,), in units."""
        return (np.array([s.lower for s in self.free]), np.array([s.upper for s in self.free]))

    def to_dict(self) -> dict[str, Any]:
        """YAML-ready dict in the same format :func:`load_parameter_set` reads."""
        d: dict[str, Any] = {"rig": self.rig, **dict(self.extra)}
        d["parameters"] = [
            {"name": s.name, "unit": s.unit, "lower": s.lower, "upper": s.upper, "nominal": s.nominal,
             "meaning": s.meaning, "target": s.target, "scale": s.scale, "kind": s.kind, "frozen": s.frozen}
            for s in self.specs]
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> "ParameterSet":
        """Build from the YAML structure described in the module docstring.

        Raises:
            ParameterSpecError: naming ``source``, the entry and the field at fault:
                unknown field (typo), missing field, wrong type, bad bounds.
        """
        if not isinstance(data, Mapping):
            raise ParameterSpecError(f"{source}: expected a mapping with a 'parameters' list, got {type(data).__name__}")
        entries = data.get("parameters")
        if not isinstance(entries, list):
            raise ParameterSpecError(f"{source}: field 'parameters' must be a list of parameter entries")
        specs = []
        for i, e in enumerate(entries):
            label = f"{source}: parameters[{i}]" + (f" ('{e.get('name')}')" if isinstance(e, Mapping) and e.get("name") else "")
            if not isinstance(e, Mapping):
                raise ParameterSpecError(f"{label}: expected a mapping, got {type(e).__name__}")
            unknown = [k for k in e if k not in _REQUIRED + _OPTIONAL]
            if unknown:
                raise ParameterSpecError(
                    f"{label}: unknown field(s) {unknown}{did_you_mean(unknown[0], _REQUIRED + _OPTIONAL)}; "
                    f"expected fields: {', '.join(_REQUIRED + _OPTIONAL)}")
            missing = [k for k in _REQUIRED if k not in e]
            if missing:
                raise ParameterSpecError(f"{label}: missing required field(s) {missing}")
            if not isinstance(e["name"], str) or not e["name"].isidentifier():
                raise ParameterSpecError(f"{label}: field 'name' must be an identifier string, got {e['name']!r}")
            try:
                specs.append(ParameterSpec(**{k: e[k] for k in e}))
            except ParameterSpecError as err:
                raise ParameterSpecError(f"{source}: {err}") from None
            except TypeError as err:
                raise ParameterSpecError(f"{label}: {err}") from None
        extra = {k: v for k, v in data.items() if k not in ("parameters", "rig")}
        rig = data.get("rig", "")
        if rig is None:
            rig = ""
        if not isinstance(rig, str):
            raise ParameterSpecError(f"{source}: field 'rig' must be a rig name string, got {rig!r}")
        return cls(specs=tuple(specs), rig=rig, source=source, extra=extra)


def load_parameter_set(path: str | Path) -> ParameterSet:
    """Load a parameter spec YAML file.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ParameterSpecError: if the YAML is unreadable or malformed (message names the file).
    """
    from .yamlio import YAMLInputError, load_yaml

    path = Path(path)
    if path.is_dir():
        raise ParameterSpecError(f"{path}: is a directory, expected a parameter spec YAML file")
    if not path.is_file():
        raise FileNotFoundError(f"parameter spec not found: {path}")
    try:
        data = load_yaml(path)
    except YAMLInputError as err:  # not UTF-8, not YAML, a duplicate key (file:line)
        raise ParameterSpecError(str(err)) from None
    return ParameterSet.from_dict(data, source=str(path))


def relative_parameter_error(estimate: Mapping[str, float], truth: Mapping[str, float],
                             names: Sequence[str] | None = None) -> dict[str, float]:
    """Relative parameter error ``|θ - θ*| / |θ*|`` per parameter.

    Args:
        estimate: identified values ``{name: value}``.
        truth: ground-truth values; must contain every name evaluated.
        names: which parameters to evaluate; default all keys of ``truth``.

    Returns:
        ``{name: relative error}`` (dimensionless). The mean over names and seeds is
        the sim2sim metric of the Vid2Sid paper (8.7 % finger, 12.4 % tentacle).

    Raises:
        KeyError: if a name is missing from ``estimate``.
        ValueError: if a true value is zero (relative error undefined).
    """
    names = list(truth) if names is None else list(names)
    out = {}
    for n in names:
        t = float(truth[n])
        if t == 0.0:
            raise ValueError(f"relative error undefined: true value of '{n}' is 0")
        out[n] = abs(float(estimate[n]) - t) / abs(t)
    return out


def draw_ground_truth(parameters: ParameterSet, seed: int, *, low: float = 0.15, high: float = 0.85) -> dict[str, float]:
    """Hidden true values for a sim2sim trial: free parameters uniform in normalised ``[low, high]``, seeded.

    Frozen parameters keep their nominal values; ``low``/``high`` keep the truth off the
    bounds (a bound-hugging truth is recovered "for free" by any optimiser that clamps).

    Returns:
        full parameter dict (SI units).

    Raises:
        ValueError: unless ``0 <= low < high <= 1``.
    """
    if not 0.0 <= low < high <= 1.0:
        raise ValueError(f"draw_ground_truth: need 0 <= low < high <= 1, got low={low}, high={high}")
    rng = np.random.default_rng([int(seed), 0x5EED])
    u = rng.uniform(low, high, size=len(parameters.free))
    return parameters.from_unit_vector(u, parameters.nominal())

