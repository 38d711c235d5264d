"""core_algos against numbers worked out by hand (the arithmetic is in each test's comments)."""

import math

import pytest
import torch

from trainer import core_algos as A


def test_gae_with_lambda_half_matches_hand_computation():
    # t2: delta = 1 - 0.7 = 0.3 -> A2 = 0.3
    # t1: delta = 0.7 - 0.6 = 0.1 -> A1 = 0.1 + 0.5 * 0.3 = 0.25
    # t0: delta = 0.6 - 0.5 = 0.1 -> A0 = 0.1 + 0.5 * 0.25 = 0.225
    adv, ret = A.gae(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.5, 0.6, 0.7]),
                     torch.tensor([0.0, 0.0, 1.0]), gamma=1.0, lam=0.5)
    assert adv.tolist() == pytest.approx([0.225, 0.25, 0.3])
    assert ret.tolist() == pytest.approx([0.725, 0.85, 1.0])


def test_gae_with_lambda_one_gives_monte_carlo_returns():
    # gamma 0.9, values 0: G2 = 2, G1 = 0 + 0.9 * 2 = 1.8, G0 = 1 + 0.9 * 1.8 = 2.62
    adv, ret = A.gae(torch.tensor([1.0, 0.0, 2.0]), torch.zeros(3), torch.tensor([0.0, 0.0, 1.0]),
                     gamma=0.9, lam=1.0)
    assert ret.tolist() == pytest.approx([2.62, 1.8, 2.0])
    assert adv.tolist() == pytest.approx([2.62, 1.8, 2.0])


def test_gae_does_not_bootstrap_across_done():
    # two one-step episodes end to end: A1 = 2 - 0.5, A0 = 1 - 0.5 (nothing flows back from t1)
    adv, _ = A.gae(torch.tensor([1.0, 2.0]), torch.tensor([0.5, 0.5]), torch.tensor([1.0, 1.0]),
                   gamma=1.0, lam=1.0)
    assert adv.tolist() == pytest.approx([0.5, 1.5])


def test_gae_batched_with_one_lambda_per_row():
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    values = torch.tensor([[0.5, 0.6, 0.7], [0.5, 0.6, 0.7]])
    dones = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    adv, ret = A.gae(rewards, values, dones, gamma=1.0, lam=torch.tensor([0.5, 1.0]))
    assert adv[0].tolist() == pytest.approx([0.225, 0.25, 0.3])
    # lam 1: A = G - V = [1 - 0.5, 1 - 0.6, 1 - 0.7]
    assert adv[1].tolist() == pytest.approx([0.5, 0.4, 0.3])
    assert ret[1].tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_length_adaptive_lambda():
    # 1 - 1 / (0.05 * L): L=100 -> 0.8, L=40 -> 0.5, L=1000 -> 0.98; L=10 -> -1, clamped to 0
    lam = A.length_adaptive_lambda(torch.tensor([100, 40, 1000, 10]), alpha=0.05)
    assert lam.tolist() == pytest.approx([0.8, 0.5, 0.98, 0.0])
    assert float(A.length_adaptive_lambda(200, 0.1)) == pytest.approx(0.95)


def test_group_advantages_normalise_within_each_group():
    # group a: mean 0.5, population std 0.5 -> [+1, -1]; group b: all equal -> 0
    adv = A.group_advantages(torch.tensor([1.0, 0.0, 1.0, 1.0]), ["a", "a", "b", "b"])
    assert adv.tolist() == pytest.approx([1.0, -1.0, 0.0, 0.0], abs=1e-5)
    # one group [3, 1, 2]: mean 2, std sqrt(2/3) = 0.81650 -> [1.22474, -1.22474, 0]
    adv = A.group_advantages(torch.tensor([3.0, 1.0, 2.0]), ["g", "g", "g"])
    assert adv.tolist() == pytest.approx([1.224744, -1.224744, 0.0], abs=1e-5)


def test_group_of_one_gets_zero_advantage():
    assert A.group_advantages(torch.tensor([1.0, 0.0]), ["x", "y"]).tolist() == [0.0, 0.0]


def test_void_turn_mask_masks_whole_trajectory():
    # trajectory 0 has a void second turn: both of its turns go; trajectories 1 and 2 stay
    mask = A.void_turn_mask([False, True, False, False, False], [0, 0, 1, 2, 2])
    assert mask.tolist() == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert A.void_turn_mask([False, False], ["a", "b"]).tolist() == [1.0, 1.0]


def test_ppo_clip_loss_uses_decoupled_bounds():
    # ratios 1.5, 1.5, 0.5, 0.5 with advantages +1, -1, +1, -1 and eps 0.2 / 0.28:
    #   r=1.5, A=+1: min(1.5, 1.28)  = 1.28 -> loss -1.28 (clipped)
    #   r=1.5, A=-1: min(-1.5, -1.28) = -1.5 -> loss  1.5
    #   r=0.5, A=+1: min(0.5, 0.8)   = 0.5  -> loss -0.5
    #   r=0.5, A=-1: min(-0.5, -0.8) = -0.8 -> loss  0.8 (clipped)
    logp = torch.log(torch.tensor([[1.5, 1.5, 0.5, 0.5]]))
    old = torch.zeros(1, 4)
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    loss, clip_frac = A.ppo_clip_loss(logp, old, adv, torch.ones(1, 4), eps_low=0.2, eps_high=0.28)
    assert float(loss) == pytest.approx((-1.28 + 1.5 - 0.5 + 0.8) / 4)
    assert float(clip_frac) == pytest.approx(0.5)
    masked, _ = A.ppo_clip_loss(logp, old, adv, torch.tensor([[0.0, 1.0, 1.0, 1.0]]), 0.2, 0.28)
    assert float(masked) == pytest.approx((1.5 - 0.5 + 0.8) / 3)


def test_ppo_clip_loss_gradient_vanishes_when_clipped():
    logp = torch.log(torch.tensor([1.5])).requires_grad_()
    loss, _ = A.ppo_clip_loss(logp, torch.zeros(1), torch.ones(1), torch.ones(1), 0.2, 0.28)
    loss.backward()
    assert float(logp.grad) == 0.0


def test_dpo_loss_matches_hand_computation():
    # rewards 0.5 * (-1 - -2) = 0.5 and 0.5 * (-3 - -2) = -0.5; margin 1; loss = log(1 + e^-1)
    loss, chosen, rejected = A.dpo_loss(torch.tensor([-1.0]), torch.tensor([-3.0]),
                                        torch.tensor([-2.0]), torch.tensor([-2.0]), beta=0.5)
    assert float(loss) == pytest.approx(math.log(1 + math.exp(-1)))
    assert chosen.tolist() == pytest.approx([0.5])
    assert rejected.tolist() == pytest.approx([-0.5])


def test_masked_mean_of_empty_mask_is_zero():
    assert float(A.masked_mean(torch.tensor([1.0, 2.0]), torch.zeros(2))) == 0.0
