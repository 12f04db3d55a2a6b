"""Conformer-lite CTC trainer: fbank-like features, conv subsampling, transformer encoder, DDP on gloo."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

N_MELS, D_MODEL, VOCAB, BATCH, STEPS = 40, 64, 32, 6, 8


def synthetic_corpus(n, seed=1234):
    g = torch.Generator().manual_seed(seed)
    utts = []
    for i in range(n):
        frames = int(torch.randint(90, 420, (1,), generator=g))
        n_tok = max(2, frames // 12)
        feats = torch.randn(frames, N_MELS, generator=g)
        tokens = torch.randint(1, VOCAB, (n_tok,), generator=g)
        utts.append((f"utt{i:05d}", feats, tokens))
    return utts


def subsampled(lengths):
    return ((lengths - 1) // 2 - 1) // 2


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = nn.Sequential(nn.Conv2d(1, 8, 3, 2), nn.ReLU(), nn.Conv2d(8, 8, 3, 2), nn.ReLU())
        self.proj = nn.Linear(8 * (((N_MELS - 1) // 2 - 1) // 2), D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, 4, 128, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(D_MODEL, VOCAB)

    def forward(self, feats, lengths):
        x = self.sub(feats.unsqueeze(1))
        b, c, t, f = x.shape
        x = self.proj(x.transpose(1, 2).reshape(b, t, c * f))
        sub_len = subsampled(lengths)
        pad_mask = torch.arange(int(sub_len.max()))[None, :] >= sub_len[:, None]
        x = self.enc(x, src_key_padding_mask=pad_mask)
        return self.out(x).log_softmax(-1), sub_len


def collate(batch, pad_to):
    lengths = torch.tensor([f.shape[0] for _, f, _ in batch])
    feats = torch.zeros(len(batch), pad_to, N_MELS)
    for i, (_, f, _) in enumerate(batch):
        feats[i, : f.shape[0]] = f
    targets = torch.cat([t for _, _, t in batch])
    target_lengths = torch.tensor([len(t) for _, _, t in batch])
    return feats, lengths, targets, target_lengths


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    corpus = synthetic_corpus(BATCH * STEPS * 4)
    shard = corpus[rank::world]
    model = DDP(Encoder())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)

    for step in range(STEPS):
        batch = shard[step * BATCH:(step + 1) * BATCH]
        # one padded length for every rank keeps the encoder's shapes identical across the job
        local_max = torch.tensor([max(f.shape[0] for _, f, _ in batch)])
        dist.all_reduce(local_max, op=dist.ReduceOp.MAX)
        feats, lengths, targets, target_lengths = collate(batch, int(local_max))

        log_probs, out_lengths = model(feats, lengths)
        loss = ctc(log_probs.transpose(0, 1), targets, out_lengths, target_lengths)
        opt.zero_grad()
        loss.backward()
        opt.step()

        stat = loss.detach().clone()
        dist.all_reduce(stat)
        if rank == 0:
            print(f"step {step} T={int(local_max)} ctc={stat.item() / world:.3f}", flush=True)

    dist.barrier()
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
