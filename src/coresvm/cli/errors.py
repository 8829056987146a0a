"""Usage errors: a bad command line or input file is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """A bad command line or input file: reported as one line on stderr, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but errors raise :class:`UsageError` (one line) instead of printing usage and exiting."""

    def error(self, message: str):
        raise UsageError(message)


def one_line(error: BaseException) -> str:
    """The first line of an error's message (its type name when the message is empty)."""
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
