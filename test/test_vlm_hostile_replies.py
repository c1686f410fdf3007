"""Pathological VLM replies are failed replies like any other: re-asked, then the fallback; replies are
capped before parsing, rationales before storing."""

from __future__ import annotations

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers.vlm.common import ReplyError, VLMProposer, parse_reply_json
from vid2sid_ros.calibration.proposers.vlm.prompt import PromptOptions
from vid2sid_ros.rigs import load_rig

import pytest


class Scripted(VLMProposer):
    """A VLM whose service answers each request with the next scripted text (the last one repeats)."""

    name = "scripted"

    def __init__(self, replies, **kw):
        super().__init__(options=PromptOptions(video=False), fallback="reasoner", sleep=lambda s: None, **kw)
        self.replies, self.sent = list(replies), 0

    def _send(self, prompt, turns, usage, events):
        self.sent += 1
        return self.replies[min(self.sent - 1, len(self.replies) - 1)]


def _run(proposer, tmp_path, **cfg):
    rig = load_rig("toy")
    real = make_sim2sim_trial(rig, rig.parameters.nominal(), seed=0, noise="keypoint")
    return run_calibration(rig, real, proposer, CalibrationConfig(iterations=1, rollout_budget=20, **cfg),
                           tmp_path / "run")


def test_deeply_nested_reply_is_reasked_then_the_fallback_proposes(tmp_path):
    p = Scripted(["[" * 100_000])
    res = _run(p, tmp_path)
    rec = res.history[1]
    assert res.status == "ok"
    assert p.sent == 3  # the reply and two re-asks
    assert rec.proposer == "reasoner" and rec.extra["requested_proposer"] == "scripted"
    assert any("nested too deeply" in n for n in rec.notes)


def test_reply_over_the_cap_is_not_parsed():
    with pytest.raises(ReplyError, match="over the limit of 1,000"):
        parse_reply_json('{"parameters": []}' + " " * 2000, max_chars=1000)
    with pytest.raises(ReplyError, match="nested too deeply"):
        parse_reply_json("[" * 100_000)


def test_huge_rationale_is_cut_before_it_is_stored(tmp_path):
    names = load_rig("toy").parameters.free_names
    reply = ('{"parameters": [{"name": "%s", "value": 0.5}], "rationale": "%s", "confidence": 0.5}'
             % (names[0], "why " * 50_000))  # 200 000 characters: under the reply cap, over the rationale cap
    res = _run(Scripted([reply]), tmp_path)
    rec = res.history[1]
    assert rec.proposer == "scripted"
    assert len(rec.rationale) < 21_000 and "[truncated: " in rec.rationale  # the reply, stripped
    assert (tmp_path / "run" / "iterations.jsonl").stat().st_size < 200_000
