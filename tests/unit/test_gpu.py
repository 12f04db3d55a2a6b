"""GPU planning, `--image host` mounts and backend choice, from fake host descriptions (no GPU, no Docker)."""

import dataclasses
import io
import tarfile

import pytest

from lab.jobs.doctor import judge
from lab.errors import RunError, SpecError
from lab.nodes.gpus import (
    CPU_NOTICE,
    HOST_ROOT_VARIABLE,
    Gpu,
    HostGpus,
    detect_host,
    parse_ldconfig,
    parse_nvidia_smi,
    plan_gpus,
    read_proc_gpus,
    run_backend,
)
from lab.nodes.host_image import host_folders, outside_usr, rootfs_tar
from lab.nodes.labels import PYTHON_LABEL
from lab.nodes.plan import AUTHORIZED_KEYS_PATH, NODE_SSH_DIR, HostFacts, HostPython, Mount, build_plan
from lab.model.spec import EXERCISES_MOUNT, SHARED_MOUNT, LabSpec, parse_gpus

LIBS = ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "/opt/nvidia/lib64/libnvidia-ptxjitcompiler.so.1")


def gpus(count):
    return tuple(Gpu(i, i, f"GPU-{i:04d}", "NVIDIA H100") for i in range(count))


def toolkit_host(count):
    return HostGpus(runtimes=frozenset({"runc", "nvidia"}), gpus=gpus(count))


def raw_host(count, control=True):
    nodes = {f"/dev/nvidia{i}" for i in range(count)}
    if control:
        nodes |= {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}
    return HostGpus(runtimes=frozenset({"runc"}), device_nodes=frozenset(nodes), gpus=gpus(count), libraries=LIBS,
                    tools=("/usr/bin/nvidia-smi",))


def node_containers(spec, host, tmp_path, python=None, folders=()):
    """Each node's ContainerPlan for `spec` on `host`, by index: what `lab up` applies."""
    facts = HostFacts(host, "lab-node:test", tmp_path / "shared", tmp_path, tmp_path / "key.pub", python, folders)
    return {container.index: container for container in build_plan(spec, facts).containers}


def extra_mounts(container):
    """Mounts beyond the shared volume, the exercises and the SSH keys that every node has."""
    return [m for m in container.mounts
            if m.target not in (SHARED_MOUNT, EXERCISES_MOUNT, AUTHORIZED_KEYS_PATH, NODE_SSH_DIR)]


# --- --gpus parsing --------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [("auto", "auto"), (" ALL ", "all"), ("none", "none"), ("2", "2"), ("02", "2")])
def test_gpus_request_is_normalised(text, expected):
    assert parse_gpus(text) == expected
    assert LabSpec(gpus=text).gpus == expected


@pytest.mark.parametrize("text", ["0", "-1", "lots", "", "1.5", "all,1"])
def test_bad_gpus_request_is_one_spec_error(text):
    with pytest.raises(SpecError) as caught:
        LabSpec(gpus=text)
    assert "\n" not in caught.value.message and "--gpus" in caught.value.message


@pytest.mark.parametrize("image", ["Ubuntu", "my image", "-x", "repo:tag:more", ""])
def test_an_image_name_docker_would_refuse_is_refused(image):
    with pytest.raises(SpecError, match="neither auto, host nor an image name"):
        LabSpec(image=image)


@pytest.mark.parametrize("image", ["ubuntu", "my-team/train:2.13", "registry.example:5000/a/b:v1-cpu",
                                   "train@sha256:" + "a" * 64])
def test_any_image_name_is_the_users_own_image(image):
    assert LabSpec(image=image).user_image and not LabSpec(image="host").user_image


# --- toolkit: device requests with per-node ids ---------------------------------------------------
def test_toolkit_partitions_gpus_into_per_node_device_requests(tmp_path):
    plan = plan_gpus("all", 2, toolkit_host(4))
    assert plan.mode == "toolkit" and plan.resolved == "all" and plan.notices == []
    mounts = node_containers(LabSpec(nodes=2, gpus="all"), toolkit_host(4), tmp_path)
    assert [m.device_requests for m in mounts.values()] == [
        [{"Driver": "nvidia", "DeviceIDs": ["GPU-0000", "GPU-0001"], "Capabilities": [["gpu", "compute", "utility"]]}],
        [{"Driver": "nvidia", "DeviceIDs": ["GPU-0002", "GPU-0003"], "Capabilities": [["gpu", "compute", "utility"]]}],
    ]
    assert all(m.devices == [] and extra_mounts(m) == [] for m in mounts.values())  # the toolkit mounts the driver
    assert [n.label for n in plan.nodes] == ["0,1", "2,3"]


@pytest.mark.parametrize("count,expected", [(2, [["GPU-0000"], ["GPU-0001"]]), (1, [["GPU-0000"], ["GPU-0000"]]),
                                            (4, [["GPU-0000", "GPU-0001"], ["GPU-0002", "GPU-0003"]])])
def test_toolkit_device_requests_for_auto_on_two_nodes(tmp_path, count, expected):
    """The cases test_gpu_passthrough.py brings up with raw passthrough, here with the toolkit."""
    plan = plan_gpus("auto", 2, toolkit_host(count))
    mounts = node_containers(LabSpec(nodes=2, gpus="auto"), toolkit_host(count), tmp_path)
    assert [[request["DeviceIDs"] for request in m.device_requests] for m in mounts.values()] == [[ids] for ids in expected]
    assert all(m.environment == {"LAB_NODE_RANK": str(m.index), "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
               for m in mounts.values())
    assert [n.loader_command for n in plan.nodes] == [[], []]  # the toolkit runs ldconfig in the container itself
    assert bool(plan.notices) == (count == 1)


def test_auto_with_an_odd_count_gives_every_gpu_away_once():
    plan = plan_gpus("auto", 2, toolkit_host(3))
    assert plan.resolved == "all"
    assert [n.device_ids for n in plan.nodes] == [["GPU-0000", "GPU-0001"], ["GPU-0002"]]
    assert plan.notices == []


def test_count_per_node():
    plan = plan_gpus("1", 2, toolkit_host(4))
    assert [n.label for n in plan.nodes] == ["0", "1"]


# --- sharing --------------------------------------------------------------------------------------
def test_fewer_gpus_than_nodes_are_shared_with_a_warning():
    plan = plan_gpus("auto", 3, toolkit_host(2))
    assert [n.label for n in plan.nodes] == ["0", "1", "0"]
    assert len(plan.notices) == 1 and "GPU 0 by node0, node2" in plan.notices[0] and "NCCL works" in plan.notices[0]


def test_count_that_does_not_fit_wraps_and_warns():
    plan = plan_gpus("2", 2, toolkit_host(3))
    assert [n.label for n in plan.nodes] == ["0,1", "2,0"]
    assert "GPU 0 by node0, node1" in plan.notices[0]


def test_more_per_node_than_the_host_has_is_refused():
    with pytest.raises(SpecError, match="this host has 2"):
        plan_gpus("3", 2, toolkit_host(2))


# --- raw passthrough: device nodes and read-only driver libraries ----------------------------------
def test_passthrough_gives_each_node_its_own_device_node_and_the_driver_read_only(tmp_path):
    plan = plan_gpus("all", 2, raw_host(2))
    assert plan.mode == "passthrough"
    mounts = node_containers(LabSpec(nodes=2, gpus="all"), raw_host(2), tmp_path)
    control = ["/dev/nvidiactl:/dev/nvidiactl:rwm", "/dev/nvidia-uvm:/dev/nvidia-uvm:rwm",
               "/dev/nvidia-uvm-tools:/dev/nvidia-uvm-tools:rwm"]
    assert mounts[0].devices == ["/dev/nvidia0:/dev/nvidia0:rwm", *control]
    assert mounts[1].devices == ["/dev/nvidia1:/dev/nvidia1:rwm", *control]
    for mount in mounts.values():
        assert mount.device_requests == [] and mount.environment == {"LAB_NODE_RANK": str(mount.index)}
        for path in (*LIBS, "/usr/bin/nvidia-smi"):
            assert Mount(path, path, read_only=True, kind="bind") in mount.mounts
    # Each node's loader cache is rebuilt over every library folder, the one outside ld.so.conf included.
    assert [n.loader_command for n in plan.nodes] == [
        ["ldconfig", "-X", "/opt/nvidia/lib64", "/usr/lib/x86_64-linux-gnu"]] * 2


def test_passthrough_from_a_host_root_mounts_its_files_at_their_paths_inside_it():
    host = dataclasses.replace(raw_host(1), root="/tmp/fakehost")
    node = plan_gpus("auto", 1, host).nodes[0]
    assert node.devices[:2] == ["/tmp/fakehost/dev/nvidia0:/dev/nvidia0:rwm", "/tmp/fakehost/dev/nvidiactl:/dev/nvidiactl:rwm"]
    assert node.binds["/tmp/fakehost/usr/lib/x86_64-linux-gnu/libcuda.so.1"] == {
        "bind": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "mode": "ro"}
    assert node.binds["/tmp/fakehost/usr/bin/nvidia-smi"] == {"bind": "/usr/bin/nvidia-smi", "mode": "ro"}


def test_passthrough_skips_gpus_without_a_device_node_and_needs_nvidiactl():
    host = raw_host(2)
    host = HostGpus(host.runtimes, host.device_nodes - {"/dev/nvidia1"}, host.gpus, host.libraries, host.tools)
    assert [n.label for n in plan_gpus("all", 1, host).nodes] == ["0"]
    assert plan_gpus("auto", 2, raw_host(2, control=False)).mode == "cpu"


# --- CPU fallback ---------------------------------------------------------------------------------
def test_auto_without_gpus_falls_back_to_cpu_with_one_notice(tmp_path):
    plan = plan_gpus("auto", 2, HostGpus())
    assert (plan.mode, plan.resolved, plan.notices) == ("cpu", "none", [CPU_NOTICE])
    mounts = node_containers(LabSpec(nodes=2, gpus="auto"), HostGpus(), tmp_path)
    assert all(not (m.devices or m.device_requests or extra_mounts(m) or set(m.environment) - {"LAB_NODE_RANK"})
               for m in mounts.values())


def test_none_is_silent_and_explicit_gpus_on_a_cpu_host_are_refused():
    assert plan_gpus("none", 2, toolkit_host(2)).notices == []
    assert plan_gpus("none", 2, toolkit_host(2)).mode == "cpu"
    with pytest.raises(SpecError, match="no NVIDIA GPU found"):
        plan_gpus("all", 2, HostGpus())


# --- host detection parsers -----------------------------------------------------------------------
def fake_host_root(root, proc=True):
    """dev/nvidia0-1 (plain files: detection only globs), a fake nvidia-smi on PATH, the driver's /proc when `proc`."""
    (root / "dev").mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-modeset"):
        (root / "dev" / name).touch()
    (root / "usr" / "bin").mkdir(parents=True)
    smi = root / "usr" / "bin" / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA Fake (UUID: GPU-smi-0)'\necho 'GPU 1: NVIDIA Fake (UUID: GPU-smi-1)'\n")
    smi.chmod(0o755)
    if proc:
        for minor in (0, 1):
            folder = root / "proc" / "driver" / "nvidia" / "gpus" / f"0000:0{minor}:00.0"
            folder.mkdir(parents=True)
            (folder / "information").write_text(f"Model: \t NVIDIA Fake\nGPU UUID: \t GPU-proc-{minor}\nDevice Minor: \t {minor}\n")


@pytest.mark.parametrize("proc,uuids", [(True, ["GPU-proc-0", "GPU-proc-1"]), (False, ["GPU-smi-0", "GPU-smi-1"])])
def test_detection_reads_the_host_root_given_by_the_test_variable(tmp_path, monkeypatch, proc, uuids):
    fake_host_root(tmp_path, proc)
    monkeypatch.setenv(HOST_ROOT_VARIABLE, str(tmp_path))
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
    host = detect_host({"runc"})
    assert host.root == str(tmp_path)
    assert host.device_nodes == {"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-modeset"}
    assert host.tools == ("/usr/bin/nvidia-smi",)  # the host's own path, found under the root
    assert [gpu.uuid for gpu in host.gpus] == uuids
    assert host.libraries == ()  # no ld.so.cache under the root: the real one is never read instead
    assert host.host_path("/dev/nvidia0") == str(tmp_path / "dev" / "nvidia0")


def test_ldconfig_keeps_64_bit_driver_libraries_only():
    text = """1234 libs found in cache `/etc/ld.so.cache'
	libnvidia-ml.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-ml.so.1
	libnvidia-ml.so.1 (libc6) => /lib/i386-linux-gnu/libnvidia-ml.so.1
	libcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1
	libcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12
	libnvidia-glcore.so.550.54 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-glcore.so.550.54
	libz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1
"""
    assert parse_ldconfig(text) == ["/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/lib/x86_64-linux-gnu/libcuda.so.1"]


def test_nvidia_smi_list():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1b2c3d4e-0000-1111-2222-333344445555)\n"
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n")
    assert parse_nvidia_smi(text) == [Gpu(0, 0, "GPU-1b2c3d4e-0000-1111-2222-333344445555", "NVIDIA H100 80GB HBM3"),
                                      Gpu(1, 1, "GPU-aaaa", "NVIDIA H100 80GB HBM3")]


def test_proc_driver_gpus_give_minor_numbers(tmp_path):
    for bus, minor, uuid in (("0000:1a:00.0", 3, "GPU-b"), ("0000:0a:00.0", 2, "GPU-a")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(
            f"Model: \t\t NVIDIA A100\nIRQ:   \t\t 42\nGPU UUID: \t {uuid}\nDevice Minor: \t {minor}\n")
    assert read_proc_gpus(tmp_path) == [Gpu(0, 2, "GPU-a", "NVIDIA A100"), Gpu(1, 3, "GPU-b", "NVIDIA A100")]
    assert read_proc_gpus(tmp_path / "missing") == []


# --- backends -------------------------------------------------------------------------------------
def test_auto_backend_is_nccl_only_when_every_process_has_its_own_gpu():
    assert run_backend("auto", [[], []], 1, "x") == "gloo"
    assert run_backend("auto", [["0"], ["1"]], 1, "x") == "nccl"
    assert run_backend("auto", [["0"], ["1"]], 2, "x") == "gloo"
    assert run_backend("auto", [["0"], ["0"]], 1, "x") == "nccl"  # nodes sharing one GPU: NCCL across containers works
    assert run_backend("auto", [["0"], ["0"]], 2, "x") == "gloo"  # two ranks of one node on one GPU: NCCL refuses
    assert run_backend("gloo", [["0"], ["1"]], 1, "x") == "gloo"


@pytest.mark.parametrize("node_gpus,nproc,why", [([[], []], 1, "has no GPUs"), ([["0"], ["0"]], 2, "node0: 1"),
                                                  ([["0", "1"], ["2"]], 2, "node1: 1")])
def test_nccl_that_cannot_work_is_one_clear_error(node_gpus, nproc, why):
    with pytest.raises(RunError, match=why) as caught:
        run_backend("nccl", node_gpus, nproc, "lab1")
    assert "\n" not in caught.value.message


# --- lab doctor's verdict -------------------------------------------------------------------------
PROBE = ('{"hostname": "node0", "python": "3.11.7", "torch": "2.13.0", "cuda_build": "12.8", "cuda": true, '
         '"gpus": ["NVIDIA H100"], "backends": ["gloo", "nccl"], "nccl": "2.27.3", "peers": {"node0": "10.0.0.2", "node1": null}}')


def test_doctor_reports_unresolved_peers_and_missing_gpus():
    diagnosis = judge(0, "node0", ["some warning", PROBE], 0, ["0", "1"])
    assert not diagnosis.ok
    assert diagnosis.problems == ["peers do not resolve: node1", "given 2 GPU(s) but torch sees 1"]
    assert judge(0, "node0", [PROBE.replace("null", '"10.0.0.3"')], 0, ["0"]).ok


def test_doctor_reports_a_probe_that_failed():
    diagnosis = judge(1, "node1", ["python3: not found"], 127, [])
    assert diagnosis.problems == ["probe failed (exit 127): python3: not found"]


# --- --image host ---------------------------------------------------------------------------------
def test_python_folders_outside_usr_are_kept_once():
    folders = ["/root/.pyenv/versions/3.11.7", "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages",
               "/usr/lib/python3/dist-packages", "/work/.venv", "/work/.venv/"]
    assert outside_usr(folders) == ["/work/.venv", "/root/.pyenv/versions/3.11.7"]


def test_host_folders_are_usr_real_library_roots_and_python_and_leave_etc_alone(tmp_path):
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "bin").symlink_to("usr/bin")
    (tmp_path / "lib64").mkdir()  # a host that is not merged-/usr here: mounted as it is
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "ld.so.cache").write_text("")
    assert host_folders(HostPython("/opt/py/bin/python3", ("/opt/py",)), root=tmp_path) == ("/usr", "/lib64", "/opt/py")


def test_host_image_nodes_run_the_host_python(tmp_path):
    python = HostPython("/opt/py/bin/python3", ("/opt/py",))
    mounts = node_containers(LabSpec(nodes=2, image="host", gpus="all"), raw_host(2), tmp_path, python, ("/usr", "/opt/py"))
    node = mounts[1]
    assert node.labels[PYTHON_LABEL] == "/opt/py/bin/python3"
    assert PYTHON_LABEL not in node_containers(LabSpec(nodes=2), raw_host(2), tmp_path)[1].labels
    assert node.environment["PATH"].startswith("/opt/py/bin:")
    # Mounted read-only at the same paths.
    assert Mount("/usr", "/usr", read_only=True) in node.mounts and Mount("/opt/py", "/opt/py", read_only=True) in node.mounts
    assert node.devices[0] == "/dev/nvidia1:/dev/nvidia1:rwm"  # GPUs combine with the host image


def test_rootfs_is_tiny_deterministic_and_has_a_real_sbin():
    first = rootfs_tar({"bin": "usr/bin", "lib": "usr/lib"}, "/usr/sbin/ldconfig", None)
    assert first == rootfs_tar({"bin": "usr/bin", "lib": "usr/lib"}, "/usr/sbin/ldconfig", None)
    assert len(first) < 64 * 1024
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert members["sbin"].isdir()  # Docker puts its init at /sbin/docker-init: not inside the read-only /usr
        assert members["bin"].issym() and members["bin"].linkname == "usr/bin"
        assert members["lab-entrypoint"].mode == 0o755
        assert "etc/hosts" not in members and "etc/resolv.conf" not in members  # Docker manages those
        assert "etc/ld.so.cache" not in members
        config = tar.extractfile("etc/ssh/sshd_config").read().decode()
    assert "AuthorizedKeysFile /etc/ssh/lab_authorized_keys" in config and "PasswordAuthentication no" in config


def test_rootfs_copies_the_loader_cache_so_it_stays_writable():
    with tarfile.open(fileobj=io.BytesIO(rootfs_tar({}, None, None, b"ld.so-1.7.0"))) as tar:
        assert tar.extractfile("etc/ld.so.cache").read() == b"ld.so-1.7.0"


def test_rootfs_carries_the_sshd_bundle_under_opt():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("lab-sshd/sshd")
        info.size, info.mode = 4, 0o755
        tar.addfile(info, io.BytesIO(b"ELF!"))
    with tarfile.open(fileobj=io.BytesIO(rootfs_tar({}, None, buffer.getvalue()))) as tar:
        assert tar.extractfile("opt/lab-sshd/sshd").read() == b"ELF!"
        assert tar.getmember("opt/lab-sshd/sshd").mode == 0o755
