"""Frame times come from the container's presentation timestamps (a clip with a 1.5 s jump is tracked
with the jump in its trajectory, and a warning), not from an even spacing at the average rate."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from vid2sid_ros.cli import main
from vid2sid_ros.io.video import frame_times, write_video

_CONTAINERS = ("moov", "trak", "mdia", "minf", "stbl")


def _find(buf, start, end, path):
    i = start
    while i < end:
        size, typ = struct.unpack(">I4s", buf[i:i + 8])
        if typ.decode("latin-1") == path[0]:
            if len(path) == 1:
                return [(i, size)]
            sub = _find(buf, i + 8, i + size, path[1:])
            if sub:
                return [(i, size)] + sub
        i += size
    return None


def jump_timestamps(path, after_frame: int, jump_s: float) -> None:
    """Rewrite an OpenCV mp4 (moov after mdat, one stts run) so that frame ``after_frame`` is
    presented ``jump_s`` later than an even spacing (the stts sample deltas), without re-encoding;
    the edit list is dropped and the durations grown so every frame is presented."""
    buf = bytearray(open(path, "rb").read())
    chain = _find(buf, 0, len(buf), ["moov", "trak", "mdia", "minf", "stbl", "stts"])
    md = _find(buf, 0, len(buf), ["moov", "trak", "mdia", "mdhd"])[-1][0]
    assert buf[md + 8] == 0
    scale = struct.unpack(">I", buf[md + 20:md + 24])[0]
    off, size = chain[-1]
    assert struct.unpack(">I", buf[off + 12:off + 16])[0] == 1
    count, delta = struct.unpack(">II", buf[off + 16:off + 24])
    runs = [(after_frame - 1, delta), (1, delta + int(round(jump_s * scale))), (count - after_frame, delta)]
    body = struct.pack(">II", 0, len(runs)) + b"".join(struct.pack(">II", c, d) for c, d in runs)
    box = struct.pack(">I4s", 8 + len(body), b"stts") + body
    buf[off:off + size] = box
    for o, s in chain[:-1]:
        struct.pack_into(">I", buf, o, s + len(box) - size)
    ed = _find(buf, 0, len(buf), ["moov", "trak", "edts"])
    if ed:
        o, s = ed[-1]
        del buf[o:o + s]
        for oo, ss in ed[:-1]:
            struct.pack_into(">I", buf, oo, ss - s)
    mv = _find(buf, 0, len(buf), ["moov", "mvhd"])[-1][0]
    tk = _find(buf, 0, len(buf), ["moov", "trak", "tkhd"])[-1][0]
    md = _find(buf, 0, len(buf), ["moov", "trak", "mdia", "mdhd"])[-1][0]
    mscale = struct.unpack(">I", buf[mv + 20:mv + 24])[0]
    for o, sc in ((mv + 24, mscale), (tk + 28, mscale), (md + 24, scale)):
        struct.pack_into(">I", buf, o, struct.unpack(">I", buf[o:o + 4])[0] + int(jump_s * sc))
    open(path, "wb").write(bytes(buf))


@pytest.fixture(scope="module")
def finger_frames():
    from vid2sid_ros.rigs import load_rig

    rig = load_rig("finger")
    twin = rig.make_twin()
    frames = twin.rollout(rig.excitations["train"][0], render=True).frames
    reps = -(-300 // len(frames))
    return np.concatenate([frames] * reps)[:300]


def test_frame_times_follow_the_timestamps_and_warn():
    pts = [k / 30 for k in range(150)] + [k / 30 + 1.5 for k in range(150, 300)]
    t, warn = frame_times(pts, 300 / 11.5, where="clip.mp4")
    assert t[150] - t[149] == pytest.approx(1.5 + 1 / 30)
    assert t[299] == pytest.approx(299 / 30 + 1.5)
    assert warn and "clip.mp4" in warn and "between frames 149 and 150" in warn
    even, none = frame_times([k / 30 for k in range(10)], 30.0, first_at=None)
    assert none is None and even == pytest.approx((np.arange(10) + 1) / 30)


def test_track_keeps_a_timestamp_jump_in_the_trajectory(finger_frames, tmp_path, capsys):
    clip = write_video(tmp_path / "jump.mp4", finger_frames, 30.0)
    jump_timestamps(clip, 150, 1.5)
    out = tmp_path / "traj.json"
    main(["track", str(clip), "--rig", "finger", "--out", str(out)])
    err = capsys.readouterr().err
    t = np.asarray(json.loads(out.read_text())["time"], float)
    assert t.size == 300
    assert t[150] - t[149] == pytest.approx(1.5 + 1 / 30, abs=1e-3)  # was 1 / 26.087 s: 0.75 s early after it
    assert t[0] == pytest.approx(1 / 30, abs=1e-3) and t[299] == pytest.approx(300 / 30 + 1.5, abs=1e-3)
    assert np.allclose(np.diff(t[:150]), 1 / 30, atol=1e-3)
    assert "not evenly spaced" in err and "between frames 149 and 150" in err


def test_track_an_even_clip_as_before(finger_frames, tmp_path, capsys):
    clip = write_video(tmp_path / "even.mp4", finger_frames[:60], 30.0)
    out = tmp_path / "traj.json"
    main(["track", str(clip), "--rig", "finger", "--out", str(out), "--overlay", str(tmp_path / "o.mp4")])
    err = capsys.readouterr().err
    t = np.asarray(json.loads(out.read_text())["time"], float)
    assert t == pytest.approx((np.arange(60) + 1) / 30, abs=1e-6)
    assert "not evenly spaced" not in err and (tmp_path / "o.mp4").stat().st_size > 0


def test_track_clip_keeps_the_jump(finger_frames, tmp_path):
    from vid2sid_ros.io.clip import track_clip
    from vid2sid_ros.rigs import load_rig

    clip = write_video(tmp_path / "jump.mp4", finger_frames, 30.0)
    jump_timestamps(clip, 150, 1.5)
    cfg = load_rig("finger").config.get("tracker")
    if not isinstance(cfg, dict) or "markers" not in cfg:
        pytest.skip("the finger rig's tracker is not a marker config")
    tracked = track_clip(clip, cfg)
    t = tracked.trajectory.time
    assert t[0] == 0.0 and t[150] - t[149] == pytest.approx(1.5 + 1 / 30, abs=1e-3)
    assert any("not evenly spaced" in w for w in tracked.warnings)
