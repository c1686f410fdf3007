"""`pip install .` gives a Python environment without ROS 2 the calibrator and the `vid2sid` command.

The checkout's files (tracked and new, as git lists them) are copied to a temporary tree and
installed with pip into a fresh venv. No network: the fresh venv sees this interpreter's
already-installed third-party packages through a ``.pth`` file pointing at a *view* of its
site-packages (symlinks) that leaves out every ROS 2 distribution (``ros-*`` wheels: rclpy,
the message packages) and any installed vid2sid_ros, and pip runs with ``--no-deps
--no-build-isolation --no-index``. What the venv then runs is the installed copy only (cwd
outside the checkout, no PYTHONPATH), in an environment where ROS 2 is absent.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
RIG = "examples/rigs/urdf_arm/rig.yaml"


def _base_sites() -> list[Path]:
    """This interpreter's site-packages directories (a venv's, or the system's dist-packages)."""
    dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]
    return [Path(d) for d in dict.fromkeys(dirs) if Path(d).is_dir()]


def _ros_free_view(dest: Path) -> Path:
    """A directory of symlinks to the entries of :func:`_base_sites`, without the ROS 2
    distributions (names ``ros-*``) and without any installed vid2sid_ros."""
    dest.mkdir(parents=True)
    for base in _base_sites():
        hidden: set[str] = set()
        for dist in metadata.distributions(path=[str(base)]):
            name = (dist.metadata["Name"] or "").lower().replace("_", "-")
            if not (name.startswith("ros-") or name == "vid2sid-ros"):
                continue
            hidden.add(Path(dist._path).name)  # noqa: SLF001 - its .dist-info / .egg-info directory
            for f in dist.files or ():
                if f.parts and f.parts[0] != "..":
                    hidden.add(f.parts[0])
        for entry in base.iterdir():
            if (entry.name in hidden or entry.name.startswith("vid2sid_ros") or entry.suffix == ".pth"
                    or (dest / entry.name).exists()):
                continue
            (dest / entry.name).symlink_to(entry)
    return dest


def _checkout_copy(dest: Path) -> Path:
    """The checkout's tracked and untracked-but-not-ignored files, copied to ``dest``."""
    listed = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, check=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = REPO_ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH")
           and not k.startswith("PIP_")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PIP_CONFIG_FILE=os.devnull,
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PYTHONNOUSERSITE="1")
    return env


@pytest.fixture(scope="module")
def pip_venv(tmp_path_factory):
    """(venv, source copy, env): the checkout installed by ``pip install .`` into a fresh venv."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed (the test copies the checkout's files as git lists them)")
    try:
        import ensurepip  # noqa: F401
    except ImportError:
        pytest.skip("python -m venv cannot install pip here (Debian/Ubuntu: apt install python3-venv)")
    for needed in ("setuptools", "wheel"):
        try:
            metadata.version(needed)
        except metadata.PackageNotFoundError:
            pytest.skip(f"{needed} is not installed in {sys.prefix} (requirements.txt has it): the offline "
                        "`pip install --no-build-isolation` needs it")
    root = tmp_path_factory.mktemp("pip_install")
    venv = root / "venv"
    src = _checkout_copy(root / "src")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    vpy = venv / "bin" / "python"
    vsite = Path(subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                capture_output=True, text=True, check=True).stdout.strip())
    (vsite / "zz_base_packages.pth").write_text(f"{_ros_free_view(root / 'base_view')}\n")
    env = _clean_env(venv)
    proc = subprocess.run([str(vpy), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                           str(src)], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return venv, src, env


def test_installed_package_is_the_copy_and_ros_is_absent(pip_venv):
    venv, _src, env = pip_venv
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import importlib.util, vid2sid_ros\n"
         "from vid2sid_ros.share import find_share_path\n"
         "from vid2sid_ros._interfaces import interfaces_available\n"
         "print(vid2sid_ros.__file__)\n"
         "print(find_share_path('config', 'finger.yaml'))\n"
         "print(find_share_path('msg', 'Trajectory.msg'))\n"
         "from vid2sid_ros.share import _pip_share\n"
         "print([str(d) for d in _pip_share('config')])\n"
         "print(importlib.util.find_spec('rclpy') is None, interfaces_available())\n"],
        cwd=venv.parent, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    module, config, msg, recorded, ros = proc.stdout.strip().splitlines()
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    assert Path(module).resolve().is_relative_to(site.resolve())
    assert Path(config) == venv / "share" / "vid2sid_ros" / "config"
    assert Path(msg) == venv / "share" / "vid2sid_ros" / "msg"
    # where pip recorded them (what finds them after `pip install --user`, outside sys.prefix)
    assert recorded == repr([str(venv / "share" / "vid2sid_ros" / "config")])
    assert ros == "True False"


def test_every_package_of_the_checkout_is_installed(pip_venv):
    """Each folder of vid2sid_ros/ with an ``__init__.py`` (calibration/proposers/vlm/, benchmark/, ...)
    is in the installed copy: the package list is found, not written down."""
    venv, src, _env = pip_venv
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    packages = sorted(p.parent.relative_to(src) for p in (src / "vid2sid_ros").rglob("__init__.py"))
    assert Path("vid2sid_ros/calibration/proposers/vlm") in packages and Path("vid2sid_ros/benchmark") in packages
    assert [str(p) for p in packages if not (site / p / "__init__.py").is_file()] == []


def test_vid2sid_calibrate_runs_from_outside_the_checkout(pip_venv, tmp_path):
    venv, src, env = pip_venv
    run = tmp_path / "run"
    proc = subprocess.run([str(venv / "bin" / "vid2sid"), "calibrate", str(src / RIG), "--out", str(run),
                           "--iterations", "1", "--budget", "4", "--seed", "0", "--quiet"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("result.yaml", "result.json", "iterations.jsonl", "calibrated_model.xml", "report.html"):
        assert (run / name).is_file(), f"{name} missing; stdout: {proc.stdout}"
    assert "Traceback" not in proc.stderr


def test_vid2sid_track_benchmark_report_run_without_ros(pip_venv, tmp_path):
    """`track` on the clip shipped as package data, a one-seed `benchmark`, and `report` of it."""
    venv, src, env = pip_venv
    vid2sid = str(venv / "bin" / "vid2sid")
    clip = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import vid2sid_ros, pathlib; print(pathlib.Path(vid2sid_ros.__file__).parent"
                           " / 'data' / 'pendulum_redapple' / 'redapple_480p.mov')"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.strip()
    runs = [
        [vid2sid, "track", clip, "--rig", "pendulum", "--out", str(tmp_path / "track.json")],
        [vid2sid, "benchmark", "sim2sim", "--rig", str(src / RIG), "--methods", "random", "--seeds", "1",
         "--budget", "3", "--iterations", "1", "--noise", "none", "--out", str(tmp_path / "bench"), "--no-progress"],
        [vid2sid, "report", str(tmp_path / "bench"), "--out", str(tmp_path / "bench.html")],
    ]
    for argv in runs:
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{argv[1]}: {proc.stdout}{proc.stderr}"
    assert (tmp_path / "track.json").stat().st_size > 0
    assert (tmp_path / "bench" / "results.json").is_file()
    assert (tmp_path / "bench.html").stat().st_size > 0


@pytest.mark.parametrize("argv", [["bringup", "finger_stand_in"], ["propose"]])
def test_ros_commands_say_in_one_line_what_they_need(pip_venv, tmp_path, argv):
    venv, _src, env = pip_venv
    proc = subprocess.run([str(venv / "bin" / "vid2sid"), *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"vid2sid {argv[0]}: vid2sid_ros interfaces are not built: run `make setup`")
    assert "colcon build" in lines[0] and "No module named 'rclpy'" in lines[0]


def test_versions_agree():
    """pyproject.toml reads the version from vid2sid_ros.__version__; package.xml must say the same."""
    init = (REPO_ROOT / "vid2sid_ros" / "__init__.py").read_text()
    version = re.search(r'^__version__ = "([^"]+)"', init, re.M).group(1)
    assert ET.parse(REPO_ROOT / "package.xml").getroot().findtext("version") == version
    assert 'version = {attr = "vid2sid_ros.__version__"}' in (REPO_ROOT / "pyproject.toml").read_text()
