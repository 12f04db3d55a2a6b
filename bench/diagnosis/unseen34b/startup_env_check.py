import hashlib
import json
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

ENV_PREFIXES = ("TORCH", "OMP_", "MKL_", "GLOO_", "NCCL_", "PYTHONHASH")


def environment_fingerprint():
    relevant = {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}
    info = {
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "threads": torch.get_num_threads(),
        "env": relevant,
    }
    blob = json.dumps(info, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16], info


def preflight(rank, world):
    digest, info = environment_fingerprint()
    digests = [None] * world
    dist.all_gather_object(digests, digest)
    if len(set(digests)) != 1:
        infos = [None] * world
        dist.all_gather_object(infos, info)
        if rank == 0:
            for r, i in enumerate(infos):
                print(f"rank {r}: {digests[r]} {json.dumps(i['env'])}", flush=True)
        raise RuntimeError(f"inconsistent environment across ranks: {sorted(set(digests))}")
    if rank == 0:
        print(f"preflight ok: environment {digest} on {world} ranks", flush=True)


def train(rank, world):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + rank)
    for step in range(20):
        x = torch.randn(16, 32, generator=g)
        y = x[:, :1] * 0.5
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    preflight(rank, world)
    train(rank, world)
    dist.barrier()
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
