"""``__all__`` lists only what a module defines (or re-exports): every name in it resolves.

A stale entry breaks ``from module import *`` and misleads a reader about the public API
(a bench script imported a renderer helper that ``__all__`` still listed after it had gone).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import vid2sid_ros

PKG_DIR = Path(vid2sid_ros.__file__).resolve().parent
# rosidl-generated interface packages are built, not written: their __all__ is the generator's
SKIP = {"vid2sid_ros.msg", "vid2sid_ros.srv"}


def _modules():
    names = []
    for info in pkgutil.walk_packages([str(PKG_DIR)], prefix="vid2sid_ros."):
        if any(info.name == s or info.name.startswith(s + ".") for s in SKIP):
            continue
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_all_names_resolve(name):
    module = importlib.import_module(name)
    listed = getattr(module, "__all__", None)
    if listed is None:
        return
    assert len(listed) == len(set(listed)), f"{name}.__all__ repeats a name"
    missing = [n for n in listed if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ lists names it does not define: {missing}"


def test_the_walk_finds_the_package():
    mods = _modules()
    assert "vid2sid_ros.sim.mujoco_render" in mods and "vid2sid_ros.calibration.loop" in mods
