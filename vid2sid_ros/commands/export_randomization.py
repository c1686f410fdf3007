"""``vid2sid export-randomization RUN_DIR``: domain-randomisation ranges from a calibration run.

Writes ``RUN_DIR/randomization.yaml`` and ``randomization.json`` (format and derivation:
:mod:`vid2sid_ros.report.randomization`): per free physics parameter, its unit, the
identified value, its standard deviation, and a sampling range and distribution derived
from the identified interval. Apply it to a MuJoCo model with
``vid2sid_ros.report.randomization.apply_to_mujoco_model(model, load_randomization(path), rng)``.
"""

from __future__ import annotations

import argparse
import sys

HELP = "write domain-randomisation ranges (YAML + JSON) from a calibration run's identified intervals"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="a finished calibration run directory (holds result.yaml)")
    parser.add_argument("--distribution", default="uniform", choices=["uniform", "normal"],
                        help="uniform over the range (log-uniform for log-scale parameters), or a truncated normal")
    parser.add_argument("--widen", type=float, default=1.0, help="multiply the 95 %% interval's half-width (default 1)")
    parser.add_argument("--min-relative", type=float, default=0.02,
                        help="smallest half-width relative to the value (default 0.02)")
    parser.add_argument("--fallback-relative", type=float, default=0.10,
                        help="half-width where the run has no standard deviation (default 0.10)")
    parser.add_argument("--out", default=None, help="output directory (default RUN_DIR)")
    parser.add_argument("--accept-unreliable", action="store_true",
                        help="export although the run did not converge, its residual diagnosis says the model is "
                             "wrong, or its intervals are marked unreliable (refused otherwise: a policy trained on "
                             "such ranges inherits the error)")


def unreliable_reasons(run_dir: str) -> list[str]:
    """Why a run's identified values should not become randomisation ranges: it did not converge,
    its residual diagnosis warned (the model is probably wrong, a cause named or several tied), or
    an interval is marked unreliable. Empty when none applies or the run has no ``result.json``.

    Args:
        run_dir: a calibration run directory.
    """
    import json
    from pathlib import Path

    from ..report.run import stop_kind

    try:
        res = json.loads((Path(run_dir) / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(res, dict):
        return []
    out = []
    kind = stop_kind(str(res.get("stopped") or ""))
    if kind not in ("converged", "target"):
        out.append(f"the run did not converge (stopped: {res.get('stopped')})")
    diag = res.get("residual_diagnosis") or {}
    if isinstance(diag, dict) and diag.get("misspecified"):
        verdict = diag.get("verdict")
        out.append("its residual diagnosis says the model is probably wrong"
                   + (f" ({verdict})" if verdict else ""))
    bad = [n for n, iv in (res.get("intervals") or {}).items() if isinstance(iv, dict) and iv.get("reliable") is False]
    if bad:
        out.append(f"intervals marked unreliable: {', '.join(sorted(bad))}")
    return out


def run(args: argparse.Namespace) -> int:
    from ..report.randomization import RandomizationError, export_randomization

    reasons = unreliable_reasons(args.run_dir)
    if reasons and not args.accept_unreliable:
        print(f"vid2sid export-randomization: {args.run_dir}: not exported: " + "; ".join(reasons)
              + "; fix the model and calibrate again, or pass --accept-unreliable", file=sys.stderr)
        return 2
    try:
        rnd, paths = export_randomization(args.run_dir, distribution=args.distribution, widen=args.widen,
                                          min_relative=args.min_relative, fallback_relative=args.fallback_relative,
                                          out=args.out)
    except RandomizationError as err:
        print(f"vid2sid export-randomization: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"vid2sid export-randomization: cannot write: {err}", file=sys.stderr)
        return 2
    for n, p in rnd.parameters.items():
        print(f"  {n}: {p.distribution} [{p.low:.6g}, {p.high:.6g}] {p.unit} (identified {p.identified:.6g})")
    print("written: " + ", ".join(str(p) for p in paths))
    for r in reasons:  # exported with --accept-unreliable: said once more, beside the files
        print(f"warning: exported although {r}")
    return 0
