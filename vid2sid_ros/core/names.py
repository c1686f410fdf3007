"""The closest valid name to a misspelt one, for one-line error messages."""

from __future__ import annotations

import difflib
from typing import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(name: object, valid: Iterable[object], *, cutoff: float = 0.6) -> str:
    """``" (did you mean X?)"`` with X the closest of ``valid`` to ``name`` (:func:`difflib.get_close_matches`
    at ``cutoff``), or ``""`` when none is close enough."""
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=cutoff)
    return f" (did you mean {close[0]}?)" if close else ""
