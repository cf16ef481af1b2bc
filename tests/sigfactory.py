"""Small, valid signature files for engine tests that must not depend on the bundled library."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from signatures.library import Library


def signature_doc(
    sig_id: str, category: str = "distributed", role: str = "initiating", **fields: Any
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": sig_id,
        "title": f"Title of {sig_id}",
        "category": category,
        "tags": ["test"],
        "severity": "high",
        "role": role,
        "restart": {"class": "unknown", "reason": f"test signature {sig_id}"},
        "fingerprints": [{"literal": f"{sig_id} happened"}],
        "summary": "s",
        "mechanism": "m",
        "observed": ["o"],
        "symptoms": [{"symptom": "s", "cause": "c"}],
        "affected": ["a"],
        "root_causes": [f"root cause of {sig_id}"],
        "confirm": ["c"],
        "fix": [{"step": f"fix {sig_id}", "command": f"export FIX_{sig_id.upper().replace('-', '_')}=1"}],
        "prevention": ["p"],
        "decision_path": {
            "evidence": "e",
            "first_failure": "f",
            "control": "c",
            "follows_workload": "w",
            "follows_node": "n",
            "disappears": "d",
        },
        "missing_facts": [],
        "follow_ups": [],
        "related": [],
        "references": [],
        "samples": {
            "positive": [{"log": f"{sig_id} happened\n", "line": f"{sig_id} happened", "source": "test"}],
            "negative": [{"log": "nothing to see\n", "why": "unrelated"}],
        },
    }
    doc.update(fields)
    return doc


def write_library(root: Path, docs: list[dict[str, Any]]) -> Path:
    for doc in docs:
        folder = root / doc["category"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{doc['id']}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return root


def build_library(root: Path, docs: list[dict[str, Any]], backend: str | None = None) -> Library:
    return Library.load(write_library(root, docs), backend=backend)
