"""Adversarial input: `vid2sid calibrate` configs, run directories, resume and interruption.

Every bad input must end in ONE line on stderr naming the file/field and what was
expected (exit code 2, no traceback) and must lose nothing recorded so far.
"""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", "77")

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial  # noqa: E402
from vid2sid_ros.calibration.loop import CalibrationConfig, CalibrationError, run_calibration  # noqa: E402
from vid2sid_ros.calibration.proposers import make_proposer  # noqa: E402
from vid2sid_ros.cli import main  # noqa: E402
from vid2sid_ros.sim.toy import make_rig  # noqa: E402

TOY = "toy"


def _cli(capsys, *argv):
    rc = main(["calibrate", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("yaml_text, msg", [
    (b"\x00\xff\xfegarbage", "cfg.yaml: not a UTF-8 text YAML file (invalid start byte at byte 1)"),
    (f"rig: [{TOY}]\n", "cfg.yaml:rig: expected a string, got ['toy'] (list)"),
    (f"rig: {TOY}\nproposer: [random]\n", "cfg.yaml:proposer: expected a string, got ['random'] (list)"),
    (f"rig: {TOY}\nreal: {{sim2sim: {{seed: x}}}}\n", "cfg.yaml: real.sim2sim.seed must be an integer, got 'x'"),
    (f"rig: {TOY}\nreal: {{sim2sim: {{truth_range: 5}}}}\n",
     "cfg.yaml: real.sim2sim.truth_range must be [low, high] with 0 <= low < high <= 1"),
    (f"rig: {TOY}\nreal: {{sim2sim: {{truth: {{damping: abc}}}}}}\n",
     "cfg.yaml: real.sim2sim.truth.damping must be a number in [0.002, 0.2] N*m*s/rad, got 'abc'"),
    (f"rig: {TOY}\ncalibration: {{seed: abc}}\n", "cfg.yaml:calibration.seed: expected an integer, got 'abc' (string)"),
    (f"rig: {TOY}\ncalibration: {{start: {{damping: abc}}}}\n",
     "cfg.yaml:calibration.start.damping: expected a number (start value), got 'abc'"),
    (f"rig: {TOY}\ncalibration: {{start: {{foo: 1}}}}\n",
     "cfg.yaml:calibration.start.foo: unknown parameter; valid: stiffness, damping"),
    (f"rig: {TOY}\ncalibration: {{target_error_px: -1}}\n",
     "cfg.yaml: calibration: 'target_error_px' must be a number >= 0 (px) or null, got -1"),
    (f"rig: {TOY}\ncalibration: {{target_error_px: abc}}\n",
     "cfg.yaml:calibration.target_error_px: expected a number or null (measurement unit), got 'abc' (string)"),
    (f"rig: {TOY}\ncalibration: {{identifiability_step: -1}}\n",
     "cfg.yaml: calibration: 'identifiability_step' must be a number in (0, 0.5)"),
    (f"rig: {TOY}\ncalibration: {{identifiability: 'no'}}\n",
     "cfg.yaml:calibration.identifiability: expected true or false, got 'no' (string)"),
    (f"rig: {TOY}\ncalibration: {{video: maybe}}\n",
     "cfg.yaml:calibration.video: expected true or false or null, got 'maybe' (string)"),
    (f"rig: {TOY}\nfree: []\n", "cfg.yaml:free: lists no parameter; name the parameters to calibrate"),
    (f"rig: {TOY}\nfree: [1]\n", "cfg.yaml:free: expected a list of strings, got [1] (list)"),
    (f"rig: {TOY}\nproposer: random\nproposer_options: {{temperature: 3}}\n",
     "cfg.yaml:proposer_options.temperature: unknown option of proposer 'random'; its options: seed, "),
])
def test_bad_config_is_one_clear_line(tmp_path, capsys, yaml_text, msg):
    # were: tracebacks (start, target_error_px, identifiability_step), "unhashable type: 'list'",
    # "invalid literal for int()", "cannot unpack non-iterable int object", a quoted 'no' read as true...
    cfg = tmp_path / "cfg.yaml"
    cfg.write_bytes(yaml_text if isinstance(yaml_text, bytes) else yaml_text.encode())
    rc, _, err = _cli(capsys, str(cfg), "--out", str(tmp_path / "run"), "--quiet")
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert msg in err
    assert not (tmp_path / "run" / "run.json").exists()


def test_parameter_override_must_match_the_rig(tmp_path, capsys):
    spec = tmp_path / "other.yaml"
    spec.write_text("parameters:\n - {name: a, unit: m, lower: 0, upper: 1, nominal: 0.5}\n")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"rig: {TOY}\nparameters: other.yaml\n")
    rc, _, err = _cli(capsys, str(cfg), "--out", str(tmp_path / "run"))
    # was: "unknown parameter(s) ['a']; valid names: ..." from deep in the twin, naming no file
    assert rc == 2 and f"cfg.yaml:parameters: {spec} does not match rig 'toy'; unknown parameter(s) ['a']; " \
                       "missing parameter(s) ['stiffness'" in err


def test_out_pointing_at_a_file(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("keep me")
    for out in (f, f / "sub"):  # was: FileExistsError / NotADirectoryError tracebacks
        rc, _, err = _cli(capsys, "--rig", TOY, "--proposer", "random", "--iterations", "1", "--out", str(out))
        assert rc == 2 and "Traceback" not in err and f"cannot use {out} as the run directory (--out): " in err
    assert "it is a file, expected a run directory" in err or "Not a directory" in err
    assert f.read_text() == "keep me"


# -- resume ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def toy_trial():
    rig = make_rig()
    truth = rig.parameters.complete({"stiffness": 0.8, "damping": 0.05, "gain": 0.5})
    return rig, make_sim2sim_trial(rig, truth, seed=3, noise="none")


def _cal(toy_trial, run_dir, *, resume=False, proposer=None, iterations=6):
    rig, real = toy_trial
    cfg = CalibrationConfig(iterations=iterations, rollout_budget=None, seed=1, identifiability=False,
                            final_identifiability=False, resume=resume)
    return run_calibration(rig, real, proposer or make_proposer("random"), cfg, run_dir)


def test_corrupt_middle_line_is_refused_and_nothing_truncated(tmp_path, toy_trial):
    _cal(toy_trial, tmp_path / "r")
    jl = tmp_path / "r" / "iterations.jsonl"
    lines = jl.read_bytes().split(b"\n")
    lines[1] = b'{"iteration": 2, garbage'
    jl.write_bytes(b"\n".join(lines))
    before = jl.read_bytes()
    # was: silently truncated the file at line 2 (iterations 2..6 lost) and re-ran them
    with pytest.raises(CalibrationError, match=r"iterations.jsonl line 2 is corrupt \(not JSON\) but later lines "
                                               r"follow; .*nothing was changed"):
        _cal(toy_trial, tmp_path / "r", resume=True)
    assert jl.read_bytes() == before


def test_torn_last_line_resumes_to_the_uninterrupted_result(tmp_path, toy_trial):
    full = _cal(toy_trial, tmp_path / "full")
    _cal(toy_trial, tmp_path / "torn")
    jl = tmp_path / "torn" / "iterations.jsonl"
    data = jl.read_bytes()
    cut = data.rstrip(b"\n").rfind(b"\n") + 1
    jl.write_bytes(data[:cut + 40])  # half of the last record, as a kill mid-write leaves it
    res = _cal(toy_trial, tmp_path / "torn", resume=True)
    assert res.values == full.values and res.rollouts == full.rollouts
    assert len(jl.read_text().splitlines()) == 6 and all(json.loads(x) for x in jl.read_text().splitlines())


class _Interrupt:
    """Proposer that is Ctrl-C'd while proposing iteration ``at``."""

    name = "random"

    def __init__(self, at):
        self.inner, self.at = make_proposer("random"), at

    def propose(self, ctx):
        if ctx.iteration == self.at:
            raise KeyboardInterrupt
        return self.inner.propose(ctx)


def test_ctrl_c_keeps_every_completed_iteration_and_resume_finishes_the_same(tmp_path, toy_trial):
    full = _cal(toy_trial, tmp_path / "full")
    with pytest.raises(KeyboardInterrupt):
        _cal(toy_trial, tmp_path / "int", proposer=_Interrupt(4))
    recs = [json.loads(x) for x in (tmp_path / "int" / "iterations.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in recs] == [1, 2, 3]
    res = _cal(toy_trial, tmp_path / "int", resume=True)
    assert res.values == full.values and res.error_px == full.error_px and res.iterations == 6


@pytest.mark.parametrize("content, msg", [
    ('{"x', r"run.json: corrupt run file \(JSONDecodeError"),
    ("[]", r"run.json: not a calibration run file \(expected a JSON object with 'initial'\)"),
])
def test_corrupt_run_json(tmp_path, toy_trial, content, msg):
    _cal(toy_trial, tmp_path / "r", iterations=1)
    (tmp_path / "r" / "run.json").write_text(content)  # was: JSONDecodeError / AttributeError traceback
    with pytest.raises(CalibrationError, match=msg):
        _cal(toy_trial, tmp_path / "r", iterations=1, resume=True)


def test_resume_with_other_settings_says_what_differs_briefly(tmp_path, toy_trial):
    rig, real = toy_trial
    _cal(toy_trial, tmp_path / "r", iterations=1)
    cfg = CalibrationConfig(iterations=1, rollout_budget=None, seed=1, identifiability=False,
                            final_identifiability=False, resume=True)
    with pytest.raises(CalibrationError) as e:
        run_calibration(rig, real, make_proposer("random"), cfg, tmp_path / "r",
                        parameters=rig.parameters.with_frozen(["gain"]))
    # was: both full parameter specs dumped (several kB on one line)
    assert "'parameters' differs from the interrupted run (gain.frozen: False vs True)" in str(e.value)
    assert len(str(e.value)) < 300


def test_calibration_config_types():
    for kw, msg in [({"seed": 1.5}, "'seed' must be an integer"), ({"condition_threshold": 0}, "'condition_threshold'"),
                    ({"resume": "yes"}, "'resume' must be true or false"), ({"start": [1]}, "'start' must map"),
                    ({"iterations": True}, "'iterations' must be an integer >= 0")]:
        with pytest.raises(CalibrationError, match=msg):
            CalibrationConfig(**kw)
    assert CalibrationConfig(target_error_px=0.5, start={"a": 1}).target_error_px == 0.5


def test_read_only_out_dir_fails_before_any_work(tmp_path, capsys, monkeypatch):
    import errno
    from pathlib import Path

    real_write = Path.write_text

    def write_text(self, *a, **kw):  # the tests run as root, so chmod cannot make a directory read-only
        if self.name == ".write_test":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_write(self, *a, **kw)

    monkeypatch.setattr(Path, "write_text", write_text)
    rc, _, err = _cli(capsys, "--rig", TOY, "--proposer", "random", "--out", str(tmp_path / "ro"))
    assert rc == 2 and f"cannot use {tmp_path / 'ro'} as the run directory (--out): Permission denied" in err
    assert not (tmp_path / "ro" / "run.json").exists()


def test_disk_error_mid_run_keeps_completed_iterations(tmp_path, capsys, monkeypatch):
    import errno

    from vid2sid_ros.calibration import loop

    real_append = loop._append_record

    def append(rd, rec):
        if rec.iteration == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_append(rd, rec)

    monkeypatch.setattr(loop, "_append_record", append)
    out = tmp_path / "run"
    rc, _, err = _cli(capsys, "--rig", TOY, "--proposer", "random", "--iterations", "5", "--budget", "none",
                      "--out", str(out), "--quiet")
    # was: an OSError traceback
    assert rc == 2 and "Traceback" not in err and "No space left on device" in err and "--resume continues" in err
    assert f"cannot write to the run directory {out}: No space left on device" in err  # no filename: the directory
    recs = [json.loads(x)["iteration"] for x in (out / "iterations.jsonl").read_text().splitlines()]
    assert recs == [1, 2]


def test_real_trial_json_errors_name_the_file(tmp_path, toy_trial):
    from vid2sid_ros.core.trial import ObservationError, RealTrial

    _, real = toy_trial
    good = tmp_path / "good.json"
    real.save(good)
    d = json.loads(good.read_text())
    cases = {"bin.json": (b"\xff\xfe{}", r"bin.json: not a UTF-8 JSON file \(invalid start byte at byte 0\)"),
             "empty_train.json": (b'{"train": []}', r"empty_train.json: 'train' must hold at least one trajectory")}
    d["train"][0]["trajectory"]["keypoints"][3] = "oops"
    cases["kp.json"] = (json.dumps(d).encode(), r"kp.json: train\[0\]: TrajectoryError: trajectory: 'keypoints' "
                                                r"frame 3 must be a list of \[x, y\] px pairs")
    d = json.loads(good.read_text())
    d["truth"] = {"damping": "x"}
    cases["truth.json"] = (json.dumps(d).encode(), r"truth.json: field 'truth' must map parameter names to numbers")
    for name, (data, msg) in cases.items():  # were: UnicodeDecodeError, "real trial: ...", a numpy
        p = tmp_path / name                  # "inhomogeneous shape" error and a bare float() error
        p.write_bytes(data)
        with pytest.raises(ObservationError, match=msg):
            RealTrial.load(p)
    assert RealTrial.load(good).keypoint_names == real.keypoint_names
