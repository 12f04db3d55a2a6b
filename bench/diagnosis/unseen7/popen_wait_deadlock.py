"""Before training, rank 0 runs a data-audit helper in a subprocess and records its report."""
import os
import subprocess
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

AUDIT = r"""
import random
random.seed(0)
for i in range(20000):
    print(f"record {i:06d} ok checksum={random.getrandbits(64):016x} tokens={random.randint(5, 500)}")
print("AUDIT PASSED")
"""


def audit_dataset():
    """Run the audit helper and return its last line."""
    proc = subprocess.Popen([sys.executable, "-c", AUDIT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    code = proc.wait()
    out = proc.stdout.read().splitlines()
    if code != 0:
        raise RuntimeError(f"audit failed with code {code}")
    return out[-1]


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    if rank == 0:
        print("auditing the dataset ...", flush=True)
        print(audit_dataset(), flush=True)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(20):
        x = torch.randn(32, 8)
        loss = nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank} done, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
