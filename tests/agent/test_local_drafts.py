"""The local policy's prompt-lookup drafts (agent/policies/local.py): a greedy answer checked several tokens a pass
is the answer of one token a pass, with the same logprobs, in fewer passes."""

import pytest

from agent.policies import local
from agent.policies.local import LocalPolicy, draft
from trainer.model import save_tiny_untrained

# the untrained tiny model repeats itself: its answer is text it wrote before, which the drafts find
MESSAGES = [{"role": "system", "content": "Act on the screen."},
            {"role": "user", "content": 'Task: click "ok ok ok ok".\n[button] "ok ok ok ok" x=10, y=20'}]


def test_draft_takes_what_followed_the_answers_latest_or_the_prompts_first_occurrence_of_the_longest_tail():
    # the prompt is [1, 2, 3, 9, 1, 2, 3, 7, 8], the answer so far [5, 1, 2, 3, 4, 1, 2, 3]
    assert draft([1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3, 4, 1, 2, 3], 9, limit=2) == [4, 1]  # the answer's own
    assert draft([1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3], 9, limit=2) == [9, 1]  # the prompt's first [1, 2, 3]
    assert draft([5, 6, 4, 6], 2, limit=3) == [4, 6]  # only [6] occurs before: what followed it
    # an earlier answer of the policy before the prompt: [4, 6] followed by [7, 7]
    assert draft([4, 6, 1, 9, 4, 6], 4, limit=2, recent=[[3, 4, 6, 7, 7]]) == [7, 7]
    assert draft([1, 2, 3], 3, limit=3) == [] and draft([], 0, limit=3) == []


def counting(policy):
    calls = []
    forward = policy.model.forward

    def counted(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[1])
        return forward(*args, **kwargs)

    policy.model.forward = counted
    return calls


def test_drafted_greedy_answers_equal_one_token_a_pass_in_fewer_passes(tmp_path, monkeypatch):
    policy = LocalPolicy(save_tiny_untrained(tmp_path / "ck", seed=5), max_new_tokens=40, stop_at_action=False)
    passes = counting(policy)
    drafted = policy.act(MESSAGES)
    drafted_passes = len(passes)
    monkeypatch.setattr(local, "DRAFT_TOKENS", 0)
    passes.clear()
    plain = policy.act(MESSAGES)
    assert drafted.error is None and plain.error is None
    assert drafted.token_ids == plain.token_ids and len(plain.token_ids) == 40
    assert drafted.token_logprobs == pytest.approx(plain.token_logprobs, abs=1e-4)
    assert len(passes) == 40 and drafted_passes < 40 and max(passes[1:]) == 1


def test_a_draft_the_model_refuses_changes_nothing(tmp_path, monkeypatch):
    """Tokens drafted past the first the model would not write were read into the cache; they must leave it."""
    policy = LocalPolicy(save_tiny_untrained(tmp_path / "ck", seed=4), max_new_tokens=24, stop_at_action=False)
    monkeypatch.setattr(local, "DRAFT_TOKENS", 0)
    plain = policy.act(MESSAGES)
    monkeypatch.setattr(local, "DRAFT_TOKENS", 6)
    monkeypatch.setattr(local, "draft", lambda context, start, limit, recent: [context[-1], 11, 12, 13, 14, 15][:limit])
    refused = policy.act(MESSAGES)
    assert refused.token_ids == plain.token_ids
    assert refused.token_logprobs == pytest.approx(plain.token_logprobs, abs=1e-4)


@pytest.mark.parametrize("capabilities, expected", [
    ({"avx2": True}, False),  # an AVX2 CPU (Zen 3)
    ({"avx512_f": True, "avx512_bw": True, "avx512_vnni": True, "avx512_bf16": False}, False),  # Ice Lake: emulated
    ({"avx512_f": True, "avx512_bf16": True}, True),  # Cooper Lake, Zen 4
    ({"avx512_f": True, "avx512_bf16": False, "amx_bf16": True}, True),  # Sapphire Rapids
])
def test_bfloat16_only_where_the_cpu_multiplies_it_in_hardware(monkeypatch, capabilities, expected):
    # oneDNN's own test says yes for any AVX-512 CPU, where bfloat16 products are several times slower than float32
    from types import SimpleNamespace

    import torch

    from trainer.model import cpu_bf16

    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)
    assert local.cpu_multiplies_bf16() is expected and cpu_bf16() is expected  # the trainer's autocast asks the same
    smollm2 = SimpleNamespace(config=SimpleNamespace(get_text_config=lambda: SimpleNamespace(hidden_size=576)))
    assert local._bf16_fits(smollm2) is expected
