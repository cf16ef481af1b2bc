"""torchrun's failure table (signatures/failtable.py): which entry failed first, and its rank."""

from __future__ import annotations

from signatures import Source, diagnose

RULE, THICK = "-" * 54, "=" * 54


def _entry(n: int, rank: int, code: int, time: str = "2024-01-16_18:04:01", gap: str = "") -> str:
    fields = [
        f"[{n}]:",
        f"  time      : {time}",
        "  host      : lexun-1",
        f"  rank      : {rank} (local_rank: {rank % 8})",
        f"  exitcode  : {code} (pid: 166{rank:02d})",
        "  error_file: <N/A>",
        f"  traceback : Signal {-code} (SIGBUS) received by PID 166{rank:02d}"
        if code < 0
        else "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    ]
    return "".join(f"{f}\n{gap}" for f in fields)


def _diagnose(text: str):
    return diagnose([Source.from_text("job.log", text)])


def test_a_paste_that_starts_inside_failures_still_takes_the_root_cause_entry() -> None:
    # no "Failures:" head in the paste, blank lines between fields: the root-cause head lies past
    # the lines kept below the first entries
    for gap in ("", "\n"):
        text = (
            _entry(5, 6, -7, gap=gap)
            + _entry(6, 7, -7, gap=gap)
            + f"{RULE}\n{gap}Root Cause (first observed failure):\n"
            f"{gap}" + _entry(0, 0, -7, gap=gap) + f"{THICK}\n"
        )
        d = _diagnose(text)
        assert d.initiating and "(pid: 16600)" in d.initiating.text, gap
        assert d.initiating.rank == 0
        assert d.signature and d.signature.id == "rank-exited-on-signal"
        assert "exitcode" in d.initiating.text  # the entry's exitcode line states it, not its traceback field


def _table(entry: str) -> str:
    head = f"{THICK}\ntrain.py FAILED\n{RULE}\nFailures:\n  <NO_OTHER_FAILURES>\n{RULE}\n"
    return f"{head}Root Cause (first observed failure):\n{entry}{THICK}\n"


def test_of_two_agents_tables_the_earliest_root_cause_wins_with_its_own_rank() -> None:
    late = _table(_entry(0, 0, 1, time="2023-06-03_22:45:52"))
    early = _table(_entry(0, 4, 1, time="2023-06-03_22:45:01"))
    for text in (late + early, early + late):
        d = _diagnose(text)
        assert d.initiating and "(pid: 16604)" in d.initiating.text
        assert d.initiating.rank == 4  # the entry's rank field, not the first table's
    same = _diagnose(_table(_entry(0, 0, 1)) + _table(_entry(0, 4, 1)))
    assert same.initiating and "(pid: 16600)" in same.initiating.text  # same time: the first printed


def test_a_positive_exit_code_is_no_signal() -> None:
    d = _diagnose(_table(_entry(0, 3, 1)))
    assert d.signature is None or d.signature.id != "rank-exited-on-signal"
    abort = _diagnose(_table(_entry(0, 3, -6)))
    assert abort.signature and abort.signature.id == "rank-exited-on-signal" and abort.initiating
    assert abort.initiating.rank == 3


def _killed(n: int, rank: int, time: str) -> str:
    # an entry the agent killed: exit code -9 and the traceback field's SIGKILL
    return (
        _entry(n, rank, 1, time=time)
        .replace("exitcode  : 1", "exitcode  : -9")
        .replace(
            "traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
            f"traceback : Signal 9 (SIGKILL) received by PID 166{rank:02d}",
        )
    )


def test_a_rank_killed_after_another_failed_was_killed_by_the_agent_not_the_host() -> None:
    # once rank 3 failed, the agent sent the others SIGTERM, then SIGKILL 31 s later
    first, later = "2026-09-07_13:02:58", "2026-09-07_13:03:29"
    d = _diagnose("Failures:\n" + _entry(1, 3, 1, time=first) + _killed(2, 0, later))
    assert d.signature is None or d.signature.id != "host-oom-killer-sigkill"
    # killed first, at the earliest time: its signal is the failure
    alone = _diagnose("Failures:\n" + _killed(1, 0, first) + _entry(2, 3, 1, time=later))
    assert alone.signature and alone.signature.id == "host-oom-killer-sigkill"


def test_the_older_layout_root_cause_other_failures_and_msg_is_read_the_same() -> None:
    # torch 1.9-1.10: "Root Cause:" first, "Other Failures:" after, and a msg field
    def entry(n: int, rank: int, pid: int) -> str:
        return (
            f"[{n}]:\n  time: 2025-02-20_22:01:20\n  rank: {rank} (local_rank: {rank})\n"
            f'  exitcode: 1 (pid: {pid})\n  error_file: <N/A>\n  msg: "Process failed with exitcode 1"\n'
        )

    text = f"train.py FAILED\n{THICK}\nRoot Cause:\n{entry(0, 0, 866229)}{THICK}\nOther Failures:\n"
    d = _diagnose(text + entry(1, 1, 866230))
    assert d.initiating and "(pid: 866229)" in d.initiating.text


def test_the_agents_record_of_a_death_states_it_before_the_tables_entry() -> None:
    # a worker ended by SIGTERM (no signature claims -15): the agent logged it before its table
    entry = _entry(0, 2, -15).replace("(SIGBUS)", "(SIGTERM)")
    record = (
        "E0415 18:06:54.863000 206745 torch/distributed/elastic/multiprocessing/api.py:882] "
        "failed (exitcode: -15) local_rank: 2 (pid: {pid}) of binary: /usr/bin/python\n"
    )
    d = _diagnose(record.format(pid=16602) + _table(entry))
    assert d.initiating and d.initiating.line == 1
    assert d.initiating.rank == 2  # still the entry's rank field
    # another pid's record is another death: the entry states its own
    other = _diagnose(record.format(pid=16603) + _table(entry))
    assert other.initiating and "exitcode  : -15" in other.initiating.text
