import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist

NUM_NODES = 200
NUM_EDGES = 800
FEAT = 24
CLASSES = 5


def citation_graph():
    g = torch.Generator().manual_seed(3)
    src = torch.randint(0, NUM_NODES, (NUM_EDGES,), generator=g)
    dst = torch.randint(0, NUM_NODES, (NUM_EDGES,), generator=g)
    keep = src != dst
    x = torch.randn(NUM_NODES, FEAT, generator=g)
    y = torch.randint(0, CLASSES, (NUM_NODES,), generator=g)
    return src[keep], dst[keep], x, y


class Partition:
    def __init__(self, src, dst, rank, world):
        per = NUM_NODES // world
        self.lo, self.hi = rank * per, (NUM_NODES if rank == world - 1 else (rank + 1) * per)
        self.rank, self.world = rank, world
        owned_src = (src >= self.lo) & (src < self.hi)
        owned_dst = (dst >= self.lo) & (dst < self.hi)
        self.send_ids = torch.unique(src[owned_src & ~owned_dst]) if world > 1 else src[:0]
        self.halo_ids = torch.unique(dst[owned_src & ~owned_dst]) if world > 1 else src[:0]
        n_own = self.hi - self.lo
        remap = torch.full((NUM_NODES,), -1, dtype=torch.long)
        remap[self.lo:self.hi] = torch.arange(n_own)
        remap[self.halo_ids] = n_own + torch.arange(len(self.halo_ids))
        e = owned_dst & (remap[src] >= 0)
        self.edge_src, self.edge_dst = remap[src[e]], remap[dst[e]]
        self.n_own = n_own

    def exchange(self, h_own):
        if self.world == 1:
            return h_own
        peer = 1 - self.rank
        out = h_own[self.send_ids - self.lo].contiguous()
        halo = torch.empty(len(self.halo_ids), h_own.shape[1])
        if self.rank == 0:
            dist.send(out, peer)
            dist.recv(halo, peer)
        else:
            dist.recv(halo, peer)
            dist.send(out, peer)
        return torch.cat([h_own, halo])


class GCNLayer(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out)

    def forward(self, h_all, part):
        msg = h_all[part.edge_src]
        agg = torch.zeros(part.n_own, h_all.shape[1]).index_add_(0, part.edge_dst, msg)
        deg = torch.bincount(part.edge_dst, minlength=part.n_own).clamp(min=1)[:, None]
        return self.lin(h_all[:part.n_own] + agg / deg)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    src, dst, x, y = citation_graph()
    part = Partition(src, dst, rank, world)
    print(f"rank {rank}: own {part.n_own} nodes, {len(part.edge_src)} edges, halo {len(part.halo_ids)}", flush=True)
    torch.manual_seed(0)
    l1, l2 = GCNLayer(FEAT, 32), GCNLayer(32, CLASSES)
    params = list(l1.parameters()) + list(l2.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    x_own, y_own = x[part.lo:part.hi], y[part.lo:part.hi]
    for epoch in range(5):
        with torch.no_grad():
            h1_own = torch.relu(l1(part.exchange(x_own), part))
        h1 = torch.relu(l1(part.exchange(x_own), part))
        h2_all = torch.cat([h1, part.exchange(h1_own)[part.n_own:]])
        loss = nn.functional.cross_entropy(l2(h2_all, part), y_own)
        opt.zero_grad()
        loss.backward()
        for p in params:
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
