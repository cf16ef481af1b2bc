"""Hostile pickles: whatever a dump asks to import or build is refused, and nothing in it runs."""

from __future__ import annotations

import os
import pickle
import subprocess
from pathlib import Path
from typing import Any

import pytest

from signatures.flight_recorder import DumpTooLarge, MalformedDump, UnsafeDump
from signatures.flight_recorder.intake import DumpChunks, divert
from signatures.flight_recorder.parse import looks_like_dump, parse_dump
from signatures.flight_recorder.unpickle import MAX_DUMP_BYTES, load_pickle


class Reducing:
    """Pickles as a call of ``func(*args)``: what an attacker's dump would hold."""

    def __init__(self, func: Any, *args: Any) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.func, self.args


def hostile(func: Any, *args: Any, protocol: int = 2) -> bytes:
    # Building the pickle runs nothing; only loading it with a stock unpickler would.
    return pickle.dumps({"version": "2.10", "entries": [Reducing(func, *args)]}, protocol=protocol)


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (hostile(os.system, "touch /tmp/denpex-pwned"), ".system"),
        (hostile(subprocess.Popen, ["true"], protocol=4), "subprocess.Popen"),
        (hostile(eval, "__import__('os').system('true')", protocol=5), "builtins.eval"),
        (b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85q\x01R.", "os.system"),  # GLOBAL + REDUCE
        (b"\x80\x02(X\x04\x00\x00\x00trueios\nsystem\n.", "os.system"),  # INST
        (b"\x80\x04\x8c\x02os\x8c\x06system\x93.", "os.system"),  # STACK_GLOBAL
    ],
    ids=["os.system-reduce", "subprocess.Popen-stack-global", "eval", "global", "inst", "stack-global"],
)
def test_a_pickle_that_imports_anything_is_refused_naming_it(data: bytes, named: str) -> None:
    with pytest.raises(UnsafeDump, match=r"asks to import .*" + named.replace(".", r"\.")) as info:
        load_pickle(data, "nccl_trace_rank_0")
    assert "nccl_trace_rank_0" in str(info.value) and "refused" in str(info.value)
    assert not Path("/tmp/denpex-pwned").exists()


def test_a_persistent_id_is_refused() -> None:
    with pytest.raises(UnsafeDump, match="persistent id"):
        load_pickle(b"\x80\x02X\x01\x00\x00\x00aQ.", "nccl_trace_rank_1")


def test_refusals_are_input_errors_the_bot_reports() -> None:
    from signatures.errors import InputError, InputTooLarge

    assert issubclass(UnsafeDump, InputError) and issubclass(MalformedDump, InputError)
    assert issubclass(DumpTooLarge, InputTooLarge)


def test_a_deep_nesting_bomb_is_refused_without_recursion() -> None:
    bomb = b"\x80\x02" + b"(" * 200_000 + b"l" * 200_000 + b"."
    with pytest.raises(MalformedDump, match="nested more than"):
        load_pickle(bomb, "deep")


def test_shared_references_that_expand_a_billion_times_are_refused() -> None:
    # a0 = "x"; a1 = [a0] * 1000; a2 = [a1] * 1000; a3 = [a2] * 1000: 10**9 values from ~12 KB.
    out = bytearray(b"\x80\x02X\x01\x00\x00\x00xq\x00")  # memo 0 = "x"
    for level in range(1, 4):
        # EMPTY_LIST, MARK, 1000 x BINGET of the level below, APPENDS, BINPUT as this level.
        out += b"](" + (b"h" + bytes([level - 1])) * 1000 + b"eq" + bytes([level])
    out += b"."
    with pytest.raises(MalformedDump, match="expands to more than"):
        load_pickle(bytes(out), "laughs")


def test_a_container_that_holds_itself_is_refused() -> None:
    with pytest.raises(MalformedDump, match="holds itself"):
        load_pickle(b"\x80\x02]q\x00h\x00a.", "cycle")


def test_a_huge_dump_is_refused_before_it_is_held_whole() -> None:
    def blocks() -> Any:
        yield b"\x80\x02}q\x00"
        while True:  # an endless stream: the bound, not the end of input, must stop it
            yield b"\x00" * (1 << 20)

    dump, _ = divert("nccl_trace_rank_9", blocks())
    assert isinstance(dump, DumpChunks)
    with pytest.raises(DumpTooLarge, match=f"larger than {MAX_DUMP_BYTES >> 20} MiB"):
        dump.read()
    with pytest.raises(DumpTooLarge, match="past the"):
        load_pickle(b"\x80\x02" + b"N" * MAX_DUMP_BYTES, "big")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (pickle.dumps([1, 2, 3], protocol=2), "not the dict"),
        (pickle.dumps({"a": 1}, protocol=2), "neither 'entries' nor 'pg_config'"),
        (pickle.dumps({"entries": [{"state": "started"}]}, protocol=2), "process_group"),
        (pickle.dumps({"entries": {}}, protocol=2), "not a list"),
        (pickle.dumps({"entries": [], "pg_config": {"0": {"ranks": "__import__('os')"}}}), "ranks"),
        (pickle.dumps({"entries": [b"bytes"]}, protocol=3), "holds a bytes"),
        (b"\x80\x02}q\x00(X", "not a readable pickle"),
        (b'{"pg_config": {"0": ', "not valid JSON"),
    ],
    ids=["list", "no-entries", "no-group", "entries-dict", "ranks-code", "bytes", "truncated", "json"],
)
def test_malformed_dumps_say_what_is_wrong(data: bytes, why: str) -> None:
    with pytest.raises(MalformedDump, match=why):
        parse_dump(data, "nccl_trace_rank_2")


def test_a_dump_whose_rank_nothing_says_is_refused() -> None:
    data = pickle.dumps({"version": "2.10", "entries": [], "pg_config": {}}, protocol=2)
    with pytest.raises(MalformedDump, match="does not say its rank"):
        parse_dump(data, "dump.pkl")
    assert parse_dump(data, "trace_rank_7").rank == 7


def test_recognised_by_content_not_by_name() -> None:
    assert looks_like_dump(b"\x80\x02}q\x00(X\x07\x00\x00\x00version")
    assert looks_like_dump(b'{"comm_lib_version":"2.21.5","entries":[')
    assert not looks_like_dump(b'{"level": "info", "msg": "step 10"}')
    assert not looks_like_dump(b"[rank0]: RuntimeError: boom\n")
    assert not looks_like_dump(b"\x80\x01")  # protocol 1 has no PROTO opcode: not a torch dump
