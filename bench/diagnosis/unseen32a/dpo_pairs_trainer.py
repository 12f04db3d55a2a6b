import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, DIM, SEQ = 256, 64, 24
BETA = 0.1


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.mix = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        return self.head(torch.relu(self.mix(self.emb(ids))))


def sequence_logps(model, ids, mask):
    logits = model(ids[:, :-1])
    logp = torch.gather(F.log_softmax(logits, -1), 2, ids[:, 1:, None]).squeeze(-1)
    return (logp * mask[:, 1:]).sum(-1)


def make_pairs(n, seed):
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, VOCAB, (n, SEQ // 2), generator=g)
    chosen = torch.cat([prompt, torch.randint(0, VOCAB // 2, (n, SEQ // 2), generator=g)], 1)
    rejected = torch.cat([prompt, torch.randint(VOCAB // 2, VOCAB, (n, SEQ // 2), generator=g)], 1)
    mask = torch.zeros(n, SEQ)
    mask[:, SEQ // 2:] = 1.0
    return chosen, rejected, mask


def setup():
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
    return rank, world


def main():
    rank, world = setup()
    torch.manual_seed(0)
    policy = DDP(Policy())
    reference = Policy()
    reference.load_state_dict(policy.module.state_dict())
    reference.requires_grad_(False)
    opt = torch.optim.Adam(policy.parameters(), lr=5e-4)
    chosen, rejected, mask = make_pairs(256, seed=rank)
    for step in range(0, 256, 16):
        c, r, m = chosen[step:step + 16], rejected[step:step + 16], mask[step:step + 16]
        pi_c, pi_r = sequence_logps(policy, c, m), sequence_logps(policy, r, m)
        with torch.no_grad():
            ref_c, ref_r = sequence_logps(reference, c, m), sequence_logps(reference, r, m)
        margin = BETA * ((pi_c - ref_c) - (pi_r - ref_r))
        loss = -F.logsigmoid(margin).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = torch.tensor([(margin > 0).float().mean().item()])
        dist.all_reduce(acc)
        if rank == 0:
            print(f"step {step // 16} loss {loss.item():.4f} reward_acc {acc.item() / world:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
