"""The order a trial's training examples are batched in."""

from __future__ import annotations

import random

from trainables.loop import GROUP_BATCHES, epoch_order, grouped_order


def padded_tokens(lengths: list[int], order: list[int], batch: int) -> int:
    """Tokens a batch-by-batch dynamic padding computes: longest in batch x batch size."""
    chunks = [order[i : i + batch] for i in range(0, len(order), batch)]
    return sum(max(lengths[j] for j in chunk) * len(chunk) for chunk in chunks)


def test_length_grouped_order_is_a_reproducible_shuffle_with_less_padding() -> None:
    rng = random.Random(0)
    lengths = [rng.randint(8, 128) for _ in range(2000)]
    order = grouped_order(lengths, seed=3, epoch=1, batch_size=16)
    assert sorted(order) == list(range(2000))  # every example, once
    assert order == grouped_order(lengths, seed=3, epoch=1, batch_size=16)  # a resume
    assert order != grouped_order(lengths, seed=3, epoch=2, batch_size=16)
    group = GROUP_BATCHES * 16
    # Each group holds the examples of that stretch of the plain shuffle, longest first.
    plain = epoch_order(2000, 3, 1)
    assert set(order[:group]) == set(plain[:group])
    assert [lengths[j] for j in order[:group]] == sorted(
        (lengths[j] for j in plain[:group]), reverse=True
    )
    assert padded_tokens(lengths, order, 16) < 0.7 * padded_tokens(lengths, plain, 16)
