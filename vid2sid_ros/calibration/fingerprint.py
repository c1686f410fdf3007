"""Fingerprints of what a run was calibrated against: the model (and every file it reads),
the rig config and the real data. ``run.json`` keeps them; a ``--resume`` against a changed
one is refused (:func:`vid2sid_ros.calibration.loop.check_run_dir`) unless overridden.

Each fingerprint is ``"sha256:<hex>"``: of the files' bytes (with their names, so a renamed
include counts as a change), or of the real trial's measurements as stored in
``real_trial.json`` form (trajectories, validity, frame times, excitations): a changed video,
bag or CSV changes what it yields, which is what the fit saw.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

__all__ = ["run_fingerprints", "files_fingerprint", "real_fingerprint", "changed_fingerprints"]

#: what each fingerprint is called in messages
WHAT = {"model": "the model file (or a file it includes)", "rig_config": "the rig config",
        "real_data": "the real data (trajectories, frame times, excitations)"}


def files_fingerprint(paths: Iterable[Path], *, root: Path | None = None) -> str:
    """``sha256:`` over each file's name (relative to ``root`` when under it) and bytes.

    Raises:
        OSError: a file cannot be read (a FIFO or device is refused, never read).
    """
    from ..core.files import read_regular_file

    h = hashlib.sha256()
    for p in paths:
        p = Path(p)
        try:
            name = str(p.relative_to(root)) if root is not None else p.name
        except ValueError:
            name = str(p)
        data = read_regular_file(p, what="a file the run depends on")
        h.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return "sha256:" + h.hexdigest()


def real_fingerprint(real: Any) -> str:
    """``sha256:`` of the real trial's measurements (its JSON form without frames or metadata)."""
    d = real.to_dict()
    d = {k: d[k] for k in ("train", "holdout", "truth") if k in d}
    return "sha256:" + hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


def _model_path(target: Any, twin: Any) -> Path | None:
    for obj in (twin, target):
        p = getattr(obj, "model_path", None)
        if isinstance(p, (str, Path)) and Path(p).is_file():
            return Path(p)
    return None


def run_fingerprints(target: Any, real: Any, twin: Any = None) -> dict[str, str]:
    """``{"model", "rig_config", "real_data"}`` fingerprints (a key is absent when there is no such file).

    Args:
        target: the rig (its ``config["_source"]`` is the rig config file) or twin.
        real: the :class:`~vid2sid_ros.core.trial.RealTrial`.
        twin: the twin built from ``target`` (its ``model_path``).
    """
    from ..sim.mujoco_model import model_files

    out: dict[str, str] = {}
    mp = _model_path(target, twin)
    if mp is not None:
        out["model"] = files_fingerprint(model_files(mp), root=mp.parent)
    cfg = getattr(target, "config", None)
    src = cfg.get("_source") if isinstance(cfg, Mapping) else None
    if isinstance(src, str) and Path(src).is_file():
        out["rig_config"] = files_fingerprint([Path(src)])
    out["real_data"] = real_fingerprint(real)
    return out


def changed_fingerprints(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Names of the fingerprints present in both and different (an older run without one is not refused)."""
    return [k for k in new if k in old and old[k] != new[k]]
