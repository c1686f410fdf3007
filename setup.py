"""setuptools shim for `pip install .`: metadata and dependencies are in pyproject.toml.

This file only adds the shared files the core looks up at run time (vid2sid_ros.share):
config/, msg/ and srv/ under ``<prefix>/share/vid2sid_ros/``, the place a CMake (`make
setup`) or colcon install puts them. colcon does not use this file: package.xml declares
``<build_type>ament_cmake</build_type>``, so colcon builds CMakeLists.txt.
"""

from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
SHARE = "share/vid2sid_ros"


def _files(folder: str, pattern: str) -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / folder).glob(pattern) if p.is_file())


setup(
    data_files=[
        (f"{SHARE}/config", _files("config", "*")),
        (f"{SHARE}/msg", _files("msg", "*.msg")),
        (f"{SHARE}/srv", _files("srv", "*.srv")),
        (SHARE, ["package.xml"]),
    ],
    # keep setuptools' build tree apart from `make setup`'s CMake build dir (build/venv)
    options={"build": {"build_base": "build/pip"}},
)
