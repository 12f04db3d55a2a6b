"""Sequence-model training whose base config is tuned per host by the cluster's node profiles."""
import copy
import datetime
import json
import os
import socket

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

BASE_CONFIG = {
    "run": {"name": "seqcls-small", "steps": 40, "log_every": 10},
    "data": {"batch_size": 16, "seq_len": 24, "vocab": 500, "num_classes": 4, "loader_threads": 4},
    "model": {"dim": 48, "layers": 2},
    "optim": {"lr": 2e-3, "betas": [0.9, 0.95], "clip": 1.0},
}

NODE_PROFILES = {
    "node1": {"data": {"loader_threads": 2}},
    "gpu-a07": {"optim": {"clip": 0.5}},
}


def load_config():
    cfg = copy.deepcopy(BASE_CONFIG)
    host = os.environ.get("NODE_NAME") or socket.gethostname()
    profile = NODE_PROFILES.get(host, {})
    cfg.update(profile)
    extra = os.environ.get("TRAIN_OVERRIDES")
    if extra:
        cfg.update(json.loads(extra))
    return cfg, host


class SeqClassifier(nn.Module):
    def __init__(self, vocab, dim, layers, num_classes):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.body = nn.Sequential(*[nn.Sequential(nn.Linear(dim, dim), nn.GELU()) for _ in range(layers)])
        self.head = nn.Linear(dim, num_classes)

    def forward(self, tokens):
        return self.head(self.body(self.emb(tokens)).mean(dim=1))


def batches(data_cfg, rank):
    g = torch.Generator().manual_seed(100 + rank)
    while True:
        x = torch.randint(0, data_cfg["vocab"], (data_cfg["batch_size"], data_cfg["seq_len"]), generator=g)
        y = x[:, 0] % data_cfg["num_classes"]
        yield x, y


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    cfg, host = load_config()
    torch.set_num_threads(cfg["data"]["loader_threads"])
    print(f"rank {rank} on {host}: run {cfg['run']['name']}", flush=True)

    m, d, o = cfg["model"], cfg["data"], cfg["optim"]
    torch.manual_seed(0)
    model = DDP(SeqClassifier(d["vocab"], m["dim"], m["layers"], d["num_classes"]))
    opt = torch.optim.AdamW(model.parameters(), lr=o["lr"], betas=tuple(o["betas"]))
    stream = batches(d, rank)

    for step in range(cfg["run"]["steps"]):
        x, y = next(stream)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), o["clip"])
        opt.step()
        if rank == 0 and step % cfg["run"]["log_every"] == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
