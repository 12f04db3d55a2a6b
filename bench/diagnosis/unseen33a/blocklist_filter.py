"""Filter a document shard against the team's blocklist before tokenization.

Rank 0 owns the blocklist (in production it is read from the curation bucket);
it is shipped to the other ranks as a byte tensor, then every rank filters its
own shard and the kept/dropped counts are summed for the run report.
"""
import datetime
import json
import os
import random

import torch
import torch.distributed as dist

BLOCKLIST = [
    "casino bonus", "free crypto", "click here", "lorem ipsum",
    "café spam", "naïve bayes seo", "straße kaufen", "prêt immédiat",
    "réduction exclusive", "günstig online",
]

WORDS = ("the model data shard token filter stream loader worker epoch "
         "casino bonus café spam click here résumé über naïve").split()


def load_blocklist():
    return "\n".join(BLOCKLIST)


def make_shard(rank, n_docs=400):
    rng = random.Random(1234 + rank)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
            for _ in range(n_docs)]


def share_text(text, rank, src=0):
    length = torch.tensor([len(text) if rank == src else 0], dtype=torch.long)
    dist.broadcast(length, src)
    if rank == src:
        buf = torch.tensor(list(text.encode("utf-8")), dtype=torch.uint8)
    else:
        buf = torch.empty(int(length.item()), dtype=torch.uint8)
    dist.broadcast(buf, src)
    return bytes(buf.tolist()).decode("utf-8")


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    text = load_blocklist() if rank == 0 else ""
    if world > 1:
        text = share_text(text, rank)
    patterns = [p for p in text.split("\n") if p]

    docs = make_shard(rank)
    kept = [d for d in docs if not any(p in d for p in patterns)]
    counts = torch.tensor([len(kept), len(docs) - len(kept)], dtype=torch.long)
    dist.all_reduce(counts)

    os.makedirs("filtered", exist_ok=True)
    with open(f"filtered/part-{rank:05d}.jsonl", "w") as f:
        for d in kept:
            f.write(json.dumps({"text": d}) + "\n")
    if rank == 0:
        print(f"blocklist: {len(patterns)} patterns; kept {counts[0].item()} "
              f"dropped {counts[1].item()} over {world} ranks", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
