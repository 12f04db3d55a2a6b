import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, DIM, SEQ = 500, 32, 12


class BiEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, DIM, mode="mean")
        self.q_head = nn.Linear(DIM, DIM)
        self.p_head = nn.Linear(DIM, DIM)

    def forward(self, q_ids, p_ids):
        return (F.normalize(self.q_head(self.emb(q_ids)), dim=-1),
                F.normalize(self.p_head(self.emb(p_ids)), dim=-1))


def all_gather_cat(x):
    if dist.get_world_size() == 1:
        return x
    buf = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(buf, x.contiguous())
    return torch.cat(buf, dim=0)


def in_batch_negatives_loss(q, p, temperature=0.05):
    all_q = all_gather_cat(q)
    all_p = all_gather_cat(p)
    scores = all_q @ all_p.T / temperature
    labels = torch.arange(all_q.shape[0])
    return F.cross_entropy(scores, labels)


def query_passage_batch(step, rank, n=8):
    g = torch.Generator().manual_seed(7919 * step + rank)
    topic = torch.randint(0, VOCAB, (n, 4), generator=g)
    q = torch.cat([topic, torch.randint(0, VOCAB, (n, SEQ - 4), generator=g)], 1)
    p = torch.cat([topic, torch.randint(0, VOCAB, (n, SEQ - 4), generator=g)], 1)
    return q, p


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(BiEncoder())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(25):
        q_ids, p_ids = query_passage_batch(step, rank)
        q, p = model(q_ids, p_ids)
        loss = in_batch_negatives_loss(q, p)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "retriever.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
