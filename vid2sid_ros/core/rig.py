"""The :class:`Rig`: everything a calibration needs to know about one robot.

A rig binds a twin factory (the simulator side), the parameter specification, the
excitations, the tracker configuration and the trials of the real robot. It is built
from ONE rig config file by :func:`vid2sid_ros.rigs.load_rig` (built-in rigs are configs
in the same format); the type lives here, on the ground floor, so that every layer
(sim/, io/, calibration/, nodes/) can hold one without importing the loader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .excitation import Excitation
from .parameters import ParameterSet

__all__ = ["Rig", "TrialSpec", "UnknownRigError"]


class UnknownRigError(KeyError):
    """The rig name is not registered; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


@dataclass
class TrialSpec:
    """One trial of a rig config (``trials[i]``), validated, paths resolved.

    Attributes:
        name: trial id (unique in the rig; trajectories and excitations carry it).
        source: ``{kind: block}`` with exactly one kind of :data:`vid2sid_ros.io.sources.SOURCES`
            (``video``, ``sim2sim``, ...), the block as normalised by that kind's ``check``.
        excitation: the commanded excitation, or None for free motion (zero commands
            over the recording's length).
        init: fixed initial state ``{"qpos[joint]": value, ...}`` (rad or m per joint
            type; ``qvel``: rad/s or m/s); values of free entries are in ``free_init``.
        free_init: initial-state coordinates identified per trial as nuisance parameters
            ``{"qpos[joint]": parameter name}``.
        frames: ``(start, stop)`` frame range of the recording, ``stop`` None = to the end.
        time_offset: time from the initial state to the first used frame, s (>= 0).
        split: ``"train"``, ``"holdout"`` or a float in (0, 1]: the training fraction
            of this trial's time (the rest is scored as holdout).
        where: ``file:trials[i]`` for messages.
    """

    name: str
    source: dict[str, Any]
    excitation: Excitation | None = None
    init: dict[str, float] = field(default_factory=dict)
    free_init: dict[str, str] = field(default_factory=dict)
    frames: tuple[int, int | None] = (0, None)
    time_offset: float = 0.0
    split: str | float = "train"
    where: str = ""

    @property
    def kind(self) -> str:
        """The source kind (``video``, ``sim2sim``...)."""
        return next(iter(self.source))


@dataclass
class Rig:
    """A calibratable rig.

    Attributes:
        name: rig identifier (``finger``, ``tentacle``, ``tentacle_water``, ``pendulum``, ``my_arm``...).
        description: one paragraph for reports, captions and VLM prompts (what moves, what the keypoints are).
        parameters: the parameter specification (physics shared by every trial; nuisance
            parameters, including per-trial initial states, kept apart by ``kind``).
        excitations: ``{"train": [...], "holdout": [...]}``; for a rig with trials, one
            excitation per trial part in trial order (``meta["trial"]`` names the trial).
        make_twin: ``make_twin(**kwargs) -> Twin``; kwargs may include ``width``, ``height``
            (px, the rendered image: a pinhole camera keeps its view, its intrinsics scaled with
            the image, :meth:`~vid2sid_ros.core.camera.PinholeCamera.resized`).
        tracker: tracker configuration (kind, colours...), see ``vid2sid_ros.perception``.
        config: the full resolved configuration (for reports and reproducibility).
        trials: the config's trials (empty: the stand-in sim2sim trial over ``excitations``).
        source: the rig config file (None for rigs built in code).
        keypoints: keypoint names in trajectory order (empty when only the twin knows them).
        camera: the config's ``camera`` block (intrinsics, pose), as validated.
        nuisance: the config's ``nuisance`` block (latency, camera pose, marker offsets switches).
        calibration: defaults for the calibration run (``calibration:`` block).
        proposer: ``{"name": ..., "options": {...}, "fallback": ...}`` from the config.
        named_excitations: the config's named ``excitations:`` profiles (``NAME -> Excitation``,
            whole profiles, before any trial split), e.g. for ``vid2sid track --excitation NAME``.
    """

    name: str
    description: str
    parameters: ParameterSet
    excitations: dict[str, list[Excitation]]
    make_twin: Callable[..., Any]
    tracker: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    trials: list[TrialSpec] = field(default_factory=list)
    source: Path | None = None
    keypoints: tuple[str, ...] = ()
    camera: dict[str, Any] = field(default_factory=dict)
    nuisance: dict[str, Any] = field(default_factory=dict)
    calibration: dict[str, Any] = field(default_factory=dict)
    proposer: dict[str, Any] = field(default_factory=dict)
    named_excitations: dict[str, Excitation] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """What messages about this rig's config name: the config file it was loaded from
        (``config["_source"]``, else :attr:`source`), or the rig's name for a rig built in code."""
        return str((self.config or {}).get("_source") or self.source or self.name)

    def trial(self, name: str) -> TrialSpec:
        """The trial called ``name``.

        Raises:
            KeyError: naming the valid trial names.
        """
        for t in self.trials:
            if t.name == name:
                return t
        raise KeyError(f"rig '{self.name}' has no trial {name!r}; trials: {', '.join(t.name for t in self.trials)}")
