"""cv_bridge where ROS 2 provides it, the own conversion otherwise (vid2sid_ros.io.image_msg).

The equality tests compare ``cv_bridge.CvBridge`` with the own conversion for every encoding
the package handles (:data:`ENCODINGS`), padded rows and every colour conversion; they run
where cv_bridge imports (a ROS 2 install: ``ros-$ROS_DISTRO-cv-bridge``; it is not on PyPI)
and are skipped elsewhere. The switch tests run wherever sensor_msgs imports.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vid2sid_ros.io import image_msg
from vid2sid_ros.io.image_msg import ENCODINGS, ImageEncodingError, array_to_image, image_to_array

REPO_ROOT = Path(__file__).resolve().parents[1]
CV_BRIDGE_MISSING = ("cv_bridge is not installed: it comes with a ROS 2 install "
                     "(apt install ros-$ROS_DISTRO-cv-bridge) and is not on PyPI")


@pytest.fixture(scope="module")
def image_type():
    try:
        from sensor_msgs.msg import Image
    except ImportError as err:
        pytest.skip(f"sensor_msgs is not importable ({err}): run `make setup` or source a ROS 2 install")
    return Image


@pytest.fixture(scope="module")
def bridge(image_type):
    if importlib.util.find_spec("cv_bridge") is None:
        pytest.skip(CV_BRIDGE_MISSING)
    from cv_bridge import CvBridge

    return CvBridge()


def _sample(encoding: str, seed: int, h: int = 6, w: int = 5) -> np.ndarray:
    dtype, channels = ENCODINGS[encoding]
    rng = np.random.default_rng(seed)
    shape = (h, w) if channels == 1 else (h, w, channels)
    if np.dtype(dtype).kind == "f":
        return rng.normal(0.0, 100.0, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _fields(msg) -> tuple:
    return (int(msg.height), int(msg.width), str(msg.encoding), int(msg.is_bigendian), int(msg.step),
            bytes(msg.data))


def _own_decode(msg, desired: str = "passthrough") -> np.ndarray:
    return image_msg._own_image_to_array(msg, desired, *image_msg._checked(msg), copy=True)


def _assert_same_array(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape and a.dtype.newbyteorder("=") == b.dtype.newbyteorder("=")
    assert np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_cv_bridge_and_own_conversion_give_the_same_messages_and_arrays(bridge, image_type, encoding):
    arr = _sample(encoding, seed=sorted(ENCODINGS).index(encoding))
    own_msg = image_msg._own_array_to_image(arr, image_msg._image_fields(arr, encoding), image_type)
    cvb_msg = bridge.cv2_to_imgmsg(arr, encoding)
    assert _fields(own_msg) == _fields(cvb_msg)
    assert _fields(array_to_image(arr, encoding, image_type)) == _fields(cvb_msg)  # the switch: cv_bridge here
    _assert_same_array(_own_decode(cvb_msg), bridge.imgmsg_to_cv2(cvb_msg, "passthrough"))
    _assert_same_array(image_to_array(own_msg), _own_decode(own_msg))
    _assert_same_array(image_to_array(own_msg), arr)
    # padded rows (two pixels of padding per row), as a camera driver may publish them
    itemsize, row = arr.dtype.itemsize, int(own_msg.step)
    pad = 2 * itemsize * ENCODINGS[encoding][1]
    padded = image_type(height=own_msg.height, width=own_msg.width, encoding=encoding, is_bigendian=0,
                        step=row + pad)
    raw = np.zeros((arr.shape[0], row + pad), np.uint8)
    raw[:, :row] = np.frombuffer(arr.tobytes(), np.uint8).reshape(arr.shape[0], row)
    padded.data = raw.tobytes()
    _assert_same_array(_own_decode(padded), bridge.imgmsg_to_cv2(padded, "passthrough"))
    _assert_same_array(image_to_array(padded), arr)


@pytest.mark.parametrize("src,dst", sorted(image_msg._COLOR_CODES))
def test_cv_bridge_and_own_conversion_agree_on_colour_conversions(bridge, image_type, src, dst):
    arr = _sample(src, seed=7)
    msg = bridge.cv2_to_imgmsg(arr, src)
    _assert_same_array(_own_decode(msg, dst), bridge.imgmsg_to_cv2(msg, dst))
    _assert_same_array(image_to_array(msg, dst), _own_decode(msg, dst))


class _RecordingBridge:
    """Wraps the own conversion under CvBridge's two method names and records the calls; its
    decoded array is a view of the message buffer, as cv_bridge returns for unpadded rows."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []

    def imgmsg_to_cv2(self, msg, desired_encoding="passthrough"):
        self.calls.append(("imgmsg_to_cv2", desired_encoding))
        dtype, channels = ENCODINGS[msg.encoding]
        shape = (msg.height, msg.width) if channels == 1 else (msg.height, msg.width, channels)
        view = np.frombuffer(msg.data, dtype=dtype).reshape(shape)
        return view if desired_encoding == "passthrough" else image_msg._convert(view, msg.encoding, desired_encoding)

    def cv2_to_imgmsg(self, cvim, encoding="passthrough", header=None):
        self.calls.append(("cv2_to_imgmsg", encoding))
        from sensor_msgs.msg import Image

        return image_msg._own_array_to_image(cvim, image_msg._image_fields(cvim, encoding), Image, header)


def test_switch_sends_ros_messages_to_the_bridge_and_keeps_the_copy_guarantees(image_type, monkeypatch):
    rec = _RecordingBridge()
    monkeypatch.setattr(image_msg, "_cv_bridge", lambda: rec)
    arr = _sample("rgb8", seed=1)
    msg = array_to_image(arr, "rgb8", image_type)
    assert rec.calls == [("cv2_to_imgmsg", "rgb8")]
    got = image_to_array(msg, "rgb8")  # the same encoding: passthrough, no colour conversion
    assert rec.calls[-1] == ("imgmsg_to_cv2", "passthrough")
    assert got.flags.writeable and not np.shares_memory(got, np.frombuffer(msg.data, np.uint8))
    view = image_to_array(msg, copy=False)
    assert not view.flags.writeable and np.array_equal(view, arr)
    assert np.array_equal(image_to_array(msg, "bgr8"), arr[..., ::-1]) and rec.calls[-1] == ("imgmsg_to_cv2", "bgr8")
    n = len(rec.calls)
    # the own conversion for what is not a ROS message (a rosbags-style object), and for the two
    # layouts cv_bridge's Python side misreads (foreign byte order, rows padded by part of a pixel)
    duck = type("Duck", (), dict(height=msg.height, width=msg.width, encoding="rgb8", is_bigendian=0,
                                 step=msg.step, data=bytes(msg.data)))()
    assert np.array_equal(image_to_array(duck), arr)
    big = image_type(height=2, width=3, encoding="mono16", is_bigendian=1, step=6,
                     data=np.arange(6, dtype=">u2").tobytes())
    assert np.array_equal(image_to_array(big), np.arange(6).reshape(2, 3))
    # rows padded to 4-byte alignment (16 B for 5 rgb8 pixels): not a whole number of pixels
    odd = image_type(height=2, width=5, encoding="rgb8", is_bigendian=0, step=16)
    raw = np.zeros((2, 16), np.uint8)
    raw[:, :15] = arr[:2, :5].reshape(2, 15)
    odd.data = raw.tobytes()
    assert np.array_equal(image_to_array(odd), arr[:2, :5])
    assert len(rec.calls) == n
    # the checks come before either path: the same error line
    bad = image_type(height=2, width=3, encoding="rgb8", is_bigendian=0, step=4, data=bytes(24))
    with pytest.raises(ImageEncodingError, match="smaller than one row"):
        image_to_array(bad)
    with pytest.raises(ImageEncodingError, match="cannot convert image encoding 'mono16' to 'rgb8'"):
        image_to_array(big, "rgb8")
    assert len(rec.calls) == n


def test_image_backend_names_what_imports():
    want = "cv_bridge" if importlib.util.find_spec("cv_bridge") is not None else "vid2sid_ros"
    assert image_msg.image_backend() == want


def test_core_paths_do_not_import_ros_or_cv_bridge():
    """Decoding a rosbags-style message and building Image fields import neither cv_bridge nor sensor_msgs."""
    code = (
        "import sys, numpy as np\n"
        "from vid2sid_ros.io.image_msg import array_to_image_fields, image_to_array\n"
        "f = array_to_image_fields(np.zeros((2, 3, 3), np.uint8), 'rgb8')\n"
        "m = type('M', (), f)()\n"
        "assert image_to_array(m, 'bgr8').shape == (2, 3, 3)\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('cv_bridge', 'sensor_msgs', 'rclpy')))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
