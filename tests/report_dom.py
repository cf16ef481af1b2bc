"""A small DOM of an HTML page (stdlib parser), for asserting on the report page and on the DOM a
real browser dumps: elements with their attributes, their text, and their ancestors."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = frozenset({"meta", "link", "br", "hr", "img", "input", "source", "wbr", "area", "base", "col"})


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    parent: Element | None
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def inside(self, tag: str, cls: str | None = None) -> bool:
        """True when an ancestor is ``tag`` (with class ``cls``)."""
        node = self.parent
        while node is not None:
            if node.tag == tag and (cls is None or cls in node.classes):
                return True
            node = node.parent
        return False


class Dom(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, {k: v or "" for k, v in attrs}, self._open[-1] if self._open else None)
        self.elements.append(el)
        if tag not in VOID:
            self._open.append(el)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(
            Element(tag, {k: v or "" for k, v in attrs}, self._open[-1] if self._open else None)
        )

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                return

    def handle_data(self, data: str) -> None:
        for el in self._open:
            el.parts.append(data)

    def all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Element]:
        """Elements by tag, class and exact attribute values (``data_rank="12"`` is data-rank)."""
        want = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [
            e
            for e in self.elements
            if (tag is None or e.tag == tag)
            and (cls is None or cls in e.classes)
            and all(e.attrs.get(k) == v for k, v in want.items())
        ]

    def one(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Element:
        found = self.all(tag, cls, **attrs)
        assert len(found) == 1, f"expected one {tag}.{cls} {attrs}, found {len(found)}"
        return found[0]
