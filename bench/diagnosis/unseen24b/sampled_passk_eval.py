"""pass@k evaluation of the arithmetic-expression model with temperature sampling, test set split over ranks."""
import argparse
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, random_split

DIGITS = "0123456789+="
EOS = len(DIGITS)
VOCAB = EOS + 1


class SumProblems(Dataset):
    def __init__(self, n):
        rng = np.random.default_rng(5)
        self.pairs = rng.integers(0, 50, size=(n, 2))

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        a, b = (int(v) for v in self.pairs[i])
        prompt = [DIGITS.index(c) for c in f"{a:02d}+{b:02d}="]
        return torch.tensor(prompt), a + b


class CharLM(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, VOCAB)

    @torch.no_grad()
    def sample(self, prompt, num_samples, max_new, temperature, gen):
        x = prompt.repeat(num_samples, 1)
        out, h = self.rnn(self.emb(x))
        logits = self.head(out[:, -1])
        toks = []
        for _ in range(max_new):
            probs = torch.softmax(logits / temperature, dim=-1)
            tok = torch.multinomial(probs, 1, generator=gen)
            toks.append(tok)
            out, h = self.rnn(self.emb(tok), h)
            logits = self.head(out[:, -1])
        return torch.cat(toks, dim=1)


def to_int(seq):
    s = "".join(DIGITS[t] for t in seq.tolist() if t < EOS and DIGITS[t].isdigit())
    return int(s[:3]) if s else None


def pass_at_k(n, c, k):
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=301)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=0.8)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = CharLM().eval()

    test_set = SumProblems(args.problems)
    shards = random_split(test_set, [len(test_set) // world] * world,
                          generator=torch.Generator().manual_seed(0))
    loader = DataLoader(shards[rank], batch_size=None, shuffle=False)
    gen = torch.Generator().manual_seed(1000 + rank)

    scores = []
    for prompt, answer in loader:
        samples = model.sample(prompt, args.samples, 3, args.temperature, gen)
        correct = sum(to_int(s) == answer for s in samples)
        scores.append(pass_at_k(args.samples, correct, args.k))

    totals = torch.tensor([sum(scores), len(scores)], dtype=torch.float64)
    dist.all_reduce(totals)
    if rank == 0:
        print(f"pass@{args.k} = {totals[0] / totals[1]:.4f} over {int(totals[1])} problems "
              f"({args.samples} samples each, T={args.temperature})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
