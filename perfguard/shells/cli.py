"""The `perfguard` command: parse arguments, dispatch to perfguard.shells.commands, map errors to exit codes."""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from typing import NoReturn

from perfguard import __version__
from perfguard.errors import EXIT_INFRA, EXIT_USAGE, PerfguardError
from perfguard.shells.commands import COMMANDS
from perfguard.signals import interruptible


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's usage errors use the contract's code
        self.print_usage(sys.stderr)
        sys.stderr.write(f"perfguard: error: {message}\n")
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="perfguard", description="Guard compute kernels against performance regressions.")
    parser.add_argument("--version", action="version", version=f"perfguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"perfguard.shells.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with interruptible():  # CI cancels with SIGINT, then SIGTERM: both stop the run the same way
            return args.run(args)
    except PerfguardError as exc:
        sys.stderr.write(f"perfguard: error: {exc.message}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("perfguard: interrupted\n")
        return EXIT_INFRA
    except OSError as exc:  # a file system or process failure no layer turned into a message
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"perfguard: error: {where}{exc.strerror or exc}\n")
        return EXIT_INFRA
    except Exception as exc:  # a bug: still exit 3 (exit 1 would read as "a regression was found")
        traceback.print_exc()
        sys.stderr.write(f"perfguard: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}\n")
        return EXIT_INFRA


if __name__ == "__main__":
    sys.exit(main())
