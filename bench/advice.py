"""What Denpex advises for every failure of the labelled corpus: the README's "What to do next" table.

Run from the repository root: ``.venv/bin/python bench/advice.py [--cases]``. It diagnoses each
failure case as pasted (the engine's advice, no history) and prints how many cases got each
decision, with the restart classes behind it (the README's table); ``--cases`` also lists every case. A case labelled with a warning
class comes out clean and, like any run that did not fail, gets no advice; exit 1 when a case
diagnosed as a failure got none.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.cli.advise import EXIT_CODES
from signatures import Source, diagnose
from signatures.advice import ADVISED_STATUSES, Decision
from signatures.spec import RestartClass
from tests.corpus.cases import load_cases


@dataclass
class Tally:
    """The corpus' failures by advice: what the README's table shows."""

    failures: int = 0
    warnings: list[str] = field(default_factory=list)  # runs that did not die: clean or degraded
    unadvised: list[str] = field(default_factory=list)  # a failure without advice: must stay empty
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)  # (decision, class) -> cases
    rows: list[str] = field(default_factory=list)

    @property
    def advised(self) -> int:
        return sum(self.pairs.values())


def tally() -> Tally:
    """Diagnose every failure case of the corpus as pasted and count its advice."""
    t = Tally()
    for case in load_cases():
        if not case.is_failure:
            continue
        t.failures += 1
        d = diagnose([Source.from_bytes(case.path.name, case.data)])
        if d.advice is None:
            (t.unadvised if d.status.value in ADVISED_STATUSES else t.warnings).append(case.id)
            continue
        t.pairs[d.advice.decision.value, d.advice.restart_class.value] += 1
        sig = d.signature.id if d.signature else "(unrecognized)"
        t.rows.append(f"| {case.id} | `{sig}` | {d.advice.decision.value} | {','.join(d.advice.exclude_hosts)} |")
    return t


def table(t: Tally) -> str:
    """The README's table: cases per decision, with the restart classes they came from."""
    lines = ["| decision | exit | cases | share | from restart class |", "|---|---:|---:|---:|---|"]
    for decision in Decision:
        by_class = {c: n for (d, c), n in t.pairs.items() if d == decision.value}
        n = sum(by_class.values())
        classes = ", ".join(f"`{c}` {by_class[c.value]}" for c in RestartClass if c.value in by_class)
        share = f"{100 * n / t.advised:.0f}%"
        lines.append(f"| `{decision.value}` | {EXIT_CODES[decision]} | {n} | {share} | {classes or '-'} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print the table; exit 1 when a failure got no advice."""
    t = tally()
    print(
        f"{t.failures} failure cases in the corpus; {len(t.warnings)} did not end the run (clean or degraded) "
        f"({', '.join(t.warnings)}); advice on {t.advised} of the other {t.failures - len(t.warnings)}\n"
    )
    print(table(t))
    if "--cases" in argv:
        print("\n| case | signature | decision | exclude |\n|---|---|---|---|")
        print("\n".join(t.rows))
    if t.unadvised:
        print(f"\nno advice for {len(t.unadvised)} failure(s): " + ", ".join(t.unadvised))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
