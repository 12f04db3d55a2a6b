"""Small causal LM pretraining step with a background prefetch thread per rank."""
import datetime
import os
import queue
import threading
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 256
SEQ = 64
BATCH = 8
N_DOCS = 400


def build_corpus(seed=1234):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(20, 400, size=N_DOCS)
    return [rng.integers(1, VOCAB, size=n, dtype=np.int64) for n in lengths]


class Prefetcher:
    def __init__(self, tokens, steps, depth=4):
        self.tokens = tokens
        self.steps = steps
        self.q = queue.Queue(maxsize=depth)
        self.thread = threading.Thread(target=self._run, name="prefetch", daemon=True)
        self.thread.start()

    def _run(self):
        chunk = BATCH * (SEQ + 1)
        for i in range(self.steps):
            window = self.tokens[i * chunk:(i + 1) * chunk].reshape(BATCH, SEQ + 1)
            x = torch.from_numpy(window[:, :-1].copy())
            y = torch.from_numpy(window[:, 1:].copy())
            self.q.put((x, y))
        self.q.put(None)

    def __iter__(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            yield item


class TinyLM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        self.mix = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, x):
        h = self.emb(x)
        h = h + self.mix(h)
        return self.head(h)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "300")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    docs = build_corpus()
    my_docs = docs[rank::world]
    tokens = np.concatenate(my_docs)
    total = sum(len(d) for d in docs)
    steps = total // world // (BATCH * (SEQ + 1))
    print(f"rank {rank}: {len(my_docs)} docs, {len(tokens)} tokens, {steps} steps", flush=True)

    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = Prefetcher(tokens, steps)

    t0 = time.time()
    for step, (x, y) in enumerate(loader):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 5 == 0:
            stat = loss.detach().clone()
            dist.all_reduce(stat, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step}: loss {stat.item():.3f} ({time.time() - t0:.1f}s)", flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), "tiny_lm.pt")
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
