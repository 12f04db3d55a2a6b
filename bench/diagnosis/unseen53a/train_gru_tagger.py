import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, TAGS, EMB, HID = 40, 6, 16, 32
SEQ, GLOBAL_BATCH, STEPS = 12, 8, 5


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMB)
        self.rnn = nn.GRU(EMB, HID)
        self.head = nn.Linear(HID, TAGS)

    def forward(self, tokens):
        _, h = self.rnn(self.emb(tokens))
        return self.head(h[-1])


def make_batch(step):
    g = torch.Generator().manual_seed(step)
    tokens = torch.randint(0, VOCAB, (SEQ, GLOBAL_BATCH), generator=g)
    tags = tokens.sum(0) % TAGS
    return tokens, tags


def local_part(tokens, tags, rank, world):
    return tokens.chunk(world)[rank], tags.chunk(world)[rank]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(Tagger())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(STEPS):
        tokens, tags = local_part(*make_batch(step), rank, world)
        logits = model(tokens)
        loss = F.cross_entropy(logits, tags)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
