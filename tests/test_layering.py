"""The shape of the code: imports run one way, with no circles, and no module grows past a reader.

Floors, imports only downward: ``signatures`` <- ``handlers`` <- ``bot``. Inside ``bot`` the
subpackages are floors too, top first: cli, watch, web, kinds, slack, pages, fetch, jobs, ops. Every import is
counted, also those inside functions and under ``TYPE_CHECKING``: a lazy import is still a
dependency a reader has to hold in mind.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("signatures", "handlers", "bot")
BOT_FLOORS = ("cli", "watch", "web", "kinds", "model", "slack", "pages", "fetch", "jobs", "ops")  # top first
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def our_modules() -> dict[str, Path]:
    """Every module of the three packages, by dotted name."""
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ours that ``path`` imports (``from pkg import sub`` counts as ``pkg.sub``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] in PACKAGES)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
    return found & set(modules)


def import_graph() -> dict[str, set[str]]:
    modules = our_modules()
    return {name: imports_of(path, modules) - {name} for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def floor(module: str) -> tuple[int, int]:
    """(package floor, bot subpackage floor); higher numbers may import lower ones."""
    parts = module.split(".")
    top = PACKAGES.index(parts[0])
    if parts[0] != "bot" or len(parts) < 2 or parts[1] not in BOT_FLOORS:
        return top, len(BOT_FLOORS) if parts[0] == "bot" else 0
    return top, len(BOT_FLOORS) - 1 - BOT_FLOORS.index(parts[1])


def test_there_is_no_import_circle() -> None:
    assert cycles(import_graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"bot.a": {"bot.b"}, "bot.b": {"bot.c"}, "bot.c": {"bot.a"}, "bot.d": {"bot.a"}}
    assert cycles(graph) == [["bot.a", "bot.b", "bot.c"]]


def test_imports_only_run_downward() -> None:
    upward = [
        f"{src} imports {dst}"
        for src, targets in import_graph().items()
        for dst in sorted(targets)
        if floor(dst) > floor(src)
    ]
    assert upward == []


@pytest.mark.parametrize(
    ("src", "dst", "allowed"),
    [
        ("handlers.webhook", "bot.jobs.queue", False),
        ("signatures.engine", "handlers.jobs", False),
        ("signatures.engine", "bot.ops.metrics", False),
        ("bot.jobs.worker", "bot.slack.reply", False),
        ("bot.ops.metrics", "bot.jobs.queue", False),
        ("bot.cli.main", "bot.web.app", True),
        ("bot.kinds.diagnose", "bot.fetch.logs", True),
        ("bot.jobs.worker", "handlers.jobs", True),
        ("bot.slack.render", "bot.pages.links", True),
        ("bot.pages.report", "bot.slack.render", False),
        ("bot.pages.report", "bot.web.app", False),
    ],
)
def test_floors_order_the_packages(src: str, dst: str, allowed: bool) -> None:
    assert (floor(dst) <= floor(src)) is allowed


def test_the_report_pages_stand_on_the_engine_the_store_and_ops_only() -> None:
    # Narrower than its floor: a page is rendered from stored data, never fetched or posted.
    allowed = ("signatures", "bot.pages", "bot.jobs", "bot.ops")
    reached = {
        dst for src, targets in import_graph().items() if src.startswith("bot.pages") for dst in targets
    }
    assert reached, "bot/pages imports nothing of ours?"
    assert sorted(d for d in reached if not d.startswith(allowed)) == []


def test_bot_is_split_into_subpackages_by_concern() -> None:
    subpackages = sorted(p.parent.name for p in (ROOT / "bot").glob("*/__init__.py"))
    assert subpackages == sorted(BOT_FLOORS)
    loose = sorted(p.name for p in (ROOT / "bot").glob("*.py") if p.name != "__init__.py")
    assert loose == []
    for sub in subpackages:
        doc = ast.get_docstring(ast.parse((ROOT / "bot" / sub / "__init__.py").read_text()))
        assert doc and doc.count(".") >= 1, f"bot/{sub}/__init__.py must say what lives there"


def test_no_module_is_over_the_size_a_reader_keeps_in_mind() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in our_modules().values()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
