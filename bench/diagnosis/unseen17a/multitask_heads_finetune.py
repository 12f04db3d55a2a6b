import os
import datetime
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

HIDDEN = 32
VOCAB = 500
SEQ = 16

TASK_LABELS = {
    "sentiment": 3,
    "topic": 12,
    "language": 7,
    "toxicity": 2,
    "intent": 9,
    "formality": 4,
}


def make_examples(n, seed):
    rng = random.Random(seed)
    names = list(TASK_LABELS)
    out = []
    for _ in range(n):
        task = rng.choice(names)
        tokens = [rng.randrange(VOCAB) for _ in range(SEQ)]
        out.append({"task": task, "tokens": tokens, "label": rng.randrange(TASK_LABELS[task])})
    return out


class SharedEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, HIDDEN, mode="mean")
        self.proj = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.GELU(), nn.LayerNorm(HIDDEN))

    def forward(self, tokens):
        return self.proj(self.embed(tokens))


class MultiTaskModel(nn.Module):
    def __init__(self, tasks):
        super().__init__()
        self.encoder = SharedEncoder()
        self.heads = nn.ModuleDict()
        for name in tasks:
            self.heads[name] = nn.Linear(HIDDEN, TASK_LABELS[name])

    def forward(self, tokens, task):
        return self.heads[task](self.encoder(tokens))


def batches_by_task(examples, batch_size):
    by_task = {}
    for ex in examples:
        by_task.setdefault(ex["task"], []).append(ex)
    for task in sorted(by_task):
        items = by_task[task]
        for i in range(0, len(items) - batch_size + 1, batch_size):
            chunk = items[i:i + batch_size]
            tokens = torch.tensor([ex["tokens"] for ex in chunk])
            labels = torch.tensor([ex["label"] for ex in chunk])
            yield task, tokens, labels


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    train = make_examples(1200, seed=1234)
    shard = train[rank::world]
    tasks = {ex["task"] for ex in train}
    print(f"[rank {rank}] {len(shard)} examples, {len(tasks)} tasks", flush=True)

    model = DDP(MultiTaskModel(tasks), find_unused_parameters=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    for epoch in range(2):
        total, steps = torch.zeros(1), 0
        for task, tokens, labels in batches_by_task(shard, 16):
            logits = model(tokens, task)
            loss = F.cross_entropy(logits, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach()
            steps += 1
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: mean loss {total.item() / (steps * world):.4f}", flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), "multitask.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
