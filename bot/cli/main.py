"""The ``denpex`` command: one sub-command per module, wired here (the composition root)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Sub-command -> the module whose add_commands(subparsers) registers it. Only the module a
# command needs is imported, so `denpex diagnose` starts without the Slack and Redis stacks.
COMMANDS: dict[str, str] = {
    "diagnose": "bot.cli.diagnose",
    "signatures": "bot.cli.diagnose",
    "report": "bot.cli.report",
    "jobs": "bot.cli.jobs",
    "serve": "bot.cli.serve",
    "worker": "bot.cli.serve",
    "stats": "bot.cli.serve",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser for every sub-command, or only for ``command`` when it is a known one."""
    parser = argparse.ArgumentParser(
        prog="denpex", description="Tell ML engineers why their training run died."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        importlib.import_module(name).add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_in[0] if args_in else None)
    args = parser.parse_args(args_in)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
