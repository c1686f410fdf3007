"""Every registered proposer's recorded rationale begins with one plain sentence per parameter moved,
with the numbers (before → after) and what the evaluation measured; its own text follows as the trace.

The sentences are checked here against the records themselves (values before = the previous
record's ``current_after``), not with the function that writes them."""

from __future__ import annotations

import json
import re

import pytest

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers import PROPOSERS, make_proposer
from vid2sid_ros.calibration.proposers.rationale import ensure_lead, format_value, leads_with_moves
from vid2sid_ros.sim.toy import make_rig

TRUTH = {"stiffness": 0.8, "damping": 0.05, "gain": 0.5}
FAST = dict(identifiability=False, final_identifiability=False)
VALUE = r"[-+0-9.e]+(?: [^\s(:]*[^\s(:.])?"  # format_value: 3 significant digits and the unit
SENTENCE = re.compile(rf"(Raising|Lowering) (\S+)(?: \(a measurement nuisance, not physics\))? ({VALUE}) → ({VALUE})"
                      r"(?: \(([+-]\d+\.\d) %\))?[.:]")


@pytest.fixture(scope="module")
def toy():
    rig = make_rig()
    return rig, make_sim2sim_trial(rig, TRUTH, seed=0, noise="keypoint", keypoint_sigma_px=0.2)


def _vlm_reply(values, rationale):
    return json.dumps({"analysis": "the real arm swings faster and further",
                       "parameters": [{"name": k, "value": v} for k, v in values.items()],
                       "rationale": rationale, "confidence": 0.6})


def _proposer(name):
    """The registered method, the VLMs answering offline (a replayed Gemini session, a fake HTTP transport)."""
    replies = [({"stiffness": 0.6, "damping": 0.03, "gain": 0.45}, "stiffer spring, stronger motor"),
               ({"stiffness": 0.75, "damping": 0.03, "gain": 0.5}, "a little stiffer again; damping is fine")]
    if name == "gemini":
        from vid2sid_ros.calibration.proposers.vlm.gemini import GeminiProposer, ReplayClient

        steps = [{"response": {"candidates": [{"content": {"parts": [{"text": _vlm_reply(v, r)}], "role": "model"},
                                               "finishReason": "STOP", "index": 0}],
                               "usageMetadata": {"promptTokenCount": 900, "candidatesTokenCount": 100}}}
                 for v, r in replies]
        return GeminiProposer(client=ReplayClient({"model": "gemini-2.5-flash", "steps": steps}),
                              sleep=lambda s: None, overlay_plot=False, video=False)
    if name == "openai-compatible":
        from vid2sid_ros.calibration.proposers.vlm.openai_compat import OpenAICompatibleProposer

        answers = [json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": _vlm_reply(v, r)}}],
                               "usage": {"prompt_tokens": 900, "completion_tokens": 100}}).encode()
                   for v, r in replies]
        return OpenAICompatibleProposer(base_url="http://127.0.0.1:9/v1", model="local-vlm", overlay_plot=False,
                                        transport=lambda url, body, headers, timeout_s: answers.pop(0))
    if name in ("bo",):
        pytest.importorskip("skopt", reason="bo's default GP backend needs scikit-optimize")
    if name == "mujoco-sysid":
        from vid2sid_ros.calibration.proposers.peers import PeerUnavailableError

        try:
            return make_proposer(name)
        except PeerUnavailableError as err:
            pytest.skip(str(err))
    return make_proposer(name, **({"seed": 1} if name in ("random", "bo", "bo-tpe", "cmaes") else {}))


@pytest.mark.parametrize("name", sorted(PROPOSERS))
def test_every_method_leads_with_one_sentence_per_moved_parameter(toy, name):
    rig, real = toy
    res = run_calibration(rig, real, _proposer(name), CalibrationConfig(iterations=2, rollout_budget=24, seed=1,
                                                                         **FAST))
    moved_any = False
    for prev, rec in zip(res.history, res.history[1:]):
        before = prev.extra["current_after"]
        moved = [s for s in rig.parameters.free
                 if abs(rec.values[s.name] - before[s.name]) > 1e-6 * (s.upper - s.lower)]
        if not moved:
            continue
        moved_any = True
        assert rec.rationale.startswith(("Raising ", "Lowering ")), (name, rec.rationale)
        lead, mark, trace = rec.rationale.partition(" Trace: ")
        found = {m.group(2): m for m in SENTENCE.finditer(lead)}
        for s in moved:
            assert s.name in found, (name, s.name, lead)
            m = found[s.name]
            a, b = before[s.name], rec.values[s.name]
            assert m.group(1) == ("Raising" if b > a else "Lowering")
            assert m.group(3) == format_value(a, s.unit) and m.group(4) == format_value(b, s.unit), (name, lead)
            if m.group(5) is not None:
                assert float(m.group(5)) == pytest.approx(100 * (b - a) / abs(a), abs=0.051)
        # the observation behind the move, with its numbers: the training error before and after
        assert re.search(r"MAE (went|fell) \d+\.\d+( px)? → \d+\.\d+ px", lead) or "could not be simulated" in lead \
            or "was not evaluated" in lead, (name, lead)
        # the method's own words come after the lead (the reasoner's trace, a baseline's search summary, the VLM's)
        assert (mark and trace.strip()) or name in ("least-squares", "mujoco-sysid"), (name, rec.rationale)
    assert moved_any, (name, [r.rationale for r in res.history])


def test_a_vlm_rationale_that_lacks_the_lead_keeps_its_own_words_as_the_trace():
    rig = make_rig()
    p = rig.parameters
    before, after = p.nominal(), {**p.nominal(), "stiffness": 0.6}
    own = "Raise stiffness: the real arm rings faster."
    assert not leads_with_moves(own, p, before, after)
    text = ensure_lead(own, p, before, after, observation="the training MAE went 3.000 px → 1.000 px")
    assert text == ("Raising stiffness 0.4 N·m/rad → 0.6 N·m/rad (+50.0 %). The training MAE went 3.000 px → "
                    "1.000 px. Trace: Raise stiffness: the real arm rings faster.")
    assert ensure_lead(text, p, before, after, observation="x") == text  # already leads: kept as it is
    assert ensure_lead(own, p, before, before) == own  # nothing moved: nothing to lead with
    # a lead that forgets one of the parameters moved does not count
    two = {**after, "gain": 0.5}
    assert not leads_with_moves("Raising stiffness 0.4 N·m/rad → 0.6 N·m/rad. Trace: x", p, before, two)


def test_the_report_shows_the_lead_and_folds_the_trace(toy, tmp_path):
    from vid2sid_ros.report import write_report

    rig, real = toy
    rd = tmp_path / "run"
    res = run_calibration(rig, real, make_proposer("random", seed=1), CalibrationConfig(iterations=2, rollout_budget=12,
                                                                                        seed=1, **FAST), rd)
    doc = write_report(rd).read_text()
    rec = next(r for r in res.history[1:] if " Trace: " in r.rationale)
    lead, _, trace = rec.rationale.partition(" Trace: ")
    import html

    i = doc.index(html.escape(lead, quote=False))
    folded = f'<details class="trace"><summary>trace</summary><pre>{html.escape(trace, quote=False)}</pre></details>'
    assert doc.index(folded, i) > i  # the lead in the open, the trace after it, folded
