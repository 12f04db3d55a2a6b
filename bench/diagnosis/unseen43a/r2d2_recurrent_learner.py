import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

OBS_DIM = 12
HIDDEN = 32
N_ACTIONS = 4
SEQ_LEN = 20
SEQS_PER_ACTOR = 8
ROUNDS = 3


class RecurrentQ(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(OBS_DIM, HIDDEN)
        self.lstm = nn.LSTM(HIDDEN, HIDDEN, batch_first=True)
        self.q = nn.Linear(HIDDEN, N_ACTIONS)

    def forward(self, obs, state):
        out, state = self.lstm(torch.relu(self.enc(obs)), state)
        return self.q(out), state


def act(net, gen, carry):
    obs = torch.randn(SEQS_PER_ACTOR, SEQ_LEN, OBS_DIM, generator=gen)
    h0, c0 = carry
    with torch.no_grad():
        q, (h1, c1) = net(obs, (h0, c0))
    actions = q.argmax(-1)
    rewards = (actions == (obs[..., 0] > 0).long()).float()
    return obs, actions, rewards, (h0, c0), (h1, c1)


def gather_to_learner(t, rank, world):
    parts = [torch.empty_like(t) for _ in range(world)] if rank == 0 else None
    dist.gather(t.contiguous(), parts, dst=0)
    return parts


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = RecurrentQ()
    target = RecurrentQ()
    target.load_state_dict(net.state_dict())
    opt = torch.optim.Adam(net.parameters(), lr=1e-3) if rank == 0 else None
    gen = torch.Generator().manual_seed(7 + rank)
    carry = (torch.zeros(1, SEQS_PER_ACTOR, HIDDEN), torch.zeros(1, SEQS_PER_ACTOR, HIDDEN))

    for rnd in range(ROUNDS):
        for p in net.parameters():
            dist.broadcast(p.data, src=0)
        obs, actions, rewards, (h0, c0), carry = act(net, gen, carry)
        g_obs = gather_to_learner(obs, rank, world)
        g_act = gather_to_learner(actions, rank, world)
        g_rew = gather_to_learner(rewards, rank, world)
        g_h0 = gather_to_learner(h0, rank, world)
        g_c0 = gather_to_learner(c0, rank, world)
        if rank == 0:
            obs_b = torch.cat(g_obs)
            act_b = torch.cat(g_act)
            rew_b = torch.cat(g_rew)
            state = (torch.cat(g_h0), torch.cat(g_c0))
            q, _ = net(obs_b, state)
            with torch.no_grad():
                q_next, _ = target(obs_b, state)
                tgt = rew_b[:, :-1] + 0.997 * q_next[:, 1:].max(-1).values
            q_taken = q.gather(-1, act_b[..., None]).squeeze(-1)[:, :-1]
            loss = nn.functional.mse_loss(q_taken, tgt)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 40.0)
            opt.step()
            target.load_state_dict(net.state_dict())
            print(f"round {rnd}: loss {loss.item():.4f} sequences {obs_b.shape[0]}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
