import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

OBS_DIM = 10
UNROLL = 40
ROUNDS = 4
GAMES = [("catch", 3), ("maze", 4), ("paddle", 6)]


class ToyGame:
    def __init__(self, name, n_actions, seed):
        self.name, self.n_actions = name, n_actions
        self.g = torch.Generator().manual_seed(seed)

    def reset(self):
        return torch.randn(OBS_DIM, generator=self.g)

    def random_action(self):
        return int(torch.randint(0, self.n_actions, (1,), generator=self.g))

    def step(self, action):
        if not 0 <= action < self.n_actions:
            raise ValueError(f"{self.name}: invalid action {action}")
        reward = 1.0 if action == self.n_actions - 1 else 0.0
        return torch.randn(OBS_DIM, generator=self.g), reward


def make_env(game_index, seed):
    name, n = GAMES[game_index % len(GAMES)]
    return ToyGame(name, n, seed)


class Policy(nn.Module):
    def __init__(self, n_actions):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(OBS_DIM, 64), nn.ReLU())
        self.pi = nn.Linear(64, n_actions)
        self.v = nn.Linear(64, 1)

    def forward(self, x):
        h = self.body(x)
        return self.pi(h), self.v(h).squeeze(-1)


def unroll(env, net, eps, gen):
    obs, acts, rews = [], [], []
    o = env.reset()
    for _ in range(UNROLL):
        if torch.rand(1, generator=gen).item() < eps:
            a = env.random_action()
        else:
            with torch.no_grad():
                a = int(net(o)[0].argmax())
        nxt, r = env.step(a)
        obs.append(o)
        acts.append(float(a))
        rews.append(r)
        o = nxt
    return torch.cat([torch.stack(obs), torch.tensor(acts)[:, None], torch.tensor(rews)[:, None]], dim=1)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    probe = make_env(0, seed=0)
    net = Policy(probe.n_actions)
    if rank == 0:
        opt = torch.optim.RMSprop(net.parameters(), lr=5e-4)
    else:
        env = make_env(rank - 1, seed=rank)
        gen = torch.Generator().manual_seed(100 + rank)
        print(f"actor {rank}: playing {env.name} ({env.n_actions} actions)", flush=True)

    for rnd in range(ROUNDS):
        for p in net.parameters():
            dist.broadcast(p.data, src=0)
        traj = torch.zeros(UNROLL, OBS_DIM + 2) if rank == 0 else unroll(env, net, 0.3, gen)
        parts = [torch.zeros(UNROLL, OBS_DIM + 2) for _ in range(world)] if rank == 0 else None
        dist.gather(traj, parts, dst=0)
        if rank != 0:
            continue
        batch = torch.stack(parts[1:])
        obs, act, rew = batch[..., :OBS_DIM], batch[..., OBS_DIM].long(), batch[..., OBS_DIM + 1]
        logits, values = net(obs)
        returns = torch.zeros_like(rew)
        running = values[:, -1].detach()
        for t in reversed(range(UNROLL)):
            running = rew[:, t] + 0.99 * running
            returns[:, t] = running
        adv = (returns - values).detach()
        logp = F.log_softmax(logits, -1).gather(-1, act[..., None]).squeeze(-1)
        entropy = -(F.softmax(logits, -1) * F.log_softmax(logits, -1)).sum(-1).mean()
        loss = -(logp * adv).mean() + 0.5 * (returns - values).pow(2).mean() - 0.01 * entropy
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"round {rnd}: loss {loss.item():.4f} return/unroll {rew.sum(1).mean().item():.2f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
