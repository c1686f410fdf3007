#!/usr/bin/env python3
"""Mutation testing of the core modules with mutmut 3.x: how many one-token bugs the tests miss.

mutmut rewrites each function of the modules below into many *mutants* (a changed
operator, constant, comparison, argument...), runs the tests that cover the function
against every mutant, and calls a mutant *killed* when a test fails, *survived* when all
pass. A survivor is either a bug the suite would let through (write a test) or an
equivalent mutant (the change does not alter behaviour: leave it, say why).

Scope (issue 12 item 18), in ``GROUPS``: core/parameters.py, core/trajectory.py,
core/excitation.py; perception/markers.py; calibration/objective.py; and the loop's resume
(calibration/loop.py: the run-directory check, the iterations.jsonl reader and validator,
record (de)serialisation). ``run_calibration`` itself (whose resume branch holds the
restart point) is left out: each of its mutants runs whole calibrations, hours on 2
cores; its restart point is covered by test_loop_resume_after_failure.py, checked by hand
against the mutation of issue 12 item 17a. Each group runs against its own fast tests (no
rendering, no ROS), so the whole run takes < 20 min on 2 cores. Lines holding only
message text (``raise X(...)``, string continuations, warnings, notes) are not mutated
(``DO_NOT_MUTATE``).

Each group runs in a scratch copy of the repository (``build/mutation/<group>/``,
git-ignored), so the checkout is never touched. The survivors are written to
``build/mutation/survivors.txt``; ``cd build/mutation/<group> && mutmut show <name>``
shows one as a diff.

Run: ``nice .venv/bin/python bench/mutation.py`` (needs ``pip install -r requirements-dev.txt``);
``--only core markers`` runs some groups.
"""

from __future__ import annotations

import argparse
import collections
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
                  "test/test_core_parameters_edges.py"],
    },
    "markers": {
        "modules": ["vid2sid_ros/perception/markers.py"],
        "patterns": ["vid2sid_ros.perception.markers.*"],
        # the rendered-finger and CLI tests cost seconds each; the synthetic-disc tests cover the same code
        "tests": ["test/test_markers.py", "-k", "not rendered_video and not sensor_noise and not track_command "
                  "and not default_rig_noise"],
    },
    "objective": {
        "modules": ["vid2sid_ros/calibration/objective.py"],
        "patterns": ["vid2sid_ros.calibration.objective.*"],
        "tests": ["test/test_objective.py"],
    },
    "resume": {  # the loop's resume: run-directory check, iterations.jsonl reader/validator, records
        "modules": ["vid2sid_ros/calibration/loop.py"],
        "patterns": [f"vid2sid_ros.calibration.loop.x_{f}__mutmut_*" for f in (
            "check_run_dir", "validate_records", "_read_jsonl", "_read_meta", "load_history", "record_from_dict",
            "record_to_dict", "_refuse_constant", "_signature")],
        "tests": ["test/test_loop_resume_after_failure.py", "test/test_resume_records.py"],
    },
}

#: lines never mutated: error/warning message text (a changed message is not a behaviour change;
#: the tests match the messages' key words, not every letter), docstrings and comments
DO_NOT_MUTATE = [r"^\s*raise \w+\(", r"^\s*f?[\"']", r"^\s*\+ f?[\"']", r"warnings\.warn\(", r"notes\.append\(",
                 r"^\s*#"]


def _copy_tree(dst: Path) -> None:
    ignore = shutil.ignore_patterns(".git", ".venv", "build", "install", "log", "runs", "mutants", "__pycache__",
                                    "*.pyc", ".pytest_cache", "*.mov", "*.mp4")
    shutil.copytree(ROOT, dst, ignore=ignore, symlinks=True)


def _run_group(name: str, group: dict, work: Path, mutmut: Path, max_children: int) -> dict:
    """One group in its own scratch copy: mutmut run, then the status of every selected mutant."""
    if work.exists():
        shutil.rmtree(work)
    _copy_tree(work)
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
    run = subprocess.run([str(mutmut), "run", "--max-children", str(max_children), *group["patterns"]], cwd=work,
                         env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (work / "mutmut_run.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        tail = "\n".join((run.stdout + run.stderr).splitlines()[-20:])
        return {"error": f"mutmut run failed (exit {run.returncode}); see {work / 'mutmut_run.log'}:\n{tail}"}
    res = subprocess.run([str(mutmut), "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True)
    rx = [re.compile(pat.replace(".", r"\.").replace("*", ".*")) for pat in group["patterns"]]
    status = {}
    for line in res.stdout.splitlines():
        m = re.match(r"\s*(\S+): (\w[\w ]*)$", line)
        if m and any(r.fullmatch(m.group(1)) for r in rx):
            status[m.group(1)] = m.group(2).strip()
    return {"status": status, "wall_s": wall}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default=str(ROOT / "build" / "mutation"))
    p.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    p.add_argument("--only", nargs="*", default=None, help=f"groups to run (default all: {', '.join(GROUPS)})")
    a = p.parse_args(argv)
    mutmut = Path(sys.executable).with_name("mutmut")
    if not mutmut.exists():
        print(f"mutation: {mutmut} not found; install it: {sys.executable} -m pip install -r "
              f"{ROOT / 'requirements-dev.txt'}", file=sys.stderr)
        return 2
    unknown = [g for g in (a.only or []) if g not in GROUPS]
    if unknown:
        print(f"mutation: unknown group(s) {unknown}; groups: {', '.join(GROUPS)}", file=sys.stderr)
        return 2
    survivors: list[str] = []
    total: collections.Counter = collections.Counter()
    t_all = time.monotonic()
    for name in a.only or list(GROUPS):
        group = GROUPS[name]
        r = _run_group(name, group, Path(a.workdir) / name, mutmut, a.max_children)
        if "error" in r:
            print(f"{name}: {r['error']}", file=sys.stderr)
            return 1
        by_module: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for k, v in r["status"].items():
            by_module[k.split(".x_")[0].split(".xǁ")[0]][v] += 1
            total[v] += 1
            if v == "survived":
                survivors.append(k)
        print(f"{name} ({' '.join(group['tests'])}): {len(r['status'])} mutants in {r['wall_s'] / 60:.1f} min",
              flush=True)
        for mod, c in sorted(by_module.items()):
            print(f"  {mod}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())), flush=True)
    out = Path(a.workdir) / "survivors.txt"
    out.write_text("".join(s + "\n" for s in sorted(survivors)))
    print(f"total ({(time.monotonic() - t_all) / 60:.1f} min, {a.max_children} workers): "
          + ", ".join(f"{k} {n}" for k, n in sorted(total.items())))
    print(f"survivors ({len(survivors)}) listed in {out}; diff: cd {a.workdir}/<group> && mutmut show NAME")
    return 0


if __name__ == "__main__":
    sys.exit(main())
