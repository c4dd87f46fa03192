"""The Kubernetes deployment (infra/k8s), rendered by kustomize and checked offline.

No cluster is needed. ``kubectl kustomize`` renders the base, each overlay and the
overlays with each component; Kubernetes' own schemas (kubernetes-validate, strict)
check every core object and every pod template inside the KubeRay objects; the schemas
of infra/k8s/schemas check the KubeRay fields themselves. The rest pins what the product
needs from the manifests, which no schema sees: the API pointed at the Ray head's Jobs
API, GPUs where (and only where) they belong, every reference resolving, non-root pods,
Secrets referenced and never committed, and the network paths between the pieces.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.conftest import REPO_ROOT

K8S = REPO_ROOT / "infra" / "k8s"
KUBERNETES_VERSION = "1.32"
NAMESPACE = "dicesweep"
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl not found: `kubectl kustomize` renders the manifests"
)

Doc = dict[str, Any]
# Folders under infra/k8s; "overlay+component" is the overlay with that component added.
OVERLAYS = ("base", "overlays/dev", "overlays/gpu")
TARGETS = (
    *OVERLAYS,
    "overlays/gpu+components/external-postgres",
    "overlays/gpu+components/shared-results",
    "overlays/dev+components/external-postgres",
)
PRODUCTION = tuple(t for t in TARGETS if not t.startswith("overlays/dev"))
# The contract's images, by (workload, pod template, container); the autoscaler is the
# container KubeRay adds beside the head, with the head's image.
IMAGES = {
    ("dicesweep-api", "api"): "dicesweep/api:0.1.0",
    ("mlflow", "mlflow"): "dicesweep/mlflow:0.1.0",
    ("postgres", "postgres"): "postgres:16",
    ("head", "ray-head"): "dicesweep/ray:0.1.0",
    ("head", "autoscaler"): "dicesweep/ray:0.1.0",
    ("cpu", "ray-worker"): "dicesweep/ray:0.1.0",
    ("gpu", "ray-worker"): "dicesweep/ray:0.1.0-cuda",
}
# Every Secret the manifests may name, with its keys: the README's `kubectl create
# secret` commands make exactly these.
SECRET_KEYS = {
    "dicesweep-db": {
        "postgres-user",
        "postgres-password",
        "postgres-db",
        "database-url",
        "mlflow-backend-store-uri",
    },
    "dicesweep-s3": {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"},
    "dicesweep-ray-token": {"auth_token"},
    "dicesweep-mlflow-admin": {"password"},
}
CREDENTIAL = re.compile(r"PASSWORD|SECRET|TOKEN|ACCESS_KEY|DATABASE_URL|STORE_URI")
URL_WITH_PASSWORD = re.compile(r"://[^/@\s]+:[^/@\s]+@")
GPU = "nvidia.com/gpu"


# --- rendering ----------------------------------------------------------------------


def kustomize(folder: Path) -> list[Doc]:
    """Every document ``kubectl kustomize`` renders from ``folder``."""
    done = subprocess.run(
        [str(KUBECTL), "kustomize", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"kubectl kustomize {folder} failed:\n{done.stderr}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def target_folder(target: str, scratch: Path) -> Path:
    """The folder to render: infra/k8s/<target>, or for "overlay+component" a
    kustomization adding the component to the overlay, as the README tells operators."""
    if "+" not in target:
        return K8S / target
    overlay, component = target.split("+")
    folder = scratch / target.replace("/", "_").replace("+", "__")
    folder.mkdir()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": NAMESPACE,
        # kustomize takes folders outside the root only by a relative path
        "resources": [os.path.relpath(K8S / overlay, folder)],
        "components": [os.path.relpath(K8S / component, folder)],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return folder


@pytest.fixture(scope="module")
def render(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], list[Doc]]:
    """Renders a target once per module; each caller gets its own copy to change."""
    scratch = tmp_path_factory.mktemp("kustomize")
    rendered: dict[str, list[Doc]] = {}

    def documents(target: str) -> list[Doc]:
        if target not in rendered:
            rendered[target] = kustomize(target_folder(target, scratch))
        return copy.deepcopy(rendered[target])

    return documents


def load_schema(name: str) -> Doc:
    return json.loads((K8S / "schemas" / name).read_text())


def of_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [doc for doc in docs if doc["kind"] == kind]


def named(docs: list[Doc], kind: str, name: str) -> Doc:
    found = [doc for doc in of_kind(docs, kind) if doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def ray_cluster(docs: list[Doc]) -> Doc:
    (cluster,) = of_kind(docs, "RayCluster")
    return cluster


def worker_group(docs: list[Doc], name: str) -> Doc:
    groups = ray_cluster(docs)["spec"].get("workerGroupSpecs", [])
    (group,) = [group for group in groups if group["groupName"] == name]
    return group


def autoscaler_container(cluster: Doc) -> Doc:
    """The container KubeRay adds to the head pod with enableInTreeAutoscaling: the
    head's image and the core/v1 fields of autoscalerOptions."""
    spec = cluster["spec"]
    options = spec.get("autoscalerOptions", {})
    head_image = spec["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    container = {"name": "autoscaler", "image": head_image}
    for field in ("resources", "env", "volumeMounts", "securityContext", "imagePullPolicy"):
        if field in options:
            container[field] = options[field]
    return container


def pod_templates(docs: list[Doc]) -> Iterator[tuple[str, Doc]]:
    """(name, pod template) of every workload: Deployments and StatefulSets by name,
    the RayCluster's head ("head", with its autoscaler when enabled) and worker groups."""
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            yield doc["metadata"]["name"], doc["spec"]["template"]
        elif doc["kind"] == "RayCluster":
            head = copy.deepcopy(doc["spec"]["headGroupSpec"]["template"])
            if doc["spec"].get("enableInTreeAutoscaling"):
                head["spec"]["containers"].append(autoscaler_container(doc))
            yield "head", head
            for group in doc["spec"].get("workerGroupSpecs", []):
                yield group["groupName"], group["template"]


def containers(template: Doc) -> list[Doc]:
    spec = template["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def environment(container: Doc, docs: list[Doc]) -> dict[str, str]:
    """A container's variables as the kubelet sets them (envFrom, then env), ConfigMap
    values resolved; a Secret's value reads ``secret:<name>/<key>``."""
    configmaps = {cm["metadata"]["name"]: cm.get("data", {}) for cm in of_kind(docs, "ConfigMap")}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(configmaps[source["configMapRef"]["name"]])
    for var in container.get("env", []):
        source = var.get("valueFrom", {})
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[var["name"]] = f"secret:{ref['name']}/{ref['key']}"
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            env[var["name"]] = configmaps[ref["name"]][ref["key"]]
    return env


def secret_references(docs: list[Doc]) -> set[tuple[str, str | None]]:
    """(Secret, key) of every reference; key None where a whole Secret is imported."""
    found: set[tuple[str, str | None]] = set()
    for _, template in pod_templates(docs):
        for container in containers(template):
            for source in container.get("envFrom", []):
                if "secretRef" in source:
                    found.add((source["secretRef"]["name"], None))
            for var in container.get("env", []):
                ref = var.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    found.add((ref["name"], ref["key"]))
        for volume in template["spec"].get("volumes", []):
            if "secret" in volume:
                keys = [item["key"] for item in volume["secret"].get("items", [])] or [None]
                found.update((volume["secret"]["secretName"], key) for key in keys)
    for cluster in of_kind(docs, "RayCluster"):
        secret = cluster["spec"].get("authOptions", {}).get("secretName")
        if secret:
            found.add((secret, "auth_token"))  # the key KubeRay reads
    return found


def as_pod_template(template: Doc) -> Doc:
    """A pod template as a core object kubernetes-validate knows."""
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "x"},
        "template": template,
    }


def schema_errors(doc: Doc) -> list[str]:
    schema = load_schema(f"{doc['kind'].lower()}-v1.json")
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(doc)
    ]


def walk(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair of a document, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


# --- every target: valid objects ----------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_renders_into_the_namespace(render: Callable[[str], list[Doc]], target: str) -> None:
    docs = render(target)
    assert of_kind(docs, "RayCluster"), "no RayCluster rendered"
    for doc in docs:
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == NAMESPACE, doc["metadata"]["name"]
    ids = [(doc["kind"], doc["metadata"]["name"]) for doc in docs]
    assert len(ids) == len(set(ids)), "an object is rendered twice"


@pytest.mark.parametrize("target", TARGETS)
def test_core_objects_are_valid_kubernetes(render: Callable[[str], list[Doc]], target: str) -> None:
    """Strict: a misspelt field fails here, where the API server would drop it silently."""
    failures = []
    for doc in render(target):
        if doc["apiVersion"].startswith("ray.io/"):
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = "/".join(map(str, error.path))
            failures.append(f"{doc['kind']} {doc['metadata']['name']}: {path}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            failures.append(error.message)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("target", TARGETS)
def test_ray_objects_match_kuberay_and_their_pods_kubernetes(
    render: Callable[[str], list[Doc]], target: str
) -> None:
    """KubeRay's CRD prunes a field it does not know without a word: ours refuses it."""
    docs = render(target)
    for cluster in of_kind(docs, "RayCluster"):
        assert not schema_errors(cluster), schema_errors(cluster)
    for name, template in pod_templates(docs):
        try:
            kubernetes_validate.validate(as_pod_template(template), KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"pod template {name}: {'/'.join(map(str, error.path))}: {error.message}")


def test_schemas_are_2020_12_and_name_their_kuberay_release() -> None:
    for name in ("raycluster-v1.json", "rayjob-v1.json"):
        schema = load_schema(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert "KubeRay v1.7.0" in schema["description"]
        assert "KubeRay v1.7.0" in schema["$comment"]


def test_example_rayjob_runs_the_smoke_driver_on_the_cluster(
    render: Callable[[str], list[Doc]],
) -> None:
    job = yaml.safe_load((K8S / "examples" / "rayjob-smoke.yaml").read_text())
    assert not schema_errors(job), schema_errors(job)
    cluster = ray_cluster(render("overlays/gpu"))["metadata"]
    assert job["spec"]["clusterSelector"] == {"ray.io/cluster": cluster["name"]}
    assert job["metadata"]["namespace"] == cluster["namespace"]
    assert job["spec"]["entrypoint"] == "python -m trainables.driver --preset smoke"


@pytest.mark.parametrize("target", TARGETS)
def test_every_reference_resolves(render: Callable[[str], list[Doc]], target: str) -> None:
    """Names kubernetes-validate cannot check: a mount of a missing volume, a missing
    ConfigMap or claim, a Secret or key the README does not tell operators to make."""
    docs = render(target)
    configmaps = {doc["metadata"]["name"] for doc in of_kind(docs, "ConfigMap")}
    claims = {doc["metadata"]["name"] for doc in of_kind(docs, "PersistentVolumeClaim")}
    for statefulset in of_kind(docs, "StatefulSet"):
        claims |= {
            claim["metadata"]["name"] for claim in statefulset["spec"]["volumeClaimTemplates"]
        }
    for name, template in pod_templates(docs):
        volumes = {volume["name"]: volume for volume in template["spec"].get("volumes", [])}
        for container in containers(template):
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes or mount["name"] in claims, (name, mount)
            environment(container, docs)  # a missing ConfigMap or key raises KeyError
        for volume in volumes.values():
            if "configMap" in volume:
                assert volume["configMap"]["name"] in configmaps, (name, volume)
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims, (name, volume)
    for secret, key in secret_references(docs):
        assert secret in SECRET_KEYS, f"Secret {secret} is not among those the README makes"
        assert key is None or key in SECRET_KEYS[secret], f"{secret} has no key {key}"


@pytest.mark.parametrize("target", TARGETS)
def test_pods_meet_the_restricted_pod_security_standard(
    render: Callable[[str], list[Doc]], target: str
) -> None:
    """The namespace enforces "restricted": a pod that misses it is refused at once."""
    docs = render(target)
    labels = named(render("base"), "Namespace", NAMESPACE)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    allowed_volumes = {"configMap", "emptyDir", "persistentVolumeClaim", "secret", "projected"}
    for name, template in pod_templates(docs):
        pod = template["spec"].get("securityContext", {})
        assert pod.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        for volume in template["spec"].get("volumes", []):
            assert set(volume) - {"name"} <= allowed_volumes, (name, volume)
        for container in containers(template):
            context = container.get("securityContext", {})
            effective = {**pod, **context}
            where = f"{name}/{container['name']}"
            assert effective.get("runAsNonRoot") is True, where
            assert effective.get("runAsUser", 1) != 0, where
            assert context.get("allowPrivilegeEscalation") is False, where
            assert context.get("capabilities", {}).get("drop") == ["ALL"], where
            assert context.get("readOnlyRootFilesystem") is True, where


@pytest.mark.parametrize("target", TARGETS)
def test_images_are_the_contracts(render: Callable[[str], list[Doc]], target: str) -> None:
    """One release everywhere: the API and the driver refuse a cluster of another."""
    for name, template in pod_templates(render(target)):
        for container in containers(template):
            expected = IMAGES.get((name, container["name"]))
            assert container["image"] == expected, (name, container["name"])


@pytest.mark.parametrize("target", TARGETS)
def test_deployments_have_readiness_and_liveness_probes(
    render: Callable[[str], list[Doc]], target: str
) -> None:
    """Out of its Service while it cannot answer (the API: while its store does not)."""
    health = {"dicesweep-api": "/healthz", "mlflow": "/health"}
    for deployment in of_kind(render(target), "Deployment"):
        name = deployment["metadata"]["name"]
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            ports = {port["name"] for port in container.get("ports", [])}
            for probe in ("readinessProbe", "livenessProbe"):
                check = container[probe]["httpGet"]
                assert check["path"] == health[name], (name, probe)
                assert check["port"] in ports, f"{name} {probe}: no port {check['port']}"


@pytest.mark.parametrize("target", TARGETS)
def test_services_and_ingresses_reach_their_pods(
    render: Callable[[str], list[Doc]], target: str
) -> None:
    """A selector or port name that matches nothing is valid and leaves a Service empty."""
    docs = render(target)
    templates = dict(pod_templates(docs))
    services = {doc["metadata"]["name"]: doc for doc in of_kind(docs, "Service")}
    for name, service in services.items():
        selector = service["spec"]["selector"]
        selected = [
            template
            for template in templates.values()
            if selector.items() <= template["metadata"].get("labels", {}).items()
        ]
        assert len(selected) == 1, f"Service {name} selects {len(selected)} pod templates"
        ports = {port["name"] for c in selected[0]["spec"]["containers"] for port in c["ports"]}
        assert {port["targetPort"] for port in service["spec"]["ports"]} <= ports, name
    for statefulset in of_kind(docs, "StatefulSet"):
        assert services[statefulset["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"
    for ingress in of_kind(docs, "Ingress"):
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                ports = {port["port"] for port in services[backend["name"]]["spec"]["ports"]}
                assert backend["port"]["number"] in ports, (rule["host"], backend)


# --- what the product needs -----------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_the_api_submits_to_the_ray_heads_jobs_api(
    render: Callable[[str], list[Doc]], target: str
) -> None:
    """KubeRay names the head's Service <cluster>-head-svc; the Jobs API is its 8265, and
    it wants the cluster's token."""
    docs = render(target)
    cluster = ray_cluster(docs)
    api = named(docs, "Deployment", "dicesweep-api")["spec"]["template"]["spec"]
    env = environment(api["containers"][0], docs)
    assert env["DICESWEEP_RAY_JOBS_URL"] == f"http://{cluster['metadata']['name']}-head-svc:8265"
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert 8265 in {port["containerPort"] for port in head["ports"]}
    token = cluster["spec"]["authOptions"]
    assert token["mode"] == "token"
    assert env["RAY_AUTH_MODE"] == "token"
    assert env["RAY_AUTH_TOKEN"] == f"secret:{token['secretName']}/auth_token"
    assert env["DICESWEEP_DATABASE_URL"] == "secret:dicesweep-db/database-url"
    assert env["DICESWEEP_MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert env["DICESWEEP_MLFLOW_UI_URL"].startswith("https://")
    assert env["DICESWEEP_DATASETS_DIR"] == "/data"


@pytest.mark.parametrize("target", TARGETS)
def test_mlflow_runs_its_basic_auth_app_and_the_api_is_its_admin(
    render: Callable[[str], list[Doc]], target: str
) -> None:
    """Owners isolated in MLflow itself: the server asks every request for a user, its
    admin's password is the Secret's, mounted as a file where the API reads it."""
    docs = render(target)
    mlflow = named(docs, "Deployment", "mlflow")["spec"]["template"]["spec"]
    server = mlflow["containers"][0]
    assert server["args"][:4] == ["mlflow", "server", "--app-name", "basic-auth"]
    api = named(docs, "Deployment", "dicesweep-api")["spec"]["template"]["spec"]
    password = "/var/run/secrets/dicesweep/mlflow-admin/password"
    assert environment(server, docs)["MLFLOW_ADMIN_PASSWORD_FILE"] == password
    assert environment(api["containers"][0], docs)["DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE"] == (
        password
    )
    for pod in (mlflow, api):
        volumes = {v["name"]: v for v in pod["volumes"]}
        secret = volumes["mlflow-admin"]["secret"]
        assert secret["secretName"] == "dicesweep-mlflow-admin" and secret["defaultMode"] == 0o400
        mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
        assert mounts["mlflow-admin"]["readOnly"] is True


@pytest.mark.parametrize("target", TARGETS)
def test_every_ray_node_has_the_sweeps_settings_and_data(
    render: Callable[[str], list[Doc]], target: str
) -> None:
    docs = render(target)
    cluster = ray_cluster(docs)["spec"]
    assert cluster["rayVersion"] == "2.60.0"
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"  # no trial on it
    storage = "/shared/ray-results" if "shared-results" in target else "s3://dicesweep/ray-results"
    for name, template in pod_templates(docs):
        if name not in ("head", "gpu", "cpu"):
            continue
        node = template["spec"]["containers"][0]
        env = environment(node, docs)
        assert env["DICESWEEP_DATASETS_DIR"] == "/data", name
        assert env["DICESWEEP_MLFLOW_TRACKING_URI"] == "http://mlflow:5000", name
        assert env["DICESWEEP_STORAGE_PATH"] == storage, name
        assert env["AWS_ENDPOINT_URL"].startswith(("http://", "https://")), name
        assert {"secretRef": {"name": "dicesweep-s3"}} in node["envFrom"], name
        assert env["HF_HOME"] == "/models", name
        volumes = {volume["name"]: volume for volume in template["spec"]["volumes"]}
        mounts = {mount["mountPath"]: mount for mount in node["volumeMounts"]}
        data = volumes[mounts["/data"]["name"]]["persistentVolumeClaim"]
        assert data["claimName"] == "dicesweep-data", name
        assert mounts["/data"]["readOnly"] is True, name
        assert volumes[mounts["/dev/shm"]["name"]]["emptyDir"]["medium"] == "Memory", name


def test_production_runs_trials_on_gpu_workers(render: Callable[[str], list[Doc]]) -> None:
    """At least one GPU worker always: the driver refuses a sweep that no existing node
    can run, and the workers an autoscaler could still add do not count."""
    docs = render("overlays/gpu")
    gpu = worker_group(docs, "gpu")
    assert gpu["minReplicas"] >= 1
    assert gpu["maxReplicas"] >= gpu["minReplicas"]
    assert gpu["minReplicas"] <= gpu["replicas"] <= gpu["maxReplicas"]
    pod = gpu["template"]["spec"]
    resources = pod["containers"][0]["resources"]
    assert int(resources["limits"][GPU]) >= 1
    assert resources["requests"][GPU] == resources["limits"][GPU]
    assert any(toleration["key"] == GPU for toleration in pod["tolerations"])
    assert pod["nodeSelector"]
    cpu = worker_group(docs, "cpu")
    assert cpu["replicas"] == cpu["minReplicas"] == cpu["maxReplicas"] == 0


def test_development_asks_for_no_gpu(render: Callable[[str], list[Doc]]) -> None:
    docs = render("overlays/dev")
    for doc in docs:
        for key, value in walk(doc):
            assert key != GPU, f"{doc['kind']} {doc['metadata']['name']} asks for a GPU"
            assert value != GPU, f"{doc['kind']} {doc['metadata']['name']} mentions {GPU}"
    groups = ray_cluster(docs)["spec"]["workerGroupSpecs"]
    assert [group["groupName"] for group in groups] == ["cpu"]
    assert (groups[0]["minReplicas"], groups[0]["maxReplicas"]) == (1, 2)


@pytest.mark.parametrize("target", PRODUCTION)
def test_production_renders_no_secret(render: Callable[[str], list[Doc]], target: str) -> None:
    """Secrets are made in the cluster (README), never rendered from the repository, and
    nothing secret hides in a ConfigMap or a literal variable instead."""
    docs = render(target)
    assert not of_kind(docs, "Secret")
    for configmap in of_kind(docs, "ConfigMap"):
        for key, value in configmap.get("data", {}).items():
            assert not CREDENTIAL.search(key), (configmap["metadata"]["name"], key)
            assert not URL_WITH_PASSWORD.search(value), (configmap["metadata"]["name"], key)
    for name, template in pod_templates(docs):
        secrets = {v["name"] for v in template["spec"].get("volumes", []) if "secret" in v}
        for container in containers(template):
            mounted = [
                m["mountPath"] for m in container.get("volumeMounts", []) if m["name"] in secrets
            ]
            for var in container.get("env", []):
                if var["name"].endswith("_FILE"):  # a secret's file: a mounted Secret's
                    assert any(var.get("value", "").startswith(f"{m}/") for m in mounted), var
                elif CREDENTIAL.search(var["name"]):
                    assert "secretKeyRef" in var.get("valueFrom", {}), (name, var["name"])


def test_development_secrets_hold_dev_only_values(render: Callable[[str], list[Doc]]) -> None:
    """The dev overlay's generated Secrets: exactly the keys the manifests read, every
    credential plainly a development one."""
    secrets = {
        doc["metadata"]["name"]: doc["data"] for doc in of_kind(render("overlays/dev"), "Secret")
    }
    assert {name: set(data) for name, data in secrets.items()} == SECRET_KEYS
    for name, data in secrets.items():
        for key, encoded in data.items():
            value = base64.b64decode(encoded).decode()
            if CREDENTIAL.search(key.upper().replace("-", "_")):
                assert "dev-only" in value, f"{name}/{key} does not look like a dev value"


def test_an_external_postgresql_removes_the_in_cluster_one(
    render: Callable[[str], list[Doc]],
) -> None:
    docs = render("overlays/gpu+components/external-postgres")
    names = {(doc["kind"], doc["metadata"]["name"]) for doc in docs}
    assert not {name for name in names if name[1].startswith("postgres")}
    assert ("Deployment", "dicesweep-api") in names


def test_shared_results_mount_the_claim_on_every_ray_node(
    render: Callable[[str], list[Doc]],
) -> None:
    docs = render("overlays/gpu+components/shared-results")
    claim = named(docs, "PersistentVolumeClaim", "dicesweep-results")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    for name in ("head", "gpu", "cpu"):
        template = dict(pod_templates(docs))[name]
        volumes = {volume["name"]: volume for volume in template["spec"]["volumes"]}
        mounts = {
            m["mountPath"]: m["name"] for m in template["spec"]["containers"][0]["volumeMounts"]
        }
        assert (
            volumes[mounts["/shared"]]["persistentVolumeClaim"]["claimName"] == "dicesweep-results"
        )


# --- network policies -----------------------------------------------------------------

Pod = tuple[str, dict[str, str]]  # (namespace, labels)
INGRESS_CONTROLLER: Pod = ("ingress-nginx", {"app.kubernetes.io/name": "ingress-nginx"})
KUBERAY_OPERATOR: Pod = ("kuberay-operator", {"app.kubernetes.io/name": "kuberay-operator"})
STRANGER: Pod = ("default", {"app": "curious"})
# A pod of the namespace that no policy names: closed by the default deny alone.
NEWCOMER: Pod = (NAMESPACE, {"app": "newcomer"})


def selects(selector: Doc, labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "only matchLabels selectors are modelled"
    return selector.get("matchLabels", {}).items() <= labels.items()


def admits(peer: Doc, source: Pod) -> bool:
    """Whether a rule's peer (same namespace unless it names namespaces) is ``source``."""
    namespace, labels = source
    assert set(peer) <= {"podSelector", "namespaceSelector"}, peer
    if "namespaceSelector" in peer:
        in_namespace = selects(
            peer["namespaceSelector"], {"kubernetes.io/metadata.name": namespace}
        )
    else:
        in_namespace = namespace == NAMESPACE
    return in_namespace and ("podSelector" not in peer or selects(peer["podSelector"], labels))


def reaches(policies: list[Doc], source: Pod, target: dict[str, str], port: int) -> bool:
    """Whether ``source`` may open ``port`` on a pod labelled ``target`` in the namespace:
    open unless a policy selects the pod, then only as one of their rules allows."""
    selecting = [p["spec"] for p in policies if selects(p["spec"]["podSelector"], target)]
    if not selecting:
        return True
    return any(
        (not rule.get("ports") or any(allowed["port"] == port for allowed in rule["ports"]))
        and (not rule.get("from") or any(admits(peer, source) for peer in rule["from"]))
        for spec in selecting
        if "Ingress" in spec["policyTypes"]
        for rule in spec.get("ingress", [])
    )


def namespace_pods(docs: list[Doc]) -> dict[str, Pod]:
    """The namespace's pods by workload, with the labels KubeRay adds to Ray's."""
    pods = {}
    cluster = ray_cluster(docs)["metadata"]["name"]
    for name, template in pod_templates(docs):
        labels = dict(template["metadata"].get("labels", {}))
        if name in ("head", "gpu", "cpu"):
            node_type = "head" if name == "head" else "worker"
            labels |= {"ray.io/cluster": cluster, "ray.io/node-type": node_type}
        pods[name] = (NAMESPACE, labels)
    return pods


OPEN_PATHS = [
    ("ingress", "dicesweep-api", 8000),
    ("ingress", "mlflow", 5000),
    ("dicesweep-api", "head", 8265),
    ("dicesweep-api", "mlflow", 5000),
    ("dicesweep-api", "postgres", 5432),
    ("mlflow", "postgres", 5432),
    ("head", "mlflow", 5000),
    ("gpu", "mlflow", 5000),
    ("cpu", "mlflow", 5000),
    ("gpu", "head", 6379),
    ("head", "gpu", 40123),
    ("cpu", "gpu", 10002),
    ("operator", "head", 8265),
]
CLOSED_PATHS = [
    ("stranger", "dicesweep-api", 8000),
    ("stranger", "mlflow", 5000),
    ("ingress", "head", 8265),
    ("ingress", "postgres", 5432),
    ("dicesweep-api", "head", 6379),
    ("dicesweep-api", "gpu", 10002),
    ("gpu", "postgres", 5432),
    ("operator", "gpu", 8265),
    ("ingress", "newcomer", 8080),
    ("dicesweep-api", "newcomer", 8080),
]


@pytest.mark.parametrize("target", OVERLAYS)
def test_network_policies_open_the_needed_paths_only(
    render: Callable[[str], list[Doc]], target: str
) -> None:
    docs = render(target)
    policies = of_kind(docs, "NetworkPolicy")
    pods = namespace_pods(docs)
    pods |= {
        "ingress": INGRESS_CONTROLLER,
        "operator": KUBERAY_OPERATOR,
        "stranger": STRANGER,
        "newcomer": NEWCOMER,
    }
    for source, destination, port in OPEN_PATHS + CLOSED_PATHS:
        if destination not in pods or source not in pods:
            continue  # a group the overlay leaves out
        expected = (source, destination, port) in OPEN_PATHS
        assert reaches(policies, pods[source], pods[destination][1], port) is expected, (
            f"{source} -> {destination}:{port} should be {'open' if expected else 'closed'}"
        )


# --- the validators bite ----------------------------------------------------------------


def test_the_kuberay_schema_refuses_a_misspelt_or_mistyped_field(
    render: Callable[[str], list[Doc]],
) -> None:
    cluster = ray_cluster(render("overlays/gpu"))
    misspelt = copy.deepcopy(cluster)
    misspelt["spec"]["workerGroupSpec"] = misspelt["spec"].pop("workerGroupSpecs")
    assert any("workerGroupSpec" in error for error in schema_errors(misspelt))
    mistyped = copy.deepcopy(cluster)
    mistyped["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = 0
    assert any("num-cpus" in error for error in schema_errors(mistyped))


def test_kubernetes_validate_refuses_an_unknown_field(render: Callable[[str], list[Doc]]) -> None:
    docs = render("overlays/gpu")
    deployment = named(docs, "Deployment", "dicesweep-api")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinessprobe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError, match="readinessprobe"):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)
    head = ray_cluster(docs)["spec"]["headGroupSpec"]["template"]
    head["spec"]["containers"][0]["volumeMount"] = []
    with pytest.raises(kubernetes_validate.ValidationError, match="volumeMount"):
        kubernetes_validate.validate(as_pod_template(head), KUBERNETES_VERSION, strict=True)


def test_the_network_model_sees_a_missing_policy(render: Callable[[str], list[Doc]]) -> None:
    docs = render("overlays/gpu")
    policies = [p for p in of_kind(docs, "NetworkPolicy") if p["metadata"]["name"] != "postgres"]
    pods = namespace_pods(docs)
    assert not reaches(policies, pods["dicesweep-api"], pods["postgres"][1], 5432)
