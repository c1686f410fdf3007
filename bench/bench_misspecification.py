"""Misspecification suite: does the residual diagnosis name the model error, and is any answer silently wrong?

Each *cell* is one rig × one case (a kind of model error, or none) × one seed × one method. The
stand-in real trial is made by ``make_sim2sim_trial(..., misspecify=...)`` (Gaussian keypoint noise,
σ = 0.3 px, no render: the error is the only thing the twin lacks), the method calibrates the free
parameters, then the residual diagnosis runs. Then **follow the advice**: if the diagnosis makes a
checked recommendation, do what it says (free the frozen parameter, free the latency nuisance, add a
parameter for the model field, declare the camera intrinsics as free nuisance parameters) and refit
with the same budget, from where the recommendation says (its ``start``: the free parameters where its
held-out check's refit put them); if the verdict is ``indistinguishable`` or ``none``, or the recommendation
cannot be followed in the twin (a drive dead-zone: no parameter models it), nothing is done and
the cell says so.

Per cell (``OUT/cells/RIG__CASE__sSEED__METHOD.json``, written atomically; a rerun skips finished
cells, so an interrupted suite resumes):

- ``verdict``: named | indistinguishable | unexplained | not_at_optimum | unchecked | none (the diagnosis's),
  and the causes;
- ``right``: on a modified rig, the named cause is the truth (for a combination: one of its
  components), or the verdict's set — indistinguishable, ``unchecked`` (nothing beyond the noise, but
  nominal values these trials cannot check), or *not at the optimum* with the model errors these trials
  cannot tell from that optimum (the optimum counts as one member) — holds it and has at most ``SET_MAX``
  (5) members; on the
  unmodified rig, no warning (an ``unchecked`` verdict there is a caveat, counted on its own);
- ``false_alarm``: a warning on the unmodified rig;
- ``max_rel_error`` / ``mean_rel_error``: over the rig's free physics parameters (relative to truth);
- ``covered``: whether each true value lies in its stated 95 % interval (the final identifiability
  check's; a parameter without an interval counts as not covered);
- ``caveat``: a consider caveat (an identified value rests on a nominal value these trials cannot check,
  ``calibration/diagnosis/consider.py``); it tells the user, so it counts against ``silent``, but it
  is no claim that the model is wrong, so it is no false alarm; counted on its own column;
- ``silent``: no warning, no caveat and no *not at the optimum* verdict AND (a truth outside its
  interval OR max error >= 5 %);

all before and after following the advice (after: over the same parameters).

    nice .venv/bin/python bench/bench_misspecification.py --seeds 5 --budget 60 --jobs 2 --out runs/misspec
    nice .venv/bin/python bench/bench_misspecification.py --seeds 5 --budget 60 \\
        --methods reasoner,least-squares,mujoco-sysid --jobs 2 --out runs/misspec_full     # the full size
    .venv/bin/python bench/bench_misspecification.py --summarise runs/misspec           # table only

=====================  ====================================================================================
case                   real side (``--misspecify``)
=====================  ====================================================================================
none                   the twin itself (false alarms)
frozen                 ``frozen=0.3``: the frozen physics parameter (finger, cart: the armature) ×1.3
mass                   ``mass=0.2``: the middle body's mass and inertia ×1.2 (armature frozen)
mass_armature_free     the same, calibrated with the armature parameter free
deadzone               ``deadzone=0.3``: a dead-zone of 30 % of the peak command
backlash               ``backlash=0.2``: play of 20 % of the command range
focal                  ``focal=0.03``: the focal length 3 % longer
camera                 ``camera=3``: the camera moved 3 mm and turned 3 mrad per axis
latency                ``latency=0.02``: a 20 ms camera latency, the latency nuisance not free
mass+latency           both (latency nuisance not free)
deadzone+focal         both
=====================  ====================================================================================

ROS is not used. Rigs: ``finger`` (built in), ``examples/rigs/urdf_arm/rig.yaml``,
``examples/rigs/cart_pendulum/rig.yaml``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", "114")
os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RIGS = {"finger": "finger", "urdf_arm": str(ROOT / "examples/rigs/urdf_arm/rig.yaml"),
        "cart_pendulum": str(ROOT / "examples/rigs/cart_pendulum/rig.yaml")}

#: case -> (misspecify text, options)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "none": ("", {}),
    "frozen": ("frozen=0.3", {}),
    "mass": ("mass=0.2", {}),
    "mass_armature_free": ("mass=0.2", {"free_armature": True}),
    "deadzone": ("deadzone=0.3", {}),
    "backlash": ("backlash=0.2", {}),
    "focal": ("focal=0.03", {}),
    "camera": ("camera=3", {}),
    "latency": ("latency=0.02", {"latency_free": False}),
    "mass+latency": ("mass=0.2,latency=0.02", {"latency_free": False}),
    "deadzone+focal": ("deadzone=0.3,focal=0.03", {}),
}

#: the bar of the suite
SILENT_ERROR = 0.05
#: a set of more causes than this (indistinguishable or unchecked) is no diagnosis, whether it holds the truth or not
SET_MAX = 5
KEYPOINT_SIGMA_PX = 0.3


class NotApplicable(Exception):
    """The case cannot be expressed on this rig (the cell records why)."""


# -- what the truth is called in a diagnosis ---------------------------------------------------------------
def truth_labels(applied: dict[str, Any], rig: Any) -> list[dict[str, Any]]:
    """One matcher per true error: ``{"kind", "match": substring of a cause name | None, "fields": prefix}``."""
    out = []
    for k, info in applied.items():
        if k == "frozen":
            out.append({"kind": "frozen", "name": info["parameter"]})
        elif k == "mass":
            out.append({"kind": "mass", "name": f"mass of body '{info['body']}'"})
        elif k == "deadzone":
            out.append({"kind": "deadzone", "name": "dead-zone"})
        elif k == "backlash":
            out.append({"kind": "backlash", "name": "backlash"})
        elif k == "focal":
            out.append({"kind": "focal", "name": "focal length"})
        elif k == "camera":
            out.append({"kind": "camera", "field_prefix": ("camera.x", "camera.y", "camera.z", "camera.roll",
                                                           "camera.pitch", "camera.yaw")})
        elif k == "latency":
            out.append({"kind": "latency", "cause_kind": "latency"})
    return out


def _matches(member: dict[str, Any], label: dict[str, Any]) -> bool:
    name = str(member.get("cause") or "")
    if "name" in label and label["name"] in name:
        return True
    if label.get("cause_kind") and member.get("kind") == label["cause_kind"]:
        return True
    if "field_prefix" in label:
        fields = member.get("fields") or []
        if member.get("kind") == "camera" and any(str(f) in label["field_prefix"] for f in fields):
            return True
        if member.get("kind") == "camera" and any(w in name for w in ("camera position", "camera orientation",
                                                                      "camera roll", "camera pitch", "camera yaw")):
            return True
    return False


def diagnosis_members(diag: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdict's causes (``Diagnosis.to_dict()["causes"]``): ``[{cause, kind, fields}]``.

    A diagnosis without that key (older result files): the first warning whose evidence names a cause — not a
    warning of another kind that comes first, such as a latency nuisance on its bound (it names none, and was
    read as a cause labelled '')."""
    if "causes" in diag:
        return [{"cause": c.get("cause"), "kind": c.get("kind"), "fields": c.get("fields")}
                for c in diag.get("causes") or []]
    for f in diag.get("findings", []):
        ev = f.get("evidence") or {}
        if f.get("severity") != "warning" or not (ev.get("causes") or ev.get("cause")):
            continue
        if ev.get("causes"):
            return [{"cause": c.get("cause"), "kind": c.get("kind"), "fields": c.get("fields")} for c in ev["causes"]]
        return [{"cause": ev["cause"], "kind": f.get("kind"), "fields": ev.get("fields")}]
    return []


def set_size(diag: dict[str, Any], members: list[dict[str, Any]]) -> int:
    """Causes in the verdict's set: 1 for a named cause (a camera group counts as one), the whole set otherwise
    (an unchecked set before it was cut to the listed few)."""
    verdict = diag.get("verdict")
    if verdict == "named":
        return 1 if members else 0
    return int(diag.get("set_size") or len(members))


def score(diag: dict[str, Any], labels: list[dict[str, Any]]) -> dict[str, Any]:
    """Verdict, causes, warning, right (module docstring)."""
    warned = bool(diag.get("misspecified"))
    members = diagnosis_members(diag)
    # a diagnosis that raised is a failure of its own, never a quiet "none"
    verdict = "failed" if diag.get("failed") else diag.get("verdict") or ("none" if not warned else "?")
    size = set_size(diag, members)
    # not at the optimum, with the model errors these trials cannot tell from that optimum: a set of its own
    held = bool(labels) and verdict in ("named", "indistinguishable", "unchecked", "not_at_optimum") and any(
        _matches(m, lab) for m in members for lab in labels)
    right = (not warned) if not labels else (held and 0 < size <= SET_MAX)
    stats = diag.get("statistics") or {}
    top = sorted((c for c in stats.get("causes", []) if c.get("refitted")), key=lambda c: -float(c.get("share", 0)))
    consider = diag.get("consider") or {}
    return {"verdict": verdict, "warned": warned, "causes": [m["cause"] for m in members], "right": right,
            "set_size": size, "truth_in_set": held,
            "caveat": bool(diag.get("caveat")),
            "caveats": [{k: c.get(k) for k in ("parameter", "cause", "shift_relative")}
                        for c in consider.get("caveats") or []],
            "consider_interval": {n: [iv.get("lower"), iv.get("upper")]
                                  for n, iv in (consider.get("intervals") or {}).items()},
            "false_alarm": (warned if not labels else None), "recommendation": diag.get("recommendation"),
            "comparison": stats.get("comparison"),
            "message": next((f.get("message") for f in sorted(diag.get("findings", []), key=lambda f: bool(
                (f.get("evidence") or {}).get("at_bound"))) if f.get("severity") == "warning"), None),
            "top_causes": [{k: c.get(k) for k in ("cause", "share", "likelihood_ratio", "significant", "determined",
                                                   "size_text")} for c in top[:5]]}


# -- one calibration and its numbers -------------------------------------------------------------------------
def _calibrate(rig, real, method, params, nuisance, budget, seed, truth, scored, start=None):
    import warnings

    import numpy as np

    from vid2sid_ros.calibration.identifiability import IdentifiabilityWarning
    from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
    from vid2sid_ros.calibration.proposers import make_proposer

    cfg = CalibrationConfig(iterations=10, rollout_budget=budget, seed=seed, identifiability=False,
                            final_identifiability=True, nuisance=nuisance, start=start or None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentifiabilityWarning)
        res = run_calibration(rig, real, make_proposer(method), cfg, parameters=params)
    interval = dict(res.final_identifiability.interval) if res.final_identifiability else {}
    rel = {n: abs(float(res.values[n]) - truth[n]) / abs(truth[n]) for n in scored}
    covered = {n: (n in interval and interval[n] is not None and interval[n][0] is not None and
                   interval[n][1] is not None and float(interval[n][0]) <= truth[n] <= float(interval[n][1]))
               for n in scored}
    inside = {n: (n in interval and interval[n] is not None and interval[n][0] is not None and
                  float(interval[n][0]) <= float(res.values[n]) <= float(interval[n][1])) for n in scored}
    diag = res.diagnosis or {}
    return {"values": {n: float(res.values[n]) for n in params.free_names},
            "nuisance": {k: float(v) for k, v in res.values.items() if k not in params.names},
            "interval": {n: [float(x) if x is not None else None for x in interval[n]] if interval.get(n) else None
                         for n in scored},
            "rel_error": rel, "max_rel_error": float(max(rel.values())), "mean_rel_error": float(np.mean(
                list(rel.values()))), "covered": covered, "value_inside_interval": inside,
            "stopped": res.stopped, "rollouts": res.rollouts, "train_mae_px": res.error_px,
            "holdout_mae_px": res.holdout_mae_px}, diag


def _told(run: dict[str, Any]) -> bool:
    """The user was told: a warning (the model is probably wrong), a consider caveat (an identified value
    rests on a nominal value these trials cannot check), or the verdict *not at the optimum* (the free
    parameters alone, refitted, explain the residual: "calibrate further"). Only a warning counts as a
    false alarm."""
    return bool(run.get("warned")) or bool(run.get("caveat")) or run.get("verdict") == "not_at_optimum"


def _silent_strict(run: dict[str, Any]) -> bool:
    """Not told, a truth outside its interval AND an error of 5 % or more (all three)."""
    return (not _told(run)) and (not all(run["covered"].values())) and run["max_rel_error"] >= SILENT_ERROR


def _silent(run: dict[str, Any], sc: dict[str, Any]) -> bool:
    return (not _told(sc)) and (not all(run["covered"].values()) or run["max_rel_error"] >= SILENT_ERROR)


# -- following the advice ------------------------------------------------------------------------------------
def follow_advice(rig, twin, params, nuisance, rec: dict[str, Any] | None, verdict: str):
    """``(rig', params', nuisance', what was done)``; None for rig' when nothing is done (module docstring)."""
    import dataclasses

    import mujoco

    from vid2sid_ros.core.parameters import ParameterSpec

    if not rec or not rec.get("recommended"):
        why = {"indistinguishable": "indistinguishable: nothing recommended", "none": "no warning: nothing to do",
               "unchecked": "unchecked nominal values, no warning: nothing to do",
               "unexplained": "the model is too simple here: nothing recommended"}.get(verdict)
        if rec and not rec.get("recommended"):
            why = "the recommendation failed its held-out check: nothing recommended"
        return None, params, nuisance, why or f"verdict {verdict}: nothing recommended"
    fields = [str(f) for f in rec.get("free") or []]
    kind = rec.get("kind")
    if kind == "latency":
        return rig, params, {**(nuisance or {}), "latency": True}, "freed the latency nuisance"
    frozen = [f for f in fields if f in params and params[f].frozen]
    if frozen:
        return rig, params.with_frozen(free=params.free_names + frozen), nuisance, f"freed {', '.join(frozen)}"
    model = getattr(twin, "model", None)
    added: list = []
    if kind == "camera":
        pin = getattr(twin, "pinhole", None)  # a pinhole user rig takes camera.* targets; the finger's camera not
        if pin is None:
            return None, params, nuisance, (f"advice '{rec.get('action')}': this twin's camera takes no camera.* "
                                            "parameters: nothing done")
        current = {"x": pin.position[0], "y": pin.position[1], "z": pin.position[2], "roll": pin.roll,
                   "pitch": pin.pitch, "yaw": pin.yaw, "fx": pin.fx, "fy": pin.fy, "cx": pin.cx, "cy": pin.cy}
        width = {"x": 0.05, "y": 0.05, "z": 0.05, "roll": 0.05, "pitch": 0.05, "yaw": 0.05, "cx": 30.0, "cy": 30.0}
        for f in fields:
            attr = f.split(".", 1)[1]
            if attr not in current:
                return None, params, nuisance, f"advice names {f}, which the suite cannot free: nothing done"
            v = float(current[attr])
            lo, hi = (0.8 * v, 1.2 * v) if attr in ("fx", "fy") else (v - width[attr], v + width[attr])
            unit = "px" if attr in ("fx", "fy", "cx", "cy") else ("m" if attr in "xyz" else "rad")
            added.append(ParameterSpec(f"suite_camera_{attr}", unit, lo, hi, v, f"camera {attr}", f,
                                       kind="nuisance"))
    elif model is not None and fields and all("[" in f for f in fields):
        body_fields = [f for f in fields if f.startswith(("body_mass[", "body_inertia["))]
        if body_fields and all(f.startswith(("body_mass[", "body_inertia[")) for f in fields):
            name = body_fields[0].split("[", 1)[1].rstrip("]")
            b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
            targets = []
            if any(f.startswith("body_mass[") for f in fields):
                targets.append(f"body_mass[{b}]*{float(model.body_mass[b])!r}")
            if any(f.startswith("body_inertia[") for f in fields):
                targets += [f"body_inertia[{b},{i}]*{float(model.body_inertia[b, i])!r}" for i in range(3)]
            added.append(ParameterSpec(f"suite_scale_{name}", "relative", 0.5, 2.0, 1.0,
                                       f"mass/inertia scale of body {name}", ", ".join(targets)))
        elif len(fields) == 1 and fields[0].startswith("body_ipos["):  # a centre of mass: "body_ipos[name,axis]"
            name, axis = fields[0].split("[", 1)[1].rstrip("]").split(",")
            b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name.strip())
            if b < 0:
                return None, params, nuisance, f"cannot express {fields[0]} as a parameter: nothing done"
            v = float(model.body_ipos[b, int(axis)])
            added.append(ParameterSpec(f"suite_body_ipos_{b}_{int(axis)}", "m", v - 0.05, v + 0.05, v,
                                       f"{fields[0]}", f"body_ipos[{b},{int(axis)}]"))
        elif len(fields) == 1:
            field, idx = fields[0].split("[", 1)
            idx = idx.rstrip("]")
            arr = getattr(model, field, None)
            obj = {"dof": mujoco.mjtObj.mjOBJ_JOINT, "jnt": mujoco.mjtObj.mjOBJ_JOINT,
                   "tendon": mujoco.mjtObj.mjOBJ_TENDON, "actuator": mujoco.mjtObj.mjOBJ_ACTUATOR}.get(
                field.split("_")[0])
            i = mujoco.mj_name2id(model, obj, idx) if obj is not None and not idx.isdigit() else int(idx)
            if field.startswith("dof_") and obj == mujoco.mjtObj.mjOBJ_JOINT and not idx.isdigit():
                i = int(model.jnt_dofadr[i])
            if arr is None or i < 0:
                return None, params, nuisance, f"cannot express {fields[0]} as a parameter: nothing done"
            v = float(arr[i])
            lo, hi = (0.0, max(4.0 * v, 1e-3)) if v <= 0 else (0.2 * v, 5.0 * v)
            added.append(ParameterSpec(f"suite_{field}_{i}", "SI", lo, hi, v, f"{fields[0]}", f"{field}[{i}]"))
    if not added:
        return None, params, nuisance, (f"advice '{rec.get('action')}' has no parameter in this twin: "
                                        "nothing done")
    new = dataclasses.replace(params, specs=tuple(params.specs) + tuple(added))
    orig = rig.make_twin
    rig2 = dataclasses.replace(rig, parameters=new, make_twin=lambda **kw: orig(**{"parameters": new, **kw}))
    return rig2, new, nuisance, "added " + ", ".join(f"{s.name} (target {s.target})" for s in added)


def advice_start(rec: dict[str, Any] | None, params) -> dict[str, float] | None:
    """Where the refit after following ``rec`` starts: the recommendation's ``start`` (the free parameters where
    its held-out check's refit put them), kept to the parameters of ``params`` and the latency nuisance; None (the
    spec's nominal values) when it gives none. Begun again from the nominal values with the same budget, the cart's
    calibration with its camera orientation freed stalled far from the point the check had scored."""
    start = {k: float(v) for k, v in ((rec or {}).get("start") or {}).items() if k in params.names or k == "latency"}
    return start or None


# -- one cell ------------------------------------------------------------------------------------------------
def run_cell(rig_key: str, case: str, seed: int, method: str, budget: int) -> dict[str, Any]:
    """One rig × case × seed × method (module docstring); JSON-ready. Never raises: errors are recorded."""
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"rig": rig_key, "case": case, "seed": seed, "method": method, "budget": budget}
    try:
        rec.update(_run_cell(rig_key, case, seed, method, budget))
        rec["status"] = "ok"
    except NotApplicable as err:
        rec.update(status="n/a", why=str(err))
    except Exception as err:  # noqa: BLE001 - a failing cell is a result, not a crash of the suite
        rec.update(status="error", error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc()[-2000:])
    rec["wall_s"] = time.perf_counter() - t0
    return rec


def _run_cell(rig_key, case, seed, method, budget):
    from vid2sid_ros.benchmark.misspecification import MisspecificationError
    from vid2sid_ros.benchmark.run import resolve_rig
    from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
    from vid2sid_ros.core.parameters import draw_ground_truth

    mis, opts = CASES[case]
    rig = resolve_rig(RIGS.get(rig_key, rig_key))
    params = rig.parameters
    truth = params.complete(draw_ground_truth(params, seed))
    scored = list(params.free_names)
    if opts.get("free_armature"):
        arm = [s.name for s in params if s.frozen and "dof_armature" in s.target]
        if not arm:
            raise NotApplicable("the rig has no frozen armature parameter to free")
        params = params.with_frozen(free=params.free_names + arm)
        scored += arm
    nuisance = None if opts.get("latency_free", True) else {"latency": False}
    try:
        real = make_sim2sim_trial(rig, truth, seed=seed, noise="keypoint", keypoint_sigma_px=KEYPOINT_SIGMA_PX,
                                  misspecify=mis or None)
    except MisspecificationError as err:
        raise NotApplicable(str(err)) from None
    applied = (real.meta.get("misspecification") or {}).get("applied", {})
    labels = truth_labels(applied, rig)
    before, diag = _calibrate(rig, real, method, params, nuisance, budget, seed, truth, scored)
    sc = score(diag, labels)
    out = {"misspecify": mis, "applied": applied, "truth": {n: truth[n] for n in scored}, "labels": labels,
           "before": {**before, **sc, "silent": _silent(before, sc)}}
    twin = rig.make_twin()
    rig2, params2, nuisance2, done = follow_advice(rig, twin, params, nuisance, sc["recommendation"],
                                                   sc["verdict"])
    out["advice"] = done
    if rig2 is None:
        out["after"] = {**out["before"], "same_as_before": True}
        return out
    after, diag2 = _calibrate(rig2, real, method, params2, nuisance2, budget, seed, truth, scored,
                              advice_start(sc["recommendation"], params2))
    sc2 = score(diag2, labels)
    out["after"] = {**after, **sc2, "silent": _silent(after, sc2), "same_as_before": False}
    return out


def cell_path(out: Path, rig: str, case: str, seed: int, method: str) -> Path:
    return out / "cells" / f"{rig}__{case.replace('+', '_and_')}__s{seed}__{method}.json"


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=float))
    os.replace(tmp, path)


# -- the table -----------------------------------------------------------------------------------------------
def _short_cause(name: str) -> str:
    for a, b in (("(mass and inertia together)", ""), ("a camera latency (constant delay)", "latency"),
                 ("frozen parameter ", ""), ("camera focal length (fx and fy together)", "focal length"),
                 ("actuator ", "")):
        name = name.replace(a, b)
    return name.strip()[:34]


def _verdicts(runs: list[dict[str, Any]]) -> str:
    """``named ×2 (latency), indistinguishable ×3 (3–5 causes), none ×1``."""
    from collections import Counter

    out = []
    for v, n in Counter(x["verdict"] for x in runs).items():
        xs = [x for x in runs if x["verdict"] == v]
        if v == "named":
            names = Counter(_short_cause(x["causes"][0]) for x in xs if x["causes"])
            out.append(f"named ×{n} (" + ", ".join(f"{k}" + (f" ×{m}" if m > 1 and len(names) > 1 else "")
                                                    for k, m in names.items()) + ")")
        elif v in ("indistinguishable", "unchecked"):
            sizes = sorted(int(x.get("set_size") or len(x["causes"])) for x in xs)
            out.append(f"{v} ×{n} ({sizes[0]}" + (f"–{sizes[-1]}" if sizes[-1] != sizes[0] else "")
                       + " causes)")
        else:
            out.append(f"{v} ×{n}")
    return "; ".join(out)


def _advice(done: list[str]) -> str:
    """What following the advice did, in short, with counts."""
    from collections import Counter

    def short(t: str) -> str:
        if t.startswith("added "):
            return "added " + ", ".join(p.split(" (target")[0] for p in t[6:].split("), ")).rstrip(")")
        for key, text in (("no warning", "nothing (no warning)"), ("indistinguishable", "nothing (indistinguishable)"),
                          ("held-out check", "nothing (held-out check failed)"),
                          ("takes no camera", "nothing (camera fields are no parameters of this twin)"),
                          ("cannot take as a parameter", "nothing (camera fields are no parameters of this twin)"),
                          ("has no parameter", "nothing (no parameter models it)"),
                          ("too simple", "nothing (unexplained)"), ("verdict named", "nothing (no recommendation)"),
                          ("unchecked", "nothing (unchecked)")):
            if key in t:
                return text
        return t
    c = Counter(short(t) for t in done)
    return "; ".join(f"{k} ×{n}" for k, n in c.items())


def _in_consider(cell: dict[str, Any], when: str) -> tuple[int, int]:
    """(true values inside their consider-widened 95 % interval, parameters scored)."""
    run, truth = cell[when], cell.get("truth") or {}
    ivs = run.get("consider_interval") or {}
    inside = 0
    for n in run.get("covered", {}):
        iv = ivs.get(n)
        if iv and iv[0] is not None and iv[1] is not None and float(iv[0]) <= truth[n] <= float(iv[1]):
            inside += 1
    return inside, len(run.get("covered", {}))


def summarise(out: Path) -> str:
    """The Markdown table of every finished cell under ``out``: per rig × case × method, counts over seeds."""
    cells = [json.loads(p.read_text()) for p in sorted((out / "cells").glob("*.json"))]
    groups: dict[tuple, list] = {}
    for c in cells:
        groups.setdefault((c["rig"], c["case"], c["method"]), []).append(c)
    order = {k: i for i, k in enumerate(CASES)}
    lines = ["| rig | case | method | verdicts | right | false alarm | max err. (worst seed) before → after | "
             "truth in 95 % interval before → after | value outside own interval | silent before → after | "
             "caveat before → after | truth in consider interval before → after | advice followed |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    tot = {"right": 0, "n": 0, "fa": 0, "nfa": 0, "silent_b": 0, "silent_a": 0, "ok": 0}
    rig_order = {k: i for i, k in enumerate(RIGS)}
    meth_order = {"reasoner": 0, "least-squares": 1, "mujoco-sysid": 2}
    per_method: dict[str, dict[str, int]] = {}
    for (rig, case, method), cs in sorted(groups.items(), key=lambda kv: (rig_order.get(kv[0][0], 9),
                                                                            order.get(kv[0][1], 99),
                                                                            meth_order.get(kv[0][2], 9))):
        ok = [c for c in cs if c["status"] == "ok"]
        if not ok:
            why = (cs[0].get("why") or cs[0].get("error", "")).split(": ")[-1]
            status = "not applicable" if cs[0]["status"] == "n/a" else cs[0]["status"]
            lines.append(f"| {rig} | {case} | {method} | {status}: {why[:90]} | | | | | | | | | |")
            continue
        n = len(ok)
        b, a = [c["before"] for c in ok], [c["after"] for c in ok]
        verdicts = _verdicts(b)
        right = sum(x["right"] for x in b)
        fa = sum(bool(x["false_alarm"]) for x in b) if case == "none" else None
        err = (f"{100 * max(x['max_rel_error'] for x in b):.1f} % → {100 * max(x['max_rel_error'] for x in a):.1f} %")
        cov_b = sum(sum(x["covered"].values()) for x in b), sum(len(x["covered"]) for x in b)
        cov_a = sum(sum(x["covered"].values()) for x in a), sum(len(x["covered"]) for x in a)
        sil = f"{sum(x['silent'] for x in b)} → {sum(x['silent'] for x in a)}"
        outside = sum(sum(not v for v in x.get("value_inside_interval", {}).values())
                      for x in b + [y for y in a if not y.get("same_as_before")])
        tot["outside"] = tot.get("outside", 0) + outside
        adv = _advice([c["advice"] for c in ok])
        cav = f"{sum(bool(x.get('caveat')) for x in b)} → {sum(bool(x.get('caveat')) for x in a)}"
        ccov = "–"
        if all("consider_interval" in x for x in b + a):
            cb = [_in_consider(c, "before") for c in ok]
            ca = [_in_consider(c, "after") for c in ok]
            ccov = (f"{sum(x[0] for x in cb)}/{sum(x[1] for x in cb)} → "
                    f"{sum(x[0] for x in ca)}/{sum(x[1] for x in ca)}")
        if case == "none":
            tot["caveat_none"] = tot.get("caveat_none", 0) + sum(bool(x.get("caveat")) for x in b)
        else:
            tot["caveat_mod"] = tot.get("caveat_mod", 0) + sum(bool(x.get("caveat")) for x in b)
        lines.append(f"| {rig} | {case} | {method} | {verdicts} | {right}/{n} | "
                     f"{'–' if fa is None else f'{fa}/{n}'} | {err} | {cov_b[0]}/{cov_b[1]} → {cov_a[0]}/{cov_a[1]} | "
                     f"{outside} | {sil} | {cav} | {ccov} | {adv} |")
        pm = per_method.setdefault(method, {"right": 0, "n": 0, "fa": 0, "nfa": 0, "sb": 0, "sa": 0})
        strict = sum(_silent_strict(x) for x in b + a)
        tot["strict"] = tot.get("strict", 0) + strict
        tot["strict_b"] = tot.get("strict_b", 0) + sum(_silent_strict(x) for x in b)
        tot["strict_a"] = tot.get("strict_a", 0) + sum(_silent_strict(x) for x in a)
        pm["sb"] += sum(x["silent"] for x in b)
        pm["sa"] += sum(x["silent"] for x in a)
        if case == "none":
            pm["fa"] += fa
            pm["nfa"] += n
        else:
            pm["right"] += right
            pm["n"] += n
        tot["ok"] += n
        if case == "none":
            tot["fa"] += fa
            tot["nfa"] += n
            tot["unchecked_none"] = tot.get("unchecked_none", 0) + sum(x["verdict"] == "unchecked" for x in b)
        else:
            tot["right"] += right
            tot["n"] += n
            tot["right_unchecked"] = tot.get("right_unchecked", 0) + sum(
                bool(x["right"]) and x["verdict"] == "unchecked" for x in b)
            tot["over_cap"] = tot.get("over_cap", 0) + sum(
                bool(x.get("truth_in_set")) and not x["right"] for x in b)
        tot["silent_b"] += sum(x["silent"] for x in b)
        tot["silent_a"] += sum(x["silent"] for x in a)
    na = sum(c["status"] == "n/a" for c in cells)
    err = sum(c["status"] == "error" for c in cells)
    lines.append("")
    lines.append(f"Totals over {tot['ok']} finished cells ({na} not applicable, {err} failed): diagnosis right "
                 f"{tot['right']}/{tot['n']} ({100 * tot['right'] / max(tot['n'], 1):.0f} %; bar >= 90 %), false "
                 f"alarms {tot['fa']}/{tot['nfa']} ({100 * tot['fa'] / max(tot['nfa'], 1):.0f} %; bar <= 5 %), silent "
                 f"failures {tot['silent_b']} before and {tot['silent_a']} after following the advice (bar 0); "
                 f"reported values outside their own interval: {tot.get('outside', 0)} (before and after together). "
                 f"Silent failures in the narrower sense (no warning AND a truth outside its interval AND an error "
                 f">= 5 %): {tot.get('strict_b', 0)} before, {tot.get('strict_a', 0)} after.")
    lines.append(f"Consider caveats (not counted as false alarms; they count as telling the user for the silent "
                 f"test): {tot.get('caveat_none', 0)}/{tot['nfa']} unmodified runs, {tot.get('caveat_mod', 0)}/"
                 f"{tot['n']} modified runs (before following the advice).")
    lines.append(f"Of the right diagnoses, {tot.get('right_unchecked', 0)} are unchecked sets (nothing beyond the "
                 f"noise; the truth among the nominal values the trials cannot check); sets holding the truth but "
                 f"with more than {SET_MAX} causes, not counted right: {tot.get('over_cap', 0)}; unchecked verdicts on "
                 f"unmodified runs (a caveat, no false alarm): {tot.get('unchecked_none', 0)}/{tot['nfa']}.")
    for m, pm in sorted(per_method.items(), key=lambda kv: meth_order.get(kv[0], 9)):
        lines.append(f"- {m}: right {pm['right']}/{pm['n']}, false alarms {pm['fa']}/{pm['nfa']}, silent failures "
                     f"{pm['sb']} → {pm['sa']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rigs", default=",".join(RIGS), help="rig keys (finger, urdf_arm, cart_pendulum) or rig.yaml")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--methods", default="reasoner")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=1, help="cells run in this many processes (1: in this one)")
    ap.add_argument("--out", default="runs/misspec")
    ap.add_argument("--summarise", metavar="OUT", help="print the table of OUT's finished cells and exit")
    a = ap.parse_args(argv)
    if a.summarise:
        print(summarise(Path(a.summarise)))
        return 0
    out = Path(a.out)
    for c in a.cases.split(","):
        if c not in CASES:
            print(f"--cases: unknown case {c!r}; valid: {', '.join(CASES)}", file=sys.stderr)
            return 2
    todo = [(r, c, s, m) for r in a.rigs.split(",") for c in a.cases.split(",") for s in range(a.seeds)
            for m in a.methods.split(",") if not cell_path(out, r, c, s, m).is_file()]
    print(f"{len(todo)} cells to run ({a.jobs} process(es)); finished cells in {out / 'cells'} are kept",
          file=sys.stderr)

    def done(cell):
        _write_json(cell_path(out, cell["rig"], cell["case"], cell["seed"], cell["method"]), cell)
        print(f"{cell['rig']} {cell['case']} seed {cell['seed']} {cell['method']}: {cell['status']} "
              f"({cell['wall_s']:.0f} s)", file=sys.stderr)

    if a.jobs <= 1:
        for args in todo:
            done(run_cell(*args, a.budget))
    else:
        with ProcessPoolExecutor(max_workers=a.jobs) as ex:
            futs = [ex.submit(run_cell, *args, a.budget) for args in todo]
            for f in as_completed(futs):
                done(f.result())
    table = summarise(out)
    (out / "summary.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
