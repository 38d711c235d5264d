"""How a text SFT run deals its rows (trainer/trl_trainers.py LengthBatches): batches of like length, in a shuffled
order each pass, every row once a pass; the Trainer's group_by_length put each megabatch's short rows last, so a short
run never saw one task's rows (the cold start's focus-text at 30 steps)."""
from trainer.trl_trainers import LengthBatches


def test_batches_hold_rows_of_like_length_in_a_shuffled_order_every_row_once_a_pass():
    lengths = [100 + 10 * (i % 3) for i in range(30)]  # three tasks' row lengths, interleaved
    sampler = LengthBatches(lengths, batch=5, seed=0)
    passes = [list(sampler) for _ in range(2)]
    for order in passes:
        assert sorted(order) == list(range(30))
        batches = [order[i:i + 5] for i in range(0, 30, 5)]
        assert all(len({lengths[i] for i in batch}) == 1 for batch in batches)  # no padding
    firsts = [[lengths[order[i]] for i in range(0, 30, 5)] for order in passes]
    assert firsts[0] != sorted(firsts[0], reverse=True)  # not longest first
    assert passes[0] != passes[1]  # another order each pass
    assert len({lengths[i] for i in passes[0][:15]}) > 1  # the first half of a pass already has several lengths
