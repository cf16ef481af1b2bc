"""What Denpex advises for every failure of the labelled corpus: the README's "What to do next" table.

Run from the repository root: ``.venv/bin/python bench/advice.py [--cases]``. It diagnoses each
failure case as pasted (the engine's advice, no history) and prints how many cases got each
decision and restart class; ``--cases`` also lists every case. A case labelled with a warning
class comes out clean and, like any run that did not fail, gets no advice; exit 1 when a case
diagnosed as a failure got none.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from signatures import Source, diagnose
from signatures.advice import ADVISED_STATUSES, Decision
from signatures.spec import RestartClass
from tests.corpus.cases import load_cases


def main(argv: list[str]) -> int:
    """Print the tables; exit 1 when a failure case has no advice."""
    failures = [c for c in load_cases() if c.is_failure]
    decisions: Counter[str] = Counter()
    classes: Counter[str] = Counter()
    unadvised: list[str] = []
    warnings: list[str] = []
    rows: list[str] = []
    for case in failures:
        d = diagnose([Source.from_bytes(case.path.name, case.data)])
        if d.advice is None:
            (unadvised if d.status.value in ADVISED_STATUSES else warnings).append(case.id)
            continue
        decisions[d.advice.decision.value] += 1
        classes[d.advice.restart_class.value] += 1
        sig = d.signature.id if d.signature else "(unrecognized)"
        hosts = ",".join(d.advice.exclude_hosts)
        rows.append(f"| {case.id} | `{sig}` | {d.advice.decision.value} | {hosts} |")
    total = len(failures) - len(warnings)
    print(
        f"{len(failures)} failure cases in the corpus; {len(warnings)} of them only warn and come out "
        f"clean ({', '.join(warnings)}); advice on {total - len(unadvised)} of the other {total}\n"
    )
    print("| decision | cases | share |\n|---|---:|---:|")
    for decision in Decision:
        n = decisions[decision.value]
        print(f"| `{decision.value}` | {n} | {100 * n / total:.0f}% |")
    print("\n| restart class | cases | share |\n|---|---:|---:|")
    for cls in RestartClass:
        n = classes[cls.value]
        print(f"| `{cls.value}` | {n} | {100 * n / total:.0f}% |")
    if "--cases" in argv:
        print("\n| case | signature | decision | exclude |\n|---|---|---|---|")
        print("\n".join(rows))
    if unadvised:
        print(f"\nno advice for {len(unadvised)} failure(s): " + ", ".join(unadvised))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
