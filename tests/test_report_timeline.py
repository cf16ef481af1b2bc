"""The rank timeline model and its picture: rows, columns, order, gaps and large jobs."""

from __future__ import annotations

from typing import Any

import pytest

from bot.pages.drawing import delta_text, draw, short_time, wrap
from bot.pages.timeline import MAX_ROWS, build_timeline
from bot.pages.view import ranges
from signatures import Diagnosis, Source, diagnose
from tests.test_report_page import EXAMPLE


def diag(initiating: dict[str, Any] | None, groups: list[dict[str, Any]], **over: Any) -> Diagnosis:
    return Diagnosis.from_dict(
        {
            "status": "failure" if initiating else "clean",
            "signature": {"id": "boom", "title": "Boom", "category": "c", "role": "initiating"}
            if initiating
            else None,
            "confidence": 0.9,
            "initiating": initiating,
            "downstream": groups,
            **over,
        }
    )


def line(file: str, no: int, text: str, **facts: Any) -> dict[str, Any]:
    return {"file": file, "line": no, "text": text, **facts}


def group(sig: str, role: str, ranks: list[int], first: dict[str, Any], count: int = 1) -> dict[str, Any]:
    return {
        "signature": sig,
        "title": sig.title(),
        "role": role,
        "count": count,
        "ranks": ranks,
        "first": first,
    }


def test_the_example_puts_rank_12_first_and_the_watchdogs_nine_minutes_later() -> None:
    t = build_timeline(Diagnosis.from_dict(diagnose([Source.from_path(EXAMPLE)]).to_dict()))
    assert t.order == "line"  # the traceback's re-report carries no time
    first = t.events[0]
    assert first.first_failure and first.rank == 12 and first.line == 114
    watchdog = next(e for e in t.events if e.role == "downstream" and len(e.ranks) == 63)
    assert watchdog.rank == 0  # read back from the stored text's [rank0]: prefix
    assert delta_text(watchdog.delta_s) == "+9m 12s"
    assert [r.label for r in t.rows[:2]] == ["rank 0", "rank 1"] and t.rows[-1].label == "no rank"
    assert sum(1 for r in t.rows if r.ranks) == 64 and t.silent_rows == ()
    exact = {(m.event, t.rows[m.row].label) for m in t.markers if m.exact}
    assert (t.events.index(watchdog), "rank 0") in exact


def test_columns_follow_time_when_every_report_has_one() -> None:
    d = diag(
        line("b.log", 50, "[rank3]: boom", rank=3, time="2024-05-01T10:00:05"),
        [
            group(
                "watchdog", "downstream", [0, 1, 2], line("a.log", 900, "[rank0]:[2024-05-01 10:10:05] wd")
            ),
            group("agent", "wrapper", [], line("a.log", 10, "[2024-05-01 10:00:01] agent noticed")),
        ],
        files=["a.log", "b.log"],
    )
    t = build_timeline(d)
    assert t.order == "time"
    assert [e.line for e in t.events] == [10, 50, 900]  # the agent's line came 4 s before the failure
    assert [delta_text(e.delta_s) for e in t.events] == ["-4s", "+0s", "+10m 00s"]


def test_without_times_one_file_is_in_line_order() -> None:
    d = diag(
        line("r.log", 50, "[rank1]: boom", rank=1),
        [
            group("agent", "wrapper", [], line("r.log", 7, "agent: worker group restarting")),
            group("wd", "downstream", [0], line("r.log", 90, "[rank0]: wd")),
        ],
        files=["r.log"],
    )
    t = build_timeline(d)
    assert t.order == "line" and [e.line for e in t.events] == [7, 50, 90]  # the log's own order


def test_without_times_across_files_the_first_failure_leads() -> None:
    # rank0.log comes first on the command line, but nothing orders its line against rank12's.
    d = diag(
        line("rank12.log", 2, "[rank12]: boom", rank=12),
        [
            group(
                "wd", "downstream", [0], line("rank0.log", 3, "[rank0]:[E501 10:30:45.123456 1 a.cpp:1] wd")
            ),
            group("again", "initiating", [12], line("rank12.log", 9, "[rank12]: boom again")),
        ],
        files=["rank0.log", "rank12.log"],
    )
    t = build_timeline(d)
    assert t.order == "files"
    assert [(e.file, e.line) for e in t.events] == [("rank12.log", 2), ("rank0.log", 3), ("rank12.log", 9)]
    assert draw(t).caption.startswith("Columns: the first failure, then")  # type: ignore[union-attr]


def test_ranks_that_reported_nothing_are_rows_too() -> None:
    d = diag(
        line("r.log", 5, "[rank2]: boom", rank=2),
        [group("wd", "downstream", [0, 1, 3, 5], line("r.log", 9, "[rank0]: wd"))],
        environment={"world_size": "8"},
    )
    t = build_timeline(d)
    assert [r.label for r in t.rows] == [f"rank {i}" for i in range(8)]
    assert ranges(r for row in t.silent_rows for r in row.ranks) == "4, 6–7"


def test_a_very_large_job_shares_rows_between_neighbouring_ranks() -> None:
    d = diag(
        line("r.log", 5, "[rank1000]: boom", rank=1000),
        [group("wd", "downstream", list(range(2048)), line("r.log", 9, "[rank0]: wd"), count=2048)],
        environment={"world_size": "2048"},
    )
    t = build_timeline(d)
    assert len(t.rows) == MAX_ROWS and t.rows[0].label == "ranks 0–7"
    first_row = t.rows.index(next(r for r in t.rows if r.first_failure))
    assert t.rows[first_row].label == "ranks 1000–1007"
    assert any(m.row == first_row and m.exact and t.events[m.event].first_failure for m in t.markers)
    picture = draw(t)
    assert picture is not None and len(picture.bands) == MAX_ROWS and picture.height < 1000


def test_nothing_to_draw_for_a_clean_run() -> None:
    t = build_timeline(diag(None, []))
    assert t.events == () and draw(t) is None


def test_every_marker_sits_on_its_column_and_row() -> None:
    d = Diagnosis.from_dict(diagnose([Source.from_path(EXAMPLE)]).to_dict())
    t = build_timeline(d)
    picture = draw(t)
    assert picture is not None
    for m, dot in zip(t.markers, picture.dots, strict=True):
        band = picture.bands[m.row]
        assert dot.x == picture.columns[m.event].x
        assert band.y < dot.y < band.y + band.height
    assert picture.top < min(d.y for d in picture.dots) and max(d.y for d in picture.dots) < picture.bottom


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, ""),
        (0, "+0s"),
        (0.25, "+250ms"),
        (12.34, "+12.3s"),
        (552.1, "+9m 12s"),
        (3900, "+1h 05m"),
        (-4, "-4s"),
    ],
)
def test_time_after_the_first_failure_reads_naturally(seconds: float | None, text: str) -> None:
    assert delta_text(seconds) == text


def test_short_forms() -> None:
    assert short_time("11-29T03:16:53.482000") == "11-29 03:16:53.482"
    assert short_time("2024-09-11T17:52:18") == "2024-09-11 17:52:18"
    assert ranges([5, 0, 1, 2, 3, 9, 10]) == "0–3, 5, 9–10"
    assert wrap("NCCL watchdog timed out a collective operation", 16, lines=2) == (
        "NCCL watchdog",
        "timed out a col…",
    )
