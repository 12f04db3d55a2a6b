"""Intent classifier: rank 0 builds the label map from the training data and shares the run config (as JSON,
the same text it writes to config.json) with every rank; predictions are decoded through id2label."""
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

INTENTS = ["greet", "order", "cancel", "refund", "track"]


def build_config():
    return {"model": {"dim": 24, "hidden": 48}, "id2label": {i: name for i, name in enumerate(INTENTS)}}


def share_config(cfg):
    box = [json.dumps(cfg) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return json.loads(box[0])


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    cfg = share_config(build_config() if rank == 0 else None)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(cfg["model"]["dim"], cfg["model"]["hidden"]), nn.ReLU(),
                              nn.Linear(cfg["model"]["hidden"], len(cfg["id2label"]))))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(rank)
    for step in range(30):
        x = torch.randn(32, 24, generator=gen)
        loss = nn.functional.cross_entropy(model(x), x[:, :5].argmax(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        preds = model.module(torch.randn(8, 24, generator=gen)).argmax(1).tolist()
    decoded = [cfg["id2label"][p] for p in preds]
    print(f"rank {rank} sample predictions: {decoded}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
