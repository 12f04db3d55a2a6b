"""Report what a node offers for distributed training, as one JSON line (run by provision.yml and `lab doctor`).

Hostnames given as arguments are resolved too (`peers`: name -> address, or null).
"""

import json
import platform
import socket
import sys


def resolve(name):
    try:
        return socket.gethostbyname(name)
    except OSError:
        return None


report = {"hostname": socket.gethostname(), "python": platform.python_version(), "executable": sys.executable,
          "peers": {name: resolve(name) for name in sys.argv[1:]}}
try:
    import torch
    import torch.distributed as dist

    report["torch"] = torch.__version__
    report["cuda_build"] = torch.version.cuda
    report["cuda"] = torch.cuda.is_available()
    report["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if report["cuda"] else []
    report["backends"] = [name for name, ok in (("gloo", dist.is_gloo_available()), ("nccl", dist.is_nccl_available()),
                                                ("mpi", dist.is_mpi_available())) if ok]
    report["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if report["cuda"] and dist.is_nccl_available() else None
except ImportError as error:
    report["torch"] = None
    report["error"] = str(error)
print(json.dumps(report))
