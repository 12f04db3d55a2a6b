import datetime
import math
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, DIM, SEQ_LEN, EOS = 300, 64, 256, 0
MICRO_BATCH, EPOCHS = 4, 1


def synthetic_conversations(rank, n=400):
    rng = np.random.default_rng(1000 + rank)
    lengths = rng.integers(40, 160, size=n)
    return [rng.integers(1, VOCAB, size=int(L)).tolist() for L in lengths]


def pack(docs, seq_len):
    stream = []
    for d in docs:
        stream.extend(d + [EOS])
    n_seq = len(stream) // (seq_len + 1)
    arr = torch.tensor(stream[: n_seq * (seq_len + 1)]).view(n_seq, seq_len + 1)
    return arr


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.ff = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, x):
        h = self.emb(x)
        return self.head(h + self.ff(h))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    packed = pack(synthetic_conversations(rank), SEQ_LEN)

    local_tokens = torch.tensor([packed.numel()], dtype=torch.float16)
    global_tokens = local_tokens.clone()
    dist.all_reduce(global_tokens)
    tokens_per_step = MICRO_BATCH * SEQ_LEN * world
    total_steps = EPOCHS * math.floor(global_tokens.item() / tokens_per_step)
    warmup = max(1, total_steps // 10)
    if rank == 0:
        print(f"{int(global_tokens.item())} tokens, {total_steps} steps, warmup {warmup}", flush=True)

    torch.manual_seed(0)
    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1 - s / total_steps))
    n_local = packed.shape[0] // MICRO_BATCH
    for step in range(min(total_steps, n_local)):
        batch = packed[step * MICRO_BATCH:(step + 1) * MICRO_BATCH]
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f} lr {sched.get_last_lr()[0]:.2e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
