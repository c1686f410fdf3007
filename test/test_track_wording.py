"""The words around tracking: the HSV hint names the rig-config key the marker's range is under."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vid2sid_ros.io.clip import ClipError, track_clip
from vid2sid_ros.rigs import load_rig


def test_a_marker_never_found_names_its_hsv_range_under_the_tracker_key(tmp_path):
    """Was: "check the HSV range in trial.tracker" for a rig config that has a top-level `tracker:`."""
    path = tmp_path / "dark.mp4"
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (64, 48))
    for _ in range(5):
        w.write(np.zeros((48, 64, 3), np.uint8))  # no marker anywhere
    w.release()
    cfg = load_rig("pendulum").tracker
    name = cfg["markers"][0]["name"]
    with pytest.raises(ClipError) as err:
        track_clip(path, cfg, thumb_scale=None)
    msg = str(err.value)
    assert f"marker '{name}' was not found" in msg and "tracker.markers[0].hsv_lower/hsv_upper" in msg, msg
    assert "trial.tracker" not in msg
