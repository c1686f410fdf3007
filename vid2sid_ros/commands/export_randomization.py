"""``vid2sid export-randomization RUN_DIR``: domain-randomisation ranges from a calibration run.

Writes ``RUN_DIR/randomization.yaml`` and ``randomization.json`` (format and derivation:
:mod:`vid2sid_ros.calibration.randomization`): per free physics parameter, its unit, the
identified value, its standard deviation, and a sampling range and distribution derived
from the identified interval. Apply it to a MuJoCo model with
``vid2sid_ros.calibration.randomization.apply_to_mujoco_model(model, load_randomization(path), rng)``.
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


def run(args: argparse.Namespace) -> int:
    from ..calibration.randomization import RandomizationError, export_randomization

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
    return 0
