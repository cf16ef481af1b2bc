"""Deployment files, checked statically (no Docker engine or cluster is needed).

Every environment variable they set must be a setting that bot/ops/settings.py reads, the KEDA
scaler must watch the stream and group the workers use, and docs/operations.md must describe
every setting.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.jobs.keys import Keys

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
KUBE = DEPLOY / "kubernetes"


def setting_names() -> set[str]:
    """Environment variable names bot/ops/settings.py reads (its string literals in UPPER_CASE)."""
    source = (ROOT / "bot" / "ops" / "settings.py").read_text()
    names = set(re.findall(r'"([A-Z][A-Z0-9_]{2,})"', source))
    assert {"SLACK_BOT_TOKEN", "REDIS_URL", "DENPEX_WEBHOOK_SECRET"} <= names
    return names


def kube_docs() -> list[dict[str, Any]]:
    """Every Kubernetes document: the default kustomization, the Secret templates, the components."""
    docs: list[dict[str, Any]] = []
    for path in sorted(KUBE.rglob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def applied_docs() -> list[dict[str, Any]]:
    """What `kubectl apply -k deploy/kubernetes` applies: the kustomization's resources only."""
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((KUBE / name).read_text()) if d]
    return docs


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in kube_docs() if d.get("kind") == kind}


# -- docker-compose ------------------------------------------------------------------------


@pytest.fixture
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    return data


def test_compose_runs_redis_with_aof_on_a_volume(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    command = " ".join(redis["command"])
    assert "--appendonly yes" in command
    [volume] = redis["volumes"]
    name, mount = volume.split(":")
    assert mount == "/data"
    assert name in compose["volumes"]


def test_compose_runs_a_web_process_and_a_worker(compose: dict[str, Any]) -> None:
    web, worker = compose["services"]["web"], compose["services"]["worker"]
    assert web["command"] == ["serve", "--no-worker"]
    assert worker["command"] == ["worker"]
    for service in (web, worker):
        assert service["build"]["dockerfile"] == "deploy/Dockerfile"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
        assert service["environment"]["REDIS_URL"].startswith("redis://redis:")
        assert service["env_file"] == ".env"


def test_compose_and_env_example_set_only_real_settings(compose: dict[str, Any]) -> None:
    known = setting_names()
    for name in ("web", "worker"):
        unknown = set(compose["services"][name]["environment"]) - known
        assert unknown == set(), f"{name} sets variables bot/ops/settings.py never reads: {unknown}"
    example = env_example()
    assert set(example) - known == set()
    assert known - set(example) == set(), "deploy/.env.example should list every setting"


def env_example() -> dict[str, str]:
    pairs: dict[str, str] = {}
    for line in (DEPLOY / ".env.example").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        pairs[key] = value
    return pairs


# -- Dockerfile -----------------------------------------------------------------------------


def dockerfile_stages() -> list[list[str]]:
    """Instructions per stage, continuation lines joined."""
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def test_dockerfile_is_multi_stage_and_the_final_stage_has_no_build_tools() -> None:
    stages = dockerfile_stages()
    assert len(stages) >= 2
    build, final = stages[0], stages[-1]
    assert " AS build" in build[0]
    assert any("build-essential" in line for line in build)
    final_text = "\n".join(final)
    for tool in ("build-essential", "gcc", "apt-get install", "pip install"):
        assert tool not in final_text
    assert any(line.startswith("COPY --from=build") for line in final)


def test_dockerfile_runs_as_a_non_root_user_with_a_healthcheck() -> None:
    final = dockerfile_stages()[-1]
    users = [line.split()[1] for line in final if line.startswith("USER ")]
    assert users, "the final stage must set USER"
    assert users[-1].split(":")[0] not in ("0", "root")
    [health] = [line for line in final if line.startswith("HEALTHCHECK ")]
    assert "/healthz" in health
    [entry] = [line for line in final if line.startswith("ENTRYPOINT ")]
    assert '"denpex"' in entry


def test_dockerfile_copies_what_the_package_needs() -> None:
    build = "\n".join(dockerfile_stages()[0])
    for path in ("pyproject.toml", "signatures", "handlers", "bot"):
        assert re.search(rf"COPY .*\b{path}\b", build), path
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text()
    for path in ("signatures", "handlers", "bot"):
        assert f"!{path}/**" in ignore


# -- Kubernetes -----------------------------------------------------------------------------


def test_every_kubernetes_file_parses_and_kustomization_lists_all_but_the_secret_templates() -> None:
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    files = {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml", "secret.example.yaml"}
    assert listed == files
    kinds = {d["kind"] for d in kube_docs()}
    assert {"Deployment", "StatefulSet", "Service", "Secret", "ConfigMap", "ScaledObject"} <= kinds


def test_applying_the_kustomization_never_touches_secrets_or_needs_keda() -> None:
    applied = {d["kind"] for d in applied_docs()}
    assert "Secret" not in applied  # placeholders must never overwrite real secrets
    assert not applied & {"ScaledObject", "TriggerAuthentication"}  # KEDA's CRDs are optional
    component = yaml.safe_load((KUBE / "components/keda/kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert component["resources"] == ["keda-scaledobject.yaml"]


def test_kubernetes_runs_redis_with_aof_on_a_volume_where_redis_url_points() -> None:
    redis = by_kind("StatefulSet")["redis"]
    [container] = redis["spec"]["template"]["spec"]["containers"]
    command = " ".join(container["args"])
    assert "--appendonly yes" in command and "--requirepass" in command
    [mount] = container["volumeMounts"]
    assert mount["mountPath"] == "/data" and "--dir /data" in command
    [claim] = redis["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == mount["name"]
    password = container["env"][0]["valueFrom"]["secretKeyRef"]
    assert password["key"] in by_kind("Secret")[password["name"]]["stringData"]
    url = by_kind("Secret")["denpex-secrets"]["stringData"]["REDIS_URL"]
    assert "@redis.denpex.svc.cluster.local:6379/" in url
    assert by_kind("Service")["redis"]["spec"]["selector"] == redis["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("name", ["denpex-web", "denpex-worker"])
def test_deployments_probe_healthz_and_request_resources(name: str) -> None:
    deployment = by_kind("Deployment")[name]
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"]["cpu"]
    assert container["resources"]["requests"]["memory"]
    args = container["args"]
    assert args == (["serve", "--no-worker"] if name == "denpex-web" else ["worker"])
    if name == "denpex-web":
        assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"


def test_kubernetes_sets_only_real_settings() -> None:
    known = setting_names()
    config = by_kind("ConfigMap")["denpex-config"]["data"]
    secret = by_kind("Secret")["denpex-secrets"]["stringData"]
    assert set(config) - known == set()
    assert set(secret) - known == set()
    for deployment in by_kind("Deployment").values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            names = {env["name"] for env in container.get("env", [])}
            assert names - known == set()
            refs = {ref.get("configMapRef", ref.get("secretRef", {}))["name"] for ref in container["envFrom"]}
            assert refs == {"denpex-config", "denpex-secrets"}


def test_service_targets_the_web_pods() -> None:
    service = by_kind("Service")["denpex-web"]
    web = by_kind("Deployment")["denpex-web"]
    assert service["spec"]["selector"] == web["spec"]["selector"]["matchLabels"]


def test_keda_watches_the_stream_and_group_the_workers_use() -> None:
    scaled = by_kind("ScaledObject")["denpex-worker"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == "denpex-worker"
    assert scaled["spec"]["minReplicaCount"] == 0
    keys = Keys()
    triggers = scaled["spec"]["triggers"]
    for trigger in triggers:
        assert trigger["type"] == "redis-streams"
        assert trigger["metadata"]["stream"] == keys.jobs
        assert trigger["metadata"]["consumerGroup"] == keys.group
    modes = {key for t in triggers for key in t["metadata"] if key.endswith("Count")}
    # lagCount is the only redis-streams metric that can wake a deployment from zero.
    assert "lagCount" in modes
    auth = by_kind("TriggerAuthentication")[triggers[0]["authenticationRef"]["name"]]
    secret = auth["spec"]["secretTargetRef"][0]
    assert secret["key"] in by_kind("Secret")[secret["name"]]["stringData"]


# -- integrations and docs ------------------------------------------------------------------


@pytest.mark.parametrize("script", sorted(p.relative_to(DEPLOY).as_posix() for p in DEPLOY.rglob("*.sh")))
def test_shell_scripts_parse(script: str) -> None:
    path = DEPLOY / script
    if path.read_text().startswith("#!"):  # run; a library without one is sourced by the others
        assert path.stat().st_mode & 0o111, f"{script} should be executable"
    result = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_kubernetes_integration_example_reports_with_denpex() -> None:
    job = yaml.safe_load((DEPLOY / "integrations/kubernetes/training-job-with-reporter.yaml").read_text())
    containers = {c["name"]: c for c in job["spec"]["template"]["spec"]["containers"]}
    script = containers["denpex-reporter"]["args"][0]
    assert "denpex report" in script and "--secret-file" in script
    assert shlex.split(script.replace("\\\n", " "))


def test_operations_doc_lists_every_setting() -> None:
    doc = (ROOT / "docs" / "operations.md").read_text()
    rows = set(re.findall(r"^\|\s*`([A-Z][A-Z0-9_]+)`\s*\|", doc, flags=re.MULTILINE))
    assert setting_names() - rows == set(), "add these settings to the table in docs/operations.md"
    assert rows - setting_names() == set(), "the table lists settings bot/ops/settings.py never reads"
