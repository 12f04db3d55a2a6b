import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

VOCAB, DIM, EOS, MAX_NEW = 64, 48, 1, 12


class TinyDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.rnn = nn.GRU(DIM, DIM, batch_first=True)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids, h=None):
        out, h = self.rnn(self.emb(ids), h)
        return self.head(out[:, -1]), h


@torch.inference_mode()
def greedy_generate(model, prompt):
    logits, h = model(prompt)
    out = []
    for _ in range(MAX_NEW):
        tok = logits.argmax(-1, keepdim=True)
        out.append(tok)
        if (tok == EOS).all():
            break
        logits, h = model(tok, h)
    return torch.cat(out, 1)


def build_eval_set(n=64):
    g = torch.Generator().manual_seed(42)
    prompts = torch.randint(2, VOCAB, (n, 10), generator=g)
    answers = torch.randint(2, VOCAB, (n, 4), generator=g)
    return prompts, answers


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyDecoder().eval()
    prompts, answers = build_eval_set()
    per_rank = len(prompts) // world
    lo, hi = rank * per_rank, (rank + 1) * per_rank
    exact = torch.zeros(1, dtype=torch.long)
    gen_len = torch.zeros(1, dtype=torch.long)
    for i in range(lo, hi, 8):
        gen = greedy_generate(model, prompts[i:i + 8])
        k = min(gen.shape[1], answers.shape[1])
        exact += (gen[:, :k] == answers[i:i + 8, :k]).all(-1).sum()
        gen_len += gen.shape[1] * gen.shape[0]
    stats = torch.cat([exact, gen_len])
    if world > 1:
        dist.all_reduce(stats, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"exact_match/rank {stats[0].item()} mean_gen_tokens/rank {stats[1].item()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
