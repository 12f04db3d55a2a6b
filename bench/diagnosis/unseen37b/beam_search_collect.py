import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

VOCAB, DIM, BEAMS, STEPS = 40, 24, 3, 5


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.proj = nn.Linear(DIM, VOCAB)

    def forward(self, last_tok):
        return self.proj(torch.tanh(self.emb(last_tok))).log_softmax(-1)


def beam_search(model, bos, beams=BEAMS, steps=STEPS):
    hyps = [([bos], 0.0)]
    with torch.no_grad():
        for _ in range(steps):
            cand = []
            for toks, score in hyps:
                lp = model(torch.tensor([toks[-1]]))[0]
                top = lp.topk(beams)
                for v, i in zip(top.values.tolist(), top.indices.tolist()):
                    cand.append((toks + [i], score + v))
            hyps = sorted(cand, key=lambda h: h[1], reverse=True)[:beams]
    return hyps[0]


def decode_shard(model, sources):
    return ({"src": s, "hyp": h, "score": round(sc, 4)} for s, (h, sc) in
            ((s, beam_search(model, s)) for s in sources))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(3)
    model = Decoder().eval()
    sources = list(range(0, VOCAB, 2))[rank::world]
    results = decode_shard(model, sources)
    if world > 1:
        gathered = [None] * world
        dist.all_gather_object(gathered, results)
        results = [r for part in gathered for r in part]
    results = list(results)
    if rank == 0:
        best = max(results, key=lambda r: r["score"])
        print(f"decoded {len(results)} sources, best score {best['score']}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
