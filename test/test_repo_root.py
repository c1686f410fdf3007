"""The repository root holds the project's own files only: no scratch model, config or data a test or a
session left behind (a user following the README writes their own ``arm.xml`` and ``rig.yaml`` there)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: every file tracked at the repository root
EXPECTED = {".gitignore", "CMakeLists.txt", "MANIFEST.in", "Makefile", "README.md", "package.xml",
            "pyproject.toml", "pytest.ini", "requirements-dev.txt", "requirements-ray.txt",
            "requirements-ros.txt", "requirements.txt", "setup.py"}


def test_no_scratch_files_are_tracked_at_the_repository_root():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing tracked to check")
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True).stdout
    root_files = {line for line in out.splitlines() if "/" not in line}
    assert root_files <= EXPECTED, f"unexpected files at the repository root: {sorted(root_files - EXPECTED)}"
