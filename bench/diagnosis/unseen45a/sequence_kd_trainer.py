"""Sequence-level knowledge distillation for a tiny GRU tagger.

A frozen teacher tagger produces tempered token distributions; the student is trained
on a mix of KL to the teacher and cross-entropy on the gold tags.
"""
import os
import datetime

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, TAGS, SEQ = 200, 8, 12
TEMPERATURE = 3.0
STEPS = 15


class Tagger(nn.Module):
    def __init__(self, emb, hidden):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, emb)
        self.rnn = nn.GRU(emb, hidden, batch_first=True)
        self.out = nn.Linear(hidden, TAGS)

    def forward(self, tokens):
        h, _ = self.rnn(self.emb(tokens))
        return self.out(h)


def batches(rank, n, bs=8):
    g = torch.Generator().manual_seed(31 + rank)
    for _ in range(n):
        toks = torch.randint(0, VOCAB, (bs, SEQ), generator=g)
        tags = toks % TAGS
        yield toks, tags


def kd_loss(s_logits, t_logits, tags, alpha=0.5):
    s = F.log_softmax(s_logits / TEMPERATURE, dim=-1)
    t = F.softmax(t_logits / TEMPERATURE, dim=-1)
    kd = F.kl_div(s.flatten(0, 1), t.flatten(0, 1), reduction="batchmean") * TEMPERATURE ** 2
    ce = F.cross_entropy(s_logits.flatten(0, 1), tags.flatten())
    return alpha * kd + (1 - alpha) * ce


def main():
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    device = torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")

    torch.manual_seed(0)
    teacher = Tagger(64, 128).to(device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    student = Tagger(16, 32).to(device)
    student = DDP(student, device_ids=[local_rank], output_device=local_rank)
    opt = torch.optim.Adam(student.parameters(), lr=3e-3)

    for step, (toks, tags) in enumerate(batches(rank, STEPS)):
        toks, tags = toks.to(device), tags.to(device)
        with torch.no_grad():
            t_logits = teacher(toks)
        loss = kd_loss(student(toks), t_logits, tags)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    dist.barrier()
    if rank == 0:
        torch.save(student.module.state_dict(), "student_tagger.pt")
        print("saved student_tagger.pt", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
