"""A Propose request with a 100 000-character field is refused in one short line; the field never reaches
a log line in full (was: logged whole)."""

from types import SimpleNamespace

import pytest

pytest.importorskip("rclpy")

from vid2sid_ros.nodes.calibrator_node import MAX_FIELD_CHARS, request_too_long  # noqa: E402


def _req(**kw):
    return SimpleNamespace(**{"proposer": "", "trial_id": "", "names": [], **kw})


def test_huge_fields_are_refused_with_a_short_message():
    msg = request_too_long(_req(proposer="x" * 100_000))
    assert msg.startswith("request field 'proposer' is 100000 characters long (at most 64)") and len(msg) < 200
    assert request_too_long(_req(trial_id="t" * 300)).startswith("request field 'trial_id' is 300 characters")
    assert "lists 2000 parameters" in request_too_long(_req(names=["k"] * 2000))
    assert "holds a 5000-character name" in request_too_long(_req(names=["a", "b" * 5000]))


def test_real_requests_pass():
    assert request_too_long(_req(proposer="reasoner", trial_id="t0", names=["k", "c"])) is None
    assert request_too_long(_req(proposer="p" * MAX_FIELD_CHARS["proposer"])) is None
