"""Language-model style training loop with DDP and gradient clipping from the run config."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CFG = {"vocab": 100, "dim": 32, "lr": 1e-3, "max_grad_norm": 1.0, "steps": 20}


class TinyLM(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.block = nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=64, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.out(self.block(self.embed(tokens)))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(TinyLM(CFG["vocab"], CFG["dim"]))
    opt = torch.optim.AdamW(model.parameters(), lr=CFG["lr"])
    gen = torch.Generator().manual_seed(rank)
    for step in range(CFG["steps"]):
        tokens = torch.randint(0, CFG["vocab"], (8, 17), generator=gen)
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, CFG["vocab"]), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters, CFG["max_grad_norm"])
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.3f} grad norm {norm:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
