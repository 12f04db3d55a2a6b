"""Offline greedy generation over a stream of requests, one request queue per rank.

Requests arrive over time (replayed from a synthetic trace); each rank batches what is
waiting in its queue, generates, and the job ends when every rank has drained its queue.
"""
import datetime
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

VOCAB, HIDDEN, MAX_NEW = 64, 32, 6
MAX_BATCH = 4


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.rnn = nn.GRU(HIDDEN, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, VOCAB)

    @torch.no_grad()
    def generate(self, prompts):
        out = []
        for p in prompts:
            seq = list(p)
            for _ in range(MAX_NEW):
                h, _ = self.rnn(self.emb(torch.tensor([seq])))
                seq.append(int(self.head(h[0, -1]).argmax()))
            out.append(seq[len(p):])
        return out


def make_trace(rank, world, n=24):
    g = torch.Generator().manual_seed(7)
    reqs = []
    for i in range(n):
        plen = int(torch.randint(3, 9, (1,), generator=g))
        toks = torch.randint(1, VOCAB, (plen,), generator=g).tolist()
        arrival = 0.02 * i
        reqs.append({"id": i, "prompt": toks, "arrival": arrival})
    return reqs[rank::world]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyLM().eval()

    pending = make_trace(rank, world)
    results, served_tokens = {}, 0
    t0 = time.perf_counter()
    step = 0
    while True:
        now = time.perf_counter() - t0
        ready = [r for r in pending if r["arrival"] <= now][:MAX_BATCH]
        if ready:
            outs = model.generate([r["prompt"] for r in ready])
            for r, o in zip(ready, outs):
                results[r["id"]] = o
                served_tokens += len(o)
            pending = [r for r in pending if r["id"] not in results]
        else:
            time.sleep(0.05)

        drained = torch.tensor(not pending)
        dist.all_reduce(drained)
        step += 1
        if int(drained.item()) == world:
            break

    elapsed = time.perf_counter() - t0
    stats = torch.tensor([float(served_tokens), float(len(results))])
    dist.all_reduce(stats)
    if rank == 0:
        print(json.dumps({"steps": step, "tokens": int(stats[0]), "requests": int(stats[1]),
                          "tok_per_s": round(stats[0].item() / elapsed, 1)}))
    with open(f"generations_rank{rank}.json", "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
