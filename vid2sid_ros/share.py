"""Where the package's shared (non-Python) files live: ``config/``, ``msg/``, ``launch/``.

One lookup for every caller. In a source checkout the files sit at the repository root
beside ``vid2sid_ros/``; once installed (``make setup`` into the venv, colcon on a ROS 2
install, or ``pip install .``) they are under ``<prefix>/share/vid2sid_ros/``, found through
``AMENT_PREFIX_PATH`` (a sourced ROS 2 workspace), the prefix the package was imported
from (``install/vid2sid_ros`` of a colcon workspace), ``sys.prefix`` (the venv) or the
file list pip recorded for the ``vid2sid-ros`` distribution (``pip install --user`` puts
them under the user base, not ``sys.prefix``).
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["PACKAGE", "PACKAGE_DIR", "share_candidates", "find_share_path", "resolve_path"]

PACKAGE = "vid2sid_ros"
#: the distribution name `pip install .` records (pyproject.toml)
DISTRIBUTION = "vid2sid-ros"

#: the vid2sid_ros package directory (``pkg:`` paths in configs resolve against it)
PACKAGE_DIR = Path(__file__).resolve().parent


def _own_prefix() -> Path | None:
    """The install prefix this package was imported from, if it sits in one:
    ``<prefix>/lib/pythonX.Y/site-packages/vid2sid_ros`` (a colcon install's
    ``install/vid2sid_ros``, or the venv). None in a source checkout."""
    pkg = Path(__file__).resolve().parent
    if pkg.parent.name in ("site-packages", "dist-packages") and pkg.parents[2].name == "lib":
        return pkg.parents[3]
    return None


def _pip_share(subdir: str) -> list[Path]:
    """``share/vid2sid_ros/<subdir>`` as recorded in the pip-installed distribution's file
    list (RECORD), wherever the install scheme put it; [] for other installs (a CMake or
    colcon install writes an egg-info without a file list)."""
    try:
        files = metadata.distribution(DISTRIBUTION).files or []
    except metadata.PackageNotFoundError:
        return []
    for f in files:
        parts = f.parts
        for i in range(len(parts) - 2):
            if parts[i:i + 3] == ("share", PACKAGE, subdir):
                return [Path(os.path.normpath(f.locate().parents[len(parts) - i - 4]))]
    return []


def share_candidates(subdir: str) -> list[Path]:
    """Directories that may hold ``subdir`` (e.g. ``"config"``), in lookup order:
    the source checkout (what a developer edits wins), then each ``AMENT_PREFIX_PATH``
    entry's ``share/vid2sid_ros``, then the prefix the package was imported from (a
    colcon install used without sourcing its setup script), then ``sys.prefix``'s, then
    where pip recorded them."""
    out = [Path(__file__).resolve().parents[1] / subdir]
    out += [Path(p) / "share" / PACKAGE / subdir
            for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    own = _own_prefix()
    if own is not None:
        out.append(own / "share" / PACKAGE / subdir)
    out.append(Path(sys.prefix) / "share" / PACKAGE / subdir)
    out += _pip_share(subdir)
    return list(dict.fromkeys(out))  # the venv is both its own prefix and sys.prefix: list it once


def find_share_path(subdir: str, *required: str) -> Path:
    """The first candidate directory ``subdir`` that holds every file in ``required``.

    Args:
        subdir: ``"config"``, ``"msg"``, ``"launch"``...
        required: file names that must exist in it (at least one).

    Raises:
        FileNotFoundError: listing the directories searched and the files required.
    """
    candidates = share_candidates(subdir)
    for c in candidates:
        if all((c / r).is_file() for r in required):
            return c
    raise FileNotFoundError(f"{PACKAGE} {subdir}/ with {', '.join(required)} not found; searched: "
                            + ", ".join(str(c) for c in candidates))


def resolve_path(path: str | Path, base: Path | None) -> Path:
    """Resolve a path named in a config file.

    ``pkg:sub/file`` = relative to the installed ``vid2sid_ros`` package directory; a
    relative path = relative to ``base`` (the config file's directory); ``~`` expanded;
    absolute paths as given. The file need not exist.
    """
    s = str(path)
    if s.startswith("pkg:"):
        return (PACKAGE_DIR / s[4:].lstrip("/")).resolve()
    p = Path(s).expanduser()
    if not p.is_absolute() and base is not None:
        p = base / p
    return p.resolve()

