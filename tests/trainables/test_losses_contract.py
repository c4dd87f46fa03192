"""One contract, run over every loss: shapes, masking, finiteness, gradients, learning."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from trainables.losses import LOSSES, build_loss

# Every registered loss, plus the settings that change its code path.
SPECS: list[dict[str, Any]] = [
    {"name": "ce"},
    {"name": "wce", "k": 1.0},
    {"name": "focal", "gamma": 2.0},
    {"name": "focal", "gamma": 0.5},
    {"name": "dice"},
    {"name": "dice", "square": False, "scope": "set"},
    {"name": "tversky", "alpha": 0.3, "beta": 0.7},
    {"name": "tversky", "alpha": 0.7, "beta": 0.3, "scope": "set"},
    {"name": "dsc", "alpha": 0.1},
    {"name": "dsc", "alpha": 0.01, "smooth": 1, "square": True, "scope": "set"},
]
IDS = [",".join(f"{k}={v}" for k, v in spec.items()) for spec in SPECS]


def make(spec: dict[str, Any], n_classes: int) -> torch.nn.Module:
    """Build ``spec``; ``wce`` gets skewed class counts for ``n_classes`` classes."""
    if spec["name"] == "wce":
        counts = [100 * (index + 1) ** 2 for index in range(n_classes)]
        return build_loss({**spec, "class_counts": counts})
    return build_loss(spec)


def test_every_registered_loss_is_covered() -> None:
    assert {spec["name"] for spec in SPECS} == set(LOSSES)


def tagging_batch(dtype: torch.dtype = torch.float32, scale: float = 1.0):
    """``[B=3, L=5, C=4]`` logits with padded (-100) positions in rows 1 and 2."""
    gen = torch.Generator().manual_seed(0)
    logits = (torch.randn(3, 5, 4, generator=gen) * scale).to(dtype)
    target = torch.randint(0, 4, (3, 5), generator=gen)
    target[1, 3:] = -100
    target[2, 1:] = -100
    return logits, target


def mrc_batch(dtype: torch.dtype = torch.float32, scale: float = 1.0):
    """Binary ``[B=2, L=8]`` start logits; the mask hides query tokens and padding."""
    gen = torch.Generator().manual_seed(1)
    logits = (torch.randn(2, 8, generator=gen) * scale).to(dtype)
    target = torch.zeros(2, 8)
    target[0, 4] = 1.0
    target[1, 6] = 1.0
    mask = torch.zeros(2, 8, dtype=torch.bool)
    mask[0, 2:7] = True
    mask[1, 3:8] = True
    return logits, target, mask


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
class TestLossContract:
    def test_sentence_pair_shape(self, spec: dict[str, Any]) -> None:
        logits = torch.randn(6, 2, requires_grad=True)  # (B, C)
        target = torch.tensor([0, 1, 1, 0, 1, 1])
        loss = make(spec, 2)(logits, target)
        assert loss.shape == ()
        loss.backward()
        assert logits.grad is not None and torch.isfinite(logits.grad).all()

    def test_one_logit_binary_shape(self, spec: dict[str, Any]) -> None:
        logits = torch.randn(6, requires_grad=True)  # (B,), sigmoid
        target = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0, 1.0])
        loss = make(spec, 2)(logits, target)
        assert loss.shape == () and torch.isfinite(loss)

    def test_tagging_shape_with_padding(self, spec: dict[str, Any]) -> None:
        logits, target = tagging_batch()
        loss = make(spec, 4)(logits.requires_grad_(), target)
        assert loss.shape == () and torch.isfinite(loss)
        loss.backward()
        # Padded positions receive exactly zero gradient.
        assert logits.grad is not None
        assert torch.all(logits.grad[target == -100] == 0)
        assert torch.any(logits.grad[target != -100] != 0)

    def test_mrc_binary_with_mask(self, spec: dict[str, Any]) -> None:
        logits, target, mask = mrc_batch()
        logits.requires_grad_()
        loss = make(spec, 2)(logits, target, mask)
        loss.backward()
        assert logits.grad is not None
        assert torch.all(logits.grad[~mask] == 0)

    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
    def test_finite_at_extreme_logits(self, spec: dict[str, Any], dtype: torch.dtype) -> None:
        # +-100 in every dtype: p rounds to exactly 0 or 1 (docs/losses.md: the official dsc
        # goes NaN from logit 16.75 in fp32, 8.5 in fp16, 6.25 in bf16).
        logits, target = tagging_batch()
        extreme = (torch.sign(logits) * 100.0).to(dtype).requires_grad_()
        loss = make(spec, 4)(extreme, target)
        loss.backward()
        assert torch.isfinite(loss)
        assert extreme.grad is not None and extreme.grad.dtype == dtype
        assert torch.isfinite(extreme.grad).all()
        binary, btarget, mask = mrc_batch()
        bextreme = (torch.sign(binary) * 100.0).to(dtype).requires_grad_()
        bloss = make(spec, 2)(bextreme, btarget, mask)
        bloss.backward()
        assert torch.isfinite(bloss)
        assert bextreme.grad is not None and torch.isfinite(bextreme.grad).all()

    def test_ignored_positions_change_nothing(self, spec: dict[str, Any]) -> None:
        loss_fn = make(spec, 4)
        logits, target = tagging_batch()
        ignored = target == -100
        first = logits.clone().requires_grad_()
        loss_a = loss_fn(first, target)
        loss_a.backward()
        changed = logits.clone()
        changed[ignored] = torch.randn(int(ignored.sum()), 4) * 1e4
        second = changed.requires_grad_()
        loss_b = loss_fn(second, target)
        loss_b.backward()
        assert loss_a.item() == loss_b.item()
        assert first.grad is not None and second.grad is not None
        assert torch.equal(first.grad, second.grad)

    @pytest.mark.parametrize("fill", [1e4, float("inf"), float("-inf"), float("nan")])
    def test_ignored_binary_positions_change_nothing(
        self, spec: dict[str, Any], fill: float
    ) -> None:
        # MRC models often set the logits outside the context to -inf; whatever the
        # masked (or -100) positions hold must not reach the loss or any gradient.
        loss_fn = make(spec, 2)
        logits, target, mask = mrc_batch()
        target[0, 2] = -100.0
        ignored = ~mask | (target == -100)
        first = logits.clone().requires_grad_()
        loss_a = loss_fn(first, target, mask)
        loss_a.backward()
        second = logits.masked_fill(ignored, fill).requires_grad_()
        loss_b = loss_fn(second, target, mask)
        loss_b.backward()
        assert loss_a.item() == loss_b.item()
        assert first.grad is not None and second.grad is not None
        assert torch.equal(first.grad, second.grad)
        assert torch.all(second.grad[ignored] == 0)

    def test_mask_and_ignore_index_agree(self, spec: dict[str, Any]) -> None:
        loss_fn = make(spec, 4)
        logits, target = tagging_batch()
        mask = target != -100
        relabelled = target.clamp_min(0)  # padding relabelled as class 0, hidden by mask
        assert torch.allclose(loss_fn(logits, target), loss_fn(logits, relabelled, mask))

    def test_gradcheck_float64_with_ignored_positions(self, spec: dict[str, Any]) -> None:
        logits, target = tagging_batch(torch.float64)
        loss_fn = make(spec, 4)
        assert torch.autograd.gradcheck(
            lambda z: loss_fn(z, target), (logits.requires_grad_(),), eps=1e-6, atol=1e-5
        )
        binary, btarget, mask = mrc_batch(torch.float64)
        bloss = make(spec, 2)
        assert torch.autograd.gradcheck(
            lambda z: bloss(z, btarget, mask), (binary.requires_grad_(),), eps=1e-6, atol=1e-5
        )

    def test_half_precision_matches_float32(self, spec: dict[str, Any]) -> None:
        logits, target = tagging_batch()
        loss_fn = make(spec, 4)
        full = loss_fn(logits, target)
        half = loss_fn(logits.to(torch.bfloat16), target)
        assert half.dtype == torch.float32  # computed in float32
        assert torch.allclose(full, half, rtol=0.05, atol=0.02)

    def test_all_positions_ignored_gives_zero(self, spec: dict[str, Any]) -> None:
        logits = torch.randn(2, 3, 4, requires_grad=True)
        target = torch.full((2, 3), -100)
        loss = make(spec, 4)(logits, target)
        loss.backward()
        assert torch.isfinite(loss)
        assert logits.grad is not None and torch.all(logits.grad == 0)

    def test_converges_on_a_toy_tagging_problem(self, spec: dict[str, Any]) -> None:
        # A linear tagger on separable features with a 90%-negative class 0: every
        # loss must learn to tag the minority classes.
        gen = torch.Generator().manual_seed(0)
        n, dim, n_classes = 512, 8, 3
        labels = torch.zeros(n, dtype=torch.long)
        labels[: n // 20] = 1
        labels[n // 20 : n // 10] = 2
        centers = torch.randn(n_classes, dim, generator=gen) * 3
        features = centers[labels] + torch.randn(n, dim, generator=gen)
        model = torch.nn.Linear(dim, n_classes)
        torch.manual_seed(0)
        model.reset_parameters()
        loss_fn = make(spec, n_classes)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
        for _ in range(150):
            optimizer.zero_grad()
            loss_fn(model(features), labels).backward()
            optimizer.step()
        predicted = model(features).argmax(-1)
        for cls in (1, 2):
            recall = (predicted[labels == cls] == cls).float().mean().item()
            assert recall > 0.9, f"class {cls} recall {recall:.2f}"


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_shape_mismatch_is_a_clear_error(name: str) -> None:
    loss_fn = make({"name": name}, 4)
    with pytest.raises(ValueError, match="fit neither form"):
        loss_fn(torch.randn(3, 5, 4), torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="mask must have the shape of target"):
        loss_fn(torch.randn(3, 5, 4), torch.zeros(3, 5, dtype=torch.long), torch.ones(3, 4))
