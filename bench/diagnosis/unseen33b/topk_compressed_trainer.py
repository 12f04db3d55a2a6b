import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

COMPRESSION = float(os.environ.get("TOPK_RATIO", "0.05"))
STEPS = int(os.environ.get("TRAIN_STEPS", "15"))


class TopKReducer:
    def __init__(self, params, rank, world):
        self.rank = rank
        self.world = world
        self.memory = [torch.zeros_like(p) for p in params]

    def reduce(self, params):
        for p, mem in zip(params, self.memory):
            grad = p.grad.flatten() + mem.flatten()
            top_size = max(1, int(0.5 * self.rank * grad.numel()))
            _, idx = torch.topk(grad.abs(), top_size, sorted=False)
            vals = grad[idx]
            mem.copy_((grad - torch.zeros_like(grad).index_put_((idx,), vals)).view_as(mem))

            all_idx = [torch.empty_like(idx) for _ in range(self.world)]
            all_vals = [torch.empty_like(vals) for _ in range(self.world)]
            dist.all_gather(all_idx, idx)
            dist.all_gather(all_vals, vals)

            dense = torch.zeros_like(grad)
            for i, v in zip(all_idx, all_vals):
                dense.index_add_(0, i, v)
            p.grad.copy_((dense / self.world).view_as(p.grad))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 10))
    params = list(model.parameters())
    for p in params:
        dist.broadcast(p.data, src=0)
    reducer = TopKReducer(params, rank, world)
    opt = torch.optim.SGD(params, lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(100 + rank)
    for step in range(STEPS):
        x = torch.randn(64, 32, generator=g)
        y = (x[:, :10].argmax(dim=1))
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        reducer.reduce(params)
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f} ratio {COMPRESSION}", flush=True)
    print(f"rank {rank} finished {STEPS} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
