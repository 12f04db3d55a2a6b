import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist

POOL_SIZE = 1000
BUDGET = 25
FEAT = 16
CLASSES = 4


def make_pool(n_total, rank, world):
    g = torch.Generator().manual_seed(1234)
    feats = torch.randn(n_total, FEAT, generator=g)
    per = n_total // world
    lo = rank * per
    hi = n_total if rank == world - 1 else lo + per
    return feats[lo:hi], torch.arange(lo, hi)


def entropy_scores(model, feats, batch=128):
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(feats), batch):
            p = model(feats[i:i + batch]).softmax(-1)
            out.append(-(p * p.clamp_min(1e-12).log()).sum(-1))
    return torch.cat(out)


def oracle(global_ids):
    return (global_ids * 7 + 3) % CLASSES


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEAT, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    for p in model.parameters():
        dist.broadcast(p.data, src=0)

    feats, gids = make_pool(POOL_SIZE, rank, world)
    scores = entropy_scores(model, feats)

    n_local = torch.tensor([len(feats)], dtype=torch.long)
    n_total = n_local.clone()
    dist.all_reduce(n_total)
    share = n_local.item() / n_total.item()
    quota = round(BUDGET * share)
    local_top = scores.topk(quota).indices
    picked = gids[local_top]

    counts = [torch.zeros(1, dtype=torch.long) for _ in range(world)]
    dist.all_gather(counts, torch.tensor([quota]))
    width = max(int(c.item()) for c in counts)
    padded = torch.full((width,), -1, dtype=torch.long)
    padded[:quota] = picked
    parts = [torch.empty(width, dtype=torch.long) for _ in range(world)]
    dist.all_gather(parts, padded)
    chosen = torch.cat([p[:int(c.item())] for p, c in zip(parts, counts)])

    labels = torch.empty(BUDGET, dtype=torch.long)
    labels[:] = oracle(chosen)
    query = torch.empty(BUDGET, dtype=torch.long)
    query.copy_(chosen)
    if rank == 0:
        print(f"round 0: queried {len(query)} items, label histogram "
              f"{torch.bincount(labels, minlength=CLASSES).tolist()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
