"""The ``denpex`` command: one sub-command per module, wired here (the composition root)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

DISTRIBUTION = "denpex-bot"  # the name on the package index; the command is `denpex`
EXIT_SIGPIPE = 141  # what a shell reports for a writer killed by SIGPIPE (`denpex ... | head`)

# Sub-command -> the module whose add_commands(subparsers) registers it. Only the module a
# command needs is imported, so `denpex diagnose` starts without the Slack and Redis stacks.
COMMANDS: dict[str, str] = {
    "diagnose": "bot.cli.diagnose",
    "advise": "bot.cli.advise",
    "signatures": "bot.cli.signatures",
    "report": "bot.cli.report",
    "jobs": "bot.cli.jobs",
    "serve": "bot.cli.serve",
    "worker": "bot.cli.serve",
    "stats": "bot.cli.serve",
    "watch": "bot.cli.watch",
}
# Sub-commands that run a command given after `--` (argparse would read it as more arguments).
RUNS_A_COMMAND = {"watch"}


def version() -> str:
    """This installation's version ("unknown" when run from a tree that was never installed)."""
    # Here, not at the top: importlib.metadata costs ~40 ms, and only --version needs it.
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


class VersionAction(argparse.Action):
    """``--version``: looks the version up only when asked (argparse's own action wants it up front)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show program's version number and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"denpex {version()}")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser for every sub-command, or only for ``command`` when it is a known one."""
    parser = argparse.ArgumentParser(
        prog="denpex", description="Tell ML engineers why their training run died."
    )
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        importlib.import_module(name).add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``denpex`` command; its exit code."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if not args_in:
        # A bare `denpex` is a question, not a mistake: answer it with the help.
        build_parser().print_help()
        return 0
    parser = build_parser(args_in[0])
    command_argv: list[str] = []
    if args_in[0] in RUNS_A_COMMAND and "--" in args_in:
        cut = args_in.index("--")
        args_in, command_argv = args_in[:cut], args_in[cut + 1 :]
    args = parser.parse_args(args_in)
    if command_argv:
        args.command_argv = command_argv
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining
        # again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_SIGPIPE
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
