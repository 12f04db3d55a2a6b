"""Train node embeddings with a link-prediction loss; sparse embedding gradients are averaged by hand across ranks."""
import os
import datetime
import torch
import torch.distributed as dist
import torch.nn.functional as F

NUM_NODES = 200
DIM = 32
STEPS = 20


def setup():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def partition_edges(rank, world):
    g = torch.Generator().manual_seed(7)
    src = torch.randint(0, NUM_NODES, (1000,), generator=g)
    dst = (src + torch.randint(1, 5, (1000,), generator=g)) % NUM_NODES
    order = torch.argsort(src)
    src, dst = src[order], dst[order]
    lo = rank * len(src) // world
    hi = (rank + 1) * len(src) // world
    return src[lo:hi], dst[lo:hi]


def sparse_grad(emb, nodes):
    rows = emb.grad[nodes]
    uniq, inv = torch.unique(nodes, return_inverse=True)
    summed = torch.zeros(len(uniq), DIM).index_add_(0, inv, rows) / torch.bincount(inv)[:, None]
    return torch.sparse_coo_tensor(uniq.unsqueeze(0), summed).coalesce()


def main():
    rank, world = setup()
    torch.manual_seed(0)
    emb = torch.nn.Parameter(torch.randn(NUM_NODES, DIM) * 0.1)
    src, dst = partition_edges(rank, world)
    lr = 0.5
    for step in range(STEPS):
        batch = torch.randint(0, len(src), (64,), generator=torch.Generator().manual_seed(step))
        s, d = src[batch], dst[batch]
        neg = d[torch.roll(torch.arange(len(d)), 1)]
        pos_score = (emb[s] * emb[d]).sum(1)
        neg_score = (emb[s] * emb[neg]).sum(1)
        loss = F.softplus(-pos_score).mean() + F.softplus(neg_score).mean()
        emb.grad = None
        loss.backward()
        touched = torch.cat([s, d, neg])
        g = sparse_grad(emb, touched)
        dist.all_reduce(g)
        with torch.no_grad():
            g = g.coalesce()
            emb.index_add_(0, g.indices()[0], -lr * g.values() / world)
        if step % 5 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
