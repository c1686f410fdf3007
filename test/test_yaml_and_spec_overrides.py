"""YAML read strictly everywhere; ``parameters:`` overrides honoured or refused (issue 12 items 8-9).

- a key given twice in any YAML the package reads is refused with file and line (PyYAML's
  ``safe_load`` keeps the last value silently);
- a calibrate config's ``parameters:`` spec whose ``target`` differs from the rig's is
  either written by the twin (MuJoCo twins, ratios included) or refused in one line,
  never silently calibrated against the old targets; ``result.yaml`` always loads back.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vid2sid_ros.rigs import RigConfigError, load_rig
from vid2sid_ros.rigs.loader import honour_targets
from vid2sid_ros.core.parameters import ParameterSpecError, load_parameter_set
from vid2sid_ros.core.yamlio import YAMLInputError, load_yaml, loads_yaml
from vid2sid_ros.cli import main
from vid2sid_ros.sim.toy import make_rig

REPO = Path(__file__).resolve().parents[1]
TOY = "toy"


def test_duplicate_key_names_file_and_both_lines(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("a: 1\nb:\n  c: 2\n  d: 3\n  c: 4\n")
    with pytest.raises(YAMLInputError) as ei:
        load_yaml(p)
    assert str(ei.value) == f"{p}:5:3: duplicate key 'c' (first given at line 3); give each key once"


def test_strict_loader_keeps_ordinary_yaml_and_merge_keys():
    assert loads_yaml("") is None
    assert loads_yaml("x: [1, 2]\ny: {z: 0.5}\n") == {"x": [1, 2], "y": {"z": 0.5}}
    # a merged key may be overridden (YAML merge spec): not a duplicate
    doc = loads_yaml("base: &b {k: 1, c: 2}\nuse:\n  <<: *b\n  k: 3\n")
    assert doc["use"] == {"k": 3, "c": 2}
    # the same key spelt twice at one level, with the same value, is still refused
    with pytest.raises(YAMLInputError, match=r"<string>:2:1: duplicate key 'k' \(first given at line 1\)"):
        loads_yaml("k: 1\nk: 1\n")
    with pytest.raises(YAMLInputError, match=r"^src:\d+:\d+: not valid YAML: "):
        loads_yaml("a: [1, 2\n", source="src")


def test_every_package_yaml_read_goes_through_the_strict_loader():
    """No bare yaml.safe_load / yaml.load left in the package (the strict loader is the one way)."""
    offenders = []
    for py in (REPO / "vid2sid_ros").rglob("*.py"):
        if py.name == "yamlio.py":
            continue
        for i, line in enumerate(py.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\byaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all)\(", line):
                offenders.append(f"{py.relative_to(REPO)}:{i}")
    assert offenders == []


def test_duplicate_key_in_calibrate_config_and_in_parameter_spec(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"rig: {TOY}\ncalibration: {{iterations: 1}}\nproposer: reasoner\nproposer: random\n")
    with pytest.raises(RigConfigError, match=re.escape(f"{cfg}:4:1: duplicate key 'proposer' (first given at line 3)")):
        load_rig(cfg)
    rc = main(["calibrate", str(cfg), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "duplicate key 'proposer'" in err
    assert not (tmp_path / "run").exists()

    spec = tmp_path / "spec.yaml"
    d = make_rig().parameters.to_dict()
    text = yaml.safe_dump(d, sort_keys=False).replace("  nominal: 0.4\n", "  nominal: 0.4\n  nominal: 1.5\n", 1)
    assert text.count("nominal: 1.5") == 1
    spec.write_text(text)
    with pytest.raises(ParameterSpecError, match=re.escape(f"{spec}:") + r"\d+:3: duplicate key 'nominal'"):
        load_parameter_set(spec)


def test_duplicate_key_in_a_bringup_override_is_one_line():
    r = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "bringup", "finger", "-p",
                        "calibrator_node.proposer_options={model: a, model: b}", "--duration", "0.1"],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "duplicate key 'model'" in r.stderr and "Traceback" not in r.stderr


def _spec_file(tmp_path: Path, rig, **changes) -> Path:
    d = rig.parameters.to_dict()
    for entry in d["parameters"]:
        entry.update(changes.get(entry["name"], {}))
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(d, sort_keys=False))
    return p


def test_a_target_the_toy_twin_cannot_write_is_refused(tmp_path, capsys):
    spec = _spec_file(tmp_path, make_rig(), stiffness={"target": "k*2"})
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"rig": TOY, "parameters": "spec.yaml", "calibration": {"iterations": 1}}))
    rc = main(["calibrate", str(cfg), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    # was: exit 0, the twin kept writing 'k' while result.yaml claimed 'k*2'
    assert rc == 2 and err.count("\n") == 1
    assert f"{cfg}:parameters: {spec}: parameter 'stiffness' has target 'k*2', the rig's is 'k'" in err
    assert "cannot re-target" in err and not (tmp_path / "run").exists()


def test_a_mujoco_twin_writes_the_overriding_target_with_its_ratio(tmp_path):
    from vid2sid_ros.sim.registry import make_rig as make_registered

    rig = make_registered("finger")
    spec = load_parameter_set(_spec_file(tmp_path, rig, joint_damping={"target": "dof_damping[0]*2, dof_damping[1]"}))
    honour_targets(rig, spec, "cfg.yaml")
    twin = rig.make_twin()
    twin.set_parameters({"joint_damping": 0.01})
    assert list(twin.model.dof_damping[:3]) == pytest.approx([0.02, 0.01, twin.model.dof_damping[2]])
    assert twin.model.dof_damping[2] != pytest.approx(0.01)  # no longer written
    twin.export_model(tmp_path / "calibrated.xml")  # the model file holds what the spec says
    import mujoco

    exported = mujoco.MjModel.from_xml_path(str(tmp_path / "calibrated.xml"))
    assert exported.dof_damping[0] == pytest.approx(0.02) and exported.dof_damping[1] == pytest.approx(0.01)
    bad = load_parameter_set(_spec_file(tmp_path, rig, joint_damping={"target": "dof_dampin[0]"}))
    with pytest.raises(RigConfigError, match=r"cfg.yaml:parameters: .*spec.yaml: parameter 'joint_damping' has target "
                                             r"'dof_dampin\[0\]'.*did you mean dof_damping"):
        honour_targets(make_registered("finger"), bad, "cfg.yaml")


def test_result_yaml_loads_back_with_spec_extras_and_after_a_run_that_proposed_nothing(tmp_path, capsys):
    rig = make_rig()
    d = rig.parameters.to_dict()
    d["notes"] = {"author": "lab", "date": "2026-11-30"}  # top-level extras are kept, as the loader allows
    d["parameters"][1]["lower"] = 0.003  # a bounds-only change needs no re-targeting
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(d, sort_keys=False))
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"rig": TOY, "parameters": "spec.yaml", "proposer": "random", "calibration": {
        "iterations": 2, "rollout_budget": None, "identifiability": False, "final_identifiability": False}}))
    assert main(["calibrate", str(cfg), "--out", str(tmp_path / "run"), "--quiet", "--no-report"]) == 0
    res = load_parameter_set(tmp_path / "run" / "result.yaml")
    doc = load_yaml(tmp_path / "run" / "result.yaml")
    assert res["damping"].lower == 0.003 and res.extra["notes"] == d["notes"]
    assert doc["calibration"]["status"] == "ok"
    cal = yaml.safe_load((tmp_path / "run" / "result.json").read_text())
    # result.yaml holds the physics; result.json's values also hold the measurement nuisances (latency)
    assert {n: res[n].nominal for n in res.names} == pytest.approx(
        {n: v for n, v in cal["values"].items() if n not in doc.get("nuisance", {})})
    assert "latency" in doc["nuisance"] and "latency" not in res.names
