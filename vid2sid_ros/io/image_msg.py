"""sensor_msgs/Image <-> numpy array: cv_bridge where ROS 2 provides it, its rules otherwise.

cv_bridge (``ros-perception/vision_opencv``) comes with a ROS 2 install but is not on PyPI.
The two conversions the graph needs therefore have one switch (:func:`image_backend`):
a ROS message (an rclpy ``sensor_msgs/msg/Image``: what the nodes publish and receive) goes
through ``cv_bridge.CvBridge`` when ``cv_bridge`` imports, and through this module's own
conversion otherwise. Duck-typed messages (rosbags typestore objects read by
``vid2sid_ros.io.rosbag`` without ROS) always take the own conversion, so the core never
imports cv_bridge or sensor_msgs. Both paths check the message first (the same
:class:`ImageEncodingError` lines) and give identical arrays and messages for every encoding
in :data:`ENCODINGS` (``test/test_image_bridge.py``). The own conversion has the semantics
of ``CvBridge.imgmsg_to_cv2`` and ``CvBridge.cv2_to_imgmsg``:

* the encoding string fixes the element type and channel count (``rgb8`` = 3 x uint8,
  ``mono16`` = 1 x uint16, ``32FC1`` = 1 x float32, ...; table :data:`ENCODINGS`);
* a message's rows may be padded (``step >= width * channels * itemsize``); the array is
  read through the row stride, and written back unpadded (``step = width * channels *
  itemsize``, ``is_bigendian = 0`` on little-endian hosts);
* ``is_bigendian`` selects the byte order of multi-byte elements;
* single-channel images come back as (H, W), multi-channel as (H, W, C);
* a ``desired_encoding`` other than ``passthrough`` converts colour order/channels with
  OpenCV (rgb8/bgr8/rgba8/bgra8/mono8), as cv_bridge does with ``cvtColor``.

The functions are duck-typed on the message: anything with ``height``, ``width``,
``encoding``, ``is_bigendian``, ``step`` and ``data`` works, so the same code decodes
rclpy messages (nodes) and rosbags typestore objects (``vid2sid_ros.io.rosbag``) and this
module does not import rclpy.
"""

from __future__ import annotations

import array as _array
import functools
import sys
from typing import Any, Callable

import numpy as np

__all__ = ["ENCODINGS", "ImageEncodingError", "encoding_info", "image_to_array", "array_to_image_fields",
           "array_to_image", "image_backend"]


class ImageEncodingError(ValueError):
    """An image message or array does not match its encoding (message says expected vs. got)."""


#: encoding -> (numpy dtype, channels); sensor_msgs/image_encodings.hpp names.
ENCODINGS: dict[str, tuple[str, int]] = {
    "rgb8": ("uint8", 3), "bgr8": ("uint8", 3), "rgba8": ("uint8", 4), "bgra8": ("uint8", 4),
    "rgb16": ("uint16", 3), "bgr16": ("uint16", 3), "rgba16": ("uint16", 4), "bgra16": ("uint16", 4),
    "mono8": ("uint8", 1), "mono16": ("uint16", 1),
    "bayer_rggb8": ("uint8", 1), "bayer_bggr8": ("uint8", 1), "bayer_gbrg8": ("uint8", 1),
    "bayer_grbg8": ("uint8", 1), "bayer_rggb16": ("uint16", 1), "bayer_bggr16": ("uint16", 1),
    "bayer_gbrg16": ("uint16", 1), "bayer_grbg16": ("uint16", 1),
}
_CV_TYPES = {"8U": "uint8", "8S": "int8", "16U": "uint16", "16S": "int16", "32S": "int32",
             "32F": "float32", "64F": "float64"}
for _depth, _dtype in _CV_TYPES.items():
    for _c in (1, 2, 3, 4):
        ENCODINGS[f"{_depth}C{_c}"] = (_dtype, _c)

# colour conversions cv_bridge performs with cvtColor, (from, to) -> OpenCV code name
_COLOR_CODES = {
    ("rgb8", "bgr8"): "COLOR_RGB2BGR", ("bgr8", "rgb8"): "COLOR_BGR2RGB",
    ("rgba8", "rgb8"): "COLOR_RGBA2RGB", ("bgra8", "bgr8"): "COLOR_BGRA2BGR",
    ("rgba8", "bgr8"): "COLOR_RGBA2BGR", ("bgra8", "rgb8"): "COLOR_BGRA2RGB",
    ("rgb8", "rgba8"): "COLOR_RGB2RGBA", ("bgr8", "bgra8"): "COLOR_BGR2BGRA",
    ("rgb8", "bgra8"): "COLOR_RGB2BGRA", ("bgr8", "rgba8"): "COLOR_BGR2RGBA",
    ("rgba8", "bgra8"): "COLOR_RGBA2BGRA", ("bgra8", "rgba8"): "COLOR_BGRA2RGBA",
    ("rgb8", "mono8"): "COLOR_RGB2GRAY", ("bgr8", "mono8"): "COLOR_BGR2GRAY",
    ("rgba8", "mono8"): "COLOR_RGBA2GRAY", ("bgra8", "mono8"): "COLOR_BGRA2GRAY",
    ("mono8", "rgb8"): "COLOR_GRAY2RGB", ("mono8", "bgr8"): "COLOR_GRAY2BGR",
    ("mono8", "rgba8"): "COLOR_GRAY2RGBA", ("mono8", "bgra8"): "COLOR_GRAY2BGRA",
}


def encoding_info(encoding: str) -> tuple[np.dtype, int]:
    """(dtype, channels) of a sensor_msgs/Image encoding.

    Raises:
        ImageEncodingError: for an encoding not in :data:`ENCODINGS` (lists a few valid ones).
    """
    if encoding not in ENCODINGS:
        raise ImageEncodingError(
            f"unsupported image encoding {encoding!r}; expected one of rgb8, bgr8, rgba8, bgra8, mono8, "
            f"mono16, 8UC3, 32FC1, ... ({len(ENCODINGS)} known)")
    dtype, channels = ENCODINGS[encoding]
    return np.dtype(dtype), channels


def image_to_array(msg: Any, desired_encoding: str = "passthrough", *, copy: bool = True) -> np.ndarray:
    """Decode an Image message into an array (``CvBridge.imgmsg_to_cv2`` semantics).

    Args:
        msg: sensor_msgs/Image (rclpy message or rosbags object).
        desired_encoding: ``"passthrough"`` keeps the message encoding; ``rgb8``, ``bgr8``,
            ``rgba8``, ``bgra8`` or ``mono8`` converts with OpenCV (8-bit sources only).
        copy: ``False`` returns a read-only view of the message's buffer when no
            conversion is needed (unpadded rows, native byte order, passthrough or same
            encoding): no copy of the pixels, for a consumer that only reads them.

    Returns:
        (H, W) for single-channel or (H, W, C) array of the encoding's dtype, native byte
        order, C-contiguous; it does not share memory with the message unless ``copy=False``.

    Raises:
        ImageEncodingError: unknown encoding, a ``step`` smaller than one row, a data buffer
            shorter than ``height * step``, or an unsupported colour conversion.
    """
    dtype, channels, buf = _checked(msg)
    same = desired_encoding in ("passthrough", "", msg.encoding)
    if not same:
        _conversion_code(str(msg.encoding), desired_encoding)  # an unsupported one fails the same way on both paths
    # Two layouts cv_bridge's Python side reads wrongly take the own conversion: a foreign byte
    # order (it swaps with ndarray.newbyteorder, which NumPy 2 removed) and rows padded by a
    # part of a pixel (it takes the row length in pixels as int(step / pixel size)).
    native_order = dtype.itemsize == 1 or bool(msg.is_bigendian) == (sys.byteorder == "big")
    whole_pixels = int(msg.step) % (dtype.itemsize * channels) == 0
    bridge = _cv_bridge() if _is_ros_message(msg) and native_order and whole_pixels else None
    if bridge is not None:
        return _bridge_image_to_array(bridge, msg, desired_encoding if not same else "passthrough", copy=copy)
    return _own_image_to_array(msg, desired_encoding, dtype, channels, buf, copy=copy)


def _checked(msg: Any) -> tuple[np.dtype, int, np.ndarray]:
    """(dtype, channels, raw bytes) of an Image message after its checks (see :func:`image_to_array`)."""
    dtype, channels = encoding_info(str(msg.encoding))
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    row_bytes = w * channels * dtype.itemsize
    if step < row_bytes:
        raise ImageEncodingError(
            f"image step {step} B is smaller than one row ({w} px x {channels} ch x {dtype.itemsize} B = {row_bytes} B)")
    data = msg.data
    if isinstance(data, np.ndarray):
        buf = data.view(np.uint8).ravel()
    elif isinstance(data, (bytes, bytearray, memoryview)) or hasattr(data, "buffer_info"):  # array.array
        buf = np.frombuffer(data, dtype=np.uint8)
    else:
        buf = np.asarray(data, dtype=np.uint8)
    if buf.size < h * step:
        raise ImageEncodingError(
            f"image data has {buf.size} B, expected height*step = {h}*{step} = {h * step} B")
    return dtype, channels, buf


def _own_image_to_array(msg: Any, desired_encoding: str, dtype: np.dtype, channels: int, buf: np.ndarray, *,
                        copy: bool) -> np.ndarray:
    """The own conversion of :func:`image_to_array` (message already checked by :func:`_checked`)."""
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    row_bytes = w * channels * dtype.itemsize
    dt = dtype.newbyteorder(">" if msg.is_bigendian else "<")
    rows = buf[: h * step].reshape(h, step)[:, :row_bytes]
    arr = np.ascontiguousarray(rows).view(dt).reshape((h, w, channels) if channels > 1 else (h, w))
    same = desired_encoding in ("passthrough", "", msg.encoding)
    if (copy and same) or not (arr.dtype.isnative or arr.dtype.itemsize == 1):
        arr = arr.astype(dtype, copy=True)  # native byte order, owns its memory
    else:  # a view; a colour conversion below makes the new array
        arr = arr.view(dtype)
        arr.flags.writeable = False
    if same:
        return arr
    return _convert(arr, str(msg.encoding), desired_encoding)


def _conversion_code(src: str, dst: str) -> str:
    """OpenCV colour-conversion code name for ``src`` -> ``dst``.

    Raises:
        ImageEncodingError: a conversion outside :data:`_COLOR_CODES` (lists the supported ones).
    """
    code = _COLOR_CODES.get((src, dst))
    if code is None:
        raise ImageEncodingError(f"cannot convert image encoding {src!r} to {dst!r}; supported conversions: "
                                 + ", ".join(f"{a}->{b}" for a, b in sorted(_COLOR_CODES)))
    return code


def _convert(arr: np.ndarray, src: str, dst: str) -> np.ndarray:
    code = _conversion_code(src, dst)
    import cv2

    return np.ascontiguousarray(cv2.cvtColor(arr, getattr(cv2, code)))


# --- the switch: cv_bridge for ROS messages where it imports ---------------------------------


@functools.cache
def _cv_bridge() -> Any | None:
    """A ``cv_bridge.CvBridge``, or None where cv_bridge does not import (no ROS 2 install).

    Imported on the first ROS message only, never by the core's own paths."""
    try:
        from cv_bridge import CvBridge
    except ImportError:
        return None
    return CvBridge()


def _is_ros_message(msg: Any) -> bool:
    """True for an rclpy-generated ``sensor_msgs/msg/Image`` (not a rosbags or test object)."""
    return type(msg).__module__.startswith("sensor_msgs.msg")


def _is_ros_factory(factory: Callable[[], Any]) -> bool:
    return getattr(factory, "__module__", "").startswith("sensor_msgs.msg")


def image_backend() -> str:
    """What converts ROS Image messages here: ``"cv_bridge"`` or ``"vid2sid_ros"`` (the own conversion)."""
    return "cv_bridge" if _cv_bridge() is not None else "vid2sid_ros"


def _bridge_error(err: Exception) -> ImageEncodingError:
    return ImageEncodingError(f"cv_bridge: {type(err).__name__}: {err}")


def _bridge_image_to_array(bridge: Any, msg: Any, desired_encoding: str, *, copy: bool) -> np.ndarray:
    """``bridge.imgmsg_to_cv2`` with :func:`image_to_array`'s guarantees on the result (native
    byte order, C-contiguous, its own memory unless ``copy=False``, then read-only)."""
    try:
        arr = bridge.imgmsg_to_cv2(msg, desired_encoding)
    except Exception as err:  # noqa: BLE001 - CvBridgeError, or a numpy error inside cv_bridge
        raise _bridge_error(err) from err
    arr = np.asarray(arr)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if copy and not arr.flags.owndata:
        arr = arr.copy()
    elif not copy and not arr.flags.owndata:
        arr.flags.writeable = False
    return np.ascontiguousarray(arr)


def array_to_image_fields(array: np.ndarray, encoding: str = "passthrough") -> dict[str, Any]:
    """Fields of a sensor_msgs/Image for ``array`` (``CvBridge.cv2_to_imgmsg`` semantics).

    Args:
        array: (H, W) or (H, W, C) array.
        encoding: target encoding; ``"passthrough"`` picks ``8UC3``-style names from the
            dtype and channels. The array's dtype and channel count must match it
            (no conversion is done here, as in cv_bridge).

    Returns:
        ``{"height", "width", "encoding", "is_bigendian", "step", "data"}`` with
        ``step = width * channels * itemsize`` and ``data`` the raw bytes.

    Raises:
        ImageEncodingError: dtype or channel mismatch, or an array that is not 2-D/3-D.
    """
    fields = _image_fields(array, encoding)
    fields["data"] = np.ascontiguousarray(array).tobytes()
    return fields


def _image_fields(array: np.ndarray, encoding: str) -> dict[str, Any]:
    """The fields of :func:`array_to_image_fields` except ``data`` (checks included)."""
    a = np.asarray(array)
    if a.ndim not in (2, 3):
        raise ImageEncodingError(f"image array must be (H, W) or (H, W, C), got shape {a.shape}")
    channels = 1 if a.ndim == 2 else int(a.shape[2])
    if encoding == "passthrough":
        depth = {v: k for k, v in _CV_TYPES.items()}.get(a.dtype.name)
        if depth is None:
            raise ImageEncodingError(f"no image encoding for dtype {a.dtype}")
        encoding = f"{depth}C{channels}"
    dtype, want_c = encoding_info(encoding)
    if a.dtype.newbyteorder("=") != dtype.newbyteorder("=") or channels != want_c:
        raise ImageEncodingError(
            f"encoding {encoding!r} expects {want_c} channel(s) of {dtype.name}, got {channels} of {a.dtype.name} "
            f"(shape {a.shape})")
    big = a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and sys.byteorder == "big")
    return {"height": int(a.shape[0]), "width": int(a.shape[1]), "encoding": encoding,
            "is_bigendian": int(big), "step": int(a.shape[1] * channels * a.dtype.itemsize)}


def array_to_image(array: np.ndarray, encoding: str, factory: Callable[[], Any], header: Any = None) -> Any:
    """Build an rclpy Image message with :func:`array_to_image_fields`, copying the pixels once.

    With ``sensor_msgs.msg.Image`` as ``factory`` and cv_bridge importable, the message is
    ``CvBridge.cv2_to_imgmsg``'s (:func:`image_backend`). Otherwise ``data`` is an
    ``array.array('B')`` filled straight from the array's buffer: the generated rclpy setter
    takes it as is, where ``bytes`` would be copied again (and, with
    ``ROS_PYTHON_CHECK_FIELDS=1``, checked element by element in Python).

    Args:
        array: image array, see :func:`array_to_image_fields`.
        encoding: e.g. ``"rgb8"``.
        factory: message constructor (e.g. ``sensor_msgs.msg.Image``).
        header: optional std_msgs/Header to attach.

    Raises:
        ImageEncodingError: as :func:`array_to_image_fields`.
    """
    fields = _image_fields(array, encoding)  # the same checks and error lines on both paths
    bridge = _cv_bridge() if _is_ros_factory(factory) else None
    if bridge is not None:
        try:
            return bridge.cv2_to_imgmsg(np.ascontiguousarray(array), fields["encoding"], header)
        except Exception as err:  # noqa: BLE001 - CvBridgeError
            raise _bridge_error(err) from err
    return _own_array_to_image(array, fields, factory, header)


def _own_array_to_image(array: np.ndarray, fields: dict[str, Any], factory: Callable[[], Any],
                        header: Any = None) -> Any:
    """The own conversion of :func:`array_to_image` (``fields`` from :func:`_image_fields`)."""
    msg = factory()
    for k, v in fields.items():
        setattr(msg, k, v)
    a = np.ascontiguousarray(array)
    data = _array.array("B")
    data.frombytes(memoryview(a).cast("B"))
    msg.data = data
    if header is not None:
        msg.header = header
    return msg
