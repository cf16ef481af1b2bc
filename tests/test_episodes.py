"""Which line of a several-line failure states it (signatures/episodes.py). One test per rule."""

from __future__ import annotations

import pytest

from signatures import Diagnosis, Source, diagnose
from signatures.library import Library
from tests.sigfactory import build_library, signature_doc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return build_library(
        tmp_path_factory.mktemp("lib"),
        [
            signature_doc(
                "watchdog-fired",
                role="downstream",
                fingerprints=[
                    {"literal": "Watchdog caught a timeout"},
                    {"literal": "taking the process down"},
                ],
            ),
            signature_doc(
                "collective-stalled",
                category="distributed",
                fingerprints=[{"literal": "Collective stalled"}, {"literal": "dropping the process"}],
            ),
            signature_doc(
                "kernel-too-big",
                category="torch-compile",
                fingerprints=[{"regex": r"error +: Entry function '\w+' uses too much parameter space"}],
            ),
            signature_doc(
                "toolchain-broke",
                category="torch-compile",
                fingerprints=[
                    {"literal": "Internal codegen error"},
                    {"literal": "asm fatal : Value 'sm_99'"},
                ],
            ),
        ],
    )


def run(library: Library, text: str) -> Diagnosis:
    return diagnose([Source.from_text("job.log", text)], library=library)


def test_an_exception_carrying_a_tools_output_gives_way_to_the_tools_error(library: Library) -> None:
    log = "mod.errors.AsmError: Internal codegen error\n`asm` stderr:\nasm fatal : Value 'sm_99' is unknown\n"
    d = run(library, log)
    assert d.signature and d.signature.id == "toolchain-broke"
    assert d.initiating and d.initiating.line == 3


def test_the_carriers_signature_names_a_tool_line_no_signature_knows(library: Library) -> None:
    log = (
        "mod.errors.AsmError: Internal codegen error\n`asm2` stderr:\nasm2 fatal : Value 'sm_98' is unknown\n"
    )
    d = run(library, log)
    assert d.signature and d.signature.id == "toolchain-broke"
    assert d.initiating and d.initiating.line == 3 and "sm_98" in d.initiating.text


def test_a_carrier_ending_in_a_colon_introduces_the_tools_error_itself(library: Library) -> None:
    log = "RuntimeError: Internal codegen error: \nasm /tmp/f.ptx, line 12; error : Entry function too big\n"
    d = run(library, log)
    assert d.signature and d.signature.id == "toolchain-broke"
    assert d.initiating and d.initiating.line == 2
    prose = "RuntimeError: Internal codegen error: \nsee the compiler's log for details\n"
    assert run(library, prose).initiating.line == 1  # type: ignore[union-attr]  # no error line: it stays


def test_a_carrier_ending_in_a_colon_gives_way_to_a_line_another_signature_knows(library: Library) -> None:
    tool = "asm f.ptx, line 12; error : Entry function 'k0' uses too much parameter space"
    log = f"RuntimeError: Internal codegen error: \n{tool}\n"
    d = run(library, log)
    assert d.signature and d.signature.id == "kernel-too-big" and d.initiating and d.initiating.line == 2


def test_without_an_introducing_line_the_exception_states_it(library: Library) -> None:
    log = "mod.errors.AsmError: Internal codegen error\nasm2 fatal : Value 'sm_98' is unknown\n"
    d = run(library, log)
    assert d.initiating and d.initiating.line == 1


OPEN_MPI_BOX = """\
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
-------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[29973,1],3]
  Exit code:    1
--------------------------------------------------------------------------
"""


def test_a_death_in_a_launchers_box_is_stated_by_the_boxs_first_line(library: Library) -> None:
    d = run(library, OPEN_MPI_BOX)
    assert d.initiating and d.initiating.line == 5
    assert d.initiating.rank == 3  # the box's Process name [[job,1],vpid]: the vpid is the MPI rank


def test_a_table_heading_above_a_death_is_no_box_lead(library: Library) -> None:
    log = (
        "-" * 40
        + "\n  # of floats    bytes moved    avg time (ms)    max time\nSegmentation fault (core dumped)\n"
    )
    d = run(library, log)
    assert d.initiating and d.initiating.line == 3


STACK = "Exception raised from checkTimeout at pg.cpp:565 (most recent call first):\nframe #0: c10::Error()\n"


def test_of_one_episode_the_thrown_line_states_it_not_the_notice_before(library: Library) -> None:
    log = (
        "[rank1]:[E pg.cpp:583] taking the process down.\n[rank1]:[E pg.cpp:1414] Watchdog caught a timeout\n"
    )
    d = run(library, log + STACK)
    assert d.initiating and d.initiating.line == 2


def test_a_thrown_line_that_quotes_the_line_above_leaves_it_the_statement(library: Library) -> None:
    log = (
        "[rank1]:[E pg.cpp:583] Watchdog caught a timeout after 600 s.\n"
        "[rank1]:[E pg.cpp:1414] taking the process down: Watchdog caught a timeout after 600 s.\n"
    )
    assert run(library, log + STACK).initiating.line == 1  # type: ignore[union-attr]
    other_rank = log.replace("[rank1]:[E pg.cpp:1414]", "[rank2]:[E pg.cpp:1414]").replace(
        ": Watchdog", " ..."
    )
    assert run(library, other_rank + STACK).initiating.line == 1  # type: ignore[union-attr]


def test_a_thrown_line_that_repeats_the_line_above_with_other_values_leaves_it_the_statement(
    library: Library,
) -> None:
    # two devices of one process report the same failure; only the second is followed by a stack
    log = (
        "E0416 15:44:18.280050 1 client.cc:2432] Watchdog caught a timeout on device 1 after 600 s.\n"
        "E0416 15:44:18.280275 1 client.cc:2432] Watchdog caught a timeout on device 0 after 600 s.\n"
    )
    assert run(library, log + STACK).initiating.line == 1  # type: ignore[union-attr]
    # other words, not other values: the earlier line is a notice, the thrown one states it
    notice = log.replace("Watchdog caught a timeout on device 1 after 600 s.", "taking the process down")
    assert run(library, notice + STACK).initiating.line == 2  # type: ignore[union-attr]


def test_a_bare_line_above_a_thrown_line_states_it_a_logged_one_gives_way(library: Library) -> None:
    # a device runtime prints its failure bare; the report below it is followed by its traceback
    bare = "kernel.cu:101: block: [0,0,0] Collective stalled\nTHCheck FAIL: Collective stalled (59)\n"
    traceback = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\nOSError: x\n'
    assert run(library, bare + traceback).initiating.line == 1  # type: ignore[union-attr]
    logged = bare.replace("kernel.cu:101:", "E0416 15:44:18.280050 1 kernel.cu:101]")
    assert run(library, logged + traceback).initiating.line == 2  # type: ignore[union-attr]
    # a thrown record below a line with no level to read: a record of its logger, cut by a paste
    cut = bare.replace("THCheck FAIL:", "E0416 15:44:18.280050 1 pg.cc:12] THCheck FAIL:")
    assert run(library, cut + traceback).initiating.line == 2  # type: ignore[union-attr]


def test_an_uncaught_cpp_exception_states_it_not_the_notice_a_paste_wrapped_above(library: Library) -> None:
    # a paste hard-wrapped at 70 characters: the notice runs over three lines, the what() over two
    def wrapped(second: str) -> str:
        return (
            "[E pg.cpp:325] dropping the process, as some operations failed and".ljust(70)
            + f"\n{second}\nto keep the data whole.\n"
            + "terminate called after throwing an instance of 'std::runtime_error'\n"
            + "  what():  [Rank 0] Collective stalled: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000)"[:70]
            + "\n ran for 1804582 milliseconds before timing out.\n"
        )

    d = run(library, wrapped("x" * 70))
    assert d.initiating and d.initiating.line == 5
    # lines of unequal widths are no wrapped paste: three lines apart, the two are no one episode
    assert run(library, wrapped("x" * 60)).initiating.line == 1  # type: ignore[union-attr]


def _failure_table(first_entry: str) -> str:
    rule, thick = "-" * 54, "=" * 54
    entry = (
        "[{n}]:\n  time      : 2024-12-31_16:45:52\n  host      : server\n"
        "  rank      : {n} (local_rank: {n})\n  exitcode  : -7 (pid: 46739{n})\n"
        "  error_file: <N/A>\n  traceback : Signal 7 (SIGBUS) received by PID 46739{n}\n"
    )
    return (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        f"{thick}\ntrain.py FAILED\n{rule}\nFailures:\n{first_entry}{rule}\n"
        f"Root Cause (first observed failure):\n{entry.format(n=0)}{thick}\n"
    ).replace("{other}", entry.format(n=1))


def test_an_entry_under_failures_is_not_the_first_failure_its_root_cause_is() -> None:
    # the whole library: the table's lines are read by the engine's own death shapes
    d = diagnose([Source.from_text("job.log", _failure_table("{other}"))])
    assert d.initiating and "(pid: 467390)" in d.initiating.text  # the Root Cause entry's line
    assert d.initiating.rank == 0
    alone = diagnose([Source.from_text("job.log", _failure_table("  <NO_OTHER_FAILURES>\n"))])
    assert alone.initiating and "(pid: 467390)" in alone.initiating.text
