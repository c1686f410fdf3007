"""Ctrl-C while ``vid2sid`` loads its command modules: exit 130 and one line, no traceback (was: an
``ImportError: cannot load module more than once per process`` traceback and exit 1)."""

import importlib
import sys

import pytest

from vid2sid_ros import cli


def test_an_interrupted_import_is_an_interrupt_not_an_import_error(monkeypatch, capsys):
    calls = {"n": 0}

    def flaky(name):
        calls["n"] += 1
        if calls["n"] == 2:  # the signal arrives during the second module's import
            cli._note_interrupt(2, None)
        if calls["n"] == 3:  # what the next import of a module cut short then raises
            raise ImportError("cannot load module more than once per process")
        return importlib.import_module(f"vid2sid_ros.commands.{cli.COMMANDS[name]}")

    monkeypatch.setattr(cli, "_load", flaky)
    monkeypatch.setattr(cli, "_INTERRUPTED", [])
    assert cli.main(["--help"]) == 130  # (every subcommand module is imported for the full help)
    err = capsys.readouterr().err
    assert err.strip() == "interrupted (Ctrl-C) before the command started; nothing was written"


def test_an_import_error_after_an_interrupt_is_reraised(monkeypatch):
    monkeypatch.setattr(cli, "_INTERRUPTED", [2])
    monkeypatch.setattr(cli, "_load", lambda name: (_ for _ in ()).throw(ImportError("cannot load module")))
    with pytest.raises(KeyboardInterrupt):
        cli.build_parser()


def test_an_interrupted_benchmark_names_its_directory_and_how_to_resume(monkeypatch, capsys, tmp_path):
    """Ctrl-C during a sweep: exit 130, and the line names where the finished cells are and that the same
    command resumes (not 'completed iterations are saved in the run directory', which names neither)."""
    from vid2sid_ros.benchmark import run as bench_run

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench_run, "run_benchmark", interrupted)  # the command imports it at call time
    out = tmp_path / "sweep"
    rc = cli.main(["benchmark", "sim2sim", "--rig", "pendulum", "--seeds", "1", "--methods", "random",
                   "--budget", "4", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 130
    assert f"finished cells are saved in {out}; the same command again (same --out)" in err
