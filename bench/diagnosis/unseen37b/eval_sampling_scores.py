import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

VOCAB, DIM, N_PROMPTS, SAMPLES = 30, 16, 24, 4


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, tok):
        return self.out(torch.relu(self.emb(tok)))


def reward(prompt, completion):
    return sum(1.0 for t in completion if (t + prompt) % 3 == 0) / len(completion)


def sample(model, prompt, gen, length=6, temperature=0.8):
    toks = [prompt]
    with torch.no_grad():
        for _ in range(length):
            probs = (model(torch.tensor([toks[-1]]))[0] / temperature).softmax(-1)
            toks.append(int(torch.multinomial(probs, 1, generator=gen)))
    return toks[1:]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(11)
    model = Policy().eval()
    gen = torch.Generator().manual_seed(1000 + rank)
    scores = {}
    for p in range(rank, N_PROMPTS, world):
        rs = [reward(p, sample(model, p, gen)) for _ in range(SAMPLES)]
        scores[p] = {"mean": sum(rs) / len(rs), "best": max(rs)}
    if world > 1:
        merged = {}
        gathered = dist.all_gather_object([None] * world, scores)
        for part in gathered:
            merged.update(part)
        scores = merged
    if rank == 0:
        mean = sum(v["mean"] for v in scores.values()) / len(scores)
        best = sum(v["best"] for v in scores.values()) / len(scores)
        print(f"prompts {len(scores)} mean reward {mean:.3f} best-of-{SAMPLES} {best:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
