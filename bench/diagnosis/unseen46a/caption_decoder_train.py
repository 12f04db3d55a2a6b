import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, CTX, DIM = 300, 10, 64
BOS, EOS, PAD = 1, 2, 0


def setup():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size(), torch.device("cpu")


class Captioner(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, DIM, 8, stride=8)
        self.tok = nn.Embedding(VOCAB, DIM, padding_idx=PAD)
        self.gru = nn.GRU(DIM, DIM, batch_first=True)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, img, ids):
        h0 = self.patch(img).flatten(2).mean(-1).unsqueeze(0)
        out, _ = self.gru(self.tok(ids), h0.contiguous())
        return self.head(out)


def _greedy(model, img, max_len=CTX):
    ids = torch.full((img.shape[0], 1), BOS, dtype=torch.long)
    for _ in range(max_len):
        nxt = model(img, ids)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], 1)
    return ids


def sample_captions(model, img, max_batch=4):
    prev = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    if img.shape[0] > max_batch:
        return torch.cat([_greedy(model, c) for c in img.split(max_batch)])
    ids = _greedy(model, img)
    torch.set_grad_enabled(prev)
    return ids


def synthetic_batch(gen, bs, device):
    img = torch.randn(bs, 3, 32, 32, generator=gen).to(device)
    lens = torch.randint(4, CTX, (bs,), generator=gen)
    ids = torch.full((bs, CTX + 1), PAD, dtype=torch.long)
    for b, n in enumerate(lens.tolist()):
        ids[b, 0] = BOS
        ids[b, 1:n] = torch.randint(3, VOCAB, (n - 1,), generator=gen)
        ids[b, n] = EOS
    return img, ids.to(device)


def main():
    rank, world, device = setup()
    torch.manual_seed(0)
    model = Captioner().to(device)
    ddp = DDP(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(10 + rank)
    for step in range(30):
        img, ids = synthetic_batch(gen, 16, device)
        logits = ddp(img, ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        tokens = (ids[:, 1:] != PAD).sum().to(device)
        dist.all_reduce(tokens)
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f} tokens {tokens.item()}", flush=True)
        if step % 10 == 0:
            shown = [torch.empty_like(img[:4]) for _ in range(world)]
            dist.all_gather(shown, img[:4].contiguous())
            if rank == 0:
                samples = sample_captions(model, torch.cat(shown))
                print("samples", samples[:, 1:6].tolist(), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
