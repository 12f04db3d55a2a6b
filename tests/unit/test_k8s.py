"""lab export k8s: manifests valid against Kubernetes' published schemas, and the pods' script and wiring."""

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from lab.cli import cli
from lab.jobs import k8s
from lab.jobs.exercises import discover, find

# The oldest version the export promises, and the newest the schemas know.
VERSIONS = ("1.27.0", kubernetes_validate.latest_version())


def validate_all(documents: list[dict]) -> None:
    for document in documents:
        for version in VERSIONS:
            kubernetes_validate.validate(document, version, strict=True)


@pytest.mark.parametrize("exercise", [exercise.name for exercise in discover()])
def test_every_exercise_exports_valid_manifests(exercise):
    found = find(exercise)
    job = k8s.exercise_job(found, found.nodes, found.nproc_per_node)
    documents = list(yaml.safe_load_all(k8s.manifests_yaml(job)))
    assert [document["kind"] for document in documents] == ["ConfigMap", "Service", "Job"]
    validate_all(documents)


def test_the_validator_refuses_a_wrong_manifest():
    """The schemas are really applied: an unknown field and a wrongly typed one both fail (so the test above can)."""
    config_map, service, job = k8s.manifests(k8s.exercise_job(find("exercise03"), 2, 2))
    job["spec"]["completionsMode"] = "Indexed"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.27.0", strict=True)
    service["spec"]["clusterIP"] = 0
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(service, "1.27.0", strict=True)


def test_indexed_job_headless_service_and_rendezvous_at_index_0():
    job = k8s.exercise_job(find("exercise03"), 3, 2, image="registry.example/torch:2", gpus=2)
    config_map, service, job_object = k8s.manifests(job)
    spec = job_object["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 3, 3)
    pod = spec["template"]["spec"]
    assert service["spec"]["clusterIP"] == "None" and pod["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["selector"] == spec["template"]["metadata"]["labels"]
    container = pod["containers"][0]
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env["MASTER_ADDR"] == f"{job_object['metadata']['name']}-0.{service['metadata']['name']}"
    assert (env["NNODES"], env["NPROC_PER_NODE"], env["MASTER_PORT"]) == ("3", "2", "29500")
    assert container["image"] == "registry.example/torch:2"
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    script = container["command"][2]
    assert 'NODE_RANK="$JOB_COMPLETION_INDEX"' in script
    assert '--node-rank="$NODE_RANK" --master-addr="$MASTER_ADDR" --master-port="$MASTER_PORT"' in script
    assert script.rstrip().endswith('"$LAB_JOB_DIR"/train.py --epochs 6')
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes["shm"]["emptyDir"]["medium"] == "Memory"
    assert volumes["files"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert {"labkit.py", "train.py"} <= set(config_map["data"]) and "check.py" not in config_map["data"]


def test_no_gpu_request_without_gpus_and_a_claim_when_asked():
    _, _, job_object = k8s.manifests(k8s.exercise_job(find("exercise04"), 2, 2, claim="shared"))
    pod = job_object["spec"]["template"]["spec"]
    assert "resources" not in pod["containers"][0]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes["output"] == {"name": "output", "persistentVolumeClaim": {"claimName": "shared"}}


def test_expected_failures_do_not_stop_the_pod():
    script = k8s.pod_script(k8s.exercise_job(find("exercise12"), 2, 1))
    launches = [line for line in script.splitlines() if "trouble.py" in line]
    assert all(line.endswith("|| true") for line in launches[:-1]) and not launches[-1].endswith("|| true")
    # a step's own env (wrong-master-addr: 2 s) wins over the exercise's (5 s, world-size-mismatch)
    assert launches[0].startswith("env LAB_PG_TIMEOUT=2 ") and launches[2].startswith("env LAB_PG_TIMEOUT=5 ")


def test_script_export_from_the_cli(tmp_path: Path):
    script = tmp_path / "My_Train.py"
    script.write_text("print('hi')\n")
    result = CliRunner().invoke(cli, ["export", "k8s", "--nodes", "4", "--nproc-per-node", "8", "--gpus", "8",
                                      "--script", str(script), "--epochs", "3", "--", "--nodes", "x"])
    assert result.exit_code == 0, result.output
    documents = list(yaml.safe_load_all(result.output))
    validate_all(documents)
    config_map, _, job_object = documents
    assert config_map["data"] == {"My_Train.py": "print('hi')\n"}
    assert job_object["metadata"]["name"] == "lab-my-train" and job_object["spec"]["completions"] == 4
    script_text = job_object["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert script_text.rstrip().endswith('"$LAB_JOB_DIR"/My_Train.py --epochs 3 --nodes x')


@pytest.mark.parametrize("args, needle", [([], "give one EXERCISE"), (["exercise01", "exercise02"], "give one EXERCISE"),
                                          (["exercise99"], "no exercise named"),
                                          (["--script", "/nonexistent.py"], "not found")])
def test_bad_input_is_one_line(args, needle):
    result = subprocess.run([sys.executable, "-m", "lab.cli", "export", "k8s", *args], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error:") and needle in result.stderr and not result.stdout


@pytest.mark.parametrize("text, name", [("lab-Exercise_03", "lab-exercise-03"), ("9lives", "lab-9lives"),
                                        ("x" * 80, "x" * k8s.MAX_JOB_NAME)])
def test_job_names_are_dns_labels(text, name):
    assert k8s.job_name(text) == name


def test_an_exercise_with_packages_installs_them_in_each_pod_before_its_launches():
    script = k8s.pod_script(k8s.exercise_job(find("exercise15"), 2, 2))
    install = next(line for line in script.splitlines() if "pip install" in line)
    assert install.endswith("lightning==2.6.6")
    assert script.index(install) < script.index("torch.distributed.run")
    assert "pip install" not in k8s.pod_script(k8s.exercise_job(find("exercise03"), 2, 2))
