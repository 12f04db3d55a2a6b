"""`lab up --scheduler slurm` and `lab sbatch`, without an engine: slurm.conf, the plan, and reading Slurm's answers."""

import dataclasses
import stat
from pathlib import Path

import pytest

from lab.errors import SpecError
from lab.jobs import sbatch
from lab.model.spec import LabSpec
from lab.nodes import slurm
from lab.nodes.gpus import HostGpus
from lab.nodes.plan import HostFacts, build_plan
from lab.nodes.slurm_image import missing_packages


def test_slurm_conf_has_every_node_with_the_labs_limits():
    conf = slurm.slurm_conf("lab-demo", ["node0", "node1", "node2"], 2, 1536, [0, 0, 0]).splitlines()
    assert "SlurmctldHost=node0" in conf and "ClusterName=lab-demo" in conf
    assert "ProctrackType=proctrack/linuxproc" in conf and "TaskPlugin=task/none" in conf
    assert "SlurmdParameters=config_overrides" in conf and "AuthType=auth/munge" in conf
    assert [line for line in conf if line.startswith("NodeName=")] == [
        f"NodeName=node{i} CPUs=2 RealMemory=1536 State=UNKNOWN" for i in range(3)]
    assert conf[-1] == "PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    assert not any(line.startswith("GresTypes") for line in conf)


def test_gpus_become_generic_resources():
    conf = slurm.slurm_conf("lab-g", ["node0", "node1"], 4, 1024, [2, 1])
    assert "GresTypes=gpu" in conf.splitlines()
    assert "NodeName=node0 CPUs=4 RealMemory=1024 Gres=gpu:2 State=UNKNOWN" in conf
    assert slurm.gres_conf(["node0", "node1"], [2, 1]) == "NodeName=node0 Name=gpu Count=2\nNodeName=node1 Name=gpu Count=1\n"


@pytest.mark.parametrize("cpus, memory, expected", [(None, None, (8, 4096)), (0.5, 2 * 1024**3, (1, 2048)),
                                                    (2.5, None, (3, 4096))])
def test_node_resources_are_the_lab_limits_else_the_hosts(cpus, memory, expected):
    assert slurm.node_resources(cpus, memory, 8, 4 * 1024**3) == expected


def test_configure_writes_the_conf_and_one_munge_key_per_lab(tmp_path: Path):
    slurm.configure(tmp_path, "lab-a", ["node0", "node1"], [0, 0], 1, 1024**3, 4, 8 * 1024**3)
    assert "NodeName=node1 CPUs=1 RealMemory=1024 State=UNKNOWN" in (tmp_path / "etc" / "slurm.conf").read_text()
    key = tmp_path / "munge.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o400 and key.stat().st_size == slurm.MUNGE_KEY_BYTES
    first = key.read_bytes()
    slurm.configure(tmp_path, "lab-a", ["node0", "node1"], [0, 0], 2, None, 4, 8 * 1024**3)
    assert key.read_bytes() == first  # the same key however often the lab is brought up
    assert "CPUs=2" in (tmp_path / "etc" / "slurm.conf").read_text()
    other = tmp_path / "other"
    slurm.configure(other, "lab-b", ["node0"], [0], 1, None, 4, 8 * 1024**3)
    assert (other / "munge.key").read_bytes() != first


def test_the_plan_mounts_config_and_key_read_only_and_starts_slurm(tmp_path: Path):
    facts = HostFacts(gpus=HostGpus(), image="lab-node-slurm:abc", shared_dir=tmp_path / "shared",
                      exercises_dir=Path("/src/exercises"), public_key=tmp_path / "ssh" / "id.pub",
                      slurm_dir=tmp_path / "slurm")
    plan = build_plan(LabSpec(name="s", nodes=2, scheduler="slurm"), facts)
    for container in plan.containers:
        mounts = {mount.target: mount for mount in container.mounts}
        assert mounts["/etc/slurm"].source == str(tmp_path / "slurm" / "etc") and mounts["/etc/slurm"].read_only
        assert mounts["/etc/lab/munge.key"].source == str(tmp_path / "slurm" / "munge.key")
        assert mounts["/etc/lab/munge.key"].read_only
        assert container.start_commands[-1] == slurm.START_COMMAND
    plain = build_plan(LabSpec(name="s", nodes=2), dataclasses.replace(facts, slurm_dir=None))
    assert all(container.start_commands == [] for container in plain.containers)
    assert not any(mount.target == "/etc/slurm" for container in plain.containers for mount in container.mounts)


def test_spec_scheduler_is_validated():
    assert LabSpec().scheduler == "none"
    with pytest.raises(SpecError, match="--scheduler 'pbs'"):
        LabSpec(scheduler="pbs")
    with pytest.raises(SpecError, match="needs the node image"):
        LabSpec(scheduler="slurm", image="host")
    old_label = {key: value for key, value in LabSpec().to_dict().items() if key != "scheduler"}
    assert LabSpec.from_dict(old_label).fingerprint() == LabSpec().fingerprint()  # labs made before the field


def test_apt_simulation_gives_exact_package_versions():
    text = ("NOTE: This is only a simulation!\nInst libmunge2 (0.5.15-2+deb12u1 Debian:12.15/oldstable [amd64])\n"
            "Inst munge (0.5.15-2+deb12u1 Debian:12.15/oldstable, Debian-Security:12/oldstable-security [amd64])\n"
            "Conf munge (0.5.15-2+deb12u1 Debian:12.15/oldstable [amd64])\n")
    assert missing_packages(text) == ["libmunge2=0.5.15-2+deb12u1", "munge=0.5.15-2+deb12u1"]


JOB = ("JobId=7 JobName=lab-exercise03 UserId=root(0) JobState=PENDING Reason=ReqNodeNotAvail,_UnavailableNodes:node1 "
       "Dependency=(null) ExitCode=0:0 RunTime=00:00:00 TimeLimit=00:30:00 NodeList=(null) NumNodes=2-2 NumCPUs=4 "
       "StdOut=/lab/shared/runs/x/lab-exercise03-7.out")


def test_scontrol_job_line_is_parsed():
    job = sbatch.parse_job(JOB)
    assert job["JobState"] == "PENDING" and job["NumNodes"] == "2-2" and job["StdOut"].endswith("-7.out")
    assert job["Reason"] == "ReqNodeNotAvail,_UnavailableNodes:node1"


def test_a_drained_node_that_the_job_needs_is_one_line():
    nodes = sbatch.parse_nodes("node0|idle|none\nnode1|drained|disk check\n")
    assert sbatch.pending_problem(sbatch.parse_job(JOB), nodes) == \
        "job 7 needs 2 node(s) but only 1 can run jobs: node1 drained (disk check)"
    assert sbatch.pending_problem(sbatch.parse_job(JOB.replace("NumNodes=2-2", "NumNodes=1")), nodes) is None
    assert sbatch.pending_problem(sbatch.parse_job(JOB.replace("NumNodes=2-2", "NumNodes=3")), nodes) == \
        "job 7 asks for 3 node(s) but the cluster has 2"
    unresponsive = sbatch.parse_nodes("node0|idle|none\nnode1|idle*|none\n")
    assert sbatch.pending_problem(sbatch.parse_job(JOB), unresponsive).endswith("node1 idle*")


@pytest.mark.parametrize("fields, output, message", [
    ("JobState=COMPLETED ExitCode=0:0", "", None),
    ("JobState=FAILED ExitCode=1:0", "x\nsrun: error: Only allocated 1 nodes asked for 2\n",
     "job 7 failed with exit code 1; srun: Only allocated 1 nodes asked for 2"),
    ("JobState=TIMEOUT ExitCode=0:15 TimeLimit=00:01:00",
     "slurmstepd-node0: error: *** JOB 7 ON node0 CANCELLED AT 2026 DUE TO TIME LIMIT ***\n",
     "job 7 reached its time limit (00:01:00) and was stopped"),
    ("JobState=CANCELLED ExitCode=0:9", "", "job 7 cancelled with signal 9"),
    ("JobState=NODE_FAIL ExitCode=0:0 NodeList=node[0-1]", "", "job 7 lost a node (node[0-1])"),
])
def test_finished_jobs_say_what_went_wrong_in_one_line(fields, output, message):
    assert sbatch.finished_problem(sbatch.parse_job(f"JobId=7 {fields}"), output) == message


def test_run_time_in_seconds():
    assert sbatch.job_seconds({"RunTime": "1-02:03:04"}) == 93784 and sbatch.job_seconds({"RunTime": "00:00:27"}) == 27
