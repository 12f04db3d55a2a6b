"""Raw GPU passthrough through the real engine, on a machine without a GPU.

A fake NVIDIA host is built under a temporary root: character device nodes with the driver's numbers
(made with mknod), small real ELF driver libraries with the driver's sonames, that root's own
ld.so.cache, a fake nvidia-smi and the driver's /proc files. LAB_HOST_ROOT (test-only, see
lab/nodes/gpus.py) points `lab up --gpus auto` at it; the test then checks from inside each node
that it got exactly its plan: its device nodes (major/minor), the libraries where and as its loader
finds them, a working nvidia-smi, and that `lab status` and `lab doctor` report the GPUs.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sysconfig
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import lab, lab_json

pytestmark = [pytest.mark.docker, pytest.mark.slow]

NVIDIA_MAJOR = 195  # the driver's fixed major: /dev/nvidiaN has minor N, /dev/nvidiactl 255, nvidia-modeset 254
MULTIARCH = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
# Library -> folder inside the fake root; /opt/nvidia/lib64 is outside the node's ld.so.conf, as on some hosts.
LIBRARIES = {"libcuda.so.1": f"/usr/lib/{MULTIARCH}", "libnvidia-ml.so.1": f"/usr/lib/{MULTIARCH}",
             "libnvidia-ptxjitcompiler.so.1": "/opt/nvidia/lib64"}
# The fake libraries answer with their own soname, so a node can tell it loaded these very files.
LIBRARY_SOURCE = 'const char *lab_fake_driver(void) { return "%s"; }\n'
# Loads each library named on the command line by soname, as torch loads libcuda.so.1, and prints its answer.
LOAD_BY_SONAME = """import ctypes, sys
for soname in sys.argv[1:]:
    answer = ctypes.CDLL(soname).lab_fake_driver
    answer.restype = ctypes.c_char_p
    print(answer().decode())
"""
# Lists the GPU device nodes of the root it lies in (ROOT/usr/bin/nvidia-smi, or /usr/bin/nvidia-smi in a
# node), as the real one lists the driver's GPUs; and, like the real one, fails when libnvidia-ml.so.1 is
# not in that root's loader cache.
NVIDIA_SMI = """#!/bin/sh
PATH=$PATH:/usr/sbin:/sbin
root=$(cd "$(dirname "$0")/../.." && pwd)
if ! ldconfig -C "$root/etc/ld.so.cache" -p | grep -q 'libnvidia-ml.so.1 '; then
    echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver" >&2
    exit 9
fi
index=0
for device in "$root"/dev/nvidia[0-9]*; do
    [ -c "$device" ] || continue
    echo "GPU $index: NVIDIA Fake (UUID: GPU-fake-${device##*/nvidia})"
    index=$((index + 1))
done
"""


def uvm_major() -> int:
    """nvidia-uvm's major is dynamic: the loaded module's if /proc/devices lists it, else a free one in the
    kernel's dynamic range (234-254), where the real driver's lands."""
    taken = {}
    for line in Path("/proc/devices").read_text().split("Block devices:")[0].splitlines():
        number, _, name = line.strip().partition(" ")
        if number.isdigit():
            taken[name] = int(number)
    if "nvidia-uvm" in taken:
        return taken["nvidia-uvm"]
    return max(set(range(234, 255)) - set(taken.values()))


def make_fake_host(root: Path, gpus: int, proc: bool) -> dict[str, tuple[int, int]]:
    """A fake NVIDIA host under `root`; returns every device node made, with its (major, minor)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler to make the fake driver libraries")
    uvm = uvm_major()
    devices = {f"/dev/nvidia{minor}": (NVIDIA_MAJOR, minor) for minor in range(gpus)}
    devices.update({"/dev/nvidiactl": (NVIDIA_MAJOR, 255), "/dev/nvidia-modeset": (NVIDIA_MAJOR, 254),
                    "/dev/nvidia-uvm": (uvm, 0), "/dev/nvidia-uvm-tools": (uvm, 1)})
    (root / "dev").mkdir(parents=True)
    for path, (major, minor) in devices.items():
        os.mknod(root / path.lstrip("/"), 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    source = root.parent / "fake_driver.c"
    for soname, folder in LIBRARIES.items():
        target = root / folder.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        source.write_text(LIBRARY_SOURCE % soname)
        real_name = soname.replace(".so.1", ".so.999.99")  # as a driver installs it, reached by its soname link
        subprocess.run([compiler, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", target / real_name, source],
                       check=True)
        (target / soname).symlink_to(real_name)
    (root / "etc" / "ld.so.conf.d").mkdir(parents=True)
    (root / "etc" / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    (root / "etc" / "ld.so.conf.d" / "nvidia.conf").write_text("/opt/nvidia/lib64\n")
    subprocess.run([shutil.which("ldconfig") or "/sbin/ldconfig", "-r", root], check=True)
    smi = root / "usr" / "bin" / "nvidia-smi"
    smi.parent.mkdir(parents=True)
    smi.write_text(NVIDIA_SMI)
    smi.chmod(0o755)
    if proc:  # without it, `lab up` has only the root's nvidia-smi to list the GPUs
        for minor in range(gpus):
            folder = root / "proc" / "driver" / "nvidia" / "gpus" / f"0000:{0x17 + minor:02x}:00.0"
            folder.mkdir(parents=True)
            (folder / "information").write_text(f"Model: \t\t NVIDIA Fake\nIRQ:   \t\t 42\nGPU UUID: \t GPU-fake-{minor}\n"
                                                 f"Device Minor: \t {minor}\n")
    return devices


def in_node(client, container: str, *argv: str) -> str:
    """Run `argv` in the node; its output, after asserting it succeeded."""
    code, output = client.containers.get(container).exec_run(list(argv))
    text = output.decode(errors="replace")
    assert code == 0, f"{container}: {argv} -> exit {code}\n{text}"
    return text


@pytest.mark.parametrize("gpus,proc,expected", [
    (2, True, [[0], [1]]),  # one each
    (1, False, [[0], [0]]),  # shared, found by the root's nvidia-smi alone
    (4, True, [[0, 1], [2, 3]]),  # two each
])
def test_raw_passthrough_gives_each_node_its_plan(tmp_path, client, gpus, proc, expected):
    root = tmp_path / "host"
    devices = make_fake_host(root, gpus, proc)
    env = {"LAB_HOST_ROOT": str(root), "COLUMNS": "1000"}  # one line per notice
    name = f"gpu{uuid.uuid4().hex[:6]}"
    try:
        up = lab("up", "--nodes", "2", "--name", name, "--gpus", "auto", env=env, check=True)
        sharing = re.search(r"note: not enough GPUs .* shared \(GPU 0 by node0, node1\)", up.stdout)
        assert bool(sharing) == (gpus == 1), up.stdout

        status = lab_json("status", "--name", name)[name]
        assert [node["gpus"] for node in status["nodes"]] == [[str(i) for i in node_gpus] for node_gpus in expected]
        for node, node_gpus in zip(status["nodes"], expected):
            container = node["container"]
            planned = {f"/dev/nvidia{minor}" for minor in node_gpus} | {
                "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}

            # Each device from its host path under the root, at its standard path in the node.
            host_config = client.containers.get(container).attrs["HostConfig"]
            assert {(d["PathOnHost"], d["PathInContainer"]) for d in host_config["Devices"]} == {
                (str(root) + path, path) for path in planned}
            listing = in_node(client, container, "sh", "-c", "stat -c '%n %F %t %T' /dev/nvidia*")
            seen = {}
            for line in listing.splitlines():
                path, _, numbers = line.partition(" character special file ")
                major, minor = numbers.split()
                seen[path] = (int(major, 16), int(minor, 16))
            assert seen == {path: devices[path] for path in planned}, listing  # no other GPU, no nvidia-modeset

            # The libraries at their paths, read-only, in the node's loader cache, and loaded by soname.
            cache = in_node(client, container, "ldconfig", "-p")
            for soname, folder in LIBRARIES.items():
                assert re.search(rf"^\s*{re.escape(soname)} \(libc6[^)]*\) => {folder}/{soname}$", cache, re.M), cache
                written = client.containers.get(container).exec_run(["sh", "-c", f": >> {folder}/{soname}"])
                assert written.exit_code != 0, f"{folder}/{soname} is writable in {container}"
            assert in_node(client, container, "python3", "-c", LOAD_BY_SONAME, *LIBRARIES).split() == list(LIBRARIES)

            # nvidia-smi runs in the node (in an ssh-like login too: no container environment needed) and
            # lists exactly the node's GPUs.
            smi = in_node(client, container, "env", "-i", "PATH=/usr/bin:/bin", "nvidia-smi", "-L")
            assert re.findall(r"UUID: (GPU-fake-\d+)", smi) == [f"GPU-fake-{minor}" for minor in node_gpus], smi

        doctor = lab("doctor", "--name", name, "--json")
        report = json.loads(doctor.stdout)
        for node, node_gpus in zip(report["nodes"], expected):
            assert node["assigned_gpus"] == [str(i) for i in node_gpus]
            # The nodes run a CPU torch: doctor must say it cannot see the GPUs it was given.
            assert f"given {len(node_gpus)} GPU(s) but torch sees 0 (a CPU-only torch build)" in node["problems"]
        assert not report["ok"] and doctor.returncode != 0
    finally:
        lab("down", "--name", name)
