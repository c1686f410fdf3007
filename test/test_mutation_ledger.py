"""The surviving-mutant ledger (docs/mutation_survivors.md, written by ``bench/mutation.py --ledger``)
leaves no survivor unexamined: every listed mutant sits under a reason, each group's listed
survivors match the counts in its heading, and the ledger reads back (name, change, reason)
the way ``--ledger`` keeps reasons when it rewrites the file."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_mutation", ROOT / "bench" / "mutation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_survivor_in_the_ledger_has_a_reason_and_the_counts_add_up():
    m = _bench()
    text = m.LEDGER.read_text()
    groups = re.findall(r"^## (\w+): (\d+) mutants, (\d+) killed, (\d+) survived, (\d+) reached by no test", text,
                        re.M)
    # every default group is in the ledger, sections in the GROUPS order (a group joins DEFAULT_GROUPS
    # once its full run is written there)
    assert [g[0] for g in groups] == [g for g in m.GROUPS if g in {x[0] for x in groups}]
    assert set(m.DEFAULT_GROUPS) <= {g[0] for g in groups}
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    entries = m._read_ledger(m.LEDGER)
    assert entries and all(reason != m.UNEXAMINED for _, reason in entries.values())
    assert not re.search(rf"^### {m.UNEXAMINED}", text, re.M)
    for (name, total, killed, survived, unreached), section in zip(groups, sections):
        listed = re.findall(r"^- `([^`]+)` \[([\w ]+)\]: ", section, re.M)
        assert len(listed) == int(survived) + int(unreached), name
        assert sum(s == "survived" for _, s in listed) == int(survived), name
        assert int(killed) + int(survived) + int(unreached) <= int(total), name
        modules = [p.replace("/", ".")[:-3] for p in m.GROUPS[name]["modules"]]
        assert all(any(k.startswith(mod + ".") for mod in modules) for k, _ in listed), name
        for reason in re.findall(r"^### (.+) \(\d+\)$", section, re.M):
            assert len(reason) > 20, (name, reason)  # a reason, not a tag


def test_the_ledger_keeps_reasons_by_name_and_change(tmp_path):
    m = _bench()
    rows = {"core": {"pkg.mod.x_f__mutmut_1": ("survived", "a => b", "equivalent: because of this and that"),
                     "pkg.mod.x_f__mutmut_2": ("no tests", "c => d", m.UNEXAMINED)}}
    path = tmp_path / "ledger.md"
    figures = {"core": {"counts": {"killed": 5, "survived": 1, "no tests": 1}, "tests": "test/x.py"}}
    assert m._write_ledger(path, rows, figures) == 1  # one unexamined
    back = m._read_ledger(path)
    assert back == {"pkg.mod.x_f__mutmut_1": ("a => b", "equivalent: because of this and that"),
                    "pkg.mod.x_f__mutmut_2": ("c => d", m.UNEXAMINED)}
    assert "## core: 7 mutants, 5 killed, 1 survived, 1 reached by no test (test/x.py)" in path.read_text()
    assert m._change("--- a\n+++ b\n@@ -1 +1 @@\n-    x = 1 | 2\n+    x = 1 & 2\n") == "x = 1 \\| 2 => x = 1 & 2"


def test_rewriting_one_group_keeps_the_other_groups_sections_as_they_were(tmp_path):
    """``--ledger --only G`` rewrites G's section only: the sections of groups whose scratch copies are gone
    (their results.json with them) stay byte for byte, in the GROUPS order."""
    m = _bench()
    path = tmp_path / "ledger.md"
    first, second = list(m.GROUPS)[:2]
    rows = {first: {"pkg.mod.x_f__mutmut_1": ("survived", "a => b", "equivalent: the first group's own reason")},
            second: {"pkg.mod.x_g__mutmut_3": ("survived", "c => d", "equivalent: the second group's reason")}}
    figures = {g: {"counts": {"killed": 4, "survived": 1}, "tests": "test/x.py"} for g in rows}
    m._write_ledger(path, rows, figures)
    before = m._ledger_sections(path)
    assert list(before) == [first, second] and "the first group's own reason" in before[first]
    # the second group re-run: a new survivor, the old one killed; the first group is not in this rewrite
    new_rows = {second: {"pkg.mod.x_g__mutmut_9": ("survived", "e => f", m.UNEXAMINED)}}
    keep = {g: t for g, t in before.items() if g not in new_rows}
    assert m._write_ledger(path, new_rows, {second: {"counts": {"killed": 5, "survived": 1}, "tests": "t"}},
                           keep, [first, second]) == 1
    after = m._ledger_sections(path)
    assert list(after) == [first, second] and after[first] == before[first]
    assert "x_g__mutmut_9" in after[second] and "x_g__mutmut_3" not in after[second]


def test_select_is_refused_without_recheck(capsys):
    m = _bench()
    with pytest.raises(SystemExit) as exc:
        m.main(["--select", "vid2sid_ros.core.*"])
    assert exc.value.code == 2 and "--select: only with --recheck" in capsys.readouterr().err


def test_a_failed_recheck_keeps_the_full_runs_results(tmp_path, monkeypatch, capsys, mutmut_stand_in):
    """A recheck whose mutmut run fails (a failing test: no stats) rebuilds the group's scratch copy;
    the full run's results.json must survive it, else the group needs a full re-run. Was: deleted."""
    m = _bench()
    name = "core_data"
    work = tmp_path / name
    work.mkdir()
    prev = {"group": name, "wall_s": 1.0, "full_run_wall_s": 1.0, "module_sha256": m._module_hashes(m.GROUPS[name]),
            "status": {"vid2sid_ros.core.rig.x_nothing__mutmut_1": "survived",
                       "vid2sid_ros.core.rig.x_nothing__mutmut_2": "killed"}}
    (work / "results.json").write_text(m.json.dumps(prev))
    calls = []

    def failing_run(gname, group, gwork, mutmut, max_children, names=None):
        calls.append(names)
        m.shutil.rmtree(gwork)  # as _run_group does before copying the tree
        gwork.mkdir()
        return {"error": "mutmut run failed (exit 1): failed to collect stats"}

    monkeypatch.setattr(m, "_run_group", failing_run)
    mutmut_stand_in(m)
    assert m.main(["--workdir", str(tmp_path), "--only", name, "--recheck"]) == 1
    assert calls == [["vid2sid_ros.core.rig.x_nothing__mutmut_1"]]
    assert m.json.loads((work / "results.json").read_text()) == prev
    assert "failed to collect stats" in capsys.readouterr().err


def test_reasons_files_are_read_strictly(tmp_path):
    """``--ledger --reasons TSV``: one reason a mutant, a real sentence, and one line errors naming the line."""
    m = _bench()
    good = tmp_path / "a.tsv"
    good.write_text("# cl1\n\npkg.mod.x_f__mutmut_1\tequivalent: the guard is never False here\n")
    assert m._read_reasons([good]) == {"pkg.mod.x_f__mutmut_1": "equivalent: the guard is never False here"}
    for text, msg in (("pkg.mod.x_f__mutmut_2 equivalent without a tab\n", ":1: expected 'mutant_name<TAB>reason'"),
                      ("pkg.mod.x_f__mutmut_2\tminor\n", ":1: the reason for pkg.mod.x_f__mutmut_2 is too short"),
                      ("pkg.mod.x_f__mutmut_1\tanother reason that is long enough\n", ":1: pkg.mod.x_f__mutmut_1 "
                                                                                       "already has another reason")):
        bad = tmp_path / "b.tsv"
        bad.write_text(text)
        with pytest.raises(ValueError, match=re.escape(str(bad) + msg)):
            m._read_reasons([good, bad])
    with pytest.raises(SystemExit) as exc:
        m.main(["--reasons", str(good)])
    assert exc.value.code == 2


def test_the_module_hash_is_of_the_source_the_mutants_were_made_from(tmp_path, monkeypatch, capsys,
                                                                      mutmut_stand_in):
    """Was: results.json's module_sha256 was hashed from the checkout when the run ENDED, so a run of the
    old module (the checkout changed during its half hour) passed --recheck against the new one."""
    import hashlib
    import subprocess

    m = _bench()
    name = "core_data"
    group = m.GROUPS[name]

    def copy_old(dst):  # the checkout as it was when the run started
        for mod in group["modules"]:
            (dst / mod).parent.mkdir(parents=True, exist_ok=True)
            (dst / mod).write_text("# the old module\n")

    monkeypatch.setattr(m, "_copy_tree", copy_old)
    monkeypatch.setattr(m.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "", ""))
    r = m._run_group(name, group, tmp_path / name, Path("mutmut"), 1)
    old = hashlib.sha256(b"# the old module\n").hexdigest()
    assert r["module_sha256"] == {mod: old for mod in group["modules"]} != m._module_hashes(group)
    # a recheck whose scratch copy is not the module of the full run is refused, the full run's results kept
    prev = {"group": name, "wall_s": 1.0, "module_sha256": m._module_hashes(group),
            "status": {"vid2sid_ros.core.rig.x_nothing__mutmut_1": "survived"}}
    (tmp_path / name / "results.json").write_text(m.json.dumps(prev))
    monkeypatch.setattr(m, "_run_group", lambda *a, **k: {"status": {}, "wall_s": 1.0,
                                                          "module_sha256": {mod: old for mod in group["modules"]}})
    mutmut_stand_in(m)
    assert m.main(["--workdir", str(tmp_path), "--only", name, "--recheck"]) == 2
    assert "changed while the recheck ran" in capsys.readouterr().err
    assert m.json.loads((tmp_path / name / "results.json").read_text()) == prev


def test_the_development_page_table_carries_the_ledgers_counts():
    """The mutation table of docs/development.md says what the ledger holds: per group its mutants
    and the mutants left alive, and their totals."""
    m = _bench()
    ledger = {g: (int(total), int(surv) + int(unreached)) for g, total, _, surv, unreached in re.findall(
        r"^## (\w+): (\d+) mutants, (\d+) killed, (\d+) survived, (\d+) reached by no test", m.LEDGER.read_text(), re.M)}
    page = (ROOT / "docs" / "development.md").read_text()
    head = "| group (tests) | mutants | survived, first full run | left alive after the last full run"
    lines = page[page.index(head):].splitlines()[2:]
    rows = lines[:next(i for i, ln in enumerate(lines) if not ln.startswith("|"))]
    table = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        table[re.match(r"\w+", cells[0]).group(0)] = (int(cells[1]), int(cells[2].split()[0]), int(cells[3]))
    assert set(table) == set(ledger) | {"all"} and set(ledger) == set(m.GROUPS)
    for g, (total, left) in ledger.items():
        mutants, first, alive = table[g]
        assert (mutants, alive) == (total, left), g
        assert alive <= first, g
    assert table["all"] == tuple(sum(v[i] for g, v in table.items() if g != "all") for i in range(3))
