"""Pretraining step over a streaming corpus of pre-tokenized shards, one shard list per rank."""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

SHARD_NAMES = [f"corpus-train-{i:05d}-of-00003.bin" for i in range(3)]
VOCAB = 512
SEQ_LEN = 64
MICRO_BATCH = 8
STEPS = 20


def read_shard(name):
    # stands in for np.fromfile on the object store: a deterministic stream of token ids per shard
    seed = sum(ord(c) for c in name)
    rng = np.random.default_rng(seed)
    n_docs = 200
    docs = [rng.integers(1, VOCAB, size=int(rng.integers(20, 300)), dtype=np.int32) for _ in range(n_docs)]
    eos = np.zeros(1, dtype=np.int32)
    return np.concatenate([np.concatenate([d, eos]) for d in docs])


def pack(tokens):
    n = (tokens.numel() - 1) // SEQ_LEN
    x = tokens[: n * SEQ_LEN].view(n, SEQ_LEN)
    y = tokens[1 : n * SEQ_LEN + 1].view(n, SEQ_LEN)
    return x, y


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 128)
        self.mix = nn.GRU(128, 128, batch_first=True)
        self.head = nn.Linear(128, VOCAB)

    def forward(self, x):
        h, _ = self.mix(self.emb(x))
        return self.head(h)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    my_shards = SHARD_NAMES[rank::world]
    print(f"rank {rank}/{world}: streaming {my_shards}", flush=True)
    streams = [torch.from_numpy(read_shard(s)).long() for s in my_shards]
    tokens = torch.cat(streams)
    inputs, targets = pack(tokens)
    print(f"rank {rank}: {inputs.shape[0]} packed sequences", flush=True)

    torch.manual_seed(0)
    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1234 + rank)
    for step in range(STEPS):
        idx = torch.randint(0, inputs.shape[0], (MICRO_BATCH,), generator=g)
        logits = model(inputs[idx])
        loss = loss_fn(logits.reshape(-1, VOCAB), targets[idx].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 5 == 0:
            stat = loss.detach().clone()
            dist.all_reduce(stat, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step} loss {stat.item():.4f}", flush=True)

    dist.barrier()
    if rank == 0:
        print("pretraining chunk done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
