"""Perception: image frames -> keypoint trajectories.

Two trackers share one call shape (``track(frames, *, time, fps, invalid_frames,
source, trial_id) -> Trajectory``): :class:`~vid2sid_ros.perception.markers.MarkerTracker`
for rigid rigs with colour/ArUco markers and
:class:`~vid2sid_ros.perception.centerline.CenterlineTracker` for soft bodies.
:func:`make_tracker` is the one place that maps a rig's ``tracker`` config to a tracker;
:func:`vid2sid_ros.perception.quality.check_tracking` is the one check of what a trial's
measurements lost (every trial source runs it).
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["make_tracker", "rig_tracker", "tracker_names", "TRACKER_KINDS"]

#: ``tracker.kind`` -> tracker class (imported lazily)
TRACKER_KINDS = {
    "markers": "vid2sid_ros.perception.markers:MarkerTracker",
    "centerline": "vid2sid_ros.perception.centerline:CenterlineTracker",
}


def make_tracker(cfg: Mapping[str, Any] | None) -> Any:
    """A fresh tracker from a rig's ``tracker`` configuration.

    Args:
        cfg: mapping with ``kind`` (``markers``, the default, or ``centerline``) and the
            tracker's own keys (see each tracker's ``from_config``).

    Raises:
        ValueError: ``cfg`` is empty or names an unknown kind (lists the valid kinds);
            the trackers' own config errors (``MarkerTrackerError``,
            ``CenterlineError``, both ``ValueError``) pass through.
    """
    import importlib

    if not cfg:
        raise ValueError("no tracker configuration: the rig needs a 'tracker' mapping with a 'kind'")
    kind = cfg.get("kind", "markers")
    if kind not in TRACKER_KINDS:
        raise ValueError(f"tracker kind {kind!r} is unknown; valid kinds: {', '.join(TRACKER_KINDS)}")
    mod, cls = TRACKER_KINDS[kind].split(":")
    return getattr(importlib.import_module(mod), cls).from_config(dict(cfg))


def tracker_names(tracker: Any) -> tuple[str, ...]:
    """Keypoint names of a tracker (``names`` or ``keypoint_names``).

    Raises:
        ValueError: the tracker exposes no names.
    """
    names = getattr(tracker, "names", None) or getattr(tracker, "keypoint_names", None)
    if not names:
        raise ValueError(f"tracker {type(tracker).__name__} exposes no keypoint names")
    return tuple(names)


def rig_tracker(rig: Any) -> tuple[Any, tuple[str, ...]]:
    """A fresh tracker for a rig (a :class:`~vid2sid_ros.core.rig.Rig`)
    and its keypoint names. Trackers keep per-stream state (search windows), so each
    image stream needs its own.

    Raises:
        ValueError: see :func:`make_tracker` (the message names the rig).
    """
    if isinstance(rig, str):  # a rig name needs the rig loader, a layer above: callers pass a Rig
        raise TypeError(f"rig_tracker: pass a Rig (vid2sid_ros.rigs.load_rig({rig!r})), not a name")
    try:
        tracker = make_tracker(rig.tracker)
    except ValueError as err:
        raise type(err)(f"rig {getattr(rig, 'name', rig)!r}: {err}") from None
    return tracker, tracker_names(tracker)
