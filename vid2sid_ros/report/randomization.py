"""Domain randomisation from what was identified: ranges from the identified intervals, applied to a model.

A policy trained in simulation should see the physics the robot might have, not one
point estimate and not the whole prior box. :func:`export_randomization` turns a
calibration run (``RUN_DIR/result.yaml``: identified values and their standard deviations)
into a randomisation file; :func:`load_randomization` reads it back and
:meth:`Randomization.sample` / :func:`apply_to_mujoco_model` draw from it with a seeded
generator.

File format (``randomization.yaml``, and the same document as ``randomization.json``)::

    version: 1
    source: runs/finger/result.yaml           # the run it came from
    rig: finger
    rule: "..."                                # how ranges were derived (text)
    parameters:
      joint_stiffness:
        unit: N*m/rad                          # SI, the spec's unit
        target: jnt_stiffness[0]*1.0, ...      # where it goes in the model (the spec's target)
        identified: 0.4213                     # the calibrated value
        std: 0.0021                            # 1-sigma of the identification (null if unknown)
        distribution: uniform | normal | log_uniform
        low: 0.4172                            # sampling range, unit (always inside the spec bounds)
        high: 0.4254
        mean: 0.4213                           # normal only: mean and std of the (truncated) normal
        sigma: 0.0021

Derivation (``rule``): the range is the identified value ± ``z`` × std (``z = 1.96``: the 95 %
interval), multiplied by ``widen`` (default 1) and never narrower than ± ``min_relative``
(default 2 %) of the value — an interval of zero width (a parameter the data pinned exactly)
would train a brittle policy — then clipped to the spec's bounds. A parameter without a
standard deviation gets ± ``fallback_relative`` (default 10 %) and says so in ``rule_applied``.
``distribution="uniform"`` (default; log-uniform for log-scale parameters) samples the range
evenly; ``"normal"`` samples N(identified, (widen·std)²) truncated to the range. Frozen
parameters and measurement nuisances (latency, marker offsets) are not randomised: they are
not physics of the model.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..core.files import file_problem
from ..core.parameters import load_parameter_set

__all__ = ["RandomizationError", "ParameterRange", "Randomization", "export_randomization", "load_randomization",
           "apply_to_mujoco_model", "DISTRIBUTIONS"]

DISTRIBUTIONS = ("uniform", "normal", "log_uniform")


class RandomizationError(ValueError):
    """A missing or malformed run directory or randomisation file (one line naming file and key)."""


@dataclass(frozen=True)
class ParameterRange:
    """How one parameter is randomised (units: the parameter's own, SI)."""

    name: str
    unit: str
    target: str
    identified: float
    std: float | None
    distribution: str
    low: float
    high: float
    mean: float | None = None
    sigma: float | None = None
    rule_applied: str = ""

    def sample(self, rng: np.random.Generator) -> float:
        """One draw (within ``[low, high]``)."""
        if self.distribution == "log_uniform":
            return float(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
        if self.distribution == "normal" and self.sigma:
            for _ in range(1000):  # truncated normal by rejection (the range is >= 2 sigma wide in practice)
                x = float(rng.normal(self.mean, self.sigma))
                if self.low <= x <= self.high:
                    return x
            return float(min(max(self.mean, self.low), self.high))
        return float(rng.uniform(self.low, self.high))

    def to_dict(self) -> dict[str, Any]:
        d = {"unit": self.unit, "target": self.target, "identified": self.identified, "std": self.std,
             "distribution": self.distribution, "low": self.low, "high": self.high}
        if self.distribution == "normal":
            d.update({"mean": self.mean, "sigma": self.sigma})
        if self.rule_applied:
            d["rule_applied"] = self.rule_applied
        return d


@dataclass
class Randomization:
    """A loaded randomisation file: ``parameters`` by name, plus where it came from."""

    parameters: dict[str, ParameterRange]
    rig: str = ""
    source: str = ""
    rule: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def sample(self, rng: np.random.Generator) -> dict[str, float]:
        """One draw of every parameter ``{name: value}`` (SI), in file order."""
        return {n: p.sample(rng) for n, p in self.parameters.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "source": self.source, "rig": self.rig, "rule": self.rule,
                "parameters": {n: p.to_dict() for n, p in self.parameters.items()}}


def _rule(z: float, widen: float, min_relative: float, fallback_relative: float, distribution: str) -> str:
    return (f"range = identified ± {z:g}·std × {widen:g} (the 95 % interval), at least ± {100 * min_relative:g} % of "
            f"the value, clipped to the spec bounds; ± {100 * fallback_relative:g} % where no std is known; "
            f"{distribution} sampling (log-uniform for log-scale parameters)" if distribution == "uniform" else
            f"normal(identified, (std × {widen:g})²) truncated to identified ± {z:g}·std × {widen:g} (at least ± "
            f"{100 * min_relative:g} %), clipped to the spec bounds; ± {100 * fallback_relative:g} % uniform where no "
            f"std is known")


def export_randomization(run_dir: str | Path, *, distribution: str = "uniform", widen: float = 1.0, z: float = 1.96,
                         min_relative: float = 0.02, fallback_relative: float = 0.10,
                         out: str | Path | None = None) -> tuple[Randomization, list[Path]]:
    """Write ``randomization.yaml`` and ``randomization.json`` from ``run_dir/result.yaml``.

    Args:
        run_dir: a calibration run directory (holds ``result.yaml``).
        distribution: ``uniform`` (log-uniform on log-scale parameters) or ``normal``.
        widen: multiplies the interval half-width (> 0).
        z: interval half-width in standard deviations (1.96: 95 %).
        min_relative: smallest half-width, relative to the identified value.
        fallback_relative: half-width where the run has no standard deviation.
        out: output directory (default ``run_dir``).

    Returns:
        ``(randomization, [yaml path, json path])``.

    Raises:
        RandomizationError: no ``result.yaml``, an unreadable one, a standard deviation that is
            not a number >= 0 or null (``calibration.uncertainty.NAME.std``), bad options.
    """
    if distribution not in ("uniform", "normal"):
        raise RandomizationError(f"--distribution must be uniform or normal, got {distribution!r}")
    for name, v in (("widen", widen), ("z", z)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise RandomizationError(f"--{name} must be a number > 0, got {v!r}")
    for name, v in (("min-relative", min_relative), ("fallback-relative", fallback_relative)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and 0 <= v < 1):
            raise RandomizationError(f"--{name} must be in [0, 1), got {v!r}")
    rd = Path(run_dir)
    path = rd / "result.yaml"
    why = file_problem(path)
    if why and not path.exists():
        raise RandomizationError(f"{rd}: no result.yaml (not a finished calibration run directory)")
    if why:  # a FIFO / directory / device where result.yaml should be: never opened
        raise RandomizationError(f"result.yaml: {why}")
    try:
        spec = load_parameter_set(path)
    except Exception as err:  # noqa: BLE001 - any parse problem is one line naming the file
        raise RandomizationError(f"{path}: cannot read the identified parameters: {err}") from None
    cal = spec.extra.get("calibration") if isinstance(spec.extra, Mapping) else None
    if cal is not None and not isinstance(cal, Mapping):  # was: AttributeError traceback
        raise RandomizationError(f"{path}: calibration: expected a mapping, got {type(cal).__name__}")
    unc = (cal or {}).get("uncertainty")
    if unc is not None and not isinstance(unc, Mapping):  # was: ignored, every parameter 'without a std'
        raise RandomizationError(f"{path}: calibration.uncertainty: expected a mapping {{name: {{std, unit}}}}, "
                                 f"got {type(unc).__name__} {unc!r}")
    unc = unc or {}
    ranges: dict[str, ParameterRange] = {}
    for s in spec.free:
        if s.kind != "physics":
            continue
        x = float(s.nominal)
        u = unc.get(s.name)
        if u is not None and not isinstance(u, Mapping):
            raise RandomizationError(f"{path}: calibration.uncertainty.{s.name}: expected a mapping {{std, unit}}, "
                                     f"got {type(u).__name__} {u!r}")
        std = u.get("std") if u is not None else None
        if std is not None and (isinstance(std, bool) or not isinstance(std, (int, float)) or not math.isfinite(std)
                                or std < 0):  # the loop writes a number >= 0 or null (NaN becomes null)
            raise RandomizationError(f"{path}: calibration.uncertainty.{s.name}.std: expected a number >= 0 or null, "
                                     f"got {std!r}")
        std = None if std is None else float(std)  # 0: the data pinned it; the min_relative floor applies
        if std is None:
            half, applied = fallback_relative * abs(x), f"no std in {path.name}: ± {100 * fallback_relative:g} %"
        else:
            half, applied = max(z * std * widen, min_relative * abs(x)), ""
            if half > z * std * widen:
                applied = f"widened to ± {100 * min_relative:g} % of the value"
        lo, hi = max(x - half, s.lower), min(x + half, s.upper)
        if s.scale == "log":
            lo = max(lo, s.lower, 1e-300)
        if not lo < hi:  # a value at a bound with a zero-width interval
            lo, hi = max(s.lower, x - max(half, 1e-12)), min(s.upper, x + max(half, 1e-12))
        dist = distribution
        if dist == "uniform" and s.scale == "log" and lo > 0:
            dist = "log_uniform"
        if dist == "normal" and not std:  # no spread to draw from (none known, or 0)
            dist = "uniform"
        ranges[s.name] = ParameterRange(s.name, s.unit, s.target, x, std, dist, float(lo), float(hi),
                                        mean=x if dist == "normal" else None,
                                        sigma=std * widen if dist == "normal" and std else None, rule_applied=applied)
    if not ranges:
        raise RandomizationError(f"{path}: no free physics parameter to randomise")
    rnd = Randomization(ranges, rig=spec.rig, source=str(path),
                        rule=_rule(z, widen, min_relative, fallback_relative, distribution))
    import yaml

    od = Path(out) if out is not None else rd
    od.mkdir(parents=True, exist_ok=True)
    doc = rnd.to_dict()
    paths = [od / "randomization.yaml", od / "randomization.json"]
    paths[0].write_text(yaml.safe_dump(doc, sort_keys=False))
    paths[1].write_text(json.dumps(doc, indent=1))
    return rnd, paths


def load_randomization(path: str | Path) -> Randomization:
    """Read a ``randomization.yaml`` / ``.json`` (module docstring format).

    Raises:
        RandomizationError: unreadable file, wrong version, a parameter entry with a missing or
            bad key (the message names ``file: parameters.NAME.key``).
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise RandomizationError(f"{p}: cannot read: {err.strerror or err}") from None
    try:
        if p.suffix == ".json":
            doc = json.loads(text)
        else:
            from ..core.yamlio import loads_yaml

            doc = loads_yaml(text, source=str(p))
    except Exception as err:  # noqa: BLE001
        raise RandomizationError(f"{p}: not valid {'JSON' if p.suffix == '.json' else 'YAML'}: {err}") from None
    if not isinstance(doc, Mapping) or doc.get("version") != 1:
        raise RandomizationError(f"{p}: version: expected 1, got {doc.get('version') if isinstance(doc, Mapping) else doc!r}")
    params = doc.get("parameters")
    if not isinstance(params, Mapping) or not params:
        raise RandomizationError(f"{p}: parameters: expected a non-empty mapping")
    out: dict[str, ParameterRange] = {}
    for name, e in params.items():
        where = f"{p}: parameters.{name}"
        if not isinstance(e, Mapping):
            raise RandomizationError(f"{where}: expected a mapping")
        dist = e.get("distribution")
        if dist not in DISTRIBUTIONS:
            raise RandomizationError(f"{where}.distribution: expected one of {', '.join(DISTRIBUTIONS)}, got {dist!r}")
        nums = {}
        for key in ("identified", "low", "high"):
            v = e.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise RandomizationError(f"{where}.{key}: expected a finite number, got {v!r}")
            nums[key] = float(v)
        if not nums["low"] < nums["high"]:
            raise RandomizationError(f"{where}: expected low < high, got low={nums['low']} high={nums['high']}")
        if dist == "log_uniform" and nums["low"] <= 0:
            raise RandomizationError(f"{where}.low: log_uniform needs low > 0, got {nums['low']}")
        mean = sigma = None
        if dist == "normal":
            mean, sigma = e.get("mean"), e.get("sigma")
            if not (isinstance(sigma, (int, float)) and sigma > 0 and isinstance(mean, (int, float))):
                raise RandomizationError(f"{where}: normal needs a number 'mean' and 'sigma' > 0")
        out[str(name)] = ParameterRange(str(name), str(e.get("unit", "")), str(e.get("target", "")),
                                        nums["identified"], e.get("std"), dist, nums["low"], nums["high"],
                                        mean=None if mean is None else float(mean),
                                        sigma=None if sigma is None else float(sigma),
                                        rule_applied=str(e.get("rule_applied", "")))
    return Randomization(out, rig=str(doc.get("rig", "")), source=str(doc.get("source", "")),
                         rule=str(doc.get("rule", "")))


def apply_to_mujoco_model(model: Any, randomization: Randomization, rng: np.random.Generator) -> dict[str, float]:
    """Draw one sample and write it into a compiled ``mujoco.MjModel`` through each parameter's target.

    Targets use the spec syntax the twins read (:func:`~vid2sid_ros.sim.user_model.parse_user_target`:
    ``dof_damping[0], dof_damping[1]``, ``jnt_stiffness[1]*0.6``, name indices ``dof_damping[j1]``,
    ``actuator_gear[m1,0]``, ``opt.density``): each listed field gets ``value × ratio``.

    Args:
        model: a ``mujoco.MjModel`` (changed in place; its compile-time constants recomputed after the writes).
        randomization: from :func:`load_randomization`.
        rng: e.g. ``numpy.random.default_rng(seed)`` — the same seed gives the same model.

    Returns:
        the drawn values ``{name: value}`` (SI).

    Raises:
        RandomizationError: a target that does not name a field of this model, or names a camera /
            initial-state / trial nuisance (not in an MjModel); the message names it.
    """
    from ..core.camera import CAMERA_FIELDS
    from ..sim.image_projection import PROJECTION_FIELDS
    from ..sim.user_model import UserModelError, parse_user_target, write_model_bindings

    values = randomization.sample(rng)
    where = f"{randomization.source or 'randomization'}: parameters"
    bindings = {}
    for name in values:  # every target checked before the model is touched
        target = randomization.parameters[name].target
        try:
            bindings[name] = parse_user_target(model, name, target,
                                               camera_fields={**PROJECTION_FIELDS, **CAMERA_FIELDS})
        except UserModelError as err:
            raise RandomizationError(f"{where}.{name}.target: {err}") from None
        other = [b.kind for b in bindings[name] if b.kind not in ("model", "option")]
        if other:
            raise RandomizationError(f"{where}.{name}.target: {target!r} sets a {other[0]} value, not a field of "
                                     "the MjModel; a randomization writes model fields only")
    write_model_bindings(model, [(b, v * b.ratio) for name, v in values.items() for b in bindings[name]])
    return values
