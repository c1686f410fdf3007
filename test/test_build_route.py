"""The colcon route's test wiring: with BUILD_TESTING on, a missing test runner fails the configure step.

Before, CMakeLists.txt found ``ament_cmake_pytest`` QUIET and registered no test when it was
absent, so ``colcon test`` reported "0 tests, 0 errors" and exited 0 (issue 12, item 15).
The check configures the real CMakeLists.txt with cmake against the venv's ament packages
(no build, ~5 s); it needs cmake and an ament_cmake prefix (``make setup``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_package_xml_declares_the_test_runner_a_test_dependency():
    root = ET.parse(REPO / "package.xml").getroot()
    assert "ament_cmake_pytest" in [e.text for e in root.findall("test_depend")]


def _configure(build: Path, testing: bool) -> subprocess.CompletedProcess:
    prefix = Path(sys.prefix)
    env = {**os.environ, "AMENT_PREFIX_PATH": str(prefix), "CMAKE_PREFIX_PATH": str(prefix),
           "PATH": f"{prefix / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["cmake", "-S", str(REPO), "-B", str(build), f"-DPython3_EXECUTABLE={sys.executable}",
                           f"-DBUILD_TESTING={'ON' if testing else 'OFF'}"], env=env, capture_output=True,
                          text=True, timeout=240)


def test_build_testing_requires_ament_cmake_pytest(tmp_path):
    prefix = Path(sys.prefix)
    if shutil.which("cmake") is None or not (prefix / "share" / "ament_cmake" / "cmake").is_dir():
        pytest.skip(f"needs cmake and ament_cmake in {prefix} (`make setup`)")
    has_runner = any((prefix / "share" / "ament_cmake_pytest" / "cmake").glob("ament_cmake_pytest*onfig.cmake"))
    out = _configure(tmp_path / "build", testing=True)
    if has_runner:  # the runner is installed: the suite is registered as a test
        assert out.returncode == 0, out.stderr[-2000:]
        assert "vid2sid_ros_pytest" in (tmp_path / "build" / "CTestTestfile.cmake").read_text()
    else:  # absent: the configure step fails and names it (it used to succeed with no test registered)
        assert out.returncode != 0, "configured without ament_cmake_pytest: colcon test would run 0 tests"
        assert "ament_cmake_pytest" in out.stderr
