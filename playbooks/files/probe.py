"""Report what a node offers for distributed training, as one JSON line.

  probe.py [--deep] [PEER ...]

Every PEER (a hostname) is resolved at once: `peers` maps each to an address (null when it does not
resolve) and `unresolved` lists those that do not. The facts about torch come in two depths:

- default (provision.yml, on every node of every `lab up`): nothing imports torch, which would cost about
  a second of CPU per node. The version and CUDA build come from torch/version.py read as a file;
  backends from what the build ships (gloo in every Linux build, nccl with libtorch_cuda.so);
  GPUs from the driver's /proc/driver/nvidia/gpus, counting those whose /dev/nvidia<minor> is in this node.
- --deep (`lab doctor`): torch imported and asked, so a torch that is installed but cannot load, or a GPU
  that CUDA cannot use, shows up.

Runs on any python 3 with the standard library only: real hosts run it too.
"""

import ast
import glob
import importlib.util
import json
import os
import platform
import socket
import sys
from concurrent.futures import ThreadPoolExecutor

PROC_GPUS = "proc/driver/nvidia/gpus"  # under the root, "/" but in tests


def resolve(name):
    """The first IPv4 address of `name` (else any address), or None."""
    try:
        found = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except OSError:
        return None
    addresses = [info[4][0] for info in found if info[0] == socket.AF_INET] or [info[4][0] for info in found]
    return addresses[0] if addresses else None


def resolve_all(names):
    """All names at once: a name that does not resolve can take seconds of DNS timeouts."""
    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=min(32, len(names))) as pool:
        return dict(zip(names, pool.map(resolve, names)))


def version_file(package_dir):
    """The constants of torch/version.py (__version__, cuda, ...), read without importing torch."""
    with open(os.path.join(package_dir, "version.py")) as file:
        tree = ast.parse(file.read())
    values = {}
    for statement in tree.body:
        target = statement.targets[0] if isinstance(statement, ast.Assign) else getattr(statement, "target", None)
        if isinstance(target, ast.Name) and isinstance(getattr(statement, "value", None), ast.Constant):
            values[target.id] = statement.value.value
    return values


def node_gpus(root="/"):
    """Model names of the NVIDIA GPUs this node can open: the driver lists the host's, /dev/nvidia<minor> says which are ours."""
    found = []
    for information in sorted(glob.glob(os.path.join(root, PROC_GPUS, "*", "information"))):
        fields = {}
        with open(information, errors="replace") as file:
            for line in file:
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
        if os.path.exists(os.path.join(root, "dev", "nvidia" + fields.get("Device Minor", "?"))):
            found.append(fields.get("Model", "NVIDIA GPU"))
    if not found:  # no driver folder visible: the device nodes alone
        found = ["NVIDIA GPU"] * len(glob.glob(os.path.join(root, "dev", "nvidia[0-9]*")))
    return found


def nccl_version():
    """The version of the NCCL wheel a CUDA build of torch loads (nvidia-nccl-cu*), if there is one."""
    from importlib import metadata

    for distribution in metadata.distributions():
        if (distribution.metadata["Name"] or "").lower().startswith("nvidia-nccl"):
            return distribution.version
    return None


def shallow_facts():
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {"torch": None, "error": "No module named 'torch'"}
    package_dir = list(spec.submodule_search_locations)[0]
    try:
        build = version_file(package_dir)
    except (OSError, SyntaxError) as error:
        return {"torch": None, "error": f"unreadable {package_dir}/version.py: {error}"}
    facts = {"torch": build.get("__version__"), "cuda_build": build.get("cuda")}
    gpu_build = bool(facts["cuda_build"]) and os.path.exists(os.path.join(package_dir, "lib", "libtorch_cuda.so"))
    facts["gpus"] = node_gpus() if facts["cuda_build"] else []
    facts["cuda"] = bool(facts["gpus"])
    facts["backends"] = ["gloo", "nccl"] if gpu_build else ["gloo"]
    facts["nccl"] = nccl_version() if gpu_build and facts["cuda"] else None
    return facts


def deep_facts():
    try:
        import torch
        import torch.distributed as dist
    except ImportError as error:
        return {"torch": None, "error": str(error)}
    facts = {"torch": torch.__version__, "cuda_build": torch.version.cuda, "cuda": torch.cuda.is_available()}
    facts["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if facts["cuda"] else []
    facts["backends"] = [name for name, ok in (("gloo", dist.is_gloo_available()), ("nccl", dist.is_nccl_available()),
                                               ("mpi", dist.is_mpi_available())) if ok]
    facts["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if facts["cuda"] and dist.is_nccl_available() else None
    return facts


def installed_versions(names):
    """The installed version of each distribution named, None where it is missing (read from metadata, not imported)."""
    import importlib.metadata

    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def main(argv):
    deep = "--deep" in argv
    packages = [arg.split("=", 1)[1] for arg in argv if arg.startswith("--package=")]
    peers = resolve_all([name for name in argv if not name.startswith("--")])
    report = {"hostname": socket.gethostname(), "python": platform.python_version(), "executable": sys.executable,
              "deep": deep, "peers": peers, "unresolved": [name for name, address in peers.items() if address is None]}
    report.update(deep_facts() if deep else shallow_facts())
    if packages:
        report["packages"] = installed_versions(packages)
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
