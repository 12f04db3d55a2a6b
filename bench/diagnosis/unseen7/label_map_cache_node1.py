"""Intent classifier for two terminals (one process per machine; MASTER_ADDR/MASTER_PORT, NODE_RANK, NNODES).
The label map is fetched once per machine and cached under ~/.cache/intents/."""
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

LABELS_V2 = ["greet", "bye", "book_flight", "cancel", "refund", "baggage", "seat", "meal", "upgrade", "complaint"]
CACHE = os.path.expanduser("~/.cache/intents/labels-v2.json")


def fetch_label_map():
    """Stand-in for downloading the label map from the team's artifact store."""
    return {name: i for i, name in enumerate(LABELS_V2)}


def label_map():
    if os.path.exists(CACHE):
        with open(CACHE) as f:
            return json.load(f)
    mapping = fetch_label_map()
    os.makedirs(os.path.dirname(CACHE), exist_ok=True)
    with open(CACHE, "w") as f:
        json.dump(mapping, f)
    return mapping


def examples(rank, n=256):
    g = torch.Generator().manual_seed(rank)
    labels = [LABELS_V2[i % len(LABELS_V2)] for i in torch.randperm(n, generator=g).tolist()]
    x = torch.randn(n, 32, generator=g)
    return x, labels


def main():
    rank, world = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    mapping = label_map()
    num_classes = len(LABELS_V2)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, num_classes)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, names = examples(rank)
    y = torch.tensor([mapping[name] for name in names])
    for epoch in range(3):
        for i in range(0, len(x), 32):
            loss = nn.functional.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
