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
    assert res["training_mae"] < 1.0 and res["holdout_mae"] < 1.5


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


USER_MJCF = """<mujoco model="slider">
  <worldbody>
    <body name="cart"><joint name="slide" type="slide" axis="1 0 0" damping="1"/>
      <geom type="box" size="0.05 0.05 0.05" mass="1"/><site name="mark" pos="0 -0.06 0"/></body>
  </worldbody>
  <actuator><motor name="push" joint="slide" gear="2"/></actuator>
</mujoco>
"""

#: the slider rig's model, parameter, keypoint, camera and red-marker tracker lines (excitations and trials follow)
SLIDER_RIG_HEAD = (
    "model: slider.xml\n"
    "parameters: {damping: {unit: N*s/m, lower: 0.1, upper: 5, nominal: 1, target: 'dof_damping[slide]'}}\n"
    "keypoints: {cart: mark}\n"
    "camera: {width: 160, height: 120, fovy: 50, pose: {position: [0, -2, 0], look_at: [0, 0, 0]}}\n"
    "tracker: {markers: [{name: cart, hsv_lower: [170, 100, 80], hsv_upper: [10, 255, 255]}]}\n"
)


def _red_disc_clip(path, n: int):
    """A red disc moving right 3 px a frame on a dark 160 x 120 background, ``n`` frames at 20 Hz."""
    import cv2

    frames = []
    for k in range(n):
        img = np.full((120, 160, 3), 40, np.uint8)
        cv2.circle(img, (40 + 3 * k, 60), 6, (255, 0, 0), -1)
        frames.append(img)
    return write_video(path, frames, 20.0)


def test_track_pairs_a_clip_with_a_named_excitation_of_a_user_rig(tmp_path, capsys):
    """`track --excitation NAME` takes the config's own named profiles (not only the per-trial-part sets
    the loader derives from trials, `<trial>_train`/`<trial>_holdout`), and pairs the whole profile."""
    (tmp_path / "slider.xml").write_text(USER_MJCF)
    (tmp_path / "rig.yaml").write_text(
        SLIDER_RIG_HEAD +
        "excitations: {push: {kind: sine, amplitude: 0.5, frequency: 1, duration: 1, rate: 20}}\n"
        "trials: [{name: run1, source: {sim2sim: {}}, excitation: push, split: {train_fraction: 0.5}}]\n")
    clip = _red_disc_clip(tmp_path / "clip.mp4", 20)
    assert main(["track", str(clip), "--rig", str(tmp_path / "rig.yaml"), "--out", str(tmp_path / "bare.json")]) == 0
    assert "this rig's excitations: push; trial parts: run1_train (push)" in capsys.readouterr().err  # profile first
    out = tmp_path / "trial.json"
    assert main(["track", str(clip), "--rig", str(tmp_path / "rig.yaml"), "--excitation", "push",
                 "--out", str(out)]) == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    (entry,) = doc["train"]
    assert entry["excitation"]["name"] == "push"
    assert np.asarray(entry["excitation"]["values"]).shape[0] == 20  # the whole profile, not run1_train's 10 rows


def test_track_hint_lists_a_free_decay_trial_as_a_trial_not_an_excitation(tmp_path, capsys):
    """`track decay.mp4 --rig my_rig.yaml` said `--excitation NAME (this rig's: chirp, multisine, decay)` on the
    /work/nu double pendulum: `decay` is a trial with `excitation: none`. Excitations and trial parts are listed
    apart, in the hint and in the unknown-excitation error."""
    (tmp_path / "slider.xml").write_text(USER_MJCF)
    clip = _red_disc_clip(tmp_path / "decay.mp4", 12)
    (tmp_path / "rig.yaml").write_text(
        SLIDER_RIG_HEAD +
        "excitations: {push: {kind: sine, amplitude: 0.5, frequency: 1, duration: 1, rate: 20},\n"
        "              pull: {kind: sine, amplitude: 0.2, frequency: 2, duration: 1, rate: 20}}\n"
        "trials: [{name: push, source: {sim2sim: {}}, excitation: push},\n"
        "         {name: decay, source: {video: decay.mp4}, excitation: none, split: holdout}]\n")
    rig = str(tmp_path / "rig.yaml")
    overlay = tmp_path / "tracked.mp4"
    assert main(["track", str(clip), "--rig", rig, "--out", str(tmp_path / "bare.json"),
                 "--overlay", str(overlay)]) == 0
    err = capsys.readouterr().err
    assert "(this rig's excitations: push, pull; trial parts: decay (no command: free decay))" in err, err
    # the clip is trial 'decay' of the config: calibrate pairs it, --excitation is only for a real-trial file (was:
    # "to calibrate from this clip, name the command it was filmed under: --excitation NAME")
    assert "this clip is trial 'decay'" in err and "nothing more to name" in err, err
    assert "name the command it was filmed under" not in err and "cannot tell" not in err, err
    assert f"wrote the overlay video {overlay}" in err and overlay.stat().st_size > 0, err
    assert main(["track", str(clip), "--rig", rig, "--excitation", "nope", "--out", str(tmp_path / "t.json")]) == 2
    assert "valid: this rig's excitations: push, pull; trial parts: decay (no command" in capsys.readouterr().err
