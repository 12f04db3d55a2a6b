"""Tiny next-token LM trained on packed batches (a token budget per step),
with a mid-run snapshot that the job reloads to continue, as after a restart."""
import datetime
import os
import shutil

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 64
TOKENS_PER_STEP = 384
NOMINAL_BATCH = 12
TOTAL_STEPS = 40
SNAPSHOT_AT = 20
SNAP_DIR = "lm_snapshots"


def corpus_shard(rank, world, n_docs=2000):
    g = torch.Generator().manual_seed(7)
    chat = torch.randint(8, 33, (n_docs // 2,), generator=g)
    articles = torch.randint(24, 65, (n_docs - n_docs // 2,), generator=g)
    lengths = torch.cat([chat, articles])
    docs = [torch.randint(0, VOCAB, (int(l),), generator=g) for l in lengths]
    per = n_docs // world
    return docs[rank * per:(rank + 1) * per]


def packed_batches(docs, start_doc):
    i = start_doc
    while True:
        batch, used = [], 0
        while used + len(docs[i % len(docs)]) <= TOKENS_PER_STEP:
            batch.append(docs[i % len(docs)])
            used += len(docs[i % len(docs)])
            i += 1
        yield nn.utils.rnn.pad_sequence(batch, batch_first=True, padding_value=-1), len(batch)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 64, batch_first=True)
        self.out = nn.Linear(64, VOCAB)

    def forward(self, tokens):
        h, _ = self.rnn(self.emb(tokens.clamp(min=0)))
        return self.out(h)


def run(model, opt, docs, step, stop, samples_seen, rank):
    stream = packed_batches(docs, samples_seen)
    while step < stop:
        tokens, n = next(stream)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1), ignore_index=-1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        samples_seen += n
        step += 1
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f} docs {samples_seen}", flush=True)
    return step, samples_seen


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    if int(os.environ.get("LOCAL_RANK", "0")) == 0:
        shutil.rmtree(SNAP_DIR, ignore_errors=True)
        os.makedirs(SNAP_DIR)
    dist.barrier()

    docs = corpus_shard(rank, world)
    torch.manual_seed(0)
    model = DDP(TinyLM())
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    step, seen = run(model, opt, docs, 0, SNAPSHOT_AT, 0, rank)
    path = os.path.join(SNAP_DIR, f"rank{rank}.pt")
    torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "samples_seen": seen}, path)

    torch.manual_seed(0)
    model = DDP(TinyLM())
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    state = torch.load(path, weights_only=True)
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    seen = state["samples_seen"]
    step = seen // NOMINAL_BATCH
    print(f"[rank {rank}] resuming at step {step} after {seen} documents", flush=True)
    run(model, opt, docs, step, TOTAL_STEPS, seen, rank)

    done = torch.tensor([1.0])
    dist.all_reduce(done)
    if rank == 0:
        print(f"finished on {int(done.item())} ranks")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
