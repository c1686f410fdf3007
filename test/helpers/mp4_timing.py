"""Rewrite an OpenCV-written mp4's frame timing (its ``stts`` sample durations) without re-encoding:
test clips with a timestamp jump or a variable frame rate.

An OpenCV mp4 has its ``moov`` after ``mdat`` and one ``stts`` run; :func:`set_sample_durations`
replaces that run by the given ones, drops the edit list (``edts``) so every frame is presented at
its own time, and grows the movie, track and media durations by the time added.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Callable, Sequence

__all__ = ["find_box", "set_sample_durations"]


def find_box(buf: bytes | bytearray, start: int, end: int, path: Sequence[str]) -> list[tuple[int, int]] | None:
    """The chain of ``(offset, size)`` of the boxes ``path`` (e.g. moov/trak/mdia) within ``buf[start:end]``."""
    i = start
    while i < end:
        size, typ = struct.unpack(">I4s", buf[i:i + 8])
        if typ.decode("latin-1") == path[0]:
            if len(path) == 1:
                return [(i, size)]
            sub = find_box(buf, i + 8, i + size, path[1:])
            if sub:
                return [(i, size)] + sub
        i += size
    return None


def set_sample_durations(path: str | Path,
                         runs: Callable[[int, int, int], Sequence[tuple[int, int]]]) -> None:
    """Replace the clip's sample durations by ``runs(count, delta, timescale)`` ->
    ``[(frames, ticks per frame), ...]`` (ticks of the media timescale; the frames must add up to
    ``count``), drop the edit list and grow the durations by the time added.

    Raises:
        AssertionError: not an OpenCV-style mp4 (a version-1 mdhd, more than one stts run), or
            the runs do not cover every frame.
    """
    path = Path(path)
    buf = bytearray(path.read_bytes())
    chain = find_box(buf, 0, len(buf), ["moov", "trak", "mdia", "minf", "stbl", "stts"])
    md = find_box(buf, 0, len(buf), ["moov", "trak", "mdia", "mdhd"])[-1][0]
    assert buf[md + 8] == 0, "a version-0 mdhd expected"
    scale = struct.unpack(">I", buf[md + 20:md + 24])[0]
    off, size = chain[-1]
    assert struct.unpack(">I", buf[off + 12:off + 16])[0] == 1, "one stts run expected"
    count, delta = struct.unpack(">II", buf[off + 16:off + 24])
    new = list(runs(count, delta, scale))
    assert sum(c for c, _ in new) == count, (new, count)
    body = struct.pack(">II", 0, len(new)) + b"".join(struct.pack(">II", c, d) for c, d in new)
    box = struct.pack(">I4s", 8 + len(body), b"stts") + body
    buf[off:off + size] = box
    for o, s in chain[:-1]:
        struct.pack_into(">I", buf, o, s + len(box) - size)
    ed = find_box(buf, 0, len(buf), ["moov", "trak", "edts"])
    if ed:
        o, s = ed[-1]
        del buf[o:o + s]
        for oo, ss in ed[:-1]:
            struct.pack_into(">I", buf, oo, ss - s)
    mv = find_box(buf, 0, len(buf), ["moov", "mvhd"])[-1][0]
    tk = find_box(buf, 0, len(buf), ["moov", "trak", "tkhd"])[-1][0]
    md = find_box(buf, 0, len(buf), ["moov", "trak", "mdia", "mdhd"])[-1][0]
    mscale = struct.unpack(">I", buf[mv + 20:mv + 24])[0]
    extra_s = (sum(c * d for c, d in new) - count * delta) / scale
    for o, sc in ((mv + 24, mscale), (tk + 28, mscale), (md + 24, scale)):
        struct.pack_into(">I", buf, o, struct.unpack(">I", buf[o:o + 4])[0] + int(round(extra_s * sc)))
    path.write_bytes(bytes(buf))
