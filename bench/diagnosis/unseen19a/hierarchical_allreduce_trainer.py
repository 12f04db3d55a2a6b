import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def build_groups(world, local_world):
    num_nodes = world // local_world
    node_groups = [
        dist.new_group(list(range(n * local_world, (n + 1) * local_world))) for n in range(num_nodes)
    ]
    leaders = dist.new_group([n * local_world for n in range(num_nodes)])
    return node_groups, leaders


class HierarchicalGradSync:
    def __init__(self, params, world, local_world):
        self.params = [p for p in params if p.requires_grad]
        self.world = world
        self.node = dist.get_rank() // local_world
        node_groups, self.leaders = build_groups(world, local_world)
        self.intra = node_groups[self.node]
        self.is_leader = dist.get_rank(self.intra) == 0

    def sync(self):
        flat = torch.cat([p.grad.reshape(-1) for p in self.params])
        dist.reduce(flat, dst=0, group=self.intra)
        if self.is_leader:
            dist.all_reduce(flat, group=self.leaders)
        dist.broadcast(flat, src=0, group=self.intra)
        flat /= self.world
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
            offset += n


def make_batch(gen, n=32):
    x = torch.randn(n, 20, generator=gen)
    y = (x[:, :5].sum(dim=1) > 0).long()
    return x, y


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    syncer = HierarchicalGradSync(model.parameters(), world, local_world)
    if rank == 0:
        print(f"{world // local_world} nodes x {local_world} ranks, hierarchical all-reduce", flush=True)

    gen = torch.Generator().manual_seed(rank)
    t0 = time.time()
    for step in range(30):
        x, y = make_batch(gen)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        syncer.sync()
        opt.step()
        if step % 10 == 0 and syncer.is_leader:
            print(f"node {syncer.node} step {step} loss {loss.item():.4f}", flush=True)

    check = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).sum().reshape(1)
    copies = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(copies, check)
    if rank == 0:
        spread = max(c.item() for c in copies) - min(c.item() for c in copies)
        print(f"done in {time.time() - t0:.1f}s, replica spread {spread:.2e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
