#!/usr/bin/env python3
"""Mutation testing of the core modules with mutmut 3.x: how many one-token bugs the tests miss.

mutmut rewrites each function of the modules below into many *mutants* (a changed
operator, constant, comparison, argument...), runs the tests that cover the function
against every mutant, and calls a mutant *killed* when a test fails, *survived* when all
pass. A survivor is either a bug the suite would let through (write a test) or an
equivalent mutant (the change does not alter behaviour: leave it, say why).

Scope (issue 12 item 18), in ``GROUPS``: core/parameters.py, core/trajectory.py,
core/excitation.py; the marker tracker perception/markers.py; calibration/objective.py; the
loop's resume (calibration/loop.py: the run-directory check, the iterations.jsonl reader
and validator, record (de)serialisation, the restored session: meter, best, restart point);
the centreline tracker perception/centerline.py; core/camera.py; and core/rig.py,
core/trial.py, core/yamlio.py, core/lockstep.py (``core_data``): every module of core/, both
trackers, the objective and the resume path. ``run_calibration`` itself is left out (each of
its mutants runs whole calibrations, hours on 2 cores), but its resume branch is
``_resume_session``, in the resume group. Each group runs against its own fast tests (no
rendering, no ROS). Lines holding only message text (``raise X(...)``, string continuations,
warnings, notes) are not mutated (``DO_NOT_MUTATE``).

Each group runs in a scratch copy of the repository (``build/mutation/<group>/``,
git-ignored), so the checkout is never touched; its statuses go to
``build/mutation/<group>/results.json`` and the survivors of every group run so far to
``build/mutation/survivors.txt``; ``cd build/mutation/<group> && mutmut show <name>``
shows one as a diff. A mutant counts as a survivor when the tests pass on it or when no
selected test reaches its function ("no tests").

Every survivor is examined in the ledger ``docs/mutation_survivors.md``: ``--ledger``
rewrites it from the last results, one line a mutant (name, ``old => new``) under the
reason it is left alive, keeping the reasons already written; a new survivor lands under
``UNEXAMINED``; ``--ledger --only G`` rewrites group G's section and keeps the other sections
as they are (their scratch copies may be gone); ``--ledger --reasons TSV`` takes the reasons of
survivors from ``name<TAB>reason`` files written outside the ledger. After writing tests for the
unexplained survivors, ``--recheck`` re-runs just those (the other mutants keep their status;
more tests only kill more, so the counts stay pessimistic), which is minutes instead of the
full run; ``--recheck --select GLOB`` re-runs only the survivors whose names match (one
function's, say).

Run: ``nice .venv/bin/python bench/mutation.py --max-children 2`` (needs ``pip install -r
requirements-dev.txt``); ``--only core markers`` runs some groups; then ``--ledger``.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: groups run one after the other, each in its own scratch copy with its own fast tests:
#: (modules, mutant-name patterns, test files and pytest args). mutmut 3 names mutants
#: ``<module>.x_<function>__mutmut_<n>`` (methods ``<module>.xǁClassǁmethod__mutmut_<n>``).
GROUPS: dict[str, dict] = {
    "core": {
        "modules": ["vid2sid_ros/core/parameters.py", "vid2sid_ros/core/trajectory.py",
                    "vid2sid_ros/core/excitation.py"],
        "patterns": ["vid2sid_ros.core.parameters.*", "vid2sid_ros.core.trajectory.*",
                     "vid2sid_ros.core.excitation.*"],
        "tests": ["test/test_core_parameters.py", "test/test_core_trajectory.py", "test/test_core_excitation.py",
                  "test/test_core_excitation_formulas.py", "test/test_core_trajectory_kinds.py",
                  "test/test_core_parameters_edges.py", "test/test_core_helpers.py"],
    },
    "markers": {
        "modules": ["vid2sid_ros/perception/markers.py"],
        "patterns": ["vid2sid_ros.perception.markers.*"],
        # the rendered-finger and CLI tests cost seconds each; the synthetic-disc tests cover the same code
        "tests": ["test/test_markers.py", "test/test_markers_edges.py", "-k", "not rendered_video and not sensor_noise and not track_command "
                  "and not default_rig_noise"],
    },
    "objective": {
        "modules": ["vid2sid_ros/calibration/objective.py"],
        "patterns": ["vid2sid_ros.calibration.objective.*"],
        "tests": ["test/test_objective.py"],
    },
    "centerline": {  # the tentacle's centreline tracker, against its synthetic-mask tests (not the rendered rollout)
        "modules": ["vid2sid_ros/perception/centerline.py"],
        "patterns": ["vid2sid_ros.perception.centerline.*"],
        "tests": ["test/test_centerline.py", "test/test_centerline_trace.py", "test/test_centerline_tracker.py",
                  "-k", "not rendered_rollout"],
    },
    "camera": {  # the pinhole camera, CameraInfo files and the camera config block (no rendering)
        "modules": ["vid2sid_ros/core/camera.py"],
        "patterns": ["vid2sid_ros.core.camera.*"],
        "tests": ["test/test_camera.py", "test/test_core_camera_edges.py"],
    },
    "core_data": {  # the rig and trial types, the strict YAML reader and the ROS lockstep pairing
        "modules": ["vid2sid_ros/core/rig.py", "vid2sid_ros/core/trial.py", "vid2sid_ros/core/yamlio.py",
                    "vid2sid_ros/core/lockstep.py"],
        "patterns": ["vid2sid_ros.core.rig.*", "vid2sid_ros.core.trial.*", "vid2sid_ros.core.yamlio.*",
                     "vid2sid_ros.core.lockstep.*"],
        "tests": ["test/test_core_data.py", "test/test_ros_lockstep.py", "-k", "assign_steps or stream or core_data"],
    },
    "resume": {  # the loop's resume: run-directory check, iterations.jsonl reader/validator, records
        "modules": ["vid2sid_ros/calibration/loop.py"],
        "patterns": [f"vid2sid_ros.calibration.loop.x_{f}__mutmut_*" for f in (
            "check_run_dir", "validate_records", "_read_jsonl", "_read_meta", "load_history", "record_from_dict",
            "record_to_dict", "_refuse_constant", "_signature", "_resume_session")],
        "tests": ["test/test_loop_resume_after_failure.py", "test/test_resume_records.py", "test/test_resume_session.py"],
    },
}

#: the groups run (and put in the ledger) when ``--only`` is not given: every group (each has had its full
#: run, and its survivors are in the ledger)
DEFAULT_GROUPS = list(GROUPS)

#: lines never mutated: error/warning message text (a changed message is not a behaviour change;
#: the tests match the messages' key words, not every letter), docstrings and comments
DO_NOT_MUTATE = [r"^\s*raise \w+\(", r"^\s*f?[\"']", r"^\s*\+ f?[\"']", r"warnings\.warn\(", r"notes\.append\(",
                 r"^\s*#"]


def _copy_tree(dst: Path) -> None:
    ignore = shutil.ignore_patterns(".git", ".venv", "build", "install", "log", "runs", "mutants", "__pycache__",
                                    "*.pyc", ".pytest_cache", "*.mov", "*.mp4")
    shutil.copytree(ROOT, dst, ignore=ignore, symlinks=True)


def _module_hashes(group: dict, root: Path = ROOT) -> dict[str, str]:
    """sha256 of each mutated module under ``root``: mutant names (numbered per function) are only
    comparable between runs on the same source."""
    return {m: hashlib.sha256((root / m).read_bytes()).hexdigest() for m in group["modules"]}


def _run_group(name: str, group: dict, work: Path, mutmut: Path, max_children: int,
               names: list[str] | None = None) -> dict:
    """One group in its own scratch copy: mutmut run (of ``names`` only if given), then the status of
    every selected mutant."""
    if work.exists():
        shutil.rmtree(work)
    _copy_tree(work)
    # the source the mutants are made from: the checkout may change while a run of half an hour goes on
    # (was: hashed from the checkout when the run ended, so a run of the old module passed for the new one)
    hashes = _module_hashes(group, work)
    tests = group["tests"]
    cfg = ("[mutmut]\nsource_paths = vid2sid_ros\n"
           "only_mutate =\n" + "".join(f"    {m}\n" for m in group["modules"])
           + "do_not_mutate_patterns =\n" + "".join(f"    {p}\n" for p in DO_NOT_MUTATE)
           + "pytest_add_cli_args_test_selection =\n" + "".join(f"    {t}\n" for t in tests)
           + "pytest_add_cli_args =\n    -p\n    no:cacheprovider\n    -q\n"
           + "use_git_change_detection = false\n")
    (work / "setup.cfg").write_text(cfg)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.setdefault("ROS_DOMAIN_ID", str(200 + os.getpid() % 30))
    env.setdefault("MUJOCO_GL", "egl")
    env["PATH"] = f"{mutmut.parent}{os.pathsep}{env.get('PATH', '')}"
    t0 = time.monotonic()
    run = subprocess.run([str(mutmut), "run", "--max-children", str(max_children), *(names or group["patterns"])],
                         cwd=work,
                         env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (work / "mutmut_run.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        tail = "\n".join((run.stdout + run.stderr).splitlines()[-20:])
        return {"error": f"mutmut run failed (exit {run.returncode}); see {work / 'mutmut_run.log'}:\n{tail}"}
    return {"status": _statuses(work, group, mutmut, env), "wall_s": wall, "module_sha256": hashes}


def _statuses(work: Path, group: dict, mutmut: Path, env: dict | None = None) -> dict[str, str]:
    """``{mutant: status}`` of the group's mutants from ``mutmut results`` in its scratch copy."""
    res = subprocess.run([str(mutmut), "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True)
    rx = [re.compile(pat.replace(".", r"\.").replace("*", ".*")) for pat in group["patterns"]]
    status = {}
    for line in res.stdout.splitlines():
        m = re.match(r"\s*(\S+): (\w[\w ]*)$", line)
        if m and any(r.fullmatch(m.group(1)) for r in rx):
            status[m.group(1)] = m.group(2).strip()
    return status


#: statuses that count as a survivor for the ledger: the tests passed on the mutant, or no selected test
#: reaches the mutated function at all (both are bugs the suite would let through unless equivalent)
SURVIVOR_STATUSES = ("survived", "no tests")
LEDGER = ROOT / "docs" / "mutation_survivors.md"
UNEXAMINED = "UNEXAMINED"

_DIFF_SCRIPT = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
out = {}
for name in json.loads(sys.stdin.read()):
    path = name.split('.x_')[0].split('.x\u01c1')[0].replace('.', '/') + '.py'
    out[name] = get_diff_for_mutant(name, path=path)
print(json.dumps(out))
"""


def _change(diff: str) -> str:
    """The removed and added lines of a mutant's unified diff, as one line: ``old => new``."""
    minus = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    text = f"{' / '.join(minus)} => {' / '.join(plus)}".replace("|", "\\|").replace("`", "'")
    return text if len(text) <= 240 else text[:237] + "..."


def _read_ledger(path: Path) -> dict[str, tuple[str, str]]:
    """``{mutant: (change, reason)}`` from a ledger written by :func:`_write_ledger` (empty if none)."""
    out: dict[str, tuple[str, str]] = {}
    if not path.exists():
        return out
    reason = UNEXAMINED
    for line in path.read_text().splitlines():
        if line.startswith("### "):
            reason = re.sub(r" \(\d+\)$", "", line[4:].strip())
        m = re.match(r"- `([^`]+)` \[[\w ]+\]: (.*)$", line)
        if m:
            out[m.group(1)] = (m.group(2), reason)
    return out


def _ledger_sections(path: Path) -> dict[str, str]:
    """``{group: its section's text}`` (from its ``## group:`` heading to the next) of an existing ledger."""
    if not path.exists():
        return {}
    parts = re.split(r"^(?=## \w+: )", path.read_text(), flags=re.M)[1:]
    return {re.match(r"## (\w+): ", part).group(1): part.rstrip("\n") + "\n" for part in parts}


def _write_ledger(path: Path, rows: dict[str, dict[str, tuple[str, str, str]]], figures: dict[str, dict],
                  keep: dict[str, str] | None = None, order: list[str] | None = None) -> int:
    """Write the survivors ledger: per group, per reason, one line a mutant. ``keep`` holds the sections
    (text) of groups not rewritten this time, put back as they were, in ``order`` (default: ``rows`` then
    ``keep``). Returns the unexamined count of the rewritten groups."""
    lines = ["# Surviving mutants, each examined",
             "",
             "Written by `bench/mutation.py --ledger` from the last run of every group (`build/mutation/<group>/",
             "results.json`). One line a mutant: `name` [status]: the mutated line, `old => new`. The",
             "heading above it is the reason it is left alive (an equivalent mutant, message text, a",
             "setting no input reaches...); a mutant that was a real gap was killed with a test instead",
             "and is no longer here. Reasons are kept by mutant name when the ledger is rewritten;",
             f"a new survivor lands under `### {UNEXAMINED}` until someone reads it "
             "(`cd build/mutation/<group> && mutmut show NAME`).",
             ""]
    unexamined = 0
    keep = keep or {}
    for group in order or [*rows, *(g for g in keep if g not in rows)]:
        if group not in rows:
            if group in keep:
                lines += keep[group].rstrip("\n").split("\n") + [""]
            continue
        items = rows[group]
        f = figures.get(group, {})
        c = f.get("counts", {})
        lines += [f"## {group}: {sum(c.values())} mutants, {c.get('killed', 0)} killed, "
                  f"{c.get('survived', 0)} survived, {c.get('no tests', 0)} reached by no test "
                  f"({f.get('tests', '')})", ""]
        by_reason: dict[str, list[str]] = collections.defaultdict(list)
        for name, (status, change, reason) in sorted(items.items()):
            by_reason[reason].append(f"- `{name}` [{status}]: {change}")
        for reason in sorted(by_reason, key=lambda r: (r != UNEXAMINED, r)):
            if reason == UNEXAMINED:
                unexamined += len(by_reason[reason])
            lines += [f"### {reason} ({len(by_reason[reason])})", *by_reason[reason], ""]
    path.write_text("\n".join(lines))
    return unexamined


def _read_reasons(paths: list[Path]) -> dict[str, str]:
    """``{mutant: reason}`` from tab-separated files, one ``name<TAB>reason`` a line (blank lines and ``#``
    comments skipped): reasons written outside the ledger, e.g. by two people reading one group's survivors.

    Raises:
        ValueError: a line without a tab, a reason of 20 characters or fewer, a name given two reasons.
    """
    out: dict[str, str] = {}
    for path in paths:
        for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, tab, reason = line.partition("\t")
            name, reason = name.strip(), " ".join(reason.split())
            if not tab or not name:
                raise ValueError(f"{path}:{n}: expected 'mutant_name<TAB>reason', got {line[:80]!r}")
            if len(reason) <= 20:
                raise ValueError(f"{path}:{n}: the reason for {name} is too short to be one ({reason!r})")
            if out.get(name, reason) != reason:
                raise ValueError(f"{path}:{n}: {name} already has another reason ({out[name]!r})")
            out[name] = reason
    return out


def ledger(workdir: Path, groups: list[str], mutmut: Path, reasons: dict[str, str] | None = None) -> int:
    """Rewrite the ledger sections of ``groups`` from their last results, keeping the reasons already given
    (and taking ``reasons``, ``{mutant: reason}``, for survivors the ledger has none for); the sections of
    other groups already in the ledger stay as they are (their scratch copies may be gone)."""
    old = _read_ledger(LEDGER)
    reasons = reasons or {}
    keep = {g: text for g, text in _ledger_sections(LEDGER).items() if g not in groups}
    rows: dict[str, dict[str, tuple[str, str, str]]] = {}
    figures: dict[str, dict] = {}
    for name in groups:
        res = workdir / name / "results.json"
        if not res.exists():
            print(f"mutation: no results for group {name} ({res}); run it first", file=sys.stderr)
            return 2
        figures[name] = json.loads(res.read_text())
        surv = {k: v for k, v in figures[name]["status"].items() if v in SURVIVOR_STATUSES}
        diffs = subprocess.run([sys.executable, "-c", _DIFF_SCRIPT], cwd=workdir / name, input=json.dumps(sorted(surv)),
                               capture_output=True, text=True, check=True)
        rows[name] = {}
        for k, diff in json.loads(diffs.stdout).items():
            change = _change(diff)
            prev = old.get(k)
            reason = prev[1] if prev and prev[0] == change and prev[1] != UNEXAMINED else reasons.get(k, UNEXAMINED)
            rows[name][k] = (surv[k], change, reason)
    order = [g for g in GROUPS if g in rows or g in keep]
    n = _write_ledger(LEDGER, rows, figures, keep, order)
    total = sum(len(r) for r in rows.values())
    print(f"ledger {LEDGER}: {total} survivors, {n} unexamined")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default=str(ROOT / "build" / "mutation"))
    p.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    p.add_argument("--only", nargs="*", default=None,
                   help=f"groups to run (default {', '.join(DEFAULT_GROUPS)}; all: {', '.join(GROUPS)})")
    p.add_argument("--recheck", action="store_true",
                   help="re-run only the last run's survivors (and unreached mutants) that the ledger does not "
                        "explain, against the current tests; every other mutant keeps its status (added tests "
                        "only kill more, so the counts stay pessimistic). Refused for a group whose module "
                        "changed since its last full run")
    p.add_argument("--select", nargs="*", default=None, metavar="GLOB",
                   help="with --recheck: re-run only the survivors whose names match one of these globs "
                        "(e.g. 'vid2sid_ros.perception.centerline.x__extend_tip__*'), the rest keep their status")
    p.add_argument("--ledger", action="store_true",
                   help=f"do not run: rewrite {LEDGER.relative_to(ROOT)} from the groups' last results")
    p.add_argument("--reasons", nargs="*", default=None, metavar="TSV",
                   help="with --ledger: files of 'mutant_name<TAB>reason' lines, the reasons of survivors the "
                        "ledger has none for yet")
    a = p.parse_args(argv)
    if a.reasons is not None and not a.ledger:
        p.error("--reasons: only with --ledger")
    if a.select is not None and not a.recheck:
        p.error("--select: only with --recheck (a full run measures every mutant of a group)")
    if a.max_children < 1:  # was: passed on to mutmut as is
        p.error(f"--max-children: expected an integer >= 1, got {a.max_children}")
    mutmut = Path(sys.executable).with_name("mutmut")
    if not mutmut.exists():
        print(f"mutation: {mutmut} not found; install it: {sys.executable} -m pip install -r "
              f"{ROOT / 'requirements-dev.txt'}", file=sys.stderr)
        return 2
    unknown = [g for g in (a.only or []) if g not in GROUPS]
    if unknown:
        print(f"mutation: unknown group(s) {unknown}; groups: {', '.join(GROUPS)}", file=sys.stderr)
        return 2
    workdir = Path(a.workdir)
    if a.ledger:
        try:
            reasons = _read_reasons([Path(r) for r in a.reasons or []])
        except (OSError, UnicodeDecodeError, ValueError) as err:
            print(f"mutation: --reasons: {err}", file=sys.stderr)
            return 2
        return ledger(workdir, a.only or DEFAULT_GROUPS, mutmut, reasons)
    total: collections.Counter = collections.Counter()
    t_all = time.monotonic()
    for name in a.only or DEFAULT_GROUPS:
        group = GROUPS[name]
        res_path = workdir / name / "results.json"
        try:
            prev = json.loads(res_path.read_text()) if a.recheck and res_path.exists() else None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:  # was: a JSONDecodeError traceback
            print(f"mutation: --recheck {name}: {res_path} is not a readable results file ({err}); run the group "
                  "in full", file=sys.stderr)
            return 2
        if prev is not None and not (isinstance(prev, dict) and isinstance(prev.get("status"), dict)):
            print(f"mutation: --recheck {name}: {res_path}: expected a mapping with a 'status' mapping; run the "
                  "group in full", file=sys.stderr)
            return 2
        if a.recheck:
            if prev is None:
                print(f"mutation: --recheck needs a full run of group {name} first ({res_path})", file=sys.stderr)
                return 2
            if prev.get("module_sha256") != _module_hashes(group):
                print(f"mutation: --recheck {name}: {', '.join(group['modules'])} changed since the last full "
                      "run (mutant numbers no longer match); run the group in full", file=sys.stderr)
                return 2
            explained = {k for k, (_, reason) in _read_ledger(LEDGER).items() if reason != UNEXAMINED}
            again = sorted(k for k, v in prev["status"].items() if v in SURVIVOR_STATUSES and k not in explained
                           and (not a.select or any(fnmatch.fnmatchcase(k, g) for g in a.select)))
            if not again:
                print(f"{name}: no survivors to recheck")
                continue
        r = _run_group(name, group, workdir / name, mutmut, a.max_children, again if a.recheck else None)
        if "error" in r:
            if prev is not None:  # the scratch copy was rebuilt for the recheck: keep the full run's statuses
                res_path.write_text(json.dumps(prev, indent=1, ensure_ascii=False))
            print(f"{name}: {r['error']}", file=sys.stderr)
            return 1
        if prev is not None and r["module_sha256"] != prev.get("module_sha256"):  # changed during the recheck
            res_path.write_text(json.dumps(prev, indent=1, ensure_ascii=False))
            print(f"mutation: --recheck {name}: {', '.join(group['modules'])} changed while the recheck ran; run "
                  "the group in full", file=sys.stderr)
            return 2
        if prev is not None:  # rechecked survivors over the statuses of the last full run
            r["status"] = {**prev["status"], **{k: v for k, v in r["status"].items() if k in again}}
            r["full_run_wall_s"] = prev.get("full_run_wall_s", prev["wall_s"])
        by_module: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for k, v in r["status"].items():
            by_module[k.split(".x_")[0].split(".xǁ")[0]][v] += 1
            total[v] += 1
        counts = collections.Counter(r["status"].values())
        (workdir / name / "results.json").write_text(json.dumps(
            {"group": name, "tests": " ".join(group["tests"]), "wall_s": round(r["wall_s"], 1),
             "rechecked": bool(prev), "full_run_wall_s": r.get("full_run_wall_s", round(r["wall_s"], 1)),
             "module_sha256": r["module_sha256"],
             "max_children": a.max_children, "load_avg": os.getloadavg()[0], "counts": dict(sorted(counts.items())),
             "status": r["status"]}, indent=1, ensure_ascii=False))
        print(f"{name} ({' '.join(group['tests'])}): {len(r['status'])} mutants in {r['wall_s'] / 60:.1f} min",
              flush=True)
        for mod, c in sorted(by_module.items()):
            print(f"  {mod}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())), flush=True)
    survivors = sorted(k for g in GROUPS if (workdir / g / "results.json").exists()
                       for k, v in json.loads((workdir / g / "results.json").read_text())["status"].items()
                       if v in SURVIVOR_STATUSES)
    out = workdir / "survivors.txt"
    out.write_text("".join(s + "\n" for s in survivors))
    print(f"total ({(time.monotonic() - t_all) / 60:.1f} min, {a.max_children} workers): "
          + ", ".join(f"{k} {n}" for k, n in sorted(total.items())))
    print(f"survivors and unreached mutants of every group run so far ({len(survivors)}) listed in {out}; "
          f"diff: cd {workdir}/<group> && mutmut show NAME; ledger: bench/mutation.py --ledger")
    return 0


if __name__ == "__main__":
    sys.exit(main())
