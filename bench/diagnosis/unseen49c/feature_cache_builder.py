"""Build a feature cache for a list of image ids, with rank 0 coordinating the work.

Workers request an item range, compute per-item features for it, and send back
one row per range: [range_id, item_count, feature...].  The coordinator keeps
the rows in a table indexed by range, checks it, and saves features.pt.
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

FEAT = 12
N_ITEMS = 3000
RANGE = 250
REQUEST = -1
STOP = -2


def backbone():
    torch.manual_seed(3)
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, FEAT)).eval()


def features_for(model, start, stop):
    g = torch.Generator().manual_seed(start)
    images = torch.rand(stop - start, 3, 16, 16, generator=g)
    with torch.no_grad():
        return model(images).mean(dim=0)


def coordinator(world):
    ranges = [(s, min(s + RANGE, N_ITEMS)) for s in range(0, N_ITEMS, RANGE)]
    queue = list(range(len(ranges)))
    rows = {}
    row = torch.zeros(2 + FEAT)
    stopped = 0
    while stopped < world - 1:
        src = dist.recv(row)
        range_id = int(row[0])
        if range_id != REQUEST:
            rows[range_id] = row
        if queue:
            r = queue.pop(0)
            dist.send(torch.tensor([r, ranges[r][0], ranges[r][1]]), dst=src)
        else:
            dist.send(torch.tensor([STOP, 0, 0]), dst=src)
            stopped += 1
    print(f"[coord] collected {len(rows)} of {len(ranges)} ranges", flush=True)

    table = torch.stack([rows[r] for r in range(len(ranges))])
    ids = table[:, 0].long()
    if not torch.equal(ids, torch.arange(len(ranges))):
        raise RuntimeError(f"feature table rows do not match their ranges: ids {ids.tolist()}")
    counts = table[:, 1].long()
    if int(counts.sum()) != N_ITEMS:
        raise RuntimeError(f"feature table covers {int(counts.sum())} items, expected {N_ITEMS}")
    torch.save({"features": table[:, 2:], "ranges": ranges}, "features.pt")
    print(f"[coord] saved features.pt {tuple(table[:, 2:].shape)}", flush=True)


def worker(rank):
    model = backbone()
    out = torch.zeros(2 + FEAT)
    out[0] = REQUEST
    task = torch.zeros(3, dtype=torch.long)
    done = 0
    while True:
        dist.send(out, dst=0)
        dist.recv(task, src=0)
        range_id, start, stop = task.tolist()
        if range_id == STOP:
            break
        feats = features_for(model, start, stop)
        out = torch.cat([torch.tensor([float(range_id), float(stop - start)]), feats])
        done += 1
    print(f"[rank {rank}] built {done} ranges", flush=True)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        coordinator(world)
    else:
        worker(rank)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
