"""DDP training of a small recommender (embedding dot products); torchrun, gloo, CPU.
A crashed earlier run can leave orphaned workers of this script holding memory and ports, so the first worker
of each machine clears them out before starting."""
import datetime
import os
import signal
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def processes_running(script):
    """Python processes running this script (by its file name)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [arg.decode(errors="replace") for arg in argv]
        if "python" in os.path.basename(args[0]) and any(arg.endswith(script) for arg in args[1:]):
            yield int(entry.name)


def kill_stale_workers():
    """Kill leftovers of an earlier run of this script (never ourselves or our launcher)."""
    script = os.path.basename(sys.argv[0])
    keep = {os.getpid(), os.getppid()}
    for pid in processes_running(script):
        if pid not in keep:
            print(f"killing stale worker {pid}", flush=True)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class DotRecommender(nn.Module):
    def __init__(self, users=500, items=300, dim=16):
        super().__init__()
        self.users = nn.Embedding(users, dim)
        self.items = nn.Embedding(items, dim)

    def forward(self, u, i):
        return (self.users(u) * self.items(i)).sum(-1)


def main():
    if os.environ.get("LOCAL_RANK") == "0":
        kill_stale_workers()
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(DotRecommender())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for step in range(40):
        u, i = torch.randint(500, (128,), generator=g), torch.randint(300, (128,), generator=g)
        target = ((u % 7) == (i % 7)).float()
        opt.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(u, i), target)
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
