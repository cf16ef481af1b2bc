"""Telling a dump from a log by its first bytes, and the bound on a dump's size.

Every input is sniffed, so this module is all of the flight recorder a diagnosis of logs alone
loads: the parser and the safe unpickler are imported only when a dump is found.
"""

from __future__ import annotations

MAX_DUMP_BYTES = 64 << 20  # a 20,000-entry buffer with stacks is a few MB; far past that is not a dump
PICKLE_PROTOCOLS = (2, 3, 4, 5)
_JSON_KEYS = (b'"comm_lib_version"', b'"pg_config"', b'"nccl_version"', b'"profiling_name"')


def is_pickle(head: bytes) -> bool:
    """Whether ``head`` starts like a pickle of protocol 2 or later (PROTO opcode)."""
    return len(head) >= 2 and head[0] == 0x80 and head[1] in PICKLE_PROTOCOLS


def looks_like_dump(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a flight-recorder dump (pickle, or JSON by shape)."""
    if is_pickle(head):
        return True
    text = head.lstrip()
    return text.startswith(b"{") and any(key in text for key in _JSON_KEYS)
