"""Command-line values: argparse types that refuse a bad count or duration with a one-line
error, and the --input/--output folders as settings overrides (shared by every command)."""

from __future__ import annotations

import argparse


def folder_overrides(args: argparse.Namespace) -> dict[str, str]:
    """The --input/--output folders given, as settings overrides."""
    pairs = (("input_dir", getattr(args, "input", None)), ("output_dir", args.output))
    return {k: v for k, v in pairs if v}


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a count, a hop limit, a budget)."""
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (a community level)."""
    return _int_at_least(text, 0, "an integer >= 0")


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return value


def seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def comma_list(text: str) -> list[str] | None:
    """argparse type: comma-separated names (an empty text: none given)."""
    return text.split(",") if text else None
