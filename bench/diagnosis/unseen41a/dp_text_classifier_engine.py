import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn

VOCAB = 500
N_DOCS = 1024
SEQ = 24
BATCH = 32
STEPS = 20


class PrivacyEngine:
    def __init__(self, params, noise_multiplier, max_grad_norm):
        self.params = list(params)
        self.max_grad_norm = max_grad_norm
        world = dist.get_world_size() if "WORLD_SIZE" in os.environ else 1
        self.noise_std = noise_multiplier * max_grad_norm / math.sqrt(world)
        self.gen = torch.Generator().manual_seed(int(os.environ.get("RANK", "0")) + 11)

    def privatize(self, batch_size):
        norm = torch.sqrt(sum((p.grad ** 2).sum() for p in self.params))
        scale = min(1.0, self.max_grad_norm / (norm.item() + 1e-6))
        for p in self.params:
            p.grad.mul_(scale).add_(torch.randn(p.shape, generator=self.gen) * self.noise_std / batch_size)
            if dist.is_initialized():
                dist.all_reduce(p.grad)
                p.grad /= dist.get_world_size()


class BagOfWords(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, 32, mode="mean")
        self.out = nn.Linear(32, 4)

    def forward(self, tokens):
        return self.out(self.emb(tokens))


def main():
    torch.manual_seed(0)
    model = BagOfWords()
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    engine = PrivacyEngine(model.parameters(), noise_multiplier=1.0, max_grad_norm=1.0)

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    g = torch.Generator().manual_seed(5)
    docs = torch.randint(0, VOCAB, (N_DOCS, SEQ), generator=g)
    labels = docs[:, 0] % 4
    docs, labels = docs[rank::world], labels[rank::world]
    loss_fn = nn.CrossEntropyLoss()
    order = torch.Generator().manual_seed(9 + rank)

    for step in range(STEPS):
        idx = torch.randint(0, len(docs), (BATCH,), generator=order)
        loss = loss_fn(model(docs[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        engine.privatize(BATCH)
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
