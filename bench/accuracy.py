"""Accuracy of the engine on the labelled real-log corpus, as pasted and embedded.

Run from the repository root::

    .venv/bin/python bench/accuracy.py                  # the whole corpus, full library
    .venv/bin/python bench/accuracy.py --generic-only   # initiating signatures switched off
    .venv/bin/python bench/accuracy.py --batch extra3b  # one batch (also tests/corpus/firstsight/NAME)
    .venv/bin/python bench/accuracy.py --json           # one JSON object instead of the table

It prints, for raw and embedded logs: initiating line found (and, beside it, within 3 lines of
the labelled one: another line of the same several-line report), rank right (of the cases with a
labelled rank), signature right (of the cases the class map names ids for; not graded with
--generic-only), clean on `none` cases, a one-line summary per mode, and every miss.
Required on the whole corpus: with the full library line found = 100%, rank right >= 95%,
signature right >= 90% and clean on none = 100%; with --generic-only line found >= 85% and
clean on none = 100%; in both, every healthy log of tests/healthy/ clean. A single batch is
reported, not judged.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from signatures import Diagnosis, Source, Status, default_library, diagnose
from tests.corpus.cases import MODES, Grade, batch_label_files, load_cases, run_case

HEALTHY = Path(__file__).resolve().parent.parent / "tests" / "healthy"

FULL_FLOORS = {"line_found": 100.0, "rank_right": 95.0, "signature_right": 90.0, "clean_right": 100.0}
GENERIC_FLOORS = {"line_found": 85.0, "clean_right": 100.0}
CHECKS = ("line_found", "line_near", "rank_right", "signature_right", "clean_right")
HEADS = ("line found", "within 3 lines", "rank right", "signature right", "clean on none")


def percent(grades: list[Grade], attr: str) -> tuple[int, int, float]:
    """Right, applicable and the percentage for one check."""
    values = [getattr(g, attr) for g in grades if getattr(g, attr) is not None]
    right = sum(1 for v in values if v)
    return right, len(values), 100.0 * right / len(values) if values else 100.0


def runner(generic_only: bool) -> Callable[[Source], Diagnosis] | None:
    """How each case is diagnosed: the bundled library, or it without initiating signatures."""
    if not generic_only:
        return None
    library = default_library().without_initiating()
    return lambda source: diagnose([source], library=library)


def main() -> int:
    """Print the figures and the misses; exit 1 when a required level is not met."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--generic-only", action="store_true", help="switch the initiating signatures off")
    parser.add_argument("--batch", metavar="NAME", help="score only tests/corpus/[firstsight/]NAME")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    cases = load_cases(tuple(batch_label_files(args.batch))) if args.batch else load_cases()
    run = runner(args.generic_only)
    checks = [c for c in CHECKS if not (args.generic_only and c == "signature_right")]
    floors = {} if args.batch else GENERIC_FLOORS if args.generic_only else FULL_FLOORS
    label = ("generic-only" if args.generic_only else "full library") + (
        f", batch {args.batch}" if args.batch else ""
    )

    results: dict[str, dict[str, dict[str, float]]] = {}
    misses: list[Grade] = []
    met = True
    for mode in MODES:
        grades = [run_case(case, mode, run) for case in cases]
        misses += [g for g in grades if not _ok(g, checks)]
        results[mode] = {}
        for attr in checks:
            right, total, pct = percent(grades, attr)
            results[mode][attr] = {"right": right, "of": total, "percent": round(pct, 1)}
            if attr in floors:
                met &= pct >= floors[attr]

    healthy = sorted(HEALTHY.glob("*.log"))
    noisy = [p.name for p in healthy if _diagnose(p, run).status is not Status.CLEAN]
    met &= not noisy or bool(args.batch)

    if args.json:
        print(
            json.dumps(
                {
                    "mode": label,
                    "cases": len(cases),
                    "figures": results,
                    "healthy_logs_clean": {"right": len(healthy) - len(noisy), "of": len(healthy)},
                    "met": met,
                    "misses": [
                        {"id": g.case.id, "mode": g.mode, "problems": g.problems, "got": g.got}
                        for g in misses
                    ],
                },
                indent=1,
            )
        )
        return 0 if met else 1

    print(
        f"{label}: {len(cases)} labelled cases ({sum(c.is_failure for c in cases)} failures, "
        f"{sum(not c.is_failure for c in cases)} none)\n"
    )
    print(f"{'':10} " + " ".join(f"{HEADS[CHECKS.index(c)]:>16}" for c in checks))
    for mode in MODES:
        cells = [f"{r['right']:>3}/{r['of']:<3} {r['percent']:6.1f}%" for r in results[mode].values()]
        print(f"{mode:10} " + " ".join(f"{c:>16}" for c in cells))
    print(
        f"\nhealthy logs (tests/healthy/) clean: {len(healthy) - len(noisy)}/{len(healthy)}"
        + (f"; failure claimed on {', '.join(noisy)}" if noisy else "")
    )
    print()
    for mode in MODES:
        parts = " ".join(f"{attr.split('_')[0]}={r['percent']:.1f}%" for attr, r in results[mode].items())
        print(f"summary [{label}] {mode}: {parts}")
    if floors:
        wanted = ", ".join(f"{HEADS[CHECKS.index(a)]} >= {v:.0f}%" for a, v in floors.items())
        print(f"\nrequired: {wanted}: {'met' if met else 'NOT met'}")
    print(f"\nmisses ({len(misses)}):" if misses else "\nno misses")
    for g in misses:
        problems = [p for p in g.problems if args.generic_only is False or "signature" not in p]
        print(f"- {g.case.id} [{g.mode}] {g.case.expected_class}: " + "; ".join(problems))
        print(
            f"    got: status={g.got['status']} signature={g.got['signature']} "
            f"line={g.got['line']} rank={g.got['rank']} text={g.got['text']!r}"
        )
    return 0 if met else 1


def _diagnose(path: Path, run: Callable[[Source], Diagnosis] | None) -> Diagnosis:
    source = Source.from_path(path)
    return run(source) if run else diagnose([source])


def _ok(g: Grade, checks: list[str]) -> bool:
    return all(getattr(g, attr) is not False for attr in checks)


if __name__ == "__main__":
    sys.exit(main())
