"""Check that rclpy and the rosidl-generated interfaces of vid2sid_ros are importable.

``require_interfaces()`` turns the long ImportError chain of a missing build into one
clear line. Nodes, the CLI and tests call it before importing ``vid2sid_ros.msg``.
"""

from __future__ import annotations

import importlib

__all__ = ["InterfacesNotBuiltError", "NOT_BUILT_MESSAGE", "interfaces_available", "require_interfaces"]

NOT_BUILT_MESSAGE = (
    "vid2sid_ros interfaces are not built: run `make setup` in the repository "
    "(or `colcon build --packages-select vid2sid_ros` and source install/setup.bash "
    "on a ROS 2 install)"
)


class InterfacesNotBuiltError(RuntimeError):
    """Raised when rclpy, vid2sid_ros.msg or vid2sid_ros.srv cannot be imported."""


def _try_import() -> str | None:
    try:
        # rclpy first: where ROS 2 itself is absent (a `pip install .` without ROS) the
        # hint names it rather than the generated modules that cannot exist without it
        importlib.import_module("rclpy")
        importlib.import_module("vid2sid_ros.msg")
        importlib.import_module("vid2sid_ros.srv")
    except ImportError as err:  # ModuleNotFoundError, or a typesupport .so that fails to load
        return f"{type(err).__name__}: {err}"
    return None


def interfaces_available() -> bool:
    """True when ``rclpy``, ``vid2sid_ros.msg`` and ``vid2sid_ros.srv`` import."""
    return _try_import() is None


def require_interfaces() -> None:
    """Raise :class:`InterfacesNotBuiltError` (a RuntimeError) with a one-line hint if missing."""
    problem = _try_import()
    if problem is not None:
        raise InterfacesNotBuiltError(f"{NOT_BUILT_MESSAGE} [{problem}]")
