"""vendor/tf2_msgs is upstream's tf2_msgs/msg/TFMessage: same definition, same type hash.

``make setup`` builds it where no tf2_msgs is importable (the PyPI ``ros-*`` wheels have none),
so that the camera transforms go on /tf_static with the type every tf2 listener expects.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENDOR = REPO / "vendor" / "tf2_msgs"
#: tf2_msgs/msg/TFMessage's RIHS01 hash on ROS 2 Jazzy/Kilted (``ros2 topic info -v /tf``, rosbag2's
#: metadata.yaml ``type_description_hash``); the definition is ros2/geometry2's tf2_msgs/msg/TFMessage.msg
UPSTREAM_HASH = "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"


def test_the_vendored_message_is_upstreams_definition():
    lines = [ln for ln in (VENDOR / "msg" / "TFMessage.msg").read_text().splitlines() if ln.strip()]
    assert lines == ["geometry_msgs/TransformStamped[] transforms"]
    assert "<name>tf2_msgs</name>" in (VENDOR / "package.xml").read_text()
    assert (REPO / "vendor" / "COLCON_IGNORE").is_file()  # a colcon workspace uses its distribution's tf2_msgs


def test_rosidl_hashes_the_vendored_message_as_upstream(tmp_path):
    rosidl = shutil.which("rosidl") or str(Path(sys.executable).with_name("rosidl"))
    share = Path(sys.prefix) / "share"
    if not Path(rosidl).is_file() or not (share / "geometry_msgs" / "msg" / "TransformStamped.idl").is_file():
        pytest.skip("rosidl and geometry_msgs come with `make setup` (.venv)")
    includes = [a for p in ("geometry_msgs", "std_msgs", "builtin_interfaces") for a in ("-I", str(share / p))]
    env = {**os.environ, "AMENT_PREFIX_PATH": os.pathsep.join(filter(None, (sys.prefix, os.environ.get(
        "AMENT_PREFIX_PATH", ""))))}
    subprocess.run([rosidl, "hash", "-o", str(tmp_path), *includes, "tf2_msgs", "msg/TFMessage.msg"],
                   cwd=VENDOR, env=env, check=True, capture_output=True, timeout=120)
    desc = json.loads((tmp_path / "msg" / "TFMessage.json").read_text())
    assert desc["type_hashes"][0] == {"type_name": "tf2_msgs/msg/TFMessage", "hash_string": UPSTREAM_HASH}

