"""Accuracy of the engine on the labelled real-log corpus, as pasted and embedded.

Run from the repository root: ``.venv/bin/python bench/accuracy.py``. It prints, for raw and
embedded logs: initiating line found, rank right (of the cases with a labelled rank), signature
right (of the cases the class map names ids for), clean on `none` cases, and every miss.
Required: line found >= 95%, signature right >= 90%, no failure claimed on a `none` case.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.corpus.cases import MODES, Grade, load_cases, run_case

LINE_FLOOR, SIGNATURE_FLOOR = 95.0, 90.0


def percent(grades: list[Grade], attr: str) -> tuple[int, int, float]:
    """Right, applicable and the percentage for one check."""
    values = [getattr(g, attr) for g in grades if getattr(g, attr) is not None]
    right = sum(1 for v in values if v)
    return right, len(values), 100.0 * right / len(values) if values else 100.0


def main() -> int:
    """Print the figures and the misses; exit 1 when a required level is not met."""
    cases = load_cases()
    met = True
    misses: list[Grade] = []
    print(
        f"{len(cases)} labelled cases ({sum(c.is_failure for c in cases)} failures, "
        f"{sum(not c.is_failure for c in cases)} none)\n"
    )
    heads = ("line found", "rank right", "signature right", "clean on none")
    print(f"{'':10} " + " ".join(f"{h:>16}" for h in heads))
    for mode in MODES:
        grades = [run_case(case, mode) for case in cases]
        misses += [g for g in grades if not g.ok]
        cells = []
        for attr in ("line_found", "rank_right", "signature_right", "clean_right"):
            right, total, pct = percent(grades, attr)
            cells.append(f"{right:>3}/{total:<3} {pct:6.1f}%")
        print(f"{mode:10} " + " ".join(f"{c:>16}" for c in cells))
        met &= percent(grades, "line_found")[2] >= LINE_FLOOR
        met &= percent(grades, "signature_right")[2] >= SIGNATURE_FLOOR
        met &= percent(grades, "clean_right")[2] == 100.0
    print(
        f"\nrequired: line found >= {LINE_FLOOR:.0f}%, signature right >= {SIGNATURE_FLOOR:.0f}%, "
        f"clean on none = 100%: {'met' if met else 'NOT met'}"
    )
    print(f"\nmisses ({len(misses)}):" if misses else "\nno misses")
    for g in misses:
        print(f"- {g.case.id} [{g.mode}] {g.case.expected_class}: " + "; ".join(g.problems))
        print(
            f"    got: status={g.got['status']} signature={g.got['signature']} "
            f"line={g.got['line']} rank={g.got['rank']}"
        )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
