import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MELS, HIDDEN, PHONES, FRAMES = 40, 96, 30, 50
BATCH, STEPS, AUX_WARMUP_STEPS, AUX_WEIGHT = 8, 16, 6, 0.3


class SpeechEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(MELS, HIDDEN, kernel_size=5, padding=2)
        self.rnn = nn.GRU(HIDDEN, HIDDEN, batch_first=True)
        self.ctc_head = nn.Linear(HIDDEN, PHONES + 1)
        self.frame_head = nn.Linear(HIDDEN, PHONES)

    def forward(self, mels):
        h = F.relu(self.conv(mels)).transpose(1, 2)
        h, _ = self.rnn(h)
        return self.ctc_head(h), self.frame_head(h)


def utterances(step, rank):
    g = torch.Generator().manual_seed(31 * step + rank)
    mels = torch.randn(BATCH, MELS, FRAMES, generator=g)
    frame_labels = torch.randint(0, PHONES, (BATCH, FRAMES), generator=g)
    targets = torch.randint(1, PHONES + 1, (BATCH, 12), generator=g)
    return mels, frame_labels, targets


def average_gradients(model):
    world = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= world


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    model = SpeechEncoder()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / AUX_WARMUP_STEPS))
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)

    for step in range(STEPS):
        mels, frame_labels, targets = utterances(step, rank)
        ctc_logits, frame_logits = model(mels)
        log_probs = ctc_logits.log_softmax(-1).transpose(0, 1)
        in_lens = torch.full((BATCH,), FRAMES, dtype=torch.long)
        tgt_lens = torch.full((BATCH,), targets.size(1), dtype=torch.long)
        loss = ctc(log_probs, targets, in_lens, tgt_lens)
        if step < AUX_WARMUP_STEPS:
            aux = F.cross_entropy(frame_logits.reshape(-1, PHONES), frame_labels.reshape(-1))
            loss = loss + AUX_WEIGHT * aux

        opt.zero_grad(set_to_none=True)
        loss.backward()
        if world > 1:
            average_gradients(model)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        sched.step()

        if rank == 0:
            print(f"step {step} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.2e}", flush=True)

    if rank == 0:
        torch.save(model.state_dict(), "speech_encoder.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
