"""`lab export k8s`: an exercise or a script as plain Kubernetes manifests (1.27+, no operators).

Three objects: a ConfigMap with the program's files, a headless Service so the pods resolve each other by
name, and an Indexed Job of N pods (JOB_COMPLETION_INDEX is the node rank) that each run torchrun with a
static rendezvous at index 0's pod, `<job>-0.<service>`. What a pod runs is one shell script driven by its
environment (`pod_script` + `pod_environment`), so the same lines run in the lab's containers with the
pod names swapped for node names.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from lab.errors import SpecError
from lab.jobs.exercises import Exercise, exercises_root
from lab.model.spec import MASTER_PORT

DEFAULT_IMAGE = "pytorch/pytorch:latest"
JOB_DIR = "/lab/job"  # the ConfigMap's files
OUTPUT_DIR = "/lab/output"  # results and snapshots: an emptyDir per pod, or a shared claim (--claim)
SHM_LIMIT = "1Gi"
DNS_LABEL = re.compile(r"[^a-z0-9-]+")
MAX_JOB_NAME = 50  # pod hostnames are <job>-<index> and must stay within a DNS label's 63 characters
CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


@dataclass(frozen=True)
class Launch:
    """One launch every pod makes: torchrun (static rendezvous) or the program once per pod."""

    name: str
    program: str  # a file of the ConfigMap
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    torchrun: bool = True
    expect: str = "pass"


@dataclass(frozen=True)
class K8sJob:
    name: str
    nodes: int
    nproc_per_node: int
    files: dict[str, str]  # ConfigMap key (a file name) -> text
    launches: tuple[Launch, ...]
    image: str = DEFAULT_IMAGE
    gpus: int = 0  # nvidia.com/gpu per pod
    claim: str | None = None  # a ReadWriteMany PersistentVolumeClaim for OUTPUT_DIR, shared by every pod
    requirements: tuple[str, ...] = ()  # packages the job needs besides torch, installed in each pod first

    @property
    def service(self) -> str:
        return self.name

    @property
    def master_addr(self) -> str:
        """Index 0's pod as the others resolve it: <hostname>.<subdomain> (the headless Service)."""
        return f"{self.name}-0.{self.service}"


def job_name(text: str) -> str:
    """`text` as a DNS-1123 label short enough for `<job>-<index>` pod hostnames."""
    name = DNS_LABEL.sub("-", text.lower()).strip("-")[:MAX_JOB_NAME].strip("-")
    if not name or not name[0].isalpha():
        name = f"lab-{name}".strip("-")
    return name


def _file_map(paths: list[Path]) -> dict[str, str]:
    files = {}
    for path in paths:
        if not CONFIGMAP_KEY.match(path.name):
            raise SpecError(f"'{path.name}' cannot be a ConfigMap key", "rename it to letters, digits, '-', '_', '.'")
        if path.name in files:
            raise SpecError(f"two files named '{path.name}'", "a ConfigMap holds one folder level: rename one")
        files[path.name] = path.read_text()
    return files


def exercise_job(exercise: Exercise, nodes: int, nproc_per_node: int, image: str = DEFAULT_IMAGE, gpus: int = 0,
                 claim: str | None = None) -> K8sJob:
    """The exercise's Python files (its checker left out) with labkit, and one launch per step."""
    sources = sorted(path for path in exercise.path.glob("*.py") if path.name != "check.py")
    files = _file_map([exercises_root() / "labkit.py", *sources])
    launches = tuple(Launch(step.name, step.program, step.args, step.env, step.launcher == "torchrun", step.expect)
                     for step in exercise.steps)
    return K8sJob(job_name(f"lab-{exercise.name}"), nodes, nproc_per_node, files, launches, image, gpus, claim,
                  exercise.requirements)


def script_job(script: Path, args: list[str], nodes: int, nproc_per_node: int, image: str = DEFAULT_IMAGE,
               gpus: int = 0, claim: str | None = None) -> K8sJob:
    """An unmodified torchrun script, alone in its ConfigMap."""
    if not script.is_file():
        raise SpecError(f"script '{script}' not found", "give the path of a Python file on this machine")
    return K8sJob(job_name(f"lab-{script.stem}"), nodes, nproc_per_node, _file_map([script]),
                  (Launch("main", script.name, tuple(args)),), image, gpus, claim)


def requirement_words(requirements: tuple[str, ...]) -> str:
    """The requirement lines as pip's command-line arguments, each quoted for sh."""
    return " ".join(shlex.quote(line) for line in requirements)


def pod_environment(job: K8sJob) -> dict[str, str]:
    """The variables `pod_script` reads (JOB_COMPLETION_INDEX comes from Kubernetes itself)."""
    return {
        "MASTER_ADDR": job.master_addr,
        "MASTER_PORT": str(MASTER_PORT),
        "NNODES": str(job.nodes),
        "NPROC_PER_NODE": str(job.nproc_per_node),
        "LAB_JOB_DIR": JOB_DIR,
        "LAB_OUTPUT": OUTPUT_DIR,
        "PYTHON": "python3",
        "LAB_BACKEND": "auto",
        "OMP_NUM_THREADS": "1",
    }


def pod_script(job: K8sJob) -> str:
    """What every pod runs: wait until index 0's name resolves, then each launch in turn."""
    lines = [
        "set -eu",
        'export NODE_RANK="$JOB_COMPLETION_INDEX" PYTHONPATH="$LAB_JOB_DIR" LAB_WORK_DIR="$LAB_OUTPUT/work"',
        'mkdir -p "$LAB_WORK_DIR"',
        "# index 0's DNS record appears once its pod runs; the static rendezvous needs it",
        'until getent hosts "$MASTER_ADDR" > /dev/null; do sleep 1; done',
    ]
    if job.requirements:
        lines += ["# the job's packages besides torch (already there when the image has them; bake them in to skip this)",
                  f'"$PYTHON" -m pip install --quiet --disable-pip-version-check {requirement_words(job.requirements)}']
    for launch in job.launches:
        program = f'"$LAB_JOB_DIR"/{shlex.quote(launch.program)}'
        args = "".join(f" {shlex.quote(arg)}" for arg in launch.args)
        if launch.torchrun:
            command = ('"$PYTHON" -m torch.distributed.run --nnodes="$NNODES" --nproc-per-node="$NPROC_PER_NODE" '
                       '--node-rank="$NODE_RANK" --master-addr="$MASTER_ADDR" --master-port="$MASTER_PORT" '
                       f"{program}{args}")
        else:
            command = f'"$PYTHON" {program}{args}'
        env = "".join(f"{key}={shlex.quote(value)} " for key, value in launch.env)
        lines += [
            f"# {launch.name}" + (" (expected to fail)" if launch.expect == "fail" else ""),
            f'export LAB_STEP={shlex.quote(launch.name)} LAB_RESULTS_DIR="$LAB_OUTPUT/results/"{shlex.quote(launch.name)}',
            'mkdir -p "$LAB_RESULTS_DIR"',
            (f"env {env}" if env else "") + command + (" || true" if launch.expect == "fail" else ""),
        ]
    return "\n".join(lines) + "\n"


def manifests(job: K8sJob) -> list[dict]:
    """ConfigMap, headless Service and Indexed Job, in the order `kubectl apply -f` needs them."""
    labels = {"app.kubernetes.io/name": job.name, "app.kubernetes.io/managed-by": "lab"}
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{job.name}-files", "labels": labels},
                  "data": job.files}
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": job.service, "labels": labels},
        # headless: no virtual IP, a DNS record per pod; published before readiness so the rendezvous can start
        "spec": {"clusterIP": "None", "selector": labels, "publishNotReadyAddresses": True},
    }
    resources = {"limits": {"nvidia.com/gpu": job.gpus}} if job.gpus else {}
    output = ({"name": "output", "persistentVolumeClaim": {"claimName": job.claim}} if job.claim
              else {"name": "output", "emptyDir": {}})
    container = {
        "name": "node",
        "image": job.image,
        "command": ["sh", "-c", pod_script(job)],
        "env": [{"name": key, "value": value} for key, value in pod_environment(job).items()],
        "ports": [{"name": "rendezvous", "containerPort": MASTER_PORT}],
        "volumeMounts": [{"name": "files", "mountPath": JOB_DIR, "readOnly": True},
                         {"name": "output", "mountPath": OUTPUT_DIR},
                         {"name": "shm", "mountPath": "/dev/shm"}],
        **({"resources": resources} if resources else {}),
    }
    job_object = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job.name, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": job.nodes,
            "parallelism": job.nodes,
            "backoffLimit": 0,  # a failed rank fails the job: torchrun's static rendezvous cannot take a new pod
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "subdomain": job.service,
                    "restartPolicy": "Never",
                    "containers": [container],
                    "volumes": [{"name": "files", "configMap": {"name": f"{job.name}-files"}},
                                output,
                                {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_LIMIT}}],
                },
            },
        },
    }
    return [config_map, service, job_object]


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the files, the pod's script) as literal blocks, and no anchors: plain manifests."""

    def ignore_aliases(self, data) -> bool:
        return True


_BlockDumper.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def manifests_yaml(job: K8sJob) -> str:
    header = (f"# Generated by `lab export k8s`: {job.nodes} pod(s) x {job.nproc_per_node} process(es), "
              f"image {job.image}\n# kubectl apply -f THIS_FILE; kubectl logs -f job/{job.name}\n")
    return header + yaml.dump_all(manifests(job), Dumper=_BlockDumper, sort_keys=False, width=1000)
