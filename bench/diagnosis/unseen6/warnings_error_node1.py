"""Token tagging with a GRU, two machines started by hand:
    python warnings_error_node1.py --rank R --world-size N   (MASTER_ADDR/MASTER_PORT set)"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

VOCAB, TAGS, LENGTH = 500, 5, 20


class TaggedSentences(Dataset):
    def __init__(self, n=1024, seed=11):
        g = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(1, VOCAB, (n, LENGTH), generator=g)
        self.tags = self.tokens % TAGS

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, i):
        return {"tokens": self.tokens[i], "tags": self.tags[i]}


def collate(samples):
    tokens = torch.stack([s["tokens"] for s in samples])
    tags = torch.tensor([s["tags"].tolist() for s in samples])
    lengths = torch.tensor([len(s["tokens"]) for s in samples])
    return tokens, tags, torch.tensor(lengths)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 32, batch_first=True)
        self.out = nn.Linear(32, TAGS)

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.out(h)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", init_method="env://", rank=args.rank, world_size=args.world_size,
                            timeout=timeout)
    data = TaggedSentences()
    sampler = DistributedSampler(data, num_replicas=args.world_size, rank=args.rank)
    loader = DataLoader(data, batch_size=32, sampler=sampler, collate_fn=collate)
    torch.manual_seed(0)
    model = DDP(Tagger())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for tokens, tags, lengths in loader:
            opt.zero_grad()
            logits = model(tokens)
            loss = nn.functional.cross_entropy(logits.reshape(-1, TAGS), tags.reshape(-1))
            loss.backward()
            opt.step()
        if args.rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f} (max length {int(lengths.max())})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
