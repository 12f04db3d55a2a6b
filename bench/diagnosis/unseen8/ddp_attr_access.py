"""Fine-tune a small tagger with DDP; the trainer logs the encoder's gradient norm every few steps."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Tagger(nn.Module):
    def __init__(self, vocab=200, dim=32, tags=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.encoder = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, tags)

    def forward(self, tokens):
        hidden, _ = self.encoder(self.embed(tokens))
        return self.head(hidden)


def batches(rank, steps=30, batch=16, length=12):
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        tokens = torch.randint(0, 200, (batch, length), generator=gen)
        yield tokens, tokens % 5


def grad_norm(module):
    return torch.norm(torch.stack([p.grad.norm() for p in module.parameters() if p.grad is not None])).item()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(Tagger())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    for step, (tokens, tags) in enumerate(batches(rank)):
        logits = model(tokens)
        loss = loss_fn(logits.reshape(-1, 5), tags.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if step % 5 == 0:
            enc_norm = grad_norm(model.encoder)
            if rank == 0:
                print(f"step {step} loss {loss.item():.3f} encoder grad norm {enc_norm:.3f}", flush=True)
        opt.step()
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
