"""The lab plan (lab/nodes/plan.py), its translation to engine API arguments and its read-back; no engine."""

import json
from pathlib import Path

from lab.model.spec import LabSpec
from lab.nodes.compose import compose_service
from lab.nodes.driver import create_arguments, describe_container
from lab.nodes.gpus import Gpu, HostGpus
from lab.nodes.labels import container_name, lab_filter, lab_labels, network_name, node_labels, volume_name
from lab.nodes.plan import ContainerPlan, HostFacts, HostPython, Mount, NetworkPlan, Port, VolumePlan, build_plan

HOME = Path("/home/u/.lab/labs/demo")
# What sshd and the exercises were found to need, every other capability dropped (README "Security" says why each).
NODE_CAPS = ["AUDIT_WRITE", "DAC_OVERRIDE", "SETGID", "SETUID", "SYS_CHROOT"]
IMAGE = "lab-node:0123456789ab"
LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"


def facts(gpus=HostGpus(), image=IMAGE, python=None, folders=()):
    return HostFacts(gpus=gpus, image=image, shared_dir=HOME / "shared", exercises_dir=Path("/src/exercises"),
                     public_key=HOME / "ssh" / "id_ed25519.pub", python=python, host_folders=folders)


def fake_gpus(count):
    return tuple(Gpu(i, i, f"GPU-{i:04d}", "NVIDIA H100") for i in range(count))


def common_mounts(lab="demo"):
    """What every node mounts, sorted by target as the plan keeps them."""
    return [Mount(str(HOME / "ssh"), "/etc/lab/ssh"),
            Mount(str(HOME / "ssh" / "id_ed25519.pub"), "/etc/ssh/lab_authorized_keys"),
            Mount("/src/exercises", "/lab/exercises"),
            Mount(volume_name(lab), "/lab/shared", read_only=False, kind="volume")]


def test_cpu_lab_plan_in_full():
    spec = LabSpec(name="demo", nodes=2, cpus=1.0, memory=1024**3, net_admin=True, gpus="auto")
    plan = build_plan(spec, facts())
    resolved = LabSpec(name="demo", nodes=2, cpus=1.0, memory=1024**3, net_admin=True, gpus="none")
    assert plan.spec == resolved and plan.gpu_mode == "cpu" and len(plan.notices) == 1
    assert plan.network == NetworkPlan("lab-demo-net", "bridge", {"com.docker.network.driver.mtu": "65520"},
                                       {**lab_labels("demo"), "io.lab.role": "network"})
    assert plan.volume == VolumePlan("lab-demo-shared", str(HOME / "shared"), {**lab_labels("demo"), "io.lab.role": "volume"})
    node1 = resolved.node_list()[1]
    assert plan.containers[1] == ContainerPlan(
        index=1, name="lab-demo-node1", hostname="node1", image=IMAGE, network="lab-demo-net", aliases=["node1"],
        labels=node_labels(resolved, node1), environment={"LAB_NODE_RANK": "1"}, mounts=common_mounts(),
        devices=[], device_requests=[], ports=[Port(22, "127.0.0.1", None)], cpus=1.0, memory=1024**3,
        memory_swap=1024**3, shm_size=512 * 1024**2, init=True, cap_drop=["ALL"], cap_add=sorted([*NODE_CAPS, "NET_ADMIN"]),
        security_opt=["no-new-privileges"], pids_limit=4096, start_commands=[])
    assert [c.name for c in plan.containers] == ["lab-demo-node0", "lab-demo-node1"]


def test_raw_gpu_passthrough_gives_each_node_its_device_and_the_driver_read_only():
    host = HostGpus(runtimes=frozenset({"runc"}), gpus=fake_gpus(2), libraries=(LIBCUDA,), tools=("/usr/bin/nvidia-smi",),
                    device_nodes=frozenset({"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"}))
    plan = build_plan(LabSpec(name="demo", nodes=2, gpus="all"), facts(host))
    assert plan.gpu_mode == "passthrough" and plan.spec.gpus == "all"
    for index, container in enumerate(plan.containers):
        assert container.devices == [f"/dev/nvidia{index}:/dev/nvidia{index}:rwm", "/dev/nvidiactl:/dev/nvidiactl:rwm"]
        assert container.device_requests == []
        assert container.mounts == sorted(common_mounts() + [Mount(LIBCUDA, LIBCUDA), Mount("/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi")],
                                          key=lambda m: (m.target, m.source))
        assert container.labels["io.lab.gpus"] == str(index)
        assert container.start_commands == [["ldconfig", "-X", "/usr/lib/x86_64-linux-gnu"]]


def test_nvidia_toolkit_gets_device_requests_with_each_node_its_gpus():
    host = HostGpus(runtimes=frozenset({"runc", "nvidia"}), gpus=fake_gpus(4))
    plan = build_plan(LabSpec(name="demo", nodes=2, gpus="auto"), facts(host))
    assert plan.gpu_mode == "toolkit" and plan.spec.gpus == "all" and plan.notices == []
    assert [c.device_requests for c in plan.containers] == [
        [{"Driver": "nvidia", "DeviceIDs": ["GPU-0000", "GPU-0001"], "Capabilities": [["gpu", "compute", "utility"]]}],
        [{"Driver": "nvidia", "DeviceIDs": ["GPU-0002", "GPU-0003"], "Capabilities": [["gpu", "compute", "utility"]]}],
    ]
    for index, container in enumerate(plan.containers):
        assert container.devices == [] and container.mounts == common_mounts() and container.start_commands == []
        assert container.environment == {"LAB_NODE_RANK": str(index), "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
    assert [c.labels["io.lab.gpus"] for c in plan.containers] == ["0,1", "2,3"]


def test_image_host_mounts_the_host_python_read_only_and_labels_it():
    python = HostPython("/opt/py/bin/python3", ("/opt/py",))
    plan = build_plan(LabSpec(name="demo", nodes=1, image="host", gpus="none"),
                      facts(image="lab-host:feedbeef0000", python=python, folders=("/usr", "/lib64", "/opt/py")))
    [container] = plan.containers
    assert container.image == "lab-host:feedbeef0000"
    assert container.labels["io.lab.python"] == "/opt/py/bin/python3"
    assert container.environment == {"LAB_NODE_RANK": "0", "LANG": "C.UTF-8",
                                     "PATH": "/opt/py/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    assert container.mounts == sorted(common_mounts() + [Mount("/usr", "/usr"), Mount("/lib64", "/lib64"), Mount("/opt/py", "/opt/py")],
                                      key=lambda m: (m.target, m.source))
    assert "io.lab.python" not in build_plan(LabSpec(name="demo", nodes=1), facts()).containers[0].labels


def test_nodes_get_least_privilege_and_net_admin_only_when_asked():
    for net_admin in (False, True):
        plan = build_plan(LabSpec(name="demo", nodes=2, net_admin=net_admin), facts())
        for container in plan.containers:
            assert container.cap_drop == ["ALL"]
            assert container.cap_add == sorted(NODE_CAPS + ["NET_ADMIN"] * net_admin)
            assert container.security_opt == ["no-new-privileges"] and container.pids_limit == 4096
            host_config = create_arguments(container)["host_config"]
            assert (host_config["cap_drop"], host_config["security_opt"], host_config["pids_limit"]) == (
                ["ALL"], ["no-new-privileges"], 4096)
            # Nothing that would hand a node the host: no privileged mode, host network or PID namespace, engine socket.
            assert not {"privileged", "network_mode", "pid_mode", "ipc_mode", "userns_mode"} & set(host_config)
            assert not any("docker.sock" in bind for bind in host_config["binds"])
        # `lab up --dry-run --json` prints exactly these.
        printed = json.loads(json.dumps(plan.to_dict()))["containers"][0]
        assert (printed["cap_drop"], printed["cap_add"], printed["security_opt"], printed["pids_limit"]) == (
            ["ALL"], sorted(NODE_CAPS + ["NET_ADMIN"] * net_admin), ["no-new-privileges"], 4096)


def test_plan_dict_is_plain_sorted_and_the_same_every_time():
    spec = LabSpec(name="demo", nodes=2, gpus="all")
    host = HostGpus(runtimes=frozenset({"nvidia"}), gpus=fake_gpus(2))
    first = json.dumps(build_plan(spec, facts(host)).to_dict())
    assert first == json.dumps(build_plan(spec, facts(host)).to_dict())
    data = json.loads(first)
    assert list(data) == sorted(data) and list(data["containers"][0]) == sorted(data["containers"][0])
    assert data["containers"][1]["mounts"][1] == {"kind": "bind", "read_only": True, "target": "/etc/ssh/lab_authorized_keys",
                                                  "source": str(HOME / "ssh" / "id_ed25519.pub")}
    assert data["spec"]["gpus"] == "all" and data["volume"]["host_dir"] == str(HOME / "shared")


def test_plan_translates_to_engine_api_arguments():
    host = HostGpus(runtimes=frozenset({"nvidia"}), gpus=fake_gpus(1))
    spec = LabSpec(name="demo", nodes=1, cpus=0.5, memory=768 * 1024**2, gpus="all")
    [container] = build_plan(spec, facts(host)).containers
    assert create_arguments(container) == {
        "container": {"image": IMAGE, "name": "lab-demo-node0", "hostname": "node0", "labels": container.labels,
                      "environment": {"LAB_NODE_RANK": "0", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
                      "ports": [22]},
        "host_config": {
            "binds": [f"{HOME}/ssh:/etc/lab/ssh:ro", f"{HOME}/ssh/id_ed25519.pub:/etc/ssh/lab_authorized_keys:ro", "/src/exercises:/lab/exercises:ro",
                      "lab-demo-shared:/lab/shared:rw"],
            "port_bindings": {22: ("127.0.0.1",)},
            "init": True, "shm_size": 512 * 1024**2, "nano_cpus": 500_000_000,
            "mem_limit": 768 * 1024**2, "memswap_limit": 768 * 1024**2, "devices": None,
            "device_requests": [{"Driver": "nvidia", "DeviceIDs": ["GPU-0000"], "Capabilities": [["gpu", "compute", "utility"]]}],
            "cap_drop": ["ALL"], "cap_add": NODE_CAPS, "security_opt": ["no-new-privileges"], "pids_limit": 4096,
        },
        "network": "lab-demo-net",
        "endpoint": {"aliases": ["node0"]},
    }


def inspect_data(plan: ContainerPlan, status="running", on_network=True) -> dict:
    """What `docker inspect` reports for a container made from `plan` (the fields the driver reads)."""
    networks = {plan.network: {"Aliases": [*plan.aliases, "0123456789ab"], "IPAddress": "172.30.0.3"}} if on_network else {}
    return {
        "Id": "0123456789abcdef", "Name": f"/{plan.name}",
        "Config": {"Hostname": plan.hostname, "Image": plan.image, "Labels": plan.labels,
                   "Env": [f"{key}={value}" for key, value in plan.environment.items()]},
        "HostConfig": {"NanoCpus": int((plan.cpus or 0) * 1e9), "Memory": plan.memory or 0, "MemorySwap": plan.memory_swap or 0,
                       "ShmSize": plan.shm_size, "Init": plan.init, "CapAdd": plan.cap_add or None,
                       "CapDrop": plan.cap_drop or None, "SecurityOpt": plan.security_opt or None, "PidsLimit": plan.pids_limit,
                       "Devices": [dict(zip(("PathOnHost", "PathInContainer", "CgroupPermissions"), d.split(":"))) for d in plan.devices],
                       "DeviceRequests": [{**request, "Count": 0, "Options": {}} for request in plan.device_requests] or None,
                       "PortBindings": {"22/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}]}},
        "Mounts": [{"Type": m.kind, "Name": m.source, "Source": f"/var/lib/docker/volumes/{m.source}/_data", "Destination": m.target,
                    "RW": not m.read_only} if m.kind == "volume" else
                   {"Type": "bind", "Source": m.source, "Destination": m.target, "RW": not m.read_only} for m in plan.mounts],
        "NetworkSettings": {"Networks": networks, "Ports": {"22/tcp": [{"HostIp": "127.0.0.1", "HostPort": "32801"}]}},
        "State": {"Status": status, "Paused": status == "paused", "OOMKilled": False, "ExitCode": 0},
    }


def test_a_container_reads_back_as_its_plan_with_its_state():
    host = HostGpus(runtimes=frozenset({"runc"}), gpus=fake_gpus(2), libraries=(LIBCUDA,),
                    device_nodes=frozenset({"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"}))
    [_, planned] = build_plan(LabSpec(name="demo", nodes=2, cpus=1.0, memory=1024**3, gpus="all", net_admin=True),
                              facts(host)).containers
    described = describe_container(inspect_data(planned))
    assert described.settings == ContainerPlan(**{**planned.__dict__, "start_commands": []})
    state = described.state
    assert (state.index, state.hostname, state.container, state.state) == (1, "node1", "lab-demo-node1", "running")
    assert (state.ip, state.ssh_port, state.cpus, state.memory, state.gpus, state.faults) == (
        "172.30.0.3", 32801, 1.0, 1024**3, ["1"], [])
    partitioned = describe_container(inspect_data(planned, on_network=False))
    assert partitioned.state.faults == ["partitioned"] and partitioned.state.ip is None
    assert describe_container(inspect_data(planned, status="paused")).state.faults == ["paused"]


def test_an_oom_kill_shows_only_while_the_node_is_down():
    [planned] = build_plan(LabSpec(name="demo", nodes=1), facts()).containers
    killed = inspect_data(planned, status="exited")
    killed["State"].update(OOMKilled=True, ExitCode=137)
    assert describe_container(killed).state.state == "exited (OOM-killed)"
    restarted = inspect_data(planned)  # Docker keeps the flag after `start`; the node is simply running again
    restarted["State"]["OOMKilled"] = True
    assert describe_container(restarted).state.state == "running"


def test_compose_service_comes_from_the_same_description():
    [planned] = build_plan(LabSpec(name="demo", nodes=1, cpus=1.0, gpus="none"), facts()).containers
    service = compose_service(describe_container(inspect_data(planned)).settings)
    assert service["volumes"] == [f"{HOME}/ssh:/etc/lab/ssh:ro", f"{HOME}/ssh/id_ed25519.pub:/etc/ssh/lab_authorized_keys:ro",
                                  "/src/exercises:/lab/exercises:ro", "shared:/lab/shared"]
    assert service["ports"] == ["127.0.0.1::22"] and service["networks"] == {"lab": {"aliases": ["node0"]}}
    assert (service["cpus"], service["init"], service["container_name"]) == (1.0, True, "lab-demo-node0")
    assert "deploy" not in service and "devices" not in service
    assert (service["cap_drop"], service["cap_add"], service["security_opt"], service["pids_limit"]) == (
        ["ALL"], NODE_CAPS, ["no-new-privileges"], 4096)


# --- names and labels (moved here from test_spec: the model knows no Docker words) ------------------
def test_labels_name_the_lab_and_node():
    spec = LabSpec(name="demo", nodes=3)
    labels = node_labels(spec, spec.node_list()[2])
    assert labels["com.docker.compose.project"] == "lab-demo"
    assert labels["io.lab.lab"] == "demo"
    assert labels["io.lab.node"] == "2"
    assert labels["io.lab.fingerprint"] == spec.fingerprint()
    assert LabSpec.from_dict(json.loads(labels["io.lab.spec"])) == spec
    assert lab_labels("demo").items() <= labels.items()


def test_filters_and_object_names():
    assert lab_filter("demo") == {"label": ["io.lab.lab=demo", "io.lab.managed=true"]}
    assert lab_filter(None) == {"label": ["io.lab.managed=true"]}
    assert network_name("demo") == "lab-demo-net"
    assert volume_name("demo") == "lab-demo-shared"
    assert container_name(LabSpec().node_list()[1]) == "lab-default-node1"


def test_a_mesh_larger_than_the_hosts_arp_table_is_announced():
    from lab.nodes.plan import neighbour_notices

    assert neighbour_notices(32, 1024) == [] and neighbour_notices(64, None) == []
    notice = neighbour_notices(64, 1024)[0]
    assert "64 nodes talking to each other need 4032 ARP entries but this host keeps at most 1024" in notice
    assert "net.ipv4.neigh.default.gc_thresh3=8192" in notice


def test_a_workspace_is_mounted_read_only_at_its_own_path_on_every_node():
    plan = build_plan(LabSpec(name="ws", nodes=2, workspace="/home/me/project"), facts())
    for container in plan.containers:
        assert Mount("/home/me/project", "/home/me/project", read_only=True) in container.mounts
    assert all(not any(m.target == "/home/me/project" for m in c.mounts)
               for c in build_plan(LabSpec(name="ws", nodes=2), facts()).containers)


def test_a_workspace_must_be_an_absolute_path():
    import pytest

    from lab.errors import SpecError

    with pytest.raises(SpecError, match="not an absolute path"):
        LabSpec(name="ws", workspace="project")
