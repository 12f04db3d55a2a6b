import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist

NUM_NODES = 64
FEAT = 16
CLASSES = 4
FANOUT = 3
BATCH = 8


def build_graph():
    g = torch.Generator().manual_seed(0)
    src, dst = [], []
    for i in range(NUM_NODES):
        for _ in range(2):
            j = (i + int(torch.randint(1, NUM_NODES, (1,), generator=g))) % NUM_NODES
            src += [i, j]
            dst += [j, i]
    x = torch.randn(NUM_NODES, FEAT, generator=g)
    y = torch.randint(0, CLASSES, (NUM_NODES,), generator=g)
    return torch.tensor(src), torch.tensor(dst), x, y


def local_csr(src, dst, lo, hi):
    keep = (src >= lo) & (src < hi) & (dst >= lo) & (dst < hi)
    s, d = src[keep] - lo, dst[keep] - lo
    order = torch.argsort(d, stable=True)
    s, d = s[order], d[order]
    counts = torch.bincount(d, minlength=hi - lo)
    indptr = torch.zeros(hi - lo + 1, dtype=torch.long)
    indptr[1:] = torch.cumsum(counts, 0)
    return indptr, s


def sample_neighbors(indptr, indices, seeds, fanout, gen):
    out = []
    for n in seeds.tolist():
        start, end = int(indptr[n]), int(indptr[n + 1])
        pick = torch.randint(start, end, (fanout,), generator=gen)
        out.append(indices[pick])
    return torch.stack(out)


class SAGE(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_lin = nn.Linear(FEAT, 32)
        self.neigh_lin = nn.Linear(FEAT, 32)
        self.out = nn.Linear(32, CLASSES)

    def forward(self, x_self, x_neigh):
        h = self.self_lin(x_self) + self.neigh_lin(x_neigh.mean(1))
        return self.out(torch.relu(h))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    src, dst, x, y = build_graph()
    per = NUM_NODES // world
    lo, hi = rank * per, (rank + 1) * per
    indptr, indices = local_csr(src, dst, lo, hi)
    x_loc, y_loc = x[lo:hi], y[lo:hi]

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(SAGE())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(100 + rank)
    for epoch in range(3):
        perm = torch.randperm(hi - lo, generator=gen)
        total = torch.zeros(2)
        for b in range(0, hi - lo, BATCH):
            seeds = perm[b:b + BATCH]
            nbrs = sample_neighbors(indptr, indices, seeds, FANOUT, gen)
            logits = model(x_loc[seeds], x_loc[nbrs])
            loss = nn.functional.cross_entropy(logits, y_loc[seeds])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(seeds), len(seeds)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch} loss {total[0] / total[1]:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
