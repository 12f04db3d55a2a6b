"""Small in-house pretraining entry point: everything comes from one JSON config (defaults below, --config to
override, --set key=value for quick sweeps)."""
import argparse
import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

DEFAULT_CONFIG = """
{
  "run_name": "char-lm-small",
  "trainer": {"num_nodes": 1, "procs_per_node": "auto", "max_steps": 40, "log_every": 10, "backend": "gloo"},
  "model": {"vocab": 96, "dim": 64, "hidden": 256},
  "optim": {"lr": 0.003, "weight_decay": 0.01},
  "data": {"seq_len": 32, "batch_size": 16, "seed": 1234}
}
"""


def load_config(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=None)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    cfg = json.loads(DEFAULT_CONFIG)
    if args.config:
        with open(args.config) as f:
            for section, values in json.load(f).items():
                cfg.setdefault(section, {}).update(values) if isinstance(values, dict) else cfg.update({section: values})
    for item in args.set:
        key, value = item.split("=", 1)
        section, name = key.split(".", 1)
        cfg[section][name] = json.loads(value)
    return cfg


class Topology:
    def __init__(self, trainer_cfg):
        procs = trainer_cfg["procs_per_node"]
        if procs == "auto":
            procs = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        self.procs_per_node = procs
        self.num_nodes = int(trainer_cfg["num_nodes"])
        self.world_size = self.num_nodes * self.procs_per_node
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))

    def __repr__(self):
        return f"Topology(nodes={self.num_nodes}, procs_per_node={self.procs_per_node}, rank={self.rank}/{self.world_size})"


class CharLM(nn.Module):
    def __init__(self, vocab, dim, hidden):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        self.head = nn.Linear(dim, vocab)

    def forward(self, x):
        h = self.embed(x)
        return self.head(h + self.mlp(h))


def batches(data_cfg, vocab, rank):
    g = torch.Generator().manual_seed(data_cfg["seed"] + rank)
    while True:
        seq = torch.randint(0, vocab, (data_cfg["batch_size"], data_cfg["seq_len"] + 1), generator=g)
        yield seq[:, :-1], seq[:, 1:]


def main():
    cfg = load_config()
    topo = Topology(cfg["trainer"])
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group(cfg["trainer"]["backend"], rank=topo.rank, world_size=topo.world_size, timeout=timeout)
    if topo.rank == 0:
        print(f"[{cfg['run_name']}] {topo}", flush=True)

    torch.manual_seed(0)
    model = DDP(CharLM(**cfg["model"]))
    opt = torch.optim.AdamW(model.parameters(), **cfg["optim"])
    loss_fn = nn.CrossEntropyLoss()
    stream = batches(cfg["data"], cfg["model"]["vocab"], topo.rank)

    for step in range(1, cfg["trainer"]["max_steps"] + 1):
        x, y = next(stream)
        loss = loss_fn(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % cfg["trainer"]["log_every"] == 0:
            avg = loss.detach().clone()
            dist.all_reduce(avg)
            if topo.rank == 0:
                print(f"step {step}: loss {avg.item() / dist.get_world_size():.4f}", flush=True)

    dist.barrier()
    if topo.rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
