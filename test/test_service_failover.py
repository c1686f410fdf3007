"""A VLM service that cannot be reached or never answers (issue 12 items 1-3).

Real sockets on 127.0.0.1, started by the tests: a server that accepts connections and
never answers (a stalled proxy), and a port nobody listens on (connection refused). The
CLI must finish its iterations through the fallback within the configured per-iteration
deadline, go straight to the fallback after a failure (retrying the service every
``retry_every`` iterations), name the proposer that actually proposed in every record,
and a run in which no proposal was ever made must end non-zero with ``status:
no_proposal`` in ``result.yaml`` and no calibrated model.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers.proposer import IterationRecord, Proposal
from vid2sid_ros.calibration.proposers.vlm.openai_compat import OpenAICompatibleProposer
from vid2sid_ros.cli import main
from vid2sid_ros.sim.toy import make_rig

TRUTH = {"stiffness": 0.8, "damping": 0.05, "gain": 0.5}
DEADLINE_S = 1.0


class SilentServer:
    """Accepts TCP connections on 127.0.0.1, reads what is sent, never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.first_lines: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.settimeout(0.5)
            self.connections.append(conn)
            try:
                self.first_lines.append(conn.recv(4096).split(b"\r\n", 1)[0])
            except OSError:
                self.first_lines.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        for c in self.connections:
            c.close()
        self.sock.close()


@pytest.fixture
def silent_server():
    srv = SilentServer()
    yield srv
    srv.close()


def _refused_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there any more: connect() is refused
    return port


@pytest.fixture(autouse=True)
def _fake_key(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "test-key-not-a-real-one")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)


def _config(tmp_path: Path, proposer: str, base_url: str, *, fallback: str | None = "random",
            iterations: int = 3) -> Path:
    opts = {"base_url": base_url, "deadline_s": DEADLINE_S, "retry_every": 2, "overlay_plot": False,
            "video": False}
    cfg = {"rig": "toy",
           "real": {"sim2sim": {"truth": TRUTH, "noise": "none"}},
           "calibration": {"iterations": iterations, "rollout_budget": None, "identifiability": False,
                           "final_identifiability": False, "stop_when_converged": False},
           "proposer": proposer, "proposer_options": opts}
    if fallback:
        cfg["fallback"] = fallback
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def _url(proposer: str, port: int) -> str:
    return f"http://127.0.0.1:{port}/v1" if proposer == "openai-compatible" else f"http://127.0.0.1:{port}/"


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "iterations.jsonl").read_text().splitlines()]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("proposer", ["openai-compatible", "gemini"])
def test_server_that_never_answers_costs_one_deadline_then_the_fallback_goes_on(tmp_path, capsys, caplog,
                                                                                 silent_server, proposer):
    cfg = _config(tmp_path, proposer, _url(proposer, silent_server.port))
    out = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="vid2sid_ros"):
        rc = main(["calibrate", str(cfg), "--out", str(out), "--quiet", "--no-report"])
    assert rc == 0, capsys.readouterr().err
    recs = _records(out)
    assert [r["iteration"] for r in recs] == [1, 2, 3]
    # every proposal came from the fallback, and the records say so (item 2)
    assert [r["proposer"] for r in recs] == ["random"] * 3
    assert all(r["extra"]["requested_proposer"] == proposer for r in recs)
    # circuit breaker: failed, skipped without a request, retried (retry_every: 2)
    assert [r["extra"]["service"]["state"] for r in recs] == ["failed", "skipped", "failed"]
    assert recs[1]["extra"]["service"] == {"proposer": proposer, "state": "skipped", "failed_at": 1, "retry_at": 3}
    for r in (recs[0], recs[2]):  # each attempt iteration spent at most the deadline on the service
        assert DEADLINE_S * 0.9 <= r["extra"]["service_wall_s"] <= DEADLINE_S + 2.0  # a loaded machine wakes late
        assert "deadline" in r["extra"]["fallback"]["reason"]
    assert len(silent_server.connections) == 2  # iteration 2 sent nothing
    assert all(b"POST" in line for line in silent_server.first_lines)
    if proposer == "gemini":  # the real SDK went to our server
        assert all(b"generateContent" in line for line in silent_server.first_lines)
    assert "skipping the service in iteration 2" in caplog.text
    assert "trying the service again in iteration 3" in caplog.text
    res = yaml.safe_load((out / "result.yaml").read_text())
    assert res["calibration"]["status"] == "ok" and res["calibration"]["best_proposer"] in ("random", "initial")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("proposer", ["openai-compatible", "gemini"])
def test_refused_connection_goes_to_the_fallback_without_30_s_of_backoff(tmp_path, capsys, proposer):
    cfg = _config(tmp_path, proposer, _url(proposer, _refused_port()))
    out = tmp_path / "run"
    rc = main(["calibrate", str(cfg), "--out", str(out), "--quiet", "--no-report"])
    assert rc == 0, capsys.readouterr().err
    recs = _records(out)
    assert [r["extra"]["service"]["state"] for r in recs] == ["failed", "skipped", "failed"]
    assert [r["proposer"] for r in recs] == ["random"] * 3
    for r in (recs[0], recs[2]):
        assert r["extra"]["service_wall_s"] <= DEADLINE_S + 2.0
        # the first retry would sleep 2 s, past the 1 s deadline: given up at once
        assert "would pass the iteration deadline" in r["extra"]["fallback"]["reason"]


@pytest.mark.timeout(60)
def test_no_proposal_ever_made_ends_non_zero_with_status_and_no_model(tmp_path, capsys):
    cfg = _config(tmp_path, "gemini", _url("gemini", _refused_port()), fallback=None, iterations=2)
    out = tmp_path / "run"
    rc = main(["calibrate", str(cfg), "--out", str(out), "--no-report"])
    cap = capsys.readouterr()
    assert rc == 1
    err_lines = cap.err.strip().splitlines()
    assert len(err_lines) == 1 and "no proposal was made in 2 iteration(s)" in err_lines[0]
    assert "status: no_proposal" in err_lines[0] and "Traceback" not in cap.err
    res = yaml.safe_load((out / "result.yaml").read_text())
    assert res["calibration"]["status"] == "no_proposal"
    assert json.loads((out / "result.json").read_text())["status"] == "no_proposal"
    assert not list(out.glob("calibrated_model*"))
    recs = _records(out)
    assert [r["extra"]["proposal_made"] for r in recs] == [False, False]


def test_one_proposal_is_enough_for_status_ok(tmp_path):
    """The toy twin exports a model: written when at least one iteration proposed."""
    rig = make_rig()
    real = make_sim2sim_trial(rig, TRUTH, noise="none")
    calls = []

    def transport(url, body, headers, timeout_s):
        calls.append(timeout_s)
        if len(calls) == 1:
            raise ConnectionError("refused")
        reply = {"parameters": [{"name": k, "value": v} for k, v in TRUTH.items()], "rationale": "r",
                 "confidence": 0.5}
        return json.dumps({"choices": [{"message": {"content": json.dumps(reply)}}]}).encode()

    p = OpenAICompatibleProposer(transport=transport, retry_every=1, max_retries=0, video=False,
                                 overlay_plot=False)
    cfg = CalibrationConfig(iterations=2, rollout_budget=None, identifiability=False, final_identifiability=False)
    res = run_calibration(rig, real, p, cfg, tmp_path / "run")
    assert any("raised VLMProposalError" in n and "refused" in n for n in res.history[1].notes)
    assert res.history[2].extra["service"]["state"] == "ok" and len(calls) == 2
    # no fallback: iteration 1 made no proposal, iteration 2 did
    assert [r.extra["proposal_made"] for r in res.history[1:]] == [False, True]
    assert res.status == "ok" and res.best_proposer == "openai-compatible" and res.best_iteration == 2
    assert (tmp_path / "run" / "calibrated_model.yaml").is_file()


def test_breaker_state_comes_from_the_history_so_a_resumed_run_decides_the_same():
    rig = make_rig()
    real = make_sim2sim_trial(rig, TRUTH, noise="none")
    from vid2sid_ros.calibration.objective import TrialObjective
    from vid2sid_ros.calibration.proposers.proposer import ProposalContext

    ev, _ = TrialObjective(rig.make_twin(), real.train_excitations, real.train, rig.parameters).evaluate(
        rig.parameters.nominal())
    failed = IterationRecord(1, "reasoner", dict(ev.values), ev.error_px, {}, "", 0.0, 1, 0.1, extra={
        "service": {"proposer": "openai-compatible", "state": "failed", "failed_at": 1, "retry_at": 4}})
    calls = []
    reply = {"parameters": [{"name": k, "value": v} for k, v in TRUTH.items()], "rationale": "r", "confidence": 0.5}

    def transport(*a):
        calls.append(a)
        return json.dumps({"choices": [{"message": {"content": json.dumps(reply)}}]}).encode()

    class Keep:
        name = "keep"

        def propose(self, context):
            return Proposal(values={}, rationale="keep the current values")

    p = OpenAICompatibleProposer(transport=transport, retry_every=3, fallback=Keep(), video=False,
                                 overlay_plot=False)

    def ctx(it):
        return ProposalContext(parameters=rig.parameters, current=dict(ev.values), current_eval=ev, real=real.train,
                               history=(failed,), iteration=it, excitations=tuple(real.train_excitations))

    prop = p.propose(ctx(3))  # a fresh instance (as after a resume) still skips the service
    assert calls == [] and prop.extra["service"]["state"] == "skipped" and prop.extra["proposed_by"] == "keep"
    assert "not asked again before iteration 4" in prop.extra["fallback"]["reason"]
    prop = p.propose(ctx(4))  # retry_every iterations after the failure: the service is asked again
    assert len(calls) == 1 and prop.extra["service"]["state"] == "ok" and prop.extra["proposed_by"] == p.name


@pytest.mark.parametrize("bad, msg", [({"deadline_s": 0}, "deadline_s must be a number > 0"),
                                      ({"retry_every": 0}, "retry_every must be an integer >= 1")])
def test_bad_deadline_options_are_one_line_naming_the_config(tmp_path, capsys, bad, msg):
    cfg = _config(tmp_path, "openai-compatible", "http://127.0.0.1:9/v1")
    d = yaml.safe_load(cfg.read_text())
    d["proposer_options"].update(bad)
    cfg.write_text(yaml.safe_dump(d))
    rc = main(["calibrate", str(cfg), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and msg in err and str(cfg) in err
    assert not (tmp_path / "run").exists()


def test_loop_with_a_proposer_that_always_raises_reports_no_proposal(tmp_path):
    rig = make_rig()
    real = make_sim2sim_trial(rig, TRUTH, noise="none")

    class Broken:
        name = "broken"

        def propose(self, context):
            raise ConnectionError("service unreachable")

    cfg = CalibrationConfig(iterations=2, rollout_budget=None, identifiability=False, final_identifiability=False)
    res = run_calibration(rig, real, Broken(), cfg, tmp_path / "run")
    assert res.status == "no_proposal" and "no proposal was made in 2 iteration(s)" in res.stopped
    assert {n: res.values[n] for n in rig.parameters.names} == rig.parameters.nominal()  # the start point
    assert "model" not in res.files
    assert not (tmp_path / "run" / "calibrated_model.yaml").exists()
    assert yaml.safe_load((tmp_path / "run" / "result.yaml").read_text())["calibration"]["status"] == "no_proposal"


def test_a_passed_deadline_is_a_transient_timeout_not_a_refusal():
    """The deadline passing between two checks must not disable the service for good (as a 4xx does)."""
    from vid2sid_ros.calibration.proposers.vlm.common import DeadlineExceeded
    from vid2sid_ros.calibration.proposers.vlm.gemini import GeminiProposer, ReplayClient

    for p in (OpenAICompatibleProposer(transport=lambda *a: b"", fallback="reasoner"),
              GeminiProposer(client=ReplayClient({"steps": []}), fallback="reasoner")):
        p._deadline = time.monotonic() - 1.0  # as if set by propose() and already passed
        with pytest.raises(DeadlineExceeded, match="iteration deadline of 30 s reached"):
            p.remaining_s(5.0)
        assert p._classify(DeadlineExceeded("late"))[0] is True  # retryable: the breaker retries later
        p._deadline = None
        assert p.remaining_s(5.0) == 5.0  # outside an iteration: the transport's own timeout
