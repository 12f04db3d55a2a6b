import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class ShardedAdamW:
    """ZeRO-1 by hand: every rank keeps AdamW state for 1/world of a flat copy of the parameters."""

    def __init__(self, params, lr=1e-3, weight_decay=0.01):
        self.params = list(params)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.numel = sum(p.numel() for p in self.params)
        self.shard_size = self.numel // self.world
        self.flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        start = self.rank * self.shard_size
        self.master = self.flat[start:start + self.shard_size].clone().requires_grad_(True)
        self.inner = torch.optim.AdamW([self.master], lr=lr, weight_decay=weight_decay)
        self._rebind()

    def _rebind(self):
        offset = 0
        for p in self.params:
            n = p.numel()
            p.data = self.flat[offset:offset + n].view_as(p)
            offset += n

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        flat_grad = torch.cat([p.grad.reshape(-1) for p in self.params])
        grad_shard = torch.empty(self.shard_size)
        dist.reduce_scatter_tensor(grad_shard, flat_grad, op=dist.ReduceOp.SUM)
        self.master.grad = grad_shard / self.world
        self.inner.step()
        dist.all_gather_into_tensor(self.flat, self.master.detach())

    def state_numel(self):
        return sum(v.numel() for s in self.inner.state.values() for v in s.values() if torch.is_tensor(v))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(24, 48), nn.LayerNorm(48), nn.GELU(), nn.Linear(48, 6),
    )
    opt = ShardedAdamW(model.parameters(), lr=3e-3)
    if rank == 0:
        print(f"{opt.numel} parameters, shard of {opt.shard_size} per rank on {world} ranks", flush=True)

    gen = torch.Generator().manual_seed(10 + rank)
    w_true = torch.randn(24, 6, generator=torch.Generator().manual_seed(7))
    for step in range(50):
        x = torch.randn(64, 24, generator=gen)
        y = (x @ w_true).argmax(dim=1)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"rank {rank} step {step} loss {loss.item():.4f} state {opt.state_numel()}", flush=True)

    checksum = opt.flat.sum().reshape(1)
    sums = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(sums, checksum)
    if rank == 0:
        print("replicas agree:", all(torch.allclose(s, sums[0]) for s in sums), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
