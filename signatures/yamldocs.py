"""The YAML side of loading: each file's document, read with ``safe_load`` semantics.

Apart from ``signatures.loader`` so that a start-up served from a snapshot never imports yaml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from signatures.spec import Problem


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a mapping with the same key twice.

    safe_load silently keeps the last of two equal keys, so a second ``note:`` or ``regex:`` in a
    fingerprint would quietly replace the first; here it is a loading problem naming the key and line.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:  # an unhashable key: SafeLoader reports it itself
                continue
            if first is not key_node.start_mark:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r} (first on line {first.line + 1})",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def read_documents(files: list[tuple[str, Path]], problems: list[Problem]) -> list[tuple[str, Any]]:
    """Each ``(name, path)`` file's document; a file that cannot be read or parsed is a problem."""
    out = []
    for name, path in files:
        try:
            doc = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)  # a SafeLoader
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem(name, "(file)", f"cannot read: {exc}"))
            continue
        except yaml.YAMLError as exc:
            problems.append(Problem(name, "(yaml)", f"not valid YAML: {_one_line(exc)}"))
            continue
        out.append((name, doc))
    return out


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
