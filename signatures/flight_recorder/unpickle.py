"""The only way Denpex reads a pickle: a loader that admits plain data and refuses every import.

PyTorch writes flight-recorder dumps with its own pickler (protocol 2): dicts, lists, tuples,
strings, ints, floats, bools and None, nothing else. Every opcode that could run code (GLOBAL,
STACK_GLOBAL, INST, OBJ, EXT*, and through them REDUCE, NEWOBJ and BUILD) needs ``find_class``,
and persistent ids need ``persistent_load``: both refuse. What loads is then walked once,
without recursion, to bound its depth and element count and to check every type.
"""

from __future__ import annotations

import io
import pickle
import struct
from typing import Any, NoReturn

from signatures.flight_recorder.errors import DumpTooLarge, MalformedDump, UnsafeDump
from signatures.flight_recorder.sniff import MAX_DUMP_BYTES, is_pickle

MAX_DEPTH = 12  # a dump nests 6 deep (dump > entries > entry > frames > frame > value)
MAX_ELEMENTS = 20_000_000  # values as if every shared reference were a copy: 20,000 entries with stacks fit

_SCALARS = (str, int, float, bool, type(None))
_CONTAINERS = (dict, list, tuple)


class _RefusingUnpickler(pickle.Unpickler):
    """An Unpickler that can build nothing but the data types pickle encodes natively."""

    def __init__(self, data: bytes, name: str) -> None:
        super().__init__(io.BytesIO(data))
        self._name = name

    def find_class(self, module: str, name: str) -> NoReturn:
        raise UnsafeDump(
            f"{self._name}: the pickle asks to import {_printable(module)}.{_printable(name)}; "
            "flight-recorder dumps hold only plain data, so it was refused and nothing in it ran"
        )

    def persistent_load(self, pid: Any) -> NoReturn:
        raise UnsafeDump(
            f"{self._name}: the pickle refers to an external object (persistent id); "
            "flight-recorder dumps never do, so it was refused"
        )


def load_pickle(data: bytes, name: str) -> Any:
    """Unpickle ``data`` admitting only plain containers, strings and numbers; raise DumpError."""
    if len(data) > MAX_DUMP_BYTES:
        raise DumpTooLarge(f"{name}: the dump is {len(data)} bytes, past the {MAX_DUMP_BYTES} byte bound")
    if not is_pickle(data[:2]):
        raise MalformedDump(f"{name}: not a pickle of protocol 2 or later")
    try:
        value = _RefusingUnpickler(data, name).load()
    except UnsafeDump:
        raise
    except (pickle.UnpicklingError, EOFError, struct.error) as exc:
        raise MalformedDump(f"{name}: not a readable pickle ({exc})") from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        # A data-only pickle can still be wrong: a dict keyed by a list, a bad memo index.
        raise MalformedDump(f"{name}: a broken pickle ({type(exc).__name__}: {exc})") from None
    except (MemoryError, RecursionError):
        raise MalformedDump(f"{name}: the pickle expands past what a dump can hold") from None
    check_plain(value, name)
    return value


def check_plain(value: Any, name: str, max_elements: int = MAX_ELEMENTS) -> None:
    """Raise MalformedDump unless ``value`` is plain data within the depth and size bounds.

    A pickle can share one container many times (PyTorch's own pickler shares frame dicts
    between entries), so sizes are counted as if expanded, each shared container once by
    identity: a small pickle that nests shared lists a billion times over is refused at once.
    """
    done: dict[int, tuple[int, int]] = {}  # id -> (elements if expanded, depth)
    open_: set[int] = set()  # containers whose children are being walked: seen again = a cycle
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, children_done = stack.pop()
        if isinstance(item, _SCALARS):
            continue
        if not isinstance(item, _CONTAINERS):
            raise MalformedDump(f"{name}: holds a {type(item).__name__}, which no flight-recorder dump does")
        key = id(item)
        if children_done:
            size, depth = 1, 1
            for child in _children(item):
                if not isinstance(child, _SCALARS):
                    n, d = done[id(child)]
                    size, depth = size + n, max(depth, d + 1)
                else:
                    size += 1
            if depth > MAX_DEPTH:
                raise MalformedDump(f"{name}: nested more than {MAX_DEPTH} levels deep, unlike any dump")
            if size > max_elements:
                raise MalformedDump(f"{name}: expands to more than {max_elements} values, unlike any dump")
            done[key] = (size, depth)
            open_.discard(key)
            continue
        if key in done:
            continue
        if key in open_:
            raise MalformedDump(f"{name}: a container holds itself, which no flight-recorder dump does")
        open_.add(key)
        stack.append((item, True))
        stack.extend((c, False) for c in _children(item) if not isinstance(c, _SCALARS))


def _children(item: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> list[Any]:
    if isinstance(item, dict):
        return [x for pair in item.items() for x in pair]
    return list(item)


def _printable(text: str) -> str:
    """A name from a hostile file, cut short and stripped of control characters for the message."""
    clean = "".join(c if c.isprintable() else "?" for c in str(text))
    return clean[:80] + ("..." if len(clean) > 80 else "")
