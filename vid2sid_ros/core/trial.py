"""The real trial a calibration fits: trajectories per excitation, optional frames.

A :class:`RealTrial` is what the robot (or a stand-in twin with hidden parameters)
produced for the *training* excitations (fitted) and the *holdout* excitations (only
scored at the end). It optionally carries the real camera frames (for proposers that
watch video) and, in sim2sim runs, the hidden ground-truth parameters.

File format (``RealTrial.save`` / ``RealTrial.load``), JSON::

    {"source": "sim2sim finger seed 0",
     "truth": {"pip_stiffness": 0.21, ...},          # optional, sim2sim only
     "train":   [{"excitation": {"name": ..., "rate": 30.0, "actuator_names": [...],
                                 "values": [[...], ...]},
                  "trajectory": <Trajectory.to_dict()>}, ...],
     "holdout": [...]}

Frames are not stored in the JSON (they are videos; pass them in memory or record a
rosbag).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .excitation import Excitation, ExcitationError
from .files import file_problem
from .trajectory import Trajectory, TrajectoryError

__all__ = ["RealTrial", "ObservationError", "jsonable", "with_current_keys"]


class ObservationError(ValueError):
    """A real trial (object or file) is inconsistent; the message names the field."""


@dataclass
class RealTrial:
    """Observed keypoint trajectories of the real rig for each excitation.

    Attributes:
        train: one trajectory per training excitation (same order), keypoints (T, K, 2) px.
        train_excitations: the commanded training excitations.
        holdout: one trajectory per holdout excitation (may be empty).
        holdout_excitations: the commanded holdout excitations.
        frames: optional real camera frames ``{trial_id: (T, H, W, 3) uint8 RGB}``.
        source: free text (file, camera, ``"sim2sim finger seed 3"``).
        truth: hidden ground-truth parameters ``{name: value}`` (sim2sim only), SI units.
        meta: free-form extras (noise model, tracker, ...).

    Raises:
        ObservationError: if the numbers of trajectories and excitations differ, or a
            training set is empty.
    """

    train: list[Trajectory]
    train_excitations: list[Excitation]
    holdout: list[Trajectory] = field(default_factory=list)
    holdout_excitations: list[Excitation] = field(default_factory=list)
    frames: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = ""
    truth: dict[str, float] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.train, self.train_excitations = list(self.train), list(self.train_excitations)
        self.holdout, self.holdout_excitations = list(self.holdout), list(self.holdout_excitations)
        if not self.train:
            raise ObservationError("real trial: 'train' must hold at least one trajectory")
        for label, trajs, excs in (("train", self.train, self.train_excitations),
                                   ("holdout", self.holdout, self.holdout_excitations)):
            if len(trajs) != len(excs):
                raise ObservationError(
                    f"real trial: {len(trajs)} {label} trajectories but {len(excs)} {label} excitations")
            for i, (t, e) in enumerate(zip(trajs, excs)):
                if not isinstance(t, Trajectory):
                    raise ObservationError(f"real trial: {label}[{i}] is a {type(t).__name__}, expected Trajectory")
                if not isinstance(e, Excitation):
                    raise ObservationError(f"real trial: {label}_excitations[{i}] is a {type(e).__name__}, "
                                           "expected Excitation")
        for kind in {t.kind for t in self.train + self.holdout}:  # a video and joint states may be mixed
            names = {t.names for t in self.train + self.holdout if t.kind == kind}
            if len(names) > 1:
                raise ObservationError(f"real trial: trajectories disagree on keypoint names: {sorted(names)}")

    @property
    def keypoint_names(self) -> tuple[str, ...]:
        """Names of the twin's keypoints the trials measure: the first image or 3-D point
        trajectory's (joint-state trials name joints, not keypoints); all joints: the first's."""
        return next((t.names for t in self.train if t.kind != "joints"), self.train[0].names)

    def first_frames(self) -> np.ndarray | None:
        """Real frames of the first training trial, (T, H, W, 3) uint8, or None."""
        return self.frames.get(self.train[0].trial_id) if self.frames else None

    # -- files ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        def pack(trajs: Sequence[Trajectory], excs: Sequence[Excitation]) -> list[dict]:
            return [{"excitation": {"name": e.name, "rate": e.rate, "actuator_names": list(e.actuator_names),
                                    "values": np.asarray(e.values).tolist()},
                     "trajectory": t.to_dict()} for t, e in zip(trajs, excs)]

        return {"source": self.source, "truth": self.truth, "meta": jsonable(self.meta),
                "train": pack(self.train, self.train_excitations),
                "holdout": pack(self.holdout, self.holdout_excitations)}

    def save(self, path: str | Path) -> Path:
        """Write the JSON format of the module docstring (frames are not saved)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        from .files import atomic_write_text

        return atomic_write_text(path, json.dumps(self.to_dict()))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> "RealTrial":
        """Inverse of :meth:`to_dict`.

        Raises:
            ObservationError: naming ``source`` and the entry at fault.
        """
        if not isinstance(data, Mapping):
            raise ObservationError(f"{source}: expected a JSON object with 'train' and 'holdout' lists")
        if "train" not in data and "keypoints" in data and "time" in data:
            raise ObservationError(f"{source}: a single trajectory, not a real trial: it lacks the excitation it "
                                   "pairs with; write it with "
                                   "`vid2sid track VIDEO --rig RIG --excitation NAME --out FILE`")
        out: dict[str, tuple[list, list]] = {}
        for label in ("train", "holdout"):
            entries = data.get(label, [] if label == "holdout" else None)
            if not isinstance(entries, list):
                raise ObservationError(f"{source}: field '{label}' must be a list of {{excitation, trajectory}}")
            trajs, excs = [], []
            for i, e in enumerate(entries):
                where = f"{source}: {label}[{i}]"
                if not isinstance(e, Mapping) or "excitation" not in e or "trajectory" not in e:
                    raise ObservationError(f"{where}: expected a mapping with 'excitation' and 'trajectory'")
                x = e["excitation"]
                try:
                    excs.append(Excitation(str(x["name"]), float(x["rate"]), np.asarray(x["values"], float),
                                           tuple(x.get("actuator_names", ("u0",)))))
                    trajs.append(Trajectory.from_dict(e["trajectory"]))
                except (KeyError, TypeError, ValueError, ExcitationError, TrajectoryError) as err:
                    raise ObservationError(f"{where}: {type(err).__name__}: {err}") from None
            out[label] = (trajs, excs)
        truth = data.get("truth")
        if truth is not None and not isinstance(truth, Mapping):
            raise ObservationError(f"{source}: field 'truth' must be a mapping of parameter values")
        try:
            truth_values = None if truth is None else {str(k): float(v) for k, v in truth.items()}
        except (TypeError, ValueError) as err:
            raise ObservationError(f"{source}: field 'truth' must map parameter names to numbers ({err})") from None
        try:
            return cls(out["train"][0], out["train"][1], out["holdout"][0], out["holdout"][1],
                       source=str(data.get("source", source)), truth=truth_values, meta=dict(data.get("meta") or {}))
        except ObservationError as err:  # name the file, not just "real trial"
            raise ObservationError(f"{source}: {str(err).removeprefix('real trial: ')}") from None

    @classmethod
    def load(cls, path: str | Path) -> "RealTrial":
        """Read a real-trial JSON file.

        Raises:
            FileNotFoundError: if missing. ObservationError: if malformed (names the file).
        """
        path = Path(path)
        why = file_problem(path)
        if why:  # missing, or a FIFO / directory / device (never opened)
            raise FileNotFoundError(f"real trial {why}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as err:
            raise ObservationError(f"{path}: not a UTF-8 JSON file ({err.reason} at byte {err.start})") from None
        except json.JSONDecodeError as err:
            raise ObservationError(f"{path}: not valid JSON: {err}") from None
        return cls.from_dict(data, source=str(path))


#: types :func:`jsonable` returns as they are
_PLAIN = (int, bool, str)


def jsonable(x: Any) -> Any:
    """Best-effort conversion of numpy scalars/arrays and tuples to JSON types."""
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):  # plain items inline (a trajectory's long lists of floats: no call each)
        return [(v if math.isfinite(v) else None) if type(v) is float else
                v if (v is None or type(v) in _PLAIN) else jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if math.isfinite(v) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, Path):
        return str(x)
    return x


def with_current_keys(doc: Mapping[str, Any], legacy: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``doc`` with each old key of ``legacy`` (``{old: new}``) under its new name; a key
    already under its new name wins over the old one (records of older versions still read)."""
    out = dict(doc)
    for old, new in legacy.items():
        if old in out:
            v = out.pop(old)
            out.setdefault(new, v)
    return out
