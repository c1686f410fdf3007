"""From a clip to a calibration with no hand-written file: `vid2sid track --excitation` -> `vid2sid calibrate --real`.

The clips are rendered here by the finger twin at hidden parameters (the stand-in robot),
encoded as MPEG-4 and tracked back by the command line; the calibration must get closer
to the hidden parameters than the start.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from vid2sid_ros.cli import main
from vid2sid_ros.core.parameters import relative_parameter_error
from vid2sid_ros.io.video import write_video


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    from vid2sid_ros.rigs import load_rig

    rig = load_rig("finger")
    twin = rig.make_twin()
    p = rig.parameters
    truth = p.complete({n: p[n].from_unit(0.7) for n in p.free_names})
    twin.set_parameters(truth)
    d = tmp_path_factory.mktemp("clips")
    out = {}
    for exc in (*rig.excitations["train"], rig.excitations["holdout"][0]):
        frames = twin.rollout(exc, render=True).frames
        out[exc.name] = write_video(d / f"{exc.name}.mp4", frames, exc.rate)
    return rig, truth, out


def test_clip_track_calibrate(clips, tmp_path, capsys):
    rig, truth, videos = clips
    *train, hold = list(videos)
    trial = tmp_path / "trial.json"
    for i, name in enumerate(train):
        assert main(["track", str(videos[name]), "--rig", "finger", "--excitation", name, "--out", str(trial)]
                    + (["--append"] if i else [])) == 0
    assert main(["track", str(videos[hold]), "--rig", "finger", "--excitation", hold, "--split", "holdout",
                 "--append", "--out", str(trial)]) == 0
    doc = json.loads(trial.read_text())
    assert [e["excitation"]["name"] for e in doc["train"]] == train
    assert [e["excitation"]["name"] for e in doc["holdout"]] == [hold]
    capsys.readouterr()
    out = tmp_path / "run"
    assert main(["calibrate", "--rig", "finger", "--real", str(trial), "--iterations", "6", "--budget", "40",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "holdout MAE" in text and (out / "report.html").is_file()
    res = json.loads((out / "result.json").read_text())
    free = rig.parameters.free_names
    start = relative_parameter_error(rig.parameters.nominal(), truth, free)
    got = relative_parameter_error(res["values"], truth, free)
    assert np.mean(list(got.values())) < 0.5 * np.mean(list(start.values())), (got, start)
    assert res["error_px"] < 1.0 and res["holdout_mae_px"] < 1.5


def test_track_bad_excitation_and_bare_trajectory_are_one_line(clips, tmp_path, capsys):
    _, _, videos = clips
    v = next(iter(videos.values()))
    assert main(["track", str(v), "--rig", "finger", "--excitation", "nope", "--out", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown excitation 'nope'" in err and "train_step" in err
    assert not (tmp_path / "t.json").exists()
    bare = tmp_path / "bare.json"
    assert main(["track", str(v), "--rig", "finger", "--out", str(bare)]) == 0
    assert "--excitation NAME" in capsys.readouterr().err  # says how to make it calibratable
    assert main(["calibrate", "--rig", "finger", "--real", str(bare), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "single trajectory, not a real trial" in err
