"""The SFT loss with the output layer run only at the learnt positions (trainer/trl_trainers.py answer_loss) is the
loss of the whole logits: the same value and the same gradients, on rows of different lengths padded into one batch,
with a LoRA as the cycles train it."""
import torch
from peft import LoraConfig, get_peft_model

from trainer.model import build_tiny
from trainer.trl_trainers import answer_loss, answer_positions, keeps_logits


def _batch(vocab: int):
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (3, 24), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 18:] = 0  # a shorter row, padded
    labels = torch.full_like(ids, -100)
    labels[0, 15:] = ids[0, 15:]  # each row's answer: its last tokens
    labels[1, 10:18] = ids[1, 10:18]
    labels[2, 20:] = ids[2, 20:]
    return ids, mask, labels


def test_the_answer_only_loss_and_its_gradients_equal_the_whole_logits_loss():
    model = get_peft_model(build_tiny(seed=1)[0], LoraConfig(r=4, target_modules="all-linear", lora_dropout=0.0))
    model.train()
    assert keeps_logits(model)
    ids, mask, labels = _batch(model.config.vocab_size)
    count = (labels[:, 1:] != -100).sum()

    whole = model(input_ids=ids, attention_mask=mask, labels=labels, num_items_in_batch=count)
    whole.loss.backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    model.zero_grad()

    kept = model(input_ids=ids, attention_mask=mask, logits_to_keep=answer_positions(labels))
    assert kept.logits.shape[0] == int(count)  # one row of logits a learnt token, not a row a position
    loss = answer_loss(kept, labels, num_items_in_batch=count)
    loss.backward()
    torch.testing.assert_close(loss, whole.loss, rtol=1e-5, atol=1e-6)
    for name, grad in expected.items():
        torch.testing.assert_close(dict(model.named_parameters())[name].grad, grad, rtol=1e-4, atol=1e-6)


def test_without_a_count_the_loss_is_the_mean_over_the_learnt_tokens():
    model = build_tiny(seed=2)[0]
    ids, mask, labels = _batch(model.config.vocab_size)
    with torch.no_grad():
        whole = model(input_ids=ids, attention_mask=mask, labels=labels)
        kept = model(input_ids=ids, attention_mask=mask, logits_to_keep=answer_positions(labels))
    torch.testing.assert_close(answer_loss(kept, labels), whole.loss, rtol=1e-5, atol=1e-6)


def test_a_batch_without_a_learnt_token_has_a_zero_loss_not_nan():
    model = build_tiny(seed=3)[0]
    ids, mask, labels = _batch(model.config.vocab_size)
    labels[:] = -100
    kept = model(input_ids=ids, attention_mask=mask, logits_to_keep=answer_positions(labels))
    assert kept.logits.shape[0] == 0
    assert answer_loss(kept, labels).item() == 0.0
    assert answer_loss(kept, labels, num_items_in_batch=torch.tensor(0)).item() == 0.0
