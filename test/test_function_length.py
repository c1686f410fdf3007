"""No function of the package is longer than ~100 lines: a longer one is split by concept.

Every module under ``vid2sid_ros/`` is parsed with :mod:`ast` (nothing is imported); a
function's length is ``end_lineno - lineno + 1`` of its ``def`` (decorators excluded,
docstring and nested functions included). A nested function counts on its own as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG_DIR = Path(__file__).resolve().parents[1] / "vid2sid_ros"
MAX_LINES = 100

# Functions exempt from the limit, each with the reason (none today). Key: (path relative to
# vid2sid_ros/, function name).
ALLOWED: set[tuple[str, str]] = set()


def long_functions(root: Path, max_lines: int = MAX_LINES) -> list[tuple[str, str, int]]:
    """``(path relative to root, function name, lines)`` of every function over ``max_lines``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > max_lines:
                    found.append((path.relative_to(root).as_posix(), node.name, lines))
    return found


def test_no_function_is_longer_than_100_lines():
    too_long = [f for f in long_functions(PKG_DIR) if (f[0], f[1]) not in ALLOWED]
    assert not too_long, "functions over %d lines (split them by concept):\n%s" % (
        MAX_LINES, "\n".join(f"vid2sid_ros/{p}:{name}:{n}" for p, name, n in too_long))


def test_the_scan_finds_a_long_function(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.py").write_text(f"def short():\n    return 1\n\n\nclass C:\n    def long(self):\n{body}\n")
    assert long_functions(tmp_path) == [("sub/m.py", "long", MAX_LINES + 1)]


def test_the_scan_covers_the_package():
    assert len(list(PKG_DIR.rglob("*.py"))) > 50 and (PKG_DIR / "calibration" / "loop.py").is_file()
