"""A diagnosis of a small log loads neither the process pool, the flight-recorder parser nor numpy.

Each costs start-up time that only large inputs or dumps need (signatures/pooling.py,
signatures/flight_recorder/sniff.py and signatures/newlines.py decide without them); a fresh
interpreter proves it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DEFERRED = (
    "signatures.parallel",
    "signatures.flight_recorder.parse",
    "signatures.flight_recorder.unpickle",
    "numpy",
)


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_a_small_log_on_disk_with_two_processes_loads_no_pool_or_dump_parser(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text("step 1 loss 2.0\nRuntimeError: CUDA error: an illegal memory access\n")
    loaded = _loaded_after(
        "import sys, json\n"
        "from signatures import diagnose\n"
        f"diagnose([{str(log)!r}], processes=2)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    assert sorted(loaded & set(DEFERRED)) == []
    assert "signatures.flight_recorder.sniff" in loaded  # the input was still sniffed for a dump


def test_a_dump_loads_the_parser(tmp_path: Path) -> None:
    dump = tmp_path / "nccl_trace_rank_0.json"
    fields = {"version": "2.10", "pg_config": {}, "comm_lib_version": "2.21.5", "entries": []}
    dump.write_text(json.dumps(fields))
    loaded = _loaded_after(
        "import sys, json\n"
        "from signatures import diagnose\n"
        f"diagnose([{str(dump)!r}])\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    assert "signatures.flight_recorder.parse" in loaded


def test_an_input_past_the_threshold_counts_newlines_with_numpy(tmp_path: Path) -> None:
    # The threshold lowered to a few bytes in the child: a 256 MB log is not written for a test.
    log = tmp_path / "rank0.log"
    log.write_text("step 1 loss 2.0\n" * 200)
    code = (
        "import sys, json\n"
        "import signatures.newlines as newlines\n"
        "newlines.NUMPY_FROM = {}\n"
        "from signatures import diagnose\n"
        f"diagnose([{str(log)!r}])\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    assert "numpy" not in _loaded_after(code.format(log.stat().st_size + 1))
    assert "numpy" in _loaded_after(code.format(log.stat().st_size))


def test_a_stream_past_the_threshold_takes_numpy_up_as_it_is_read() -> None:
    code = (
        "import io, sys, json\n"
        "import signatures.newlines as newlines\n"
        "newlines.NUMPY_FROM = 1000\n"
        "from signatures import Source, diagnose\n"
        "diagnose([Source.from_stream('s.log', io.BytesIO(b'step 1 loss 2.0\\n' * 200))])\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    assert "numpy" in _loaded_after(code)
