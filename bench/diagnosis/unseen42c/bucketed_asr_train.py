"""Duration-bucketed ASR training: every step all ranks train on the same duration bucket to balance step times."""
import datetime
import os
import random

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

N_FEAT, VOCAB, BATCH = 24, 30, 4
BUCKETS = [(0, 100), (100, 200), (200, 300), (300, 400), (400, 600)]


def synthetic_manifest(rank, n=60):
    g = torch.Generator().manual_seed(500 + rank)
    items = []
    for _ in range(n):
        frames = int(torch.distributions.Gamma(4.0, 0.02).sample().clamp(30, 599))
        if torch.rand(1, generator=g).item() < 0.5:
            frames = int(torch.randint(30, 250, (1,), generator=g))
        items.append(frames)
    return items


def make_bucket_batches(frames_list, seed):
    buckets = {b: [] for b in range(len(BUCKETS))}
    for n in frames_list:
        for b, (lo, hi) in enumerate(BUCKETS):
            if lo <= n < hi:
                buckets[b].append(n)
    rng = random.Random(seed)
    batches = {}
    for b, lens in buckets.items():
        rng.shuffle(lens)
        batches[b] = [lens[i:i + BATCH] for i in range(0, len(lens), BATCH)]
    return batches


class TinyCTC(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(N_FEAT, 64, 5, stride=2, padding=2)
        self.gru = nn.GRU(64, 64, batch_first=True)
        self.out = nn.Linear(64, VOCAB)

    def forward(self, x):
        h = torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        h, _ = self.gru(h)
        return self.out(h).log_softmax(-1)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    batches = make_bucket_batches(synthetic_manifest(rank), seed=rank)
    model = DDP(TinyCTC())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ctc = nn.CTCLoss(zero_infinity=True)
    picker = random.Random(2024)

    step = 0
    while True:
        choice = torch.tensor([-1])
        if rank == 0:
            ready = [b for b, bl in batches.items() if bl]
            if ready:
                choice[0] = picker.choice(ready)
        dist.broadcast(choice, src=0)
        if choice.item() < 0:
            break
        lens = batches[choice.item()].pop()
        t_max = max(lens)
        x = torch.randn(len(lens), t_max, N_FEAT)
        out_len = torch.tensor([(n + 1) // 2 for n in lens])
        tgt_len = torch.tensor([max(1, n // 12) for n in lens])
        targets = torch.randint(1, VOCAB, (int(tgt_len.sum()),))
        log_probs = model(x)
        loss = ctc(log_probs.transpose(0, 1), targets, out_len, tgt_len)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} bucket {choice.item()} T={t_max} loss={loss.item():.3f}", flush=True)
        step += 1

    if rank == 0:
        print(f"epoch done after {step} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
