"""What a follow-up question asks: one of a fixed set of intents, matched by keywords, then by
``rapidfuzz`` against example phrasings so rewordings and typos still land.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rapidfuzz import fuzz, process

# Below this fuzzy score (0-100) a question with no keyword is "not understood".
FUZZY_THRESHOLD = 72.0


@dataclass(frozen=True)
class Intent:
    name: str
    label: str  # button text for the "I can answer" menu
    keywords: re.Pattern[str]
    examples: tuple[str, ...]


def _kw(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


INTENTS: tuple[Intent, ...] = (
    Intent(
        "is_root_cause",
        "Is this the real cause?",
        _kw(
            r"\bis (this|that|it) (really |actually )?(the )?(real |actual |true |root )"
            r"?(cause|problem|culprit|issue)",
            r"\b(just|only) a (symptom|side effect)",
            r"red herring",
            r"why (did you|do you|would you) (pick|choose|say|blame|think)",
            r"why not (the )?\w+",
            r"\bnot the (real |actual )?cause",
            r"are you sure",
            r"\bisn'?t (it|this|that) (the|a|just)",
        ),
        (
            "is this really the root cause",
            "isn't the nccl timeout the real problem",
            "why did you pick this line",
            "are you sure that's the cause",
        ),
    ),
    Intent(
        "downstream",
        "What happened to the other ranks?",
        _kw(
            r"other (ranks?|gpus?|workers?|nodes?|processes)",
            r"(rest|all) of the (ranks?|gpus?|workers?|nodes?)",
            r"\bdownstream",
            r"what happened (next|after|afterwards|then)",
            r"knock.?on|cascad",
            r"\bthe (other )?timeouts?\b",
            r"why did (everything|everyone|all( the)? ranks?) ",
            r"(so many|all those|all these) (errors|timeouts|ranks)",
        ),
        (
            "why did the other ranks fail",
            "what happened to the rest of the ranks",
            "what are all those timeouts",
            "what happened after that",
        ),
    ),
    Intent(
        "which_rank",
        "Which rank failed first?",
        _kw(
            r"\b(which|what) (rank|gpu|worker|process|proc|pid|device|local.?rank)\b",
            r"\brank (failed|died|crashed|broke|went down)",
            r"who (failed|died|crashed|broke) first",
            r"\bculprit rank",
            r"\brank number",
        ),
        ("which rank failed first", "what gpu died", "which worker crashed", "who died first"),
    ),
    Intent(
        "where_started",
        "Where and when did it start?",
        _kw(
            r"\b(where|when) (did|does|was) (it|this|the (failure|error|crash|problem)|things?)"
            r" (start|begin|happen|first|go wrong|occur|break)",
            r"\bwhen did (it|this|the \w+) (fail|die|crash|break)",
            r"\bfirst (failure|error|sign|thing)",
            r"\bwhat time\b",
            r"\b(which|what) (host|machine|server|box|node)",
            r"\btimestamp",
            r"\bwhere did (it|this) (fail|die|crash|break)",
        ),
        (
            "when did it start",
            "which host was it on",
            "where did the failure begin",
            "what time did it die",
        ),
    ),
    Intent(
        "evidence",
        "Show the log line",
        _kw(
            r"show (me )?(the )?(line|log|evidence|error|trace|stack)",
            r"\b(which|what) (log )?line\b",
            r"\bevidence\b",
            r"\bthe exact (error|line|message|text)",
            r"where in the (log|file)",
            r"\bwhat does (this|that|the) (log )?line (say|mean)",
            r"\bquote\b",
            r"\bline number",
        ),
        ("show me the line", "what line in the log", "what's the evidence", "quote the error"),
    ),
    Intent(
        "environment",
        "What environment was this?",
        _kw(
            r"\benv(ironment)?\b",
            r"\bversions?\b",
            r"\b(torch|pytorch|cuda|nccl|driver|python|transformers|deepspeed) ?v(er|ersion)?\b",
            r"what (gpu|gpus|hardware|cluster|setup|card)s? (was|were|is|are|did)",
            r"\bsetup\b",
        ),
        (
            "what environment was this",
            "which pytorch version",
            "what cuda version was it",
            "what gpus were used",
        ),
    ),
    Intent(
        "hardware_or_software",
        "Hardware or software?",
        _kw(
            r"\bhardware\b",
            r"\bsoftware\b",
            r"\b(bad|faulty|broken|dead|flaky) (gpu|node|card|host|nic|ib|machine|hardware)",
            r"\b(our|my) (code|bug|fault)",
            r"\bdriver bug",
            r"\bphysical",
            r"\bhw\b|\bsw\b",
            r"\bthe (node|gpu|machine)'?s? fault",
        ),
        ("is this hardware or software", "is the gpu bad", "is it a faulty node", "our code or hw"),
    ),
    Intent(
        "prevention",
        "How to prevent it?",
        _kw(
            r"\bprevent",
            r"\bnext time\b",
            r"\bin (the )?future\b",
            r"stop (this|it) from",
            r"\bguard (against|rail)",
            r"\b(monitor|alert|catch) (for )?(this|it)",
            r"\bavoid (this|it) (again|in)",
            r"\bearly warning",
        ),
        (
            "how do we prevent this",
            "how to avoid it next time",
            "what monitoring would catch this",
            "how to stop it from happening in the future",
        ),
    ),
    Intent(
        "recurrence",
        "Will it happen again?",
        _kw(
            r"\bagain\b",
            r"\brecur",
            r"happen(ed)? (before|previously)",
            r"\bseen (this|it) before",
            r"\bhow often",
            r"\bfirst time",
            r"\brepeat",
            r"\bintermittent",
            r"\bflaky\b",
            r"\blast time",
            r"\bkeep(s)? happening",
            r"\bdeterministic",
        ),
        (
            "will it happen again",
            "have we seen this before",
            "how often does this happen",
            "is it deterministic",
        ),
    ),
    Intent(
        "scale",
        "Does it depend on scale?",
        _kw(
            r"\bscal(e|es|ing)\b",
            r"\b(more|fewer|less) (gpus|nodes|ranks|workers|machines)",
            r"\b(bigger|larger|smaller) (model|cluster|job|run|batch)",
            r"\bnumber of (gpus|nodes|ranks)",
            r"\bat \d+ (gpus|nodes|ranks)",
            r"\bmulti.?node|single.?(gpu|node)",
            r"\b\d+ ?(gpus|nodes)\b",
        ),
        (
            "does it depend on scale",
            "will it happen with fewer gpus",
            "does this only happen multi-node",
            "what if we use a bigger cluster",
        ),
    ),
    Intent(
        "collect",
        "What to collect before restarting?",
        _kw(
            r"\bcollect",
            r"\bgather",
            r"\bcapture",
            r"before (i |we )?(restart|rerun|relaunch|resubmit|retry)",
            r"what (logs|data|info|information|output|diagnostics) (should|do|to)",
            r"\b(grab|save|dump|attach) (before|first|what)",
            r"\bwhat (else )?(should|do) (i|we) (attach|send|save|grab)",
        ),
        (
            "what should i collect before restarting",
            "what logs do you need",
            "what should we capture first",
            "what info should i attach",
        ),
    ),
    Intent(
        "confirm",
        "How to confirm it?",
        _kw(
            r"\bconfirm",
            r"\bverify",
            r"\bmake sure",
            r"how (do|can|would) (i|we|you) (know|tell|check|be sure)",
            r"\bprove\b",
            r"double.?check",
            r"\bchecklist",
            r"\bsanity.?check",
            r"\btest (that|whether|if) (this|it)",
        ),
        (
            "how do i confirm this",
            "how can we verify it",
            "how would i know for sure",
            "what should i check to be sure",
        ),
    ),
    Intent(
        "root_cause",
        "What caused it?",
        _kw(
            r"root.?cause",
            r"\bunderlying",
            r"\bwhat (caused|causes|triggered|triggers|led to)",
            r"\bcause[sd]?\b",
            r"\bwhy (did|does|do|would|is|was) .{0,40}"
            r"(fail|happen|crash|die|oom|hang|break|explode|run out)",
            r"\breason\b",
            r"\bhow (did|does|come) (this|it) happen",
        ),
        (
            "what caused this",
            "why did the job fail",
            "what's the reason for the crash",
            "why did it run out of memory",
        ),
    ),
    Intent(
        "fix",
        "How do I fix it?",
        _kw(
            r"\bfix",
            r"\bsolve|\bresolve|\bsolution",
            r"\bworkaround|work around",
            r"\bremed",
            r"what (should|do|can|must) (i|we) (do|change|try|set)",
            r"how (do|can|to|should) (i|we)? ?"
            r"(fix|avoid|get (past|around|rid)|make it work|repair)",
            r"\b(get|make) (it|this|the (job|run|training)) (work|run|pass)",
            r"\bwhat (flag|setting|option|command|config)",
            r"\bnext steps?\b",
        ),
        (
            "how do i fix this",
            "what should we change",
            "any workaround",
            "what setting should i use",
        ),
    ),
    Intent(
        "related",
        "Related failures",
        _kw(
            r"\brelated\b",
            r"\bsimilar\b",
            r"\bother (failures|errors|signatures|issues) like",
            r"\bsee also",
            r"\blinked to",
            r"\bconnected (to|with)",
            r"\blooks? like (something|another)",
        ),
        (
            "any related failures",
            "what similar errors are there",
            "is this related to other issues",
        ),
    ),
    Intent(
        "meaning",
        "What does this error mean?",
        _kw(
            r"\bwhat (does|do) (this|that|it|the) (error|message|exception|failure)?\s?mean",
            r"\bmeaning\b",
            r"\bexplain",
            r"\bwhat is (a|an|this|that|the) ",
            r"\bwhat'?s (a|an|this|that) ",
            r"\bin plain (english|words)",
            r"\beli5\b",
            r"\bnever (seen|heard)",
            r"\bwhat even is",
        ),
        (
            "what does this error mean",
            "explain this please",
            "what is a watchdog timeout",
            "in plain english?",
        ),
    ),
)

BY_NAME = {i.name: i for i in INTENTS}
_EXAMPLES: list[tuple[str, str]] = [(ex, i.name) for i in INTENTS for ex in i.examples]
_VOCAB = frozenset(w for ex, _ in _EXAMPLES for w in ex.split() if len(w) >= 3) | frozenset(
    ("fix", "cause", "caused", "rank", "failed", "evidence", "happen", "restart")
)
_VOCAB_LIST = sorted(_VOCAB)
SPELL_THRESHOLD = 66.0
_CLEAN = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>|[^\w\s'?.-]")


def normalise(question: str) -> str:
    """Lower-case, mentions and punctuation removed, spaces squeezed."""
    return " ".join(_CLEAN.sub(" ", question).lower().split())


def match_intent(question: str) -> str | None:
    """The intent a question asks about, or None when it cannot be mapped."""
    if question.startswith("intent:"):  # a button from the "I can answer" menu
        name = question.removeprefix("intent:").strip()
        return name if name in BY_NAME else None
    q = normalise(question)
    if not q:
        return None
    winner = _by_keywords(q) or _by_keywords(_spell(q))
    if winner is not None:
        return winner
    found = process.extractOne(q, [ex for ex, _ in _EXAMPLES], scorer=fuzz.QRatio)
    if found is not None and found[1] >= FUZZY_THRESHOLD:
        return _EXAMPLES[found[2]][1]
    return None


def _by_keywords(q: str) -> str | None:
    # The intent with the most keyword hits wins; ties go to the one declared first (specific
    # intents such as is_root_cause are declared before broad ones such as root_cause).
    best: tuple[int, int] | None = None
    winner = None
    for order, intent in enumerate(INTENTS):
        hits = len(intent.keywords.findall(q))
        if hits and (best is None or (hits, -order) > best):
            best, winner = (hits, -order), intent.name
    return winner


def _spell(q: str) -> str:
    """Each unknown word replaced by the closest word of the example phrasings (typos)."""
    out = []
    for word in q.split():
        if word in _VOCAB or len(word) < 3:
            out.append(word)
            continue
        near = [
            cand
            for cand, score, _ in process.extract(word, _VOCAB_LIST, scorer=fuzz.ratio, limit=3)
            if score >= SPELL_THRESHOLD and abs(len(cand) - len(word)) <= 1
        ]
        out.append(near[0] if near else word)
    return " ".join(out)


def menu() -> list[tuple[str, str]]:
    """(button label, value) for every intent, for a question that could not be mapped."""
    return [(i.label, i.name) for i in INTENTS]
