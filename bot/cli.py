"""The ``denpex`` command: one sub-command per module, wired here (the composition root)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="denpex", description="Tell ML engineers why their training run died."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    # Each module adds its own sub-commands; keep one line per module.
    from bot import cli_diagnose, jobs_cli, report

    cli_diagnose.add_commands(sub)
    report.add_commands(sub)
    jobs_cli.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
