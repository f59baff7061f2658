"""The Kubernetes manifests (``platform/kubernetes``): rendered, validated, and read back.

- ``kustomize build`` renders the base and the example overlay;
- ``kubeconform -strict`` validates every rendered object against the Kubernetes JSON
  schemas of the oldest and the newest Kubernetes version checked (unknown fields, wrong
  types, missing required fields and kinds without a schema all fail), and a broken
  manifest is rejected, so the check can fail;
- every stream application of ``STREAM_APPS`` runs as a StatefulSet whose container starts
  the supervisor's CLI: its args, expanded as the kubelet expands them, parsed by the
  supervisor's own ``main()`` select that application with the settings the manifest
  promises (state on the pod's volume, ``application.server`` = the pod's DNS name,
  standby replicas, the query port that readiness and Prometheus use);
- Dagster: the instance is the cluster deployment's (``platform/cluster/dagster.yaml``) plus
  the ``K8sRunLauncher``, and every name it refers to exists in the rendered manifests; the
  ``cluster`` resources built from the ConfigMap and the Secret carry the raw topics' format
  and the schema registry, and every pod that runs the platform's code sees the CA files.

kustomize and kubeconform come from ``make setup`` (``.tools/bin``, built from the Go module
proxy); a missing tool fails the tests. The schemas are the ones the pinned
``kubernetes-validate`` package bundles (``-local-strict``: objects refer to a shared
``_definitions.json`` through ``$id``/``$ref`` on kubernetes.io), copied with file-relative
references so that kubeconform resolves them offline.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster import EnvVar

from pipelines.schemas import RawFormat, SchemaRegistry
from pipelines.streams import supervisor
from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.config import StreamAppConfig

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "platform" / "kubernetes"
TOOLS = REPO / ".tools" / "bin"
KUSTOMIZATIONS = ("base", "overlays/production")
#: the oldest and the newest Kubernetes version the manifests are checked against
K8S_VERSIONS = ("1.33.0", "1.37.0")
SECRETS_EXAMPLE = K8S / "secrets.example.yaml"
CLUSTER_INSTANCE = REPO / "platform" / "cluster" / "dagster.yaml"
K8S_INSTANCE = K8S / "base" / "dagster" / "dagster.yaml"
#: what the platform's `cluster` deployment reads from its environment
KAFKA_ENV = (
    "KAFKA_BOOTSTRAP_SERVERS",
    "KAFKA_SECURITY_PROTOCOL",
    "KAFKA_SASL_MECHANISM",
    "KAFKA_SASL_USERNAME",
    "KAFKA_SASL_PASSWORD",
    "KAFKA_SSL_CA_LOCATION",
)
#: the raw topics' value format and the schema registry the `cluster` deployment reads
REGISTRY_ENV = (
    "PLATFORM_VALUE_FORMAT",
    "SCHEMA_REGISTRY_URL",
    "SCHEMA_REGISTRY_USERNAME",
    "SCHEMA_REGISTRY_PASSWORD",
    "SCHEMA_REGISTRY_SSL_CA_LOCATION",
)
#: the files a pod of the platform's code reads its TLS trust from
CA_ENV = ("KAFKA_SSL_CA_LOCATION", "SCHEMA_REGISTRY_SSL_CA_LOCATION")
#: the supervisor's environment defaults: unset unless the container sets them
SUPERVISOR_ENV = (
    "KAFKA_BOOTSTRAP_SERVERS",
    "STREAM_STATE_DIR",
    "STREAM_QUERY_BASE_PORT",
    *REGISTRY_ENV,
)
#: status.podIP of a pod, for the kubelet's expansion
POD_IP = "10.1.2.3"


# -- tools, schemas, rendering ------------------------------------------------------------


def tool(name: str) -> Path:
    path = TOOLS / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: `make setup` builds it from the Go module proxy")
    return path


def _relative_refs(node: Any) -> Any:
    """A schema with file-relative references to ``_definitions.json`` and no ``$id``."""
    if isinstance(node, dict):
        return {
            k: v.replace("/api/_definitions.json", "_definitions.json")
            if k == "$ref" and isinstance(v, str)
            else _relative_refs(v)
            for k, v in node.items()
            if k != "$id"
        }
    if isinstance(node, list):
        return [_relative_refs(v) for v in node]
    return node


@pytest.fixture(scope="session")
def schema_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kubeconform's schema folder: ``v<version>-local-strict/<kind>-<group>-<version>.json``."""
    import kubernetes_validate

    bundled = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    root = tmp_path_factory.mktemp("k8s-schemas")
    for version in K8S_VERSIONS:
        src = bundled / f"v{version}-local-strict"
        assert src.is_dir(), f"kubernetes-validate has no schemas for Kubernetes {version}"
        dst = root / src.name
        dst.mkdir()
        for schema in src.glob("*.json"):
            doc = _relative_refs(json.loads(schema.read_text()))
            (dst / schema.name).write_text(json.dumps(doc))
    return root


def kubeconform(
    manifests: str, schema_root: Path, version: str
) -> tuple[subprocess.CompletedProcess, dict[str, Any]]:
    """Run ``kubeconform -strict`` on ``manifests`` (YAML text); its JSON report."""
    location = str(
        schema_root / "{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}"
        "/{{ .ResourceKind }}{{ .KindSuffix }}.json"
    )
    proc = subprocess.run(
        [
            str(tool("kubeconform")),
            "-strict",
            "-summary",
            "-output=json",
            f"-kubernetes-version={version}",
            f"-schema-location={location}",
            "-",
        ],
        input=manifests,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"kubeconform printed no JSON report: {proc.stdout}{proc.stderr}")
    return proc, report


@pytest.fixture(scope="session")
def rendered() -> dict[str, str]:
    """``kustomize build`` of every kustomization, by its path under platform/kubernetes."""
    out = {}
    for name in KUSTOMIZATIONS:
        proc = subprocess.run(
            [str(tool("kustomize")), "build", str(K8S / name)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, f"kustomize build {name} failed:\n{proc.stderr}"
        out[name] = proc.stdout
    return out


@pytest.fixture(scope="session")
def objects(rendered: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    return {name: [d for d in yaml.safe_load_all(text) if d] for name, text in rendered.items()}


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def secret_example() -> dict[str, Any]:
    return yaml.safe_load(SECRETS_EXAMPLE.read_text())


def platform_env(docs: list[dict[str, Any]]) -> dict[str, str]:
    """What every pod of the platform reads: the ConfigMap platform-env and the Secret."""
    return {
        **one(docs, "ConfigMap", "platform-env")["data"],
        **secret_example()["stringData"],
    }


def raw_format_of(env: dict[str, str]) -> RawFormat:
    """The raw topics' format and registry that ``env`` describes."""
    return RawFormat(
        env["PLATFORM_VALUE_FORMAT"],
        SchemaRegistry(
            env["SCHEMA_REGISTRY_URL"],
            env["SCHEMA_REGISTRY_USERNAME"],
            env["SCHEMA_REGISTRY_PASSWORD"],
            env["SCHEMA_REGISTRY_SSL_CA_LOCATION"],
        ),
    )


def ca_folders(env: dict[str, str]) -> set[str]:
    """The folders holding the CA files ``env`` names."""
    return {str(Path(env[name]).parent) for name in CA_ENV}


# -- schemas ------------------------------------------------------------------------------


def test_renders_the_platform(objects: dict[str, list[dict[str, Any]]]) -> None:
    for name, docs in objects.items():
        kinds = {d["kind"] for d in docs}
        assert {"StatefulSet", "Service", "Deployment", "ConfigMap", "Role"} <= kinds, name
        assert {d["metadata"]["name"] for d in find(docs, "StatefulSet")} == set(STREAM_APPS)
        namespaced = [d for d in docs if d["kind"] != "Namespace"]
        assert {d["metadata"].get("namespace") for d in namespaced} == {"streamplatform"}, name


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_manifests_match_the_kubernetes_schemas(
    rendered: dict[str, str], schema_root: Path, kustomization: str, version: str
) -> None:
    text = rendered[kustomization]
    proc, report = kubeconform(text, schema_root, version)
    summary = report["summary"]
    assert proc.returncode == 0, json.dumps(report["resources"], indent=1)
    count = sum(1 for d in yaml.safe_load_all(text) if d)
    assert summary == {"valid": count, "invalid": 0, "errors": 0, "skipped": 0}


def test_secret_example_matches_the_schema(schema_root: Path) -> None:
    proc, report = kubeconform(SECRETS_EXAMPLE.read_text(), schema_root, K8S_VERSIONS[-1])
    assert proc.returncode == 0, report
    assert report["summary"]["valid"] == 1


def _unknown_field(sts: dict[str, Any]) -> None:
    sts["spec"]["template"]["spec"]["containers"][0]["readynessProbe"] = {"periodSeconds": 5}


def _wrong_type(sts: dict[str, Any]) -> None:
    sts["spec"]["replicas"] = "three"


def _missing_required(sts: dict[str, Any]) -> None:
    del sts["spec"]["template"]["spec"]["containers"][0]["name"]


def _bad_port(sts: dict[str, Any]) -> None:
    sts["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "http"


def _unknown_kind(sts: dict[str, Any]) -> None:
    sts["kind"] = "StatefullSet"


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (_unknown_field, "additional properties 'readynessProbe' not allowed"),
        (_wrong_type, "at '/spec/replicas': got string"),
        (_missing_required, "missing property 'name'"),
        (_bad_port, "containerPort': got string, want integer"),
        (_unknown_kind, "could not find schema for StatefullSet"),
    ],
)
def test_a_broken_manifest_is_rejected(
    objects: dict[str, list[dict[str, Any]]], schema_root: Path, breakage: Any, message: str
) -> None:
    sts = copy.deepcopy(find(objects["base"], "StatefulSet")[0])
    proc, report = kubeconform(yaml.safe_dump(sts), schema_root, K8S_VERSIONS[0])
    assert proc.returncode == 0, report  # the object is valid as rendered
    breakage(sts)
    proc, report = kubeconform(yaml.safe_dump(sts), schema_root, K8S_VERSIONS[0])
    assert proc.returncode != 0
    assert report["summary"]["valid"] == 0
    [problem] = report["resources"]
    assert message in problem["msg"]


# -- the stream applications --------------------------------------------------------------

_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's expansion of ``$(VAR)`` in args and env values (``$$`` escapes); an
    undefined variable would be left as is by the kubelet: here it is a failure."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        assert m.group(1) in env, f"$({m.group(1)}) is not defined in the container's env"
        return env[m.group(1)]

    return _REF.sub(sub, text)


def container_env(
    docs: list[dict[str, Any]], pod: dict[str, Any], container: dict[str, Any]
) -> dict[str, str]:
    """The container's environment as the kubelet builds it for ``pod`` (envFrom first, then
    env in order, each value expanded against what precedes it)."""
    secrets = {secret_example()["metadata"]["name"]: secret_example()["stringData"]}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(one(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
        else:
            name = source["secretRef"]["name"]
            assert name in secrets, f"Secret {name} is neither rendered nor in the example"
            env.update(secrets[name])
    fields = {
        "metadata.name": pod["name"],
        "metadata.namespace": pod["namespace"],
        "status.podIP": POD_IP,
    }
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = expand(var["value"], env)
        else:
            env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


class _Started(Exception):
    """Raised instead of starting the applications."""


def run_supervisor_cli(
    argv: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> supervisor.Supervisor:
    """The ``Supervisor`` that ``supervisor.main(argv)`` builds in ``env``, not started.

    ``main()`` builds its argparse parser inline (no function returns it), so ``main()``
    itself parses ``argv``, with a ``Supervisor`` that stops instead of starting."""
    built: list[supervisor.Supervisor] = []

    class Capture(supervisor.Supervisor):
        def start(self) -> None:
            built.append(self)
            raise _Started

        def close(self, timeout: float = 60.0) -> bool:
            self.probe.close()
            return True

    for name in SUPERVISOR_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(supervisor, "Supervisor", Capture)
    monkeypatch.setattr(supervisor.signal, "signal", lambda *_: None)
    with pytest.raises(_Started):
        supervisor.main(argv)
    return built[0]


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
@pytest.mark.parametrize("app", sorted(STREAM_APPS))
def test_stream_app_container_runs_the_supervisor_on_its_app(
    objects: dict[str, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
    kustomization: str,
    app: str,
) -> None:
    docs = objects[kustomization]
    sts = one(docs, "StatefulSet", app)
    spec = sts["spec"]
    pod_spec = spec["template"]["spec"]
    [container] = pod_spec["containers"]
    namespace = sts["metadata"]["namespace"]
    pod = {"name": f"{app}-1", "namespace": namespace}

    # python -m <the supervisor's module>
    python, dash_m, module = container["command"]
    assert (python, dash_m, module) == ("python", "-m", "pipelines.streams.supervisor")
    assert importlib.import_module(module) is supervisor
    env = container_env(docs, pod, container)
    args = [expand(a, env) for a in container["args"]]
    run = run_supervisor_cli(args, env, monkeypatch)

    # ... selects this one application, under its own name as application.id
    [runner] = run.runners
    assert runner.app is STREAM_APPS[app]
    assert runner.application_id == app
    # the raw topics in the format of the ConfigMap, through its schema registry
    assert runner.config == replace(StreamAppConfig(), raw_format=raw_format_of(env))
    assert runner.config.raw_format.avro
    assert not any(env["SCHEMA_REGISTRY_PASSWORD"] in a for a in args)
    s = run.settings
    kafka = s.bootstrap_servers
    assert kafka.bootstrap_servers == env["KAFKA_BOOTSTRAP_SERVERS"]
    # TLS and SASL from the ConfigMap, the password from the Secret (never in argv)
    assert kafka.security_protocol == env["KAFKA_SECURITY_PROTOCOL"]
    assert kafka.sasl_mechanism == env["KAFKA_SASL_MECHANISM"]
    assert kafka.sasl_username == env["KAFKA_SASL_USERNAME"]
    assert kafka.sasl_password == env["KAFKA_SASL_PASSWORD"]
    assert kafka.ssl_ca_location == env["KAFKA_SSL_CA_LOCATION"]
    assert not any(env["KAFKA_SASL_PASSWORD"] in a for a in args)
    assert s.processing_guarantee == "exactly_once_v2"
    assert s.instance == pod["name"]

    # RocksDB state on the pod's own volume
    claims = {c["metadata"]["name"] for c in spec["volumeClaimTemplates"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[str(s.state_root)] in claims
    # the brokers' and the registry's CA files on a mounted Secret
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    for folder in ca_folders(env):
        assert "secret" in volumes[mounts[folder]]
    streams = runner.streams_config()
    assert streams["security.protocol"] == kafka.security_protocol
    assert streams["sasl.password"] == env["KAFKA_SASL_PASSWORD"]
    assert streams["state.dir"] == f"{s.state_root}/{pod['name']}"

    # interactive queries, /health and /metrics on the port the probes and Prometheus use
    [port] = container["ports"]
    assert runner.query_port == s.query_base_port == port["containerPort"]
    probe = container["readinessProbe"]["httpGet"]
    assert probe["path"] == "/health" and probe["port"] in (port["name"], port["containerPort"])
    annotations = spec["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(port["containerPort"])
    assert annotations["prometheus.io/path"] == "/metrics"

    # application.server: the pod's stable name under its headless Service
    service = one(docs, "Service", spec["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    labels = spec["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert (
        streams["application.server"]
        == f"{pod['name']}.{spec['serviceName']}.{namespace}.svc:{port['containerPort']}"
    )
    assert streams["interactive.queries.http.bind"] == "0.0.0.0"

    # the health sensor reaches the app's instances through the same Service and port
    template = one(docs, "ConfigMap", "platform-env")["data"]["STREAM_QUERY_URL_TEMPLATE"]
    assert template.format(app=app) == (
        f"http://{spec['serviceName']}.{namespace}.svc:{port['containerPort']}"
    )

    # standby replicas: a warm copy of every task on another instance
    standbys = int(streams["num.standby.replicas"])
    assert standbys == int(env["STREAM_NUM_STANDBY_REPLICAS"]) >= 1
    assert spec["replicas"] > standbys
    [budget] = [
        d
        for d in find(docs, "PodDisruptionBudget")
        if d["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ]
    assert budget["spec"]["maxUnavailable"] == 1

    # SIGTERM closes the application: up to 60 s for the watchdog, 60 s for the close
    assert pod_spec["terminationGracePeriodSeconds"] >= 120
    assert "lifecycle" not in container


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_topics_job_runs_the_platform_topics_command(
    objects: dict[str, list[dict[str, Any]]], kustomization: str
) -> None:
    # tests/platform/test_secure_platform.py runs the same command against a SASL_SSL broker
    [job] = [d for d in objects[kustomization] if d["kind"] == "Job"]
    [container] = job["spec"]["template"]["spec"]["containers"]
    python, dash_m, module = container["command"]
    assert (python, dash_m, module) == ("python", "-m", "pipelines.topics")
    assert callable(importlib.import_module(module).main)
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    config = one(objects[kustomization], "ConfigMap", "platform-env")["data"]
    assert str(Path(config["KAFKA_SSL_CA_LOCATION"]).parent) in mounts


def test_every_pod_reads_the_platform_config(objects: dict[str, list[dict[str, Any]]]) -> None:
    secret = secret_example()
    for docs in objects.values():
        config = one(docs, "ConfigMap", "platform-env")["data"]
        assert config["DAGSTER_DEPLOYMENT"] == "cluster"
        assert set(KAFKA_ENV) <= set(config) | set(secret["stringData"])
        assert set(REGISTRY_ENV) <= set(config) | set(secret["stringData"])
        assert config["PLATFORM_VALUE_FORMAT"] in ("json", "avro")
        assert config["SCHEMA_REGISTRY_URL"].startswith("https://")
        assert config["KAFKA_SECURITY_PROTOCOL"] in ("SASL_SSL", "SASL_PLAINTEXT", "SSL")
        assert config["SPARK_MASTER_URL"].startswith(("spark://", "k8s://"))
        for workload in find(docs, "StatefulSet") + find(docs, "Deployment"):
            for container in workload["spec"]["template"]["spec"]["containers"]:
                sources = container["envFrom"]
                assert {"configMapRef": {"name": "platform-env"}} in sources
                assert {"secretRef": {"name": secret["metadata"]["name"]}} in sources


# -- Dagster ------------------------------------------------------------------------------


def test_dagster_instance_is_the_cluster_instance_with_the_k8s_run_launcher() -> None:
    cluster = yaml.safe_load(CLUSTER_INSTANCE.read_text())
    k8s = yaml.safe_load(K8S_INSTANCE.read_text())
    assert {k: v for k, v in k8s.items() if k not in ("run_launcher", "compute_logs")} == cluster
    assert k8s["run_launcher"]["module"] == "dagster_k8s"
    assert k8s["run_launcher"]["class"] == "K8sRunLauncher"


def test_dagster_instance_matches_dagster_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster._core.instance.config import dagster_instance_config

    env = yaml.safe_load(SECRETS_EXAMPLE.read_text())["stringData"]
    env |= yaml.safe_load((K8S / "base" / "platform-env.yaml").read_text())["data"]
    env["POD_NAMESPACE"] = "streamplatform"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "dagster.yaml").write_text(K8S_INSTANCE.read_text())
    config, _ = dagster_instance_config(str(tmp_path))
    assert config["run_launcher"]["class"] == "K8sRunLauncher"
    assert "postgres" in config["storage"]


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_dagster_deployments_fit_together(
    objects: dict[str, list[dict[str, Any]]], kustomization: str
) -> None:
    docs = objects[kustomization]
    instance_text = K8S_INSTANCE.read_text()
    instance = yaml.safe_load(instance_text)
    launcher = instance["run_launcher"]["config"]

    # the instance ConfigMap the launcher mounts into run pods is the one rendered
    rendered_instance = one(docs, "ConfigMap", launcher["instance_config_map"])
    assert rendered_instance["data"]["dagster.yaml"] == instance_text
    for name in launcher["env_config_maps"]:
        one(docs, "ConfigMap", name)
    assert launcher["env_secrets"] == [secret_example()["metadata"]["name"]]
    one(docs, "ServiceAccount", launcher["service_account_name"])
    for volume in launcher["volumes"]:
        if "persistent_volume_claim" in volume:
            one(docs, "PersistentVolumeClaim", volume["persistent_volume_claim"]["claim_name"])
    # every DAGSTER_PG_* the storage reads comes from platform-env or the Secret
    db = instance["storage"]["postgres"]["postgres_db"]
    pg_env = {v["env"] for v in db.values() if isinstance(v, dict) and "env" in v}
    known = set(one(docs, "ConfigMap", "platform-env")["data"]) | set(
        secret_example()["stringData"]
    )
    assert pg_env <= known

    # the Spark driver runs in the run pod; executors reach it at the pod's IP
    run_env = launcher["run_k8s_config"]["container_config"]["env"]
    driver = next(e for e in run_env if e["name"] == "SPARK_DRIVER_HOST")
    assert driver["value_from"]["field_ref"]["field_path"] == "status.podIP"

    # webserver and daemon: the same instance and the workspace pointing at the code server
    code = one(docs, "Deployment", "dagster-user-code")
    [code_container] = code["spec"]["template"]["spec"]["containers"]
    code_env = {e["name"]: e.get("value") for e in code_container["env"]}
    assert code_env["DAGSTER_CURRENT_IMAGE"] == code_container["image"]
    code_args = dict(a.split("=", 1) for a in code_container["command"] if "=" in a)
    code_service = one(docs, "Service", "dagster-user-code")
    workspace = yaml.safe_load(
        one(docs, "ConfigMap", "dagster-workspace")["data"]["workspace.yaml"]
    )
    [location] = workspace["load_from"]
    grpc = location["grpc_server"]
    assert grpc["host"] == code_service["metadata"]["name"]
    assert grpc["port"] == code_service["spec"]["ports"][0]["port"] == int(code_args["--port"])
    assert grpc["location_name"] == code_args["--location-name"]

    for name, sa in (
        ("dagster-webserver", "dagster"),
        ("dagster-daemon", "dagster"),
        ("dagster-user-code", launcher["service_account_name"]),
    ):
        pod = one(docs, "Deployment", name)["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == sa
        [container] = pod["containers"]
        env = {e["name"]: e for e in container["env"]}
        assert env["DAGSTER_HOME"]["value"] == launcher["dagster_home"]
        assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        home = mounts[f"{launcher['dagster_home']}/dagster.yaml"]
        assert volumes[home["name"]]["configMap"]["name"] == launcher["instance_config_map"]
        if name != "dagster-user-code":
            flags = dict(a.split("=", 1) for a in container["command"] if "=" in a)
            folder = str(Path(flags["--workspace"]).parent)
            assert volumes[mounts[folder]["name"]]["configMap"]["name"] == "dagster-workspace"

    # the webserver and the daemon may launch and delete run Jobs in their namespace
    binding = one(docs, "RoleBinding", "dagster-run-launcher")
    [subject] = binding["subjects"]
    assert subject == {
        "kind": "ServiceAccount",
        "name": "dagster",
        "namespace": binding["metadata"]["namespace"],
    }
    role = one(docs, "Role", binding["roleRef"]["name"])
    jobs = next(r for r in role["rules"] if "jobs" in r["resources"])
    assert {"create", "delete", "get", "list", "watch"} <= set(jobs["verbs"])


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_cluster_resources_read_the_format_and_the_registry(
    objects: dict[str, list[dict[str, Any]]], kustomization: str
) -> None:
    from resources import platform_resources

    env = platform_env(objects[kustomization])
    kafka = platform_resources(env)["kafka"]
    assert kafka.bootstrap_servers == env["KAFKA_BOOTSTRAP_SERVERS"]
    assert kafka.value_format == env["PLATFORM_VALUE_FORMAT"] == "avro"
    assert kafka.schema_registry_url == env["SCHEMA_REGISTRY_URL"]
    assert kafka.schema_registry_username == env["SCHEMA_REGISTRY_USERNAME"]
    assert kafka.schema_registry_ssl_ca_location == env["SCHEMA_REGISTRY_SSL_CA_LOCATION"]
    # the password is read from the pod's environment (the Secret) when a run starts
    assert kafka.schema_registry_password == EnvVar("SCHEMA_REGISTRY_PASSWORD")
    with_password = kafka.model_copy(
        update={"schema_registry_password": env["SCHEMA_REGISTRY_PASSWORD"]}
    )
    assert with_password.raw_format == raw_format_of(env)
    assert with_password.raw_format.registry is not None
    client = with_password.raw_format.registry.client_config()
    assert client["basic.auth.user.info"] == (
        f"{env['SCHEMA_REGISTRY_USERNAME']}:{env['SCHEMA_REGISTRY_PASSWORD']}"
    )
    assert client["schema.registry.ssl.ca.location"] == env["SCHEMA_REGISTRY_SSL_CA_LOCATION"]


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_pods_running_the_platform_code_see_the_ca_files(
    objects: dict[str, list[dict[str, Any]]], kustomization: str
) -> None:
    # the code server evaluates the sensors (topics, schema metadata), the run pods run the
    # assets, the stream apps and the topics Job their commands: each reads both CA files
    docs = objects[kustomization]
    folders = ca_folders(platform_env(docs))
    pods = [one(docs, "Deployment", "dagster-user-code")["spec"]["template"]["spec"]]
    pods += [d["spec"]["template"]["spec"] for d in find(docs, "StatefulSet") + find(docs, "Job")]
    for pod in pods:
        volumes = {v["name"]: v for v in pod["volumes"]}
        [container] = pod["containers"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        for folder in folders:
            assert folder in mounts, f"{container['name']} does not mount {folder}"
            assert volumes[mounts[folder]]["secret"]["secretName"] == "kafka-ca"
    launcher = yaml.safe_load(K8S_INSTANCE.read_text())["run_launcher"]["config"]
    run_volumes = {v["name"]: v for v in launcher["volumes"]}
    run_mounts = {m["mount_path"]: m["name"] for m in launcher["volume_mounts"]}
    for folder in folders:
        assert run_volumes[run_mounts[folder]]["secret"]["secret_name"] == "kafka-ca"
