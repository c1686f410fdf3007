"""Adding a phase measured after ``result.json`` was written (the HTML report) to its ``phases``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

__all__ = ["add_phase"]


def add_phase(result_json: Path, name: str, row: Mapping[str, Any] | None) -> None:
    """Set ``phases[name] = row`` in ``result_json`` (rewritten atomically); nothing when the file or
    the row is missing or the file is not a result (the calibration's result stands without it)."""
    if not row:
        return
    try:
        data = json.loads(result_json.read_text())
    except (OSError, ValueError):
        return
    if not isinstance(data, dict) or not isinstance(data.get("phases"), dict):
        return
    data["phases"][name] = dict(row)
    tmp = result_json.with_name(result_json.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, result_json)
    except OSError:  # a full disk loses the report's timing, never the result
        tmp.unlink(missing_ok=True)
