"""The VLM calibration prompt: built from data, switches, reply schema (no network)."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from pathlib import Path

import cv2
import numpy as np
import pytest

from vid2sid_ros.calibration.objective import TrialObjective
from vid2sid_ros.calibration.proposers.proposer import IterationRecord, ProposalContext
from vid2sid_ros.calibration.proposers.vlm.prompt import (
    PromptOptions,
    build_prompt,
    reply_model,
    sample_key_frames,
    trajectory_plot_png,
)
from vid2sid_ros.sim.toy import make_rig

TRUTH = {"stiffness": 0.8, "damping": 0.05, "gain": 0.5}


def _write_mp4(path: Path, frames: np.ndarray, fps: float = 30.0) -> Path:
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (frames.shape[2], frames.shape[1]))
    for f in frames:
        w.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    w.release()
    return path


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """Toy rig, 'real' trajectories at TRUTH, videos of real and nominal sim."""
    d = tmp_path_factory.mktemp("prompt")
    rig = make_rig()
    twin = rig.make_twin()
    twin.set_parameters(TRUTH)
    real_res = [twin.rollout(e, render=(i == 0)) for i, e in enumerate(rig.excitations["train"])]
    real = [r.trajectory for r in real_res]
    obj = TrialObjective(rig.make_twin(), rig.excitations["train"], real)
    ev, sim_frames = obj.evaluate(rig.parameters.nominal(), render_first=True)
    videos = {"real": _write_mp4(d / "real.mp4", real_res[0].frames), "sim": _write_mp4(d / "sim.mp4", sim_frames)}
    return rig, real, ev, videos


def _context(toy, *, history=(), videos=None, iteration=0):
    rig, real, ev, vids = toy
    return ProposalContext(parameters=rig.parameters, current=dict(ev.values), current_eval=ev, real=real,
                           history=list(history), iteration=iteration, iterations_remaining=5,
                           videos=vids if videos is None else videos,
                           rig={"name": rig.name, "description": rig.description, "camera": "front, 320x240"})


def _record(i, values, err, rationale):
    return IterationRecord(i, "gemini", dict(values), err, {}, rationale, 0.6, 2 * (i + 1), 0.1)


def test_prompt_text_holds_parameters_bounds_metrics_history_and_rules(toy):
    rig, real, ev, _ = toy
    nominal = rig.parameters.nominal()
    hist = [_record(0, nominal, 20.0, "stiffness looks too low"),
            _record(1, {**nominal, "stiffness": 0.9}, 7.5, "raised stiffness; overshoot now matches"),
            _record(2, {**nominal, "stiffness": 1.2}, 11.0, "went too far")]
    p = build_prompt(_context(toy, history=hist, iteration=3), PromptOptions(video=False, overlay_plot=False))
    text = p.render_text()
    # parameter table: name, unit, bounds, current value of every free parameter
    for s in rig.parameters.free:
        row = next(line for line in text.splitlines() if line.startswith(f"| {s.name} |"))
        assert s.unit in row and f"{s.lower:.6g}" in row and f"{s.upper:.6g}" in row
        assert f"{ev.values[s.name]:.6g}" in row and s.meaning in row
    # frozen parameters are context only
    assert "Fixed parameters" in text and "- inertia = 0.01 kg*m^2" in text
    assert p.free_names == ["stiffness", "damping", "gain"]
    # metrics, overall and per keypoint, per trial
    assert f"overall trajectory MAE: {ev.error_px:.6g} px" in text
    for k, v in ev.per_keypoint_px.items():
        assert f"{k} {v:.6g}" in text
    for exc in rig.excitations["train"]:
        assert f"trial '{exc.name}': MAE " in text
    # history with rationales; the best iteration is marked
    assert "raised stiffness; overshoot now matches" in text
    best_line = next(line for line in text.splitlines() if "(BEST so far)" in line)
    assert "iteration 2" in best_line and "MAE 7.5 px" in best_line
    # rules: bounds and evidence
    assert "Stay inside [lower, upper]" in text and "Change only what the evidence" in text
    assert "none (text-only mode)" in text
    assert p.intro().startswith("You are calibrating") and "Iteration 4" in p.intro()


def test_history_limit_keeps_best_entry(toy):
    rig = toy[0]
    nominal = rig.parameters.nominal()
    hist = [_record(i, nominal, e, f"r{i}") for i, e in enumerate([30.0, 3.0, 9.0, 8.0, 7.0])]
    p = build_prompt(_context(toy, history=hist), PromptOptions(video=False, overlay_plot=False, history_limit=2))
    assert [h.iteration for h in p.history] == [1, 4]
    assert p.history_omitted == 3 and [h.best for h in p.history] == [True, False]
    assert "(3 older iteration(s) omitted)" in p.render_text()


def test_video_switch_and_media(toy):
    on = build_prompt(_context(toy), PromptOptions(video=True, key_frames=3, overlay_plot=True))
    kinds = [(m.kind, m.role) for m in on.media]
    assert kinds[:2] == [("video", "real"), ("video", "sim")]
    assert kinds.count(("image", "key_frame")) == 3 and ("image", "trajectory_plot") in kinds
    assert on.media[0].mime_type == "video/mp4" and on.media[0].size_bytes > 1000
    frame = next(m for m in on.media if m.role == "key_frame")
    img = cv2.imdecode(np.frombuffer(frame.data, np.uint8), cv2.IMREAD_COLOR)
    assert img.shape == (240, 640, 3)  # real | sim side by side
    plot = next(m for m in on.media if m.role == "trajectory_plot")
    assert plot.data[:8] == b"\x89PNG\r\n\x1a\n"

    off = build_prompt(_context(toy), PromptOptions(video=False, key_frames=3, overlay_plot=False))
    assert off.media == () and off.media_notes == ()

    missing = build_prompt(_context(toy, videos={"real": toy[3]["real"], "sim": Path("/nonexistent/sim.mp4")}),
                           PromptOptions(video=True, overlay_plot=False))
    assert [m.role for m in missing.media] == ["real"]
    assert missing.media_notes == ("sim video: file not found (sim.mp4)",)


def test_reply_schema_follows_switches(toy):
    assert list(reply_model(chain_of_thought=True, active_learning=False).model_fields) == [
        "analysis", "parameters", "rationale", "confidence", "diagnosis"]
    assert list(reply_model(chain_of_thought=False, active_learning=True).model_fields) == [
        "parameters", "rationale", "confidence", "diagnosis", "excitation_change"]
    schema = reply_model(chain_of_thought=False, active_learning=False).model_json_schema()
    assert schema["properties"]["confidence"]["minimum"] == 0.0 and schema["properties"]["confidence"]["maximum"] == 1.0
    assert schema["properties"]["parameters"]["type"] == "array"  # a list of {name, value}, not a dict
    # the prompt's reply section is rendered from the same model
    p = build_prompt(_context(toy), PromptOptions(video=False, overlay_plot=False, chain_of_thought=False,
                                                  active_learning=True))
    reply = next(s.body for s in p.sections() if s.title == "Reply format")
    assert "- excitation_change (optional)" in reply and "analysis" not in reply
    assert "amplitude_gain in [0.25, 4]" in p.render_text()


def test_key_frames_and_plot_helpers(toy, tmp_path):
    frames = sample_key_frames(toy[3]["real"], 4, max_side=160)
    assert len(frames) == 4 and frames[0][1].shape == (120, 160, 3)
    assert frames[0][0] == 0.0 and abs(frames[-1][0] - 89 / 30) < 1e-6
    with pytest.raises(ValueError, match="cannot open video"):
        sample_key_frames(tmp_path / "none.mp4", 2)
    png = trajectory_plot_png(toy[1][0], toy[2].sim[0], dpi=40)
    decoded = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape[1] == 320  # 8 in x 40 dpi
