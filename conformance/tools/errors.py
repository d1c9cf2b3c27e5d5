"""A problem of the user's in a `conformance` command: one line on stderr naming the thing and the fix, exit 2.

Contracts:

* `CliError` is such a problem, its message the line; `conformance`'s `main` (for `conformance jobs` too) prints
  it and returns `USAGE_ERROR`, having written nothing.
* `write_files(files)` writes the texts at once (`io.write_texts_atomic`); a path that cannot be written is a
  `CliError` naming it.
* `CommandParser` is the one parser style of every `conformance` command (`cli`, its `jobs` and `bench`): argparse
  whose bad option is a `CliError` (one line, ending with the `--help` to read), not argparse's usage and exit.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from conformance.report import io

USAGE_ERROR = 2


class CliError(Exception):
    """A user-facing problem: printed as one line, exit status 2."""


class CommandParser(argparse.ArgumentParser):
    """argparse, a bad option raising `CliError` (its subcommands' parsers are of this class too); an option no
    parser knows is named with the `--help` of the innermost subcommand given, not the top command's."""

    def error(self, message):
        raise CliError(f"{message} (see `{self.prog} --help`)")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if not hasattr(namespace, "_innermost_parser"):  # a subcommand's parser returns before its parent's
            namespace._innermost_parser = self
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            namespace._innermost_parser.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace


def write_files(files: dict[Path, str]) -> None:
    try:
        io.write_texts_atomic(files)
    except OSError as exc:
        target = Path(exc.filename) if exc.filename else next(iter(files))
        raise CliError(f"{target}: cannot write ({exc.strerror or exc}); choose a writable path") from None
