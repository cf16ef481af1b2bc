"""The engine imports no Slack, Redis or network code: a fresh interpreter proves it."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = (
    "slack_bolt",
    "slack_sdk",
    "redis",
    "fakeredis",
    "aiohttp",
    "requests",
    "httpx",
    "urllib3",
    "handlers",
    "bot",
)


def test_importing_and_running_the_engine_loads_no_network_module() -> None:
    code = (
        "import sys, json\n"
        "import signatures\n"
        "from signatures import Source, diagnose\n"
        "diagnose([Source.from_text('x.log', 'RuntimeError: CUDA error: an illegal memory access\\n')])\n"
        "print(json.dumps(sorted(m for m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    bad = sorted(m for m in loaded for f in FORBIDDEN if m == f or m.startswith(f + "."))
    assert bad == []
