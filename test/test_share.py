"""Shared files (config/, msg/) are found from the checkout and from an install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vid2sid_ros.share import find_share_path, share_candidates

REPO = Path(__file__).resolve().parents[1]


def test_checkout_config_wins():
    assert find_share_path("config", "finger.yaml") == REPO / "config"
    assert share_candidates("msg")[0] == REPO / "msg"


def test_missing_file_lists_where_it_looked():
    with pytest.raises(FileNotFoundError, match=r"config/ with nope\.yaml not found; searched: .*config"):
        find_share_path("config", "nope.yaml")


def _site_packages(prefix: Path) -> list[Path]:
    return sorted(prefix.glob("lib/python3*/site-packages"))


def _installs() -> list[tuple[str, Path, dict[str, str]]]:
    """Installs to check, as (route, prefix, extra environment): the venv of `make setup`, and a colcon
    workspace's ``install/vid2sid_ros`` (the repo inside ``<ws>/src/``, or an ``install/`` beside it, or a
    sourced workspace on ``AMENT_PREFIX_PATH``), imported through PYTHONPATH as colcon's setup script does
    but WITHOUT ``AMENT_PREFIX_PATH`` (the lookup must not depend on a sourced environment)."""
    found = []
    if (Path(sys.prefix) / "share" / "vid2sid_ros" / "config" / "finger.yaml").is_file():
        found.append(("make setup (venv)", Path(sys.prefix), {}))
    colcon = [REPO / "install" / "vid2sid_ros", REPO.parents[1] / "install" / "vid2sid_ros"]
    colcon += [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)
               if p and Path(p).name == "vid2sid_ros"]
    for prefix in dict.fromkeys(colcon):
        if (prefix / "share" / "vid2sid_ros" / "config" / "finger.yaml").is_file() and _site_packages(prefix):
            found.append(("colcon", prefix, {"PYTHONPATH": os.pathsep.join(map(str, _site_packages(prefix)))}))
    return found


@pytest.mark.parametrize("route", ["make setup (venv)", "colcon"])
def test_installed_copy_finds_config_and_messages(tmp_path, route):
    # regression: `make demo` runs the installed console script, whose package lives in
    # site-packages; it looked for <site-packages>/config/<file> and failed. And a colcon
    # install (README's second route) was never looked for: the check skipped with "run `make setup`"
    installs = [i for i in _installs() if i[0] == route]
    if not installs:
        pytest.skip(f"no {route} install found (venv: {sys.prefix}; colcon: <ws>/install/vid2sid_ros beside "
                    f"or above {REPO})")
    _, prefix, extra = installs[0]
    installed = prefix / "share" / "vid2sid_ros" / "config" / "finger.yaml"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH")}
    env.update(extra)
    code = ("import vid2sid_ros, vid2sid_ros.nodes.graph as g, vid2sid_ros.io.rosbag as r;"
            "print(vid2sid_ros.__file__); print(g.find_config_dir() / 'finger.yaml'); print(r.find_interface_dir())")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    pkg, cfg, msg = out.stdout.split()
    assert Path(pkg).parent != REPO / "vid2sid_ros", "expected the installed copy, not the checkout"
    assert Path(cfg) == installed
    assert Path(msg) == installed.parents[1] / "msg"


def test_an_unsourced_colcon_style_prefix_finds_its_own_share(tmp_path):
    """A package imported from ``<prefix>/lib/python3.X/site-packages`` finds ``<prefix>/share/vid2sid_ros``
    first, not another install's (the venv's) share, when AMENT_PREFIX_PATH is not set."""
    prefix = tmp_path / "ws" / "install" / "vid2sid_ros"
    site = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "vid2sid_ros").mkdir(parents=True)
    for f in ("__init__.py", "share.py"):
        (site / "vid2sid_ros" / f).write_text((REPO / "vid2sid_ros" / f).read_text())
    cfg = prefix / "share" / "vid2sid_ros" / "config"
    cfg.mkdir(parents=True)
    (cfg / "finger.yaml").write_text("camera_node: {ros__parameters: {}}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH")}
    env["PYTHONPATH"] = str(site)
    code = ("import vid2sid_ros.share as s; print(s.__file__); print(s.find_share_path('config', 'finger.yaml'));"
            "print(s.share_candidates('config').count(s.share_candidates('config')[-1]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    mod, found, n_last = out.stdout.split()
    assert Path(mod).parent == site / "vid2sid_ros"
    assert Path(found) == cfg
    assert n_last == "1"
