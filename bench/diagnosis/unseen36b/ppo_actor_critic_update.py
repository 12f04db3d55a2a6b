"""PPO update for a shared-trunk actor-critic: policy and value heads trained with separate optimizers."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

OBS, ACT, HID = 12, 5, 64
ROLLOUT, MINIBATCH, EPOCHS = 64, 16, 2
CLIP, GAMMA, LAM = 0.2, 0.99, 0.95


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(OBS, HID), nn.Tanh(), nn.Linear(HID, HID), nn.Tanh())
        self.pi = nn.Linear(HID, ACT)
        self.v = nn.Linear(HID, 1)

    def forward(self, obs):
        h = self.trunk(obs)
        return self.pi(h), self.v(h).squeeze(-1)


def collect(model, gen):
    obs = torch.randn(ROLLOUT, OBS, generator=gen)
    with torch.no_grad():
        logits, values = model(obs)
        dist_ = torch.distributions.Categorical(logits=logits)
        actions = dist_.sample()
        logp = dist_.log_prob(actions)
    rewards = (actions == obs[:, :ACT].argmax(1)).float()
    dones = (torch.rand(ROLLOUT, generator=gen) < 0.05).float()
    adv = torch.zeros(ROLLOUT)
    last = 0.0
    for t in reversed(range(ROLLOUT)):
        nv = values[t + 1] if t + 1 < ROLLOUT else 0.0
        delta = rewards[t] + GAMMA * nv * (1 - dones[t]) - values[t]
        last = delta + GAMMA * LAM * (1 - dones[t]) * last
        adv[t] = last
    return obs, actions, logp, adv, adv + values


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(ActorCritic())
    actor_params = list(model.module.trunk.parameters()) + list(model.module.pi.parameters())
    actor_opt = torch.optim.Adam(actor_params, lr=3e-4)
    critic_opt = torch.optim.Adam(model.module.v.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(100 + rank)

    for it in range(3):
        obs, actions, old_logp, adv, returns = collect(model.module, gen)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        for epoch in range(EPOCHS):
            perm = torch.randperm(ROLLOUT, generator=gen)
            for start in range(0, ROLLOUT, MINIBATCH):
                idx = perm[start:start + MINIBATCH]
                logits, values = model(obs[idx])
                dist_ = torch.distributions.Categorical(logits=logits)
                ratio = torch.exp(dist_.log_prob(actions[idx]) - old_logp[idx])
                surr = torch.min(ratio * adv[idx], ratio.clamp(1 - CLIP, 1 + CLIP) * adv[idx])
                policy_loss = -surr.mean() - 0.01 * dist_.entropy().mean()
                value_loss = 0.5 * (values - returns[idx]).pow(2).mean()

                actor_opt.zero_grad()
                critic_opt.zero_grad()
                policy_loss.backward(retain_graph=True)
                value_loss.backward()
                actor_opt.step()
                critic_opt.step()
        if rank == 0:
            print(f"iter {it}: policy {policy_loss.item():.4f} value {value_loss.item():.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
