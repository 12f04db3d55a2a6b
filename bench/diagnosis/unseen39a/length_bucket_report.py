import datetime
import json
import os
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist


def bucket_boundaries(max_len=512, n=8):
    return [int(max_len * (i + 1) / n) for i in range(n)]


def local_lengths(rank, n=5000):
    rng = np.random.default_rng(1000 + rank)
    return np.clip(rng.lognormal(4.5, 0.6, size=n).astype(np.int64), 4, 512)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    @dataclass
    class BucketStat:
        upper: int
        count: int
        tokens: int
        pad_tokens: int

        def merge(self, other):
            return BucketStat(self.upper, self.count + other.count,
                              self.tokens + other.tokens, self.pad_tokens + other.pad_tokens)

    lengths = local_lengths(rank)
    bounds = bucket_boundaries()
    idx = np.searchsorted(bounds, lengths)
    stats = []
    for b, upper in enumerate(bounds):
        sel = lengths[idx == b]
        stats.append(BucketStat(upper, int(sel.size), int(sel.sum()), int((upper - sel).sum())))

    gathered = [None] * world
    dist.all_gather_object(gathered, stats)
    merged = gathered[0]
    for other in gathered[1:]:
        merged = [a.merge(b) for a, b in zip(merged, other)]

    if rank == 0:
        total = sum(s.tokens for s in merged)
        pad = sum(s.pad_tokens for s in merged)
        report = {"buckets": [asdict(s) for s in merged], "pad_fraction": pad / (total + pad)}
        with open("bucket_report.json", "w") as f:
            json.dump(report, f, indent=2)
        print(f"pad fraction {report['pad_fraction']:.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
