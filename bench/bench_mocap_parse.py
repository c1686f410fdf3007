"""Time and memory of reading a large motion-capture CSV (issue 12 quality: `io/mocap.py` on 1M rows).

Writes a Motive 1.23 CSV of ``--rows`` samples of ``--markers`` markers (100 Hz, mm, Y-up, 1 % of the
samples as gaps) once, then reads it with :func:`vid2sid_ros.io.mocap.load_mocap` in a fresh child
process and reports the wall time of the read and the child's peak resident memory (``ru_maxrss``),
with the interpreter's baseline (numpy + the package imported) subtracted. Results go to
``--out`` (JSON) and stdout.

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python bench/bench_mocap_parse.py --rows 1000000 \\
        --out /work/coord/out/q/mocap_parse.json

Wall times on a shared, loaded machine are pessimistic; compare runs made the same way.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
import vid2sid_ros
from vid2sid_ros.io.mocap import load_mocap
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
rec = load_mocap(sys.argv[1], markers=[f"m{k}" for k in range(int(sys.argv[2]))], frame={"up_axis": "y"})
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"package": vid2sid_ros.__file__, "wall_s": wall, "peak_rss_mb": peak / 1024, "baseline_rss_mb": base / 1024,
                  "samples": int(rec.time.size), "invalid": rec.invalid}))
"""


def write_take(path: Path, rows: int, markers: int) -> None:
    """A Motive CSV of ``rows`` samples: each marker on its own circle, 1 % of the samples empty (gaps)."""
    import numpy as np

    from vid2sid_ros.io.mocap import write_motive_csv

    rng = np.random.default_rng(0)
    t = np.arange(rows) / 100.0
    k = np.arange(markers)
    pts = np.stack([0.1 * np.cos(t[:, None] + k), 0.1 * np.sin(t[:, None] + k), 0.5 + 0.01 * k + 0 * t[:, None]],
                   axis=2)
    pts[rng.random((rows, markers)) < 0.01] = np.nan
    write_motive_csv(path, t, pts, [f"m{j}" for j in range(markers)], take="bench")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--markers", type=int, default=3)
    ap.add_argument("--csv", default=None, help="take file (default: /tmp/vid2sid_bench_mocap_<rows>x<markers>.csv)")
    ap.add_argument("--out", default=None, help="JSON results file")
    ap.add_argument("--label", default="", help="label stored with the result (e.g. before / after)")
    a = ap.parse_args(argv)
    path = Path(a.csv or f"/tmp/vid2sid_bench_mocap_{a.rows}x{a.markers}.csv")
    if not path.is_file():
        t0 = time.perf_counter()
        write_take(path, a.rows, a.markers)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    # cwd outside any checkout: the package comes from PYTHONPATH (compare two trees by pointing it at each)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path.resolve()), str(a.markers)], capture_output=True,
                          text=True, check=False, cwd="/")
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return 1
    res = {"label": a.label, "rows": a.rows, "markers": a.markers, "file_mb": path.stat().st_size / 1e6,
           **json.loads(proc.stdout)}
    res["read_rss_mb"] = res["peak_rss_mb"] - res["baseline_rss_mb"]
    print(json.dumps(res, indent=1))
    if a.out:
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        old = json.loads(out.read_text()) if out.is_file() else []
        out.write_text(json.dumps(old + [res], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
