"""Supervised fine-tuning of a small causal LM on prompt/response pairs (DDP, gloo)."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

VOCAB = 96
MAX_LEN = 48
GLOBAL_BATCH = 16
IGNORE = -100


class PromptResponseSet(Dataset):
    """Synthetic instruction data: a prompt, then a response; only the response is supervised."""

    def __init__(self, n, seed=11):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            p_len = int(torch.randint(8, 70, (1,), generator=g))
            r_len = int(torch.randint(4, 16, (1,), generator=g))
            toks = torch.randint(3, VOCAB, (p_len + r_len,), generator=g)
            labels = toks.clone()
            labels[:p_len] = IGNORE
            self.items.append((toks[:MAX_LEN], labels[:MAX_LEN]))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        toks, labels = self.items[i]
        pad = MAX_LEN - toks.numel()
        return (F.pad(toks, (0, pad), value=0), F.pad(labels, (0, pad), value=IGNORE))


class TinyLM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, VOCAB)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


def masked_lm_loss(logits, labels):
    logits = logits[:, :-1].reshape(-1, VOCAB)
    labels = labels[:, 1:].reshape(-1)
    mask = (labels != IGNORE).float()
    per_tok = F.cross_entropy(logits, labels.clamp(min=0), reduction="none")
    return (per_tok * mask).sum() / mask.sum()


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

    data = PromptResponseSet(256)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=5)
    loader = DataLoader(data, batch_size=GLOBAL_BATCH // world, sampler=sampler, drop_last=True)

    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, (toks, labels) in enumerate(loader):
            loss = masked_lm_loss(model(toks), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
            opt.step()
            if step % 4 == 0:
                logged = loss.detach().clone()
                dist.all_reduce(logged, op=dist.ReduceOp.AVG)
                if rank == 0:
                    print(f"epoch {epoch} step {step} loss {logged.item():.4f} gnorm {gnorm.item():.3f}", flush=True)

    if rank == 0:
        print("sft finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
