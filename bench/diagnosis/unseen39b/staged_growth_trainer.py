import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def batches(rank, n, seed):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return [(torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)) for _ in range(n)]


def train(model, data, group=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    local = torch.stack(losses).mean().reshape(1)
    world = dist.get_world_size()
    gathered = torch.empty(world)
    dist.all_gather_into_tensor(gathered, local, group=group)
    return gathered


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))

    # stage 1: all workers
    losses = train(DDP(net), batches(rank, 12, 1))
    if rank == 0:
        print("stage1 losses", [round(v, 4) for v in losses.tolist()], flush=True)

    # stage 2: half of the workers refine while the rest idle until export
    half = max(1, world // 2)
    stage2 = dist.new_group(ranks=list(range(half)))
    if rank < half:
        losses = train(DDP(net, process_group=stage2), batches(rank, 6, 2), group=stage2)
        if rank == 0:
            print("stage2 losses", [round(v, 4) for v in losses.tolist()], flush=True)
    dist.barrier()
    if rank == 0:
        torch.save(net.state_dict(), "staged.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
