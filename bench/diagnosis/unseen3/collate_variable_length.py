"""Sequence classifier trained with DDP, a DistributedSampler and a multi-worker DataLoader."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

SEQ_LEN = 24
VOCAB = 300


class TokenizedReviews(Dataset):
    """Reviews tokenised and truncated to SEQ_LEN tokens; a few reviews are shorter than that."""

    def __init__(self, size=512):
        g = torch.Generator().manual_seed(0)
        self.lengths = [SEQ_LEN] * size
        for i in (206, 391):
            self.lengths[i] = 17
        self.tokens = torch.randint(1, VOCAB, (size, SEQ_LEN), generator=g)
        self.labels = torch.randint(0, 2, (size,), generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.tokens[i, :self.lengths[i]], self.labels[i]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32, padding_idx=0)
        self.conv = nn.Conv1d(32, 32, 3, padding=1)
        self.out = nn.Linear(32, 2)

    def forward(self, tokens):
        h = self.conv(self.embed(tokens).transpose(1, 2)).relu()
        return self.out(h.max(dim=2).values)


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    dataset = TokenizedReviews()
    sampler = DistributedSampler(dataset, shuffle=False)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler, num_workers=2)
    torch.manual_seed(0)
    model = DDP(Model())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, (tokens, labels) in enumerate(loader):
            loss = F.cross_entropy(model(tokens), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
