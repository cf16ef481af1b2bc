"""PyTorch's NCCL flight-recorder dumps: read safely, compared across ranks, told as evidence.

When every rank only reports a watchdog timeout, the logs cannot say which rank never entered
the collective; the per-rank dumps (TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT) can.
Modules: ``unpickle`` (the only pickle reader, refusing every import), ``parse`` (dump -> typed
records), ``analysis`` (the first collective where ranks disagree), ``evidence`` (that finding as
a line the signature library names), ``intake`` (recognising dumps among the inputs, by ``sniff``).
"""

from __future__ import annotations

from collections.abc import Sequence

from signatures.flight_recorder.errors import DumpError, DumpTooLarge, MalformedDump, UnsafeDump
from signatures.flight_recorder.intake import DumpChunks, DumpScan, divert, read_any
from signatures.hits import TextScan, read_text
from signatures.library import Library

__all__ = [
    "DumpChunks",
    "DumpError",
    "DumpScan",
    "DumpTooLarge",
    "MalformedDump",
    "UnsafeDump",
    "divert",
    "read_any",
    "with_findings",
]


def with_findings(scans: Sequence[TextScan], library: Library) -> list[TextScan]:
    """``scans`` with the dumps' finding as a text of its own, last, so log errors keep the lead.

    The lagging rank's dump becomes that text: its line 1 is the finding's sentence (read with
    ``library`` like a log line), its context the details. Without dumps, nothing changes.
    """
    dumps = [s for s in scans if isinstance(s, DumpScan) and s.dump is not None]
    if not dumps:
        return list(scans)
    # Here, not at the top: a diagnosis of logs alone never loads the comparison of dumps.
    from signatures.flight_recorder.analysis import analyse
    from signatures.flight_recorder.evidence import details, sentence, summary_fact

    analysis = analyse([s.dump for s in dumps if s.dump is not None])
    first = dumps[0]
    fact = summary_fact(analysis, first.dump.version if first.dump else "?")
    first.facts = {**first.facts, "flight_recorder": fact}
    finding = analysis.finding
    if finding is None:
        return list(scans)
    host = next(s for s in dumps if s.dump is not None and s.dump.rank == finding.named[0])
    text = read_text(library, host.name, 0, iter([sentence(finding).encode("utf-8") + b"\n"]))
    context = tuple(details(analysis))
    for hit in text.hits:
        hit.before, hit.after = (), context
    text.bytes, text.facts = host.bytes, host.facts
    # Last in file order: a real error in a log (an OOM on that rank) names the cause before it.
    out = [s for s in scans if s is not host] + [text]
    for index, scan in enumerate(out):
        scan.renumber(index)
    return out
