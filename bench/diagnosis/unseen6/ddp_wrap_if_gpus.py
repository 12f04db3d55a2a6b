"""Train a small CNN-free tabular model; written for 1..N GPUs and used here on CPU nodes with torchrun.
The final check compares the replicas' weights."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def setup_model(model):
    """Move the model to its device and wrap it for data parallelism where there is more than one device."""
    device = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', 0)}") if torch.cuda.is_available() else torch.device("cpu")
    model = model.to(device)
    if torch.cuda.device_count() > 1:
        model = DDP(model, device_ids=[device.index])
    return model, device


def unwrap(model):
    return model.module if hasattr(model, "module") else model


def weights_checksum(model):
    return torch.cat([p.detach().flatten() for p in unwrap(model).parameters()]).double().sum()


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model, device = setup_model(nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(rank)          # each rank its own shard of the stream
    for step in range(50):
        x = torch.randn(64, 12, generator=g).to(device)
        y = (x[:, :3].argmax(1)).to(device)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    sums = [torch.zeros((), dtype=torch.float64) for _ in range(world)]
    dist.all_gather(sums, weights_checksum(model))
    if any(abs(s.item() - sums[0].item()) > 1e-6 for s in sums):
        raise RuntimeError(f"model replicas differ after training: weight sums {[round(s.item(), 4) for s in sums]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
