"""Memory and speed of `denpex watch` over a long run: 1 GB appended while it follows the log.

Not a test (tests/test_watch_memory.py checks the same bound on 96 MB). A writer appends a
generated 8-rank training log (progress lines, NCCL chatter, handled errors, a recompile
warning every few thousand lines) as fast as it can; the real CLI follows it, and its RSS is
sampled against the bytes it says it has read (its own Prometheus counter).

    python bench/watch.py [--mb 1024]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.watch_rss import follow_and_measure

MB = 1 << 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="megabytes to append (default 1024)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        m = follow_and_measure(Path(folder), args.mb, timeout=3600)
    print(
        f"appended and read: {args.mb} MB in {m.seconds:.0f} s ({args.mb / m.seconds:.1f} MB/s, writer included)"
    )
    marks = [args.mb * MB * k // 10 for k in range(1, 11)]
    for mark in marks:
        read, rss = next(((r, s) for r, s in m.samples if r >= mark), m.samples[-1])
        print(f"  read {read / MB:7.0f} MB   RSS {rss / MB:6.1f} MB")
    warm = min(64 * MB, args.mb * MB // 4)
    print(f"RSS growth after the first {warm // MB} MB: {m.growth_after(warm) / MB:.1f} MB")
    print(f"final: {m.final['status']}, {m.final['lines_read']} lines, {m.final['bytes_read'] / MB:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
