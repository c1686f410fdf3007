"""``--executor``, ``--workers`` and ``--ray-address``: the command-line side of the rollout executor
(:mod:`vid2sid_ros.calibration.executor`), shared by ``vid2sid calibrate`` and ``vid2sid benchmark``."""

from __future__ import annotations

import argparse

__all__ = ["add_executor_arguments", "executor_from_args"]


def add_executor_arguments(parser: argparse.ArgumentParser, *, what: str) -> None:
    """Add the three options to ``parser``; ``what`` says what runs concurrently (for the help)."""
    parser.add_argument("--executor", default="serial", choices=["serial", "threads", "pool", "ray"],
                        help=f"where {what} run: serial (default), threads (MuJoCo twins: batched "
                             "mujoco.rollout on C++ threads), pool (worker processes), ray (a Ray cluster; pip install -r "
                             "requirements-ray.txt). The results are the same on every backend")
    parser.add_argument("--workers", type=int, default=None,
                        help="concurrent workers (default: this machine's CPUs; ignored by serial)")
    parser.add_argument("--ray-address", default=None, metavar="auto|HOST:PORT",
                        help="--executor ray: the cluster to join (auto: the one 'ray start' made here); "
                             "default: a private local Ray on 127.0.0.1")


def executor_from_args(args: argparse.Namespace):
    """The :class:`~vid2sid_ros.calibration.executor.Executor` the options ask for.

    Raises:
        vid2sid_ros.calibration.executor.ExecutorError: a bad combination, Ray missing or unreachable (one line).
    """
    from ..calibration.executor import make_executor

    return make_executor(args.executor, args.workers, ray_address=args.ray_address)
