"""The watch's deploy forms: the srun wrapper runs for real (with a stand-in srun), the sidecar
Job's script is a `denpex watch` that waits for the training's exit code, the alert rules parse."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from signatures.engine import default_library

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def test_srun_wrapper_watches_the_step_and_passes_its_exit_code_on(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"  # Slurm's srun, standing in: run the step here
    srun.write_text('#!/bin/sh\nexec "$@"\n')
    denpex = bin_dir / "denpex"  # this checkout's CLI
    denpex.write_text(
        f'#!/bin/sh\ncd {shlex.quote(str(ROOT))} && exec {shlex.quote(sys.executable)} -m bot.cli "$@"\n'
    )
    for script in (srun, denpex):
        script.chmod(0o755)
    step = "print('[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB'); exit(7)"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DENPEX_", "SLURM_"))},
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "4242",
        "SLURM_CLUSTER_NAME": "prod",
    }
    result = subprocess.run(
        [str(DEPLOY / "integrations/slurm/denpex-watch-srun.sh"), sys.executable, "-c", step],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 7, result.stderr
    assert "CUDA out of memory" in result.stderr  # the step's output, passed on
    final = json.loads(result.stdout.splitlines()[-1])
    assert (final["event"], final["exit_code"], final["initiating"]["rank"]) == ("final", 7, 5)


def test_kubernetes_sidecar_runs_watch_until_the_training_exit_code_appears() -> None:
    job = yaml.safe_load((DEPLOY / "integrations/kubernetes/training-job-with-watch.yaml").read_text())
    containers = {c["name"]: c for c in job["spec"]["template"]["spec"]["containers"]}
    words = shlex.split(containers["denpex-watch"]["args"][0].replace("\\\n", " "))
    assert words[:3] == ["denpex", "watch", "/logs/*.log"]
    assert "--secret-file" in words and "--metrics-port" in words
    command = words[words.index("--") + 1 :]
    assert "/logs/exit-code" in " ".join(command)  # the training container writes it when it ends
    ports = {p["name"]: p["containerPort"] for p in containers["denpex-watch"]["ports"]}
    assert str(ports["watch-metrics"]) == words[words.index("--metrics-port") + 1]


def test_alert_rules_use_the_watchs_metrics() -> None:
    rules = yaml.safe_load((DEPLOY / "watch-alerts.yaml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    assert exprs and all("denpex_watch_" in e for e in exprs)
    names = {"denpex_watch_status", "denpex_watch_signature_hits_total"}
    assert names <= {w.split("{")[0] for e in exprs for w in e.replace("(", " ").split()}
    named = {m for e in exprs for m in re.findall(r'signature="([^"]+)"', e)}
    ids = {s.id for s in default_library().signatures}
    assert named and named <= ids, f"not in the library: {named - ids}"
