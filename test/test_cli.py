"""`vid2sid --help` says what the docs say: the version, examples in the current config format,
only the documented rigs, one meaning for an unlimited budget, `track` needing a rig."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from vid2sid_ros import __version__
from vid2sid_ros.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_version_is_the_package_xml_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"vid2sid {__version__}"
    xml = (REPO / "package.xml").read_text()
    assert re.search(r"<version>([^<]+)</version>", xml).group(1) == __version__


def test_calibrate_help_example_is_a_current_rig_config_that_loads(capsys, tmp_path):
    """The only example was the legacy format (rig:, free:, real:)."""
    text = _help(capsys, "calibrate")
    example = text.split("For example::", 1)[1].split("The run directory")[0]
    doc = yaml.safe_load(re.sub(r"^    ", "", example.strip("\n"), flags=re.M))
    assert {"model", "parameters", "keypoints", "camera", "tracker", "excitations", "trials"} <= set(doc)
    assert not {"real", "free", "rig_options"} & set(doc)
    from vid2sid_ros.rigs.schema import KEYS  # every key of the example is a documented key

    assert set(doc) <= {k.path.split(".")[0].split("[")[0] for k in KEYS}
    # (test_readme_own_robot runs this same config on a filmed motor arm: the README's 5-minute path)


def test_help_lists_only_the_documented_rigs(capsys):
    docs = (REPO / "docs" / "rig_config.md").read_text()
    listed = re.search(r"--rig RIG\s+built-in rig \(([^)]*)\)", _help(capsys, "calibrate"))
    assert listed, "calibrate --help lists the built-in rigs"
    names = [n.strip() for n in listed.group(1).split(",")]
    assert names == ["finger", "tentacle", "tentacle_water", "pendulum"]  # not the test twin 'toy'
    assert all(n in docs for n in names)


def test_an_unlimited_budget_is_none_on_the_command_line_as_null_in_a_config(capsys):
    parser = build_parser()
    assert parser.parse_args(["calibrate", "--rig", "finger", "--budget", "none"]).budget is None
    assert parser.parse_args(["calibrate", "--rig", "finger", "--budget", "12"]).budget == 12
    with pytest.raises(SystemExit):
        parser.parse_args(["calibrate", "--rig", "finger", "--budget", "0"])  # was: 0 = unlimited
    assert "expected a positive number of rollouts, or 'none' for no limit; got '0'" in capsys.readouterr().err
    assert "0 = unlimited" not in _help(capsys, "calibrate")


def test_track_needs_a_rig(capsys, tmp_path):
    """`track` used the finger's tracker when no rig was named."""
    with pytest.raises(SystemExit) as exc:
        main(["track", str(tmp_path / "clip.mp4")])
    assert exc.value.code == 2 and "the following arguments are required: --rig" in capsys.readouterr().err
    assert "RIG.yaml" in _help(capsys, "track")


@pytest.mark.parametrize("command", [["demo"], ["benchmark", "sim2sim"]])
def test_zero_is_no_budget_in_any_command(command, capsys):
    """`demo --budget 0` ran with the config's budget (0 = "not given") and `benchmark --budget 0`
    was taken as given; `calibrate` refuses 0. Every command now says what it expects."""
    parser = build_parser()
    assert parser.parse_args([*command, "--budget", "12"]).budget == 12
    for bad in ("0", "-3", "none"):
        with pytest.raises(SystemExit):
            parser.parse_args([*command, "--budget", bad])
        assert f"expected a positive number of rollouts" in capsys.readouterr().err
    assert "0 = " not in _help(capsys, *command[:1])
