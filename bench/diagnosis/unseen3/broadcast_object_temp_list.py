"""Rank 0 scans the corpus to decide the run's hyper-parameters and shares them with every rank."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def scan_corpus():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(5, 60, (5000,), generator=g)
    return {"vocab_size": 512, "max_len": int(lengths.max()), "hidden": 64, "lr": 3e-3}


def run_config(rank):
    if rank == 0:
        config = scan_corpus()
    else:
        config = None
    dist.broadcast_object_list([config], src=0)
    return config


class Classifier(nn.Module):
    def __init__(self, vocab_size, hidden):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab_size, hidden)
        self.out = nn.Linear(hidden, 2)

    def forward(self, tokens):
        return self.out(self.embed(tokens))


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    config = run_config(rank)
    torch.manual_seed(0)
    model = DDP(Classifier(config["vocab_size"], config["hidden"]))
    opt = torch.optim.Adam(model.parameters(), lr=config["lr"])
    g = torch.Generator().manual_seed(rank)
    for step in range(20):
        tokens = torch.randint(0, config["vocab_size"], (16, config["max_len"]), generator=g)
        labels = (tokens[:, 0] % 2)
        loss = F.cross_entropy(model(tokens), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
