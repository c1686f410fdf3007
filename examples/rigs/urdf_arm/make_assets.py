"""Writes this rig's mesh files (meshes/*.obj) and its recorded commands (commands.csv).

Run from anywhere: ``python examples/rigs/urdf_arm/make_assets.py``. The outputs are
committed; the script documents how they were made (deterministic, no randomness but
the seeded multisine phases).

Meshes: prisms with an n-gon cross-section (octagon = a link tube, 16-gon = the base
drum), in metres, link frame at the joint (links extend along +x). Commands: two
multisines (one per motor, N*m before the actuator gain) at 30 Hz for 10 s, with a slow
square wave on top so the joints also rest and reverse (friction shows at low speed).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def prism_obj(path: Path, n: int, radius: float, length: float, axis: str) -> None:
    """A closed prism: an ``n``-gon of circumradius ``radius`` (m) swept ``length`` (m) along
    ``axis`` (``x``: from 0 to length; ``z``: centred on 0)."""
    ring = [(radius * math.cos(2 * math.pi * k / n + math.pi / n), radius * math.sin(2 * math.pi * k / n + math.pi / n))
            for k in range(n)]
    if axis == "x":
        v = [(0.0, a, b) for a, b in ring] + [(length, a, b) for a, b in ring]
    else:
        v = [(a, b, -length / 2) for a, b in ring] + [(a, b, length / 2) for a, b in ring]
    v += [v[0][:1] + (0.0, 0.0) if axis == "x" else (0.0, 0.0, -length / 2),
          (length, 0.0, 0.0) if axis == "x" else (0.0, 0.0, length / 2)]
    c0, c1 = 2 * n, 2 * n + 1
    faces = []
    for k in range(n):
        a, b = k, (k + 1) % n
        faces += [(a, b, n + b), (a, n + b, n + a), (c0, b, a), (c1, n + a, n + b)]
    lines = [f"# {path.name}: {n}-gon prism, radius {radius} m, length {length} m along {axis}"]
    lines += [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in v]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces]
    path.write_text("\n".join(lines) + "\n")


def commands(path: Path, rate: float = 30.0, duration: float = 10.0) -> None:
    t = np.arange(int(round(rate * duration))) / rate
    rng = np.random.default_rng(7)

    def multisine(freqs, amp):
        ph = rng.uniform(0, 2 * np.pi, len(freqs))
        s = np.sin(2 * np.pi * np.asarray(freqs)[None, :] * t[:, None] + ph[None, :]).sum(axis=1)
        return amp * s / np.max(np.abs(s))

    square = np.sign(np.sin(2 * np.pi * 1.0 * t))
    shoulder = multisine([0.4, 0.9, 1.7, 2.9], 0.10) + 0.03 * square
    elbow = multisine([0.6, 1.3, 2.3, 3.7], 0.04) - 0.015 * square
    with path.open("w") as f:
        f.write("time,shoulder_motor,elbow_motor\n")
        for row in zip(t, shoulder, elbow):
            f.write(",".join(f"{x:.6f}" for x in row) + "\n")


if __name__ == "__main__":
    (HERE / "meshes").mkdir(exist_ok=True)
    prism_obj(HERE / "meshes" / "base.obj", 16, 0.07, 0.06, "z")
    prism_obj(HERE / "meshes" / "upper_arm.obj", 8, 0.025, 0.25, "x")
    prism_obj(HERE / "meshes" / "forearm.obj", 8, 0.018, 0.20, "x")
    commands(HERE / "commands.csv")
    print("written:", ", ".join(str(p.relative_to(HERE)) for p in sorted(HERE.glob("meshes/*.obj"))), "commands.csv")
