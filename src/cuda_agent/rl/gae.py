"""Generalised advantage estimation over a multi-turn token stream: the critic's
targets in value pretraining and PPO, written out so the stage's contract is
checkable (CI compares it with verl's `compute_gae_advantage_return`).

Contract: `gae(rewards, values, mask, gamma, lam)` treats only sampled tokens
(mask 1) as time steps: observation tokens are skipped, so the value after a
model turn bootstraps from the first token of the next model turn, and a reward
placed on a masked token is lost (hence rollouts end on a sampled token).
Returns (advantages, returns) per position; both are 0 at masked positions.
With gamma = 1 and the outcome reward R on the last sampled token, the return at
the last sampled token is R, and at earlier ones it mixes R with the critic's
own later values by lam (0.95 in the paper).
Not guaranteed: whitening (verl whitens advantages afterwards; returns are not).
"""

from __future__ import annotations


def gae(
    rewards: list[float], values: list[float], mask: list[int], gamma: float = 1.0, lam: float = 0.95
) -> tuple[list[float], list[float]]:
    if not len(rewards) == len(values) == len(mask):
        raise ValueError("rewards, values and mask must have one entry per response token")
    adv = [0.0] * len(mask)
    next_value, next_adv = 0.0, 0.0
    for t in reversed([i for i, m in enumerate(mask) if m]):
        delta = rewards[t] + gamma * next_value - values[t]
        next_adv = delta + gamma * lam * next_adv
        next_value = values[t]
        adv[t] = next_adv
    returns = [a + v if m else 0.0 for a, v, m in zip(adv, values, mask, strict=True)]
    return adv, returns
