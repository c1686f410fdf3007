"""The ``vid2sid`` command line: a thin dispatcher over ``vid2sid_ros.commands``.

Each subcommand lives in its own module ``vid2sid_ros.commands.<name>`` exposing
``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``. Modules are
imported lazily so ``vid2sid --help`` stays fast and a broken optional backend does
not take the whole CLI down.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main", "COMMANDS"]

#: subcommand name -> module under vid2sid_ros.commands
COMMANDS: dict[str, str] = {
    "demo": "demo",            # the README's main job: calibrate the real pendulum clip, write the report
    "calibrate": "calibrate",  # one calibration run
    "benchmark": "benchmark",  # sim2sim benchmark across methods and seeds
    "track": "track",          # track a video file into a keypoint trajectory
    "bringup": "bringup",      # in-process ROS 2 graph (no launch on PyPI)
    "report": "report",        # HTML report of a run directory or a benchmark
    "export-randomization": "export_randomization",  # domain-randomisation ranges from a run's intervals
    "bag": "bag",              # rosbag2 info / repair of a bag whose recorder was killed
    "propose": "propose",      # call /vid2sid/propose of a running graph (rclpy client)
}


def _load(name: str):
    return importlib.import_module(f"vid2sid_ros.commands.{COMMANDS[name]}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``vid2sid`` parser. ``only``: import just that subcommand's module (the one being run:
    the others' imports, e.g. the report's or the ROS graph's, are not paid for; their names are
    still listed, without help); None imports every subcommand (``vid2sid --help``)."""
    from . import __version__

    parser = argparse.ArgumentParser(prog="vid2sid", description="System identification from video (Vid2Sid) for ROS 2.")
    parser.add_argument("--version", action="version", version=f"vid2sid {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        if only is not None and name != only:
            sub.add_parser(name)
            continue
        try:
            mod = _load(name)
        except ImportError as err:  # not written yet, or an optional dependency is missing
            if _INTERRUPTED:  # a Ctrl-C that cut an import short: the next import of that module fails
                raise KeyboardInterrupt from None
            p = sub.add_parser(name, help=f"(unavailable: {err})")
            p.set_defaults(_unavailable=str(err))
            continue
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


#: SIGINTs received before the command ran (set by :func:`_note_interrupt`)
_INTERRUPTED: list[int] = []


def _note_interrupt(signum, frame) -> None:
    """SIGINT while the command's modules load: remembered, then the usual KeyboardInterrupt."""
    _INTERRUPTED.append(signum)
    raise KeyboardInterrupt


class _PipeSafeStdout:
    """``sys.stdout`` that survives its reader going away (``vid2sid calibrate ... | head``).

    A ``BrokenPipeError`` on write or flush points the stream's file descriptor at ``os.devnull`` (the
    recipe of the Python documentation, "Note on SIGPIPE") and the command carries on: the run
    directory is written as without the pipe, and nothing is reported as failed because the terminal
    output was not read. Everything else is the wrapped stream's.
    """

    def __init__(self, stream) -> None:
        self._stream = stream

    def _closed_reader(self) -> None:
        import os

        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # no file descriptor (a capture): drop the output
            self._stream = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._closed_reader()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed_reader()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vid2sid`` console command; returns the exit code (130 after Ctrl-C,
    143 after SIGTERM, without a traceback whenever the signal arrives). Standard output whose reader
    has gone (a pipe into ``head``) is dropped, never an error (:class:`_PipeSafeStdout`)."""
    import signal

    stdout = sys.stdout
    wrapped = _PipeSafeStdout(stdout) if stdout is not None and not isinstance(stdout, _PipeSafeStdout) else None
    if wrapped is not None:
        sys.stdout = wrapped
    previous = signal.getsignal(signal.SIGINT)
    ours = previous is signal.default_int_handler
    try:
        if ours:
            signal.signal(signal.SIGINT, _note_interrupt)
        return _main(argv)
    except KeyboardInterrupt:  # before the command ran (its own handler reports an interrupted run)
        print("interrupted (Ctrl-C) before the command started; nothing was written", file=sys.stderr)
        return 130
    finally:
        if ours and signal.getsignal(signal.SIGINT) is _note_interrupt:
            signal.signal(signal.SIGINT, previous)
        if wrapped is not None and sys.stdout is wrapped:
            sys.stdout = stdout


def _main(argv: list[str] | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    chosen = words[0] if words and words[0] in COMMANDS else None  # the subcommand comes first
    parser = build_parser(chosen)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    if getattr(args, "_unavailable", None):
        print(f"vid2sid {args.command}: unavailable: {args._unavailable}", file=sys.stderr)
        return 2
    from ._interfaces import InterfacesNotBuiltError
    from .commands.signals import interrupt_exit_code, interrupt_name, sigterm_as_interrupt

    try:
        with sigterm_as_interrupt():  # SIGTERM: the same message as Ctrl-C, exit 143
            return int(args._run(args) or 0)
    except InterfacesNotBuiltError as err:  # a ROS command where ROS or the interfaces are missing
        print(f"vid2sid {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        said = getattr(args, "_interrupt_note", None) or {
            "track": "track stopped before it finished (a clip's tracking is not resumed): run it again"
        }.get(args.command, "completed iterations are saved in the run directory")
        print(f"interrupted ({interrupt_name(err)}); {said}", file=sys.stderr)
        return interrupt_exit_code(err)


if __name__ == "__main__":
    sys.exit(main())
