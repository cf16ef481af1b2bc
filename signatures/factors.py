"""Required literals of a regex: strings one of which every match contains.

A regex's required literals tell, in one literal pass over a chunk, that the regex cannot match
anywhere in it. Only what is certain is derived: a run of literal characters (or of small sets
of literal alternatives) at the top level of the pattern; anything else ends the run. A pattern
without such a run of at least MIN_LENGTH characters has none (None: it may match anywhere).
"""

from __future__ import annotations

import re
import re._constants as sre_constants
import re._parser as sre_parse
from typing import Any

MIN_LENGTH = 2  # a shorter literal is found nearly everywhere: it tells nothing
MAX_ALTERNATIVES = 16  # alternatives one run may grow to (sets of literals multiply them)


def required_literals(regex: str) -> tuple[str, ...] | None:
    """Literals one of which every match of ``regex`` contains; None when none can be derived."""
    try:
        parsed = sre_parse.parse(regex)
    except re.error:
        return None
    if parsed.state.flags & (re.IGNORECASE | re.VERBOSE):
        return None  # literals would need the same flags in the literal pass: not worth it
    best: list[str] | None = None
    run = [""]
    for op, av in [*parsed, (None, None)]:  # the sentinel closes the last run
        alternatives = _alternatives(op, av) if op is not None else None
        if alternatives is not None and len(run) * len(alternatives) <= MAX_ALTERNATIVES:
            run = [head + tail for head in run for tail in alternatives]
            continue
        shortest = min(len(s) for s in run)
        if shortest >= MIN_LENGTH and (best is None or shortest > min(len(s) for s in best)):
            best = run
        run = [""]
    return tuple(dict.fromkeys(best)) if best is not None else None


def _alternatives(op: Any, av: Any) -> list[str] | None:
    """The literal strings one node matches exactly, or None when it matches anything else."""
    if op is sre_constants.LITERAL:
        return [chr(av)]
    if op is sre_constants.SUBPATTERN:
        _group, add_flags, del_flags, body = av
        if add_flags or del_flags:
            return None
        out = [""]
        for sub_op, sub_av in body:
            tails = _alternatives(sub_op, sub_av)
            if tails is None:
                return None
            out = [head + tail for head in out for tail in tails]
            if len(out) > MAX_ALTERNATIVES:
                return None
        return out
    if op is sre_constants.BRANCH:
        out = []
        for branch in av[1]:
            text = ""
            for sub_op, sub_av in branch:
                if sub_op is not sre_constants.LITERAL:
                    return None
                text += chr(sub_av)
            out.append(text)
        return out if len(out) <= MAX_ALTERNATIVES else None
    if op is sre_constants.IN and len(av) <= 4 and all(o is sre_constants.LITERAL for o, _ in av):
        return [chr(a) for _, a in av]
    return None
