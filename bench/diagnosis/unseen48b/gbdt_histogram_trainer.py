import os
import datetime
import numpy as np
import torch
import torch.distributed as dist

N_ROWS = 4000
N_FEAT = 4
N_BINS = 16
DEPTH = 3
MIN_CHILD = 20
LAMBDA = 1.0


def load_shard(rank, world):
    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 1.0, size=(N_ROWS, N_FEAT))
    y = 2.0 * (x[:, 0] > 0.25) + 0.5 * x[:, 1] + rng.normal(0, 0.1, N_ROWS)
    order = np.argsort(x[:, 0], kind="stable")
    x, y = x[order], y[order]
    lo, hi = rank * N_ROWS // world, (rank + 1) * N_ROWS // world
    return torch.from_numpy(x[lo:hi]), torch.from_numpy(y[lo:hi])


def merged_bin_edges(x):
    qs = torch.linspace(0, 1, N_BINS + 1, dtype=torch.float64)
    local = torch.quantile(x, qs, dim=0).contiguous()
    parts = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, local)
    merged = torch.stack(parts).mean(0)
    return merged[1:-1].T.contiguous()


def build_hist(bins, g, h):
    hist = torch.zeros(N_FEAT, N_BINS, 2, dtype=torch.float64)
    for f in range(N_FEAT):
        hist[f, :, 0].index_add_(0, bins[:, f], g)
        hist[f, :, 1].index_add_(0, bins[:, f], h)
    return hist


def best_split(hist):
    G = hist[..., 0].sum(1, keepdim=True)
    H = hist[..., 1].sum(1, keepdim=True)
    gl = hist[..., 0].cumsum(1)[:, :-1]
    hl = hist[..., 1].cumsum(1)[:, :-1]
    gr, hr = G - gl, H - hl
    gain = gl ** 2 / (hl + LAMBDA) + gr ** 2 / (hr + LAMBDA) - G ** 2 / (H + LAMBDA)
    gain[(hl < MIN_CHILD) | (hr < MIN_CHILD)] = -1.0
    flat = int(torch.argmax(gain))
    return flat // (N_BINS - 1), flat % (N_BINS - 1), float(gain.flatten()[flat])


def grow_tree(bins, g, h):
    node_of_row = torch.zeros(bins.shape[0], dtype=torch.long)
    frontier = [0]
    splits = {}
    for depth in range(DEPTH):
        active = []
        for nid in frontier:
            idx = (node_of_row == nid).nonzero().squeeze(1)
            if idx.numel() == 0:
                continue
            active.append((nid, idx))
        hists = torch.stack([build_hist(bins[i], g[i], h[i]) for _, i in active])
        dist.all_reduce(hists)
        next_frontier = []
        for (nid, idx), hist in zip(active, hists):
            f, b, gain = best_split(hist)
            if gain <= 0:
                continue
            splits[nid] = (f, b)
            go_left = bins[idx, f] <= b
            node_of_row[idx[go_left]] = 2 * nid + 1
            node_of_row[idx[~go_left]] = 2 * nid + 2
            next_frontier += [2 * nid + 1, 2 * nid + 2]
        frontier = next_frontier
        if dist.get_rank() == 0:
            print(f"depth {depth}: {len(splits)} splits so far", flush=True)
    return splits, node_of_row


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = load_shard(rank, world)
    edges = merged_bin_edges(x)
    bins = torch.stack([torch.bucketize(x[:, f].contiguous(), edges[f]) for f in range(N_FEAT)], 1)
    pred = torch.zeros_like(y)
    for rnd in range(3):
        g = pred - y
        h = torch.ones_like(y)
        splits, leaf = grow_tree(bins, g, h)
        leaf_ids = torch.arange(2 ** (DEPTH + 1))
        stats = torch.zeros(leaf_ids.numel(), 2, dtype=torch.float64)
        stats[:, 0].index_add_(0, leaf, g)
        stats[:, 1].index_add_(0, leaf, h)
        dist.all_reduce(stats)
        values = -stats[:, 0] / (stats[:, 1] + LAMBDA)
        pred = pred + 0.3 * values[leaf]
        loss = torch.tensor([((pred - y) ** 2).sum().item(), float(y.numel())], dtype=torch.float64)
        dist.all_reduce(loss)
        if rank == 0:
            print(f"round {rnd}: mse {loss[0] / loss[1]:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
