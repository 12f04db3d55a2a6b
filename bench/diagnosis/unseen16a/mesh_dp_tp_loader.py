"""2-D parallel training on CPU: data parallel across nodes x tensor parallel inside a node (torchrun, 2 per node).

The mesh is (dp, tp) = (nodes, processes per node). The two halves of the MLP's hidden layer live on the two tp ranks
of a node (column-parallel then row-parallel, summed with an all_reduce over the tp group); gradients are averaged
over the dp group. Every tp rank of a dp replica must see the same batch, each dp replica a different shard.
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

DIM, HIDDEN, CLASSES = 32, 128, 8


class TPMLP(torch.nn.Module):
    """fc1 split by output columns, fc2 by input rows: partial outputs are summed over the tp group."""

    def __init__(self, tp_group, tp_size):
        super().__init__()
        self.tp_group = tp_group
        torch.manual_seed(0)                       # same full weights everywhere, each tp rank keeps its slice
        fc1, fc2 = torch.nn.Linear(DIM, HIDDEN), torch.nn.Linear(HIDDEN, CLASSES)
        tp_rank = dist.get_rank(tp_group)
        cols = slice(tp_rank * HIDDEN // tp_size, (tp_rank + 1) * HIDDEN // tp_size)
        self.w1 = torch.nn.Parameter(fc1.weight.detach()[cols].clone())
        self.b1 = torch.nn.Parameter(fc1.bias.detach()[cols].clone())
        self.w2 = torch.nn.Parameter(fc2.weight.detach()[:, cols].clone())
        self.b2 = torch.nn.Parameter(fc2.bias.detach().clone() / tp_size)

    def forward(self, x):
        partial = torch.relu(x @ self.w1.T + self.b1) @ self.w2.T + self.b2
        return AllReduceSum.apply(partial, self.tp_group)


class AllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, group):
        out = t.clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def dataset(n=2048, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=g)
    y = (x @ torch.randn(DIM, CLASSES, generator=g)).argmax(1)
    return TensorDataset(x, y)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    nodes = int(os.environ["WORLD_SIZE"]) // int(os.environ["LOCAL_WORLD_SIZE"])
    mesh = init_device_mesh("cpu", (nodes, int(os.environ["LOCAL_WORLD_SIZE"])), mesh_dim_names=("dp", "tp"))
    dp_group, tp_group = mesh.get_group("dp"), mesh.get_group("tp")
    rank = dist.get_rank()

    data = dataset()
    sampler = DistributedSampler(data, num_replicas=mesh["dp"].size(), rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=64, sampler=sampler, drop_last=True)

    model = TPMLP(tp_group, mesh["tp"].size())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, group=dp_group)
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
