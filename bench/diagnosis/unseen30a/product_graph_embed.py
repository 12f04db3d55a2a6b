import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist

NUM_NODES = 301
DIM = 16


def copurchase_edges():
    g = torch.Generator().manual_seed(5)
    src = torch.randint(0, NUM_NODES, (1500,), generator=g)
    dst = (src + torch.randint(1, 20, (1500,), generator=g)) % NUM_NODES
    return src, dst


class LinkPredictor(nn.Module):
    def __init__(self, num_nodes):
        super().__init__()
        self.node_emb = nn.Embedding(num_nodes, DIM)
        self.conv = nn.Linear(DIM, DIM)
        self.score = nn.Bilinear(DIM, DIM, 1)

    def propagate(self, src, dst, n):
        h = self.node_emb.weight
        agg = torch.zeros(n, DIM).index_add_(0, dst, h[src])
        deg = torch.bincount(dst, minlength=n).clamp(min=1)[:, None]
        return torch.relu(self.conv(h + agg / deg))

    def forward(self, src, dst, pairs):
        h = self.propagate(src, dst, self.node_emb.num_embeddings)
        return self.score(h[pairs[0]], h[pairs[1]]).squeeze(-1)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    src, dst = copurchase_edges()
    bounds = torch.linspace(0, NUM_NODES, world + 1).long().tolist()
    lo, hi = bounds[rank], bounds[rank + 1]
    keep = (src >= lo) & (src < hi) & (dst >= lo) & (dst < hi)
    l_src, l_dst = src[keep] - lo, dst[keep] - lo
    n_local = hi - lo
    print(f"rank {rank}: nodes [{lo}, {hi}) local edges {len(l_src)}", flush=True)

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(LinkPredictor(n_local))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    gen = torch.Generator().manual_seed(rank)
    for step in range(20):
        idx = torch.randint(0, len(l_src), (64,), generator=gen)
        pos = torch.stack([l_src[idx], l_dst[idx]])
        neg = torch.randint(0, n_local, (2, 64), generator=gen)
        logits = model(l_src, l_dst, torch.cat([pos, neg], 1))
        labels = torch.cat([torch.ones(64), torch.zeros(64)])
        loss = nn.functional.binary_cross_entropy_with_logits(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
