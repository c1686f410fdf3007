#!/usr/bin/env python3
"""Mutation testing of the core modules with mutmut 3.x: how many one-token bugs the tests miss.

mutmut rewrites each function of the modules below into many *mutants* (a changed
operator, constant, comparison, argument...), runs the tests that cover the function
against every mutant, and calls a mutant *killed* when a test fails, *survived* when all
pass. A survivor is either a bug the suite would let through (write a test) or an
equivalent mutant (the change does not alter behaviour: leave it, say why).

Scope (issue 12 item 18): core/parameters.py, core/trajectory.py, core/excitation.py,
perception/markers.py, calibration/objective.py and the loop's resume
(calibration/loop.py: the run-directory check, the iterations.jsonl reader and validator,
record (de)serialisation, and ``run_calibration``'s restart point, whose tests are the
resume tests). Tests: a fast subset (``TESTS``; no rendering, no ROS), so the whole run
takes < 20 min on 2 cores.

The run happens in a scratch copy of the repository (``build/mutation/``, git-ignored),
so the checkout is never touched; mutmut writes its mutated tree to
``build/mutation/mutants/``. Afterwards the survivors are listed by module and written to
``build/mutation/survivors.txt``; ``cd build/mutation && mutmut show <name>`` shows a diff.

Run: ``nice .venv/bin/python bench/mutation.py`` (needs ``pip install -r requirements-dev.txt``);
``--only parameters`` restricts to module names containing that text.
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

#: module -> mutant-name patterns (mutmut 3: ``<module>.x_<function>__mutmut_<n>``, methods ``xǁClassǁmethod``)
TARGETS: dict[str, list[str]] = {
    "vid2sid_ros/core/parameters.py": ["vid2sid_ros.core.parameters.*"],
    "vid2sid_ros/core/trajectory.py": ["vid2sid_ros.core.trajectory.*"],
    "vid2sid_ros/core/excitation.py": ["vid2sid_ros.core.excitation.*"],
    "vid2sid_ros/perception/markers.py": ["vid2sid_ros.perception.markers.*"],
    "vid2sid_ros/calibration/objective.py": ["vid2sid_ros.calibration.objective.*"],
    "vid2sid_ros/calibration/loop.py": [f"vid2sid_ros.calibration.loop.x_{f}__mutmut_*" for f in (
        "check_run_dir", "validate_records", "_read_jsonl", "_read_meta", "load_history", "record_from_dict",
        "record_to_dict", "_refuse_constant", "_signature", "_signature_diff", "run_calibration")],
}

#: the fast test subset mutants are run against (mutmut picks, per function, the tests that cover it)
TESTS = [
    "test/test_core_parameters.py", "test/test_core_trajectory.py", "test/test_core_excitation.py",
    "test/test_markers.py", "test/test_loop_resume_after_failure.py", "test/test_run_dir_safety.py",
    "test/test_calibration_loop.py", "test/test_objective.py",
]
#: deselected from the subset: slow (rendered finger video, CLI subprocesses) or outside the scope
DESELECT = ["rendered_video", "default_sensor_noise", "track_command", "video_proposer", "reasoner_recovers",
            "reduce_training_error", "result_files_are_loadable"]


def _copy_tree(dst: Path) -> None:
    ignore = shutil.ignore_patterns(".git", ".venv", "build", "install", "log", "runs", "mutants", "__pycache__",
                                    "*.pyc", ".pytest_cache", "*.mov", "*.mp4")
    shutil.copytree(ROOT, dst, ignore=ignore, symlinks=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default=str(ROOT / "build" / "mutation"))
    p.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    p.add_argument("--only", default=None, help="only modules whose path contains this text")
    a = p.parse_args(argv)
    mutmut = Path(sys.executable).with_name("mutmut")
    if not mutmut.exists():
        print(f"mutation: {mutmut} not found; install it: {sys.executable} -m pip install -r "
              f"{ROOT / 'requirements-dev.txt'}", file=sys.stderr)
        return 2
    targets = {m: pats for m, pats in TARGETS.items() if a.only is None or a.only in m}
    if not targets:
        print(f"mutation: --only {a.only!r} matches none of {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    tests = [t for t in TESTS if (ROOT / t).is_file()]
    work = Path(a.workdir)
    if work.exists():
        shutil.rmtree(work)
    _copy_tree(work)
    deselect = " and ".join(f"not {k}" for k in DESELECT)
    (work / "setup.cfg").write_text(
        "[mutmut]\nsource_paths = vid2sid_ros\n"
        "only_mutate =\n" + "".join(f"    {m}\n" for m in targets)
        + "pytest_add_cli_args_test_selection =\n" + "".join(f"    {t}\n" for t in tests)
        + f"    -k\n    {deselect}\n"
        + "pytest_add_cli_args =\n    -p\n    no:cacheprovider\n    -q\n"
        + "use_git_change_detection = false\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.setdefault("ROS_DOMAIN_ID", str(200 + os.getpid() % 30))
    env.setdefault("MUJOCO_GL", "egl")
    env["PATH"] = f"{mutmut.parent}{os.pathsep}{env.get('PATH', '')}"
    patterns = [pat for pats in targets.values() for pat in pats]
    t0 = time.monotonic()
    run = subprocess.run([str(mutmut), "run", "--max-children", str(a.max_children), *patterns], cwd=work, env=env,
                         capture_output=True, text=True)
    wall = time.monotonic() - t0
    (work / "mutmut_run.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        print(f"mutation: mutmut run failed (exit {run.returncode}); last lines of {work / 'mutmut_run.log'}:",
              file=sys.stderr)
        print("\n".join((run.stdout + run.stderr).splitlines()[-30:]), file=sys.stderr)
        return 1
    res = subprocess.run([str(mutmut), "results", "--all", "true"], cwd=work, env=env, capture_output=True,
                         text=True)
    status: dict[str, str] = {}
    for line in res.stdout.splitlines():
        m = re.match(r"\s*(\S+): (\w[\w ]*)$", line)
        if m:
            status[m.group(1)] = m.group(2).strip()
    selected = {k: v for k, v in status.items()
                if any(re.fullmatch(pat.replace(".", r"\.").replace("*", ".*"), k) for pat in patterns)}
    by_module: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for k, v in selected.items():
        mod = next(m for m, pats in targets.items()
                   if any(re.fullmatch(pat.replace(".", r"\.").replace("*", ".*"), k) for pat in pats))
        by_module[mod][v] += 1
    survivors = sorted(k for k, v in selected.items() if v == "survived")
    (work / "survivors.txt").write_text("".join(s + "\n" for s in survivors))
    total = collections.Counter(selected.values())
    print(f"mutmut 3 over {len(targets)} module(s), {len(tests)} test files ({', '.join(DESELECT)} deselected), "
          f"{a.max_children} workers: {sum(total.values())} mutants in {wall / 60:.1f} min")
    for mod, c in by_module.items():
        print(f"  {mod}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())))
    print("  total: " + ", ".join(f"{k} {n}" for k, n in sorted(total.items())))
    print(f"survivors ({len(survivors)}) listed in {work / 'survivors.txt'}; diff: cd {work} && mutmut show NAME")
    return 0


if __name__ == "__main__":
    sys.exit(main())
