"""The precision a trial trains in: losses are computed in fp32 under any autocast, and
``training.precision`` resolves per device (``trainables.precision``)."""

from __future__ import annotations

import copy
import dataclasses
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from search_spaces.sections import TrainingSpec
from trainables.losses import build_loss
from trainables.precision import (
    PrecisionUnavailableError,
    autocast,
    batch_loss,
    cpu_bf16_speedup,
    cpu_has_native_bf16,
    grad_scaler,
    resolve,
)
from trainables.step import step_context, train_step
from trainables.tasks.tagging import Tagging

CPU = torch.device("cpu")
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
# The loss family whose sums and denominators a 16-bit product would round (dice,
# Tversky, DSC), and cross-entropy.
LOSSES = [
    {"name": "ce"},
    {"name": "dice", "smooth": 1.0},
    {"name": "tversky", "alpha": 0.3, "beta": 0.7},
    {"name": "dsc", "alpha": 0.1},
]


def tagging_batch(seed: int = 0) -> tuple[Tagging, dict[str, torch.Tensor], torch.Tensor]:
    """A token-classification task, a batch of 16 sequences of 24 tokens (some tags
    ignored) and bf16 logits ``(16, 24, 5)`` as a bf16 forward pass gives them."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, len(TAGS), (16, 24), generator=generator)
    labels[:, -4:] = -100  # padding and later sub-words
    logits = (3 * torch.randn(16, 24, len(TAGS), generator=generator)).to(torch.bfloat16)
    return Tagging(TAGS), {"labels": labels}, logits


@pytest.mark.parametrize("spec", LOSSES, ids=lambda spec: spec["name"])
def test_a_loss_asked_under_bf16_autocast_is_computed_in_fp32(spec: dict[str, Any]) -> None:
    """The step's loss (``batch_loss``) of bf16 logits, asked inside a bf16 autocast
    region, is the fp32 loss of the same logits: its matrix products and sums are
    not rounded to bf16."""
    task, batch, logits = tagging_batch()
    loss_fn = build_loss(spec, labels=TAGS)
    expected = loss_fn(logits.float(), batch["labels"])  # plain fp32, no autocast
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = batch_loss(task.loss, SimpleNamespace(logits=logits), batch, loss_fn, CPU)
    assert expected.dtype == torch.float32
    assert got.dtype == torch.float32
    assert float(got) == pytest.approx(float(expected), abs=1e-6, rel=0)


class TinyTagger(nn.Module):
    """Embeddings and a linear layer: logits ``(B, L, C)`` as a tagger's outputs."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(50, 32)
        self.head = nn.Linear(32, len(TAGS))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        return SimpleNamespace(logits=self.head(self.embed(input_ids)))


@pytest.mark.parametrize("spec", LOSSES[1:], ids=lambda spec: spec["name"])
def test_a_bf16_training_step_reports_the_fp32_loss_of_its_bf16_logits(
    spec: dict[str, Any],
) -> None:
    """``train_step`` under ``precision: bf16`` takes its loss in fp32 from the bf16
    logits: a loss computed inside the autocast region would differ by bf16's rounding."""
    task, batch, _ = tagging_batch()
    ids = torch.randint(0, 50, batch["labels"].shape, generator=torch.Generator().manual_seed(1))
    batch = {**batch, "input_ids": ids, "attention_mask": torch.ones_like(ids)}
    model, training = TinyTagger(), TrainingSpec(precision="bf16", learning_rate=1e-3)
    loss_fn = build_loss(spec, labels=TAGS)
    with torch.no_grad(), autocast(CPU, "bf16"):
        logits = copy.deepcopy(model)(ids, batch["attention_mask"]).logits
    assert logits.dtype == torch.bfloat16
    expected = float(loss_fn(logits.float(), batch["labels"]))
    context = step_context(model, task, loss_fn, training, CPU, total_steps=10)
    assert context.precision == "bf16" and not context.scaler.is_enabled()
    got = train_step(context, [batch])
    assert got == pytest.approx(expected, abs=1e-6, rel=0)


@pytest.mark.parametrize(
    ("native", "speedup", "width"),
    [(True, 2.0, 384), (True, 1.3, 384), (True, 0.55, 384), (False, 2.0, 384), (True, 2.0, None)],
    ids=["faster", "marginal", "slower", "not-native", "no-width"],
)
def test_auto_on_a_cpu_is_fp32_whatever_the_chip_measures(
    monkeypatch: pytest.MonkeyPatch, native: bool, speedup: float, width: int | None
) -> None:
    """No timing decides ``auto`` on a CPU: a probe near its bar chose bf16 in one process
    and fp32 in the other for the same trial, so the same spec gave other numbers."""
    import trainables.precision as precision

    measured: list[int] = []
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    monkeypatch.setattr(
        precision, "cpu_bf16_speedup", lambda width: measured.append(width) or speedup
    )
    precision.resolve.cache_clear()
    try:
        assert precision.resolve("auto", CPU, width) == "fp32"
        assert measured == []  # nothing timed
        assert precision.resolve("bf16", CPU, width) == "bf16"  # an explicit setting stands
    finally:
        precision.resolve.cache_clear()


def test_the_bf16_probe_times_both_precisions_on_this_cpu() -> None:
    """The real measurement: a finite positive ratio, the thread count left as it was."""
    threads = torch.get_num_threads()
    speedup = cpu_bf16_speedup(64, threads=1)
    # Without native bf16 (an AMD EPYC without AVX-512 BF16) the emulated product ran
    # at 0.02-0.03x; with it, 0.4-2x: finite and positive either way.
    assert 0.001 < speedup < 50
    assert torch.get_num_threads() == threads


def test_bf16_asked_for_where_it_is_measured_slower_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import trainables.precision as precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(precision, "cpu_bf16_speedup", lambda width: 0.55)
    precision.resolve.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="trainables.precision"):
            assert precision.resolve("bf16", CPU, 384) == "bf16"  # asked for: it stands
    finally:
        precision.resolve.cache_clear()
    assert "runs 0.55x as fast as fp32's on this CPU" in caplog.text


def test_explicit_settings_stand_on_a_cpu() -> None:
    assert resolve("auto", CPU) == "fp32"
    assert resolve("fp32", CPU) == "fp32"
    assert resolve("bf16", CPU) == "bf16"
    assert not grad_scaler(CPU, "fp32").is_enabled()
    assert not grad_scaler(CPU, "bf16").is_enabled()
    assert isinstance(autocast(CPU, "fp32"), type(autocast(CPU, "fp32")))
    with autocast(CPU, "bf16"):
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
        assert torch.is_autocast_enabled("cpu")
    with autocast(CPU, "fp32"):
        assert not torch.is_autocast_enabled("cpu")


def test_fp16_off_a_gpu_is_refused_naming_the_field() -> None:
    with pytest.raises(PrecisionUnavailableError, match=r"^training\.precision: fp16 needs"):
        resolve("fp16", CPU)


def test_native_bf16_is_read_from_the_cpu_flags(tmp_path: Path) -> None:
    def flags(line: str) -> bool:
        info = tmp_path / f"cpuinfo-{len(list(tmp_path.iterdir()))}"
        info.write_text(f"processor\t: 0\nflags\t\t: {line}\n")
        return cpu_has_native_bf16(info)

    assert flags("fpu sse2 avx2 avx512f avx512_bf16")
    assert flags("fpu amx_tile amx_bf16")
    assert not flags("fpu sse2 avx2 avx512f avx512bw")
    assert not cpu_has_native_bf16(tmp_path / "missing")


def test_bf16_on_a_cpu_without_native_bf16_is_logged_as_slow(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import trainables.precision as precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    precision.resolve.cache_clear()
    with caplog.at_level(logging.WARNING, logger="trainables.precision"):
        assert precision.resolve("bf16", CPU) == "bf16"
    precision.resolve.cache_clear()
    assert "emulated, slower than fp32" in caplog.text


@pytest.mark.parametrize(
    ("old", "new"), [(True, "bf16"), (False, "fp32"), ("auto", "auto")], ids=str
)
def test_the_older_bf16_flag_reads_as_a_precision(old: Any, new: str) -> None:
    assert TrainingSpec.model_validate({"bf16": old}).precision == new
    assert "bf16" not in TrainingSpec.model_validate({"bf16": old}).model_dump()


@pytest.mark.parametrize(("has_bf16", "expected"), [(True, "bf16"), (False, "fp16")])
def test_auto_on_a_gpu_is_bf16_where_it_has_bf16_else_fp16(
    monkeypatch: pytest.MonkeyPatch, has_bf16: bool, expected: str
) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *_, **__: has_bf16)
    resolve.cache_clear()
    try:
        assert resolve("auto", torch.device("cuda")) == expected
        assert resolve("fp16", torch.device("cuda")) == "fp16"
    finally:
        resolve.cache_clear()


def test_a_scaled_step_updates_the_weights_as_the_plain_step_does() -> None:
    """fp16's step (the loss scaled by a power of two, the gradients unscaled before
    clipping, the fused AdamW step through the scaler) moves the weights as the plain
    fp32 step does: the scaler changes how gradients are held, not what they are. Run
    in fp32 on a CPU, since fp16 needs a GPU."""
    task, batch, _ = tagging_batch()
    ids = torch.randint(0, 50, batch["labels"].shape, generator=torch.Generator().manual_seed(1))
    batch = {**batch, "input_ids": ids, "attention_mask": torch.ones_like(ids)}
    training = TrainingSpec(precision="fp32", learning_rate=1e-2, grad_clip=0.5)
    loss_fn = build_loss({"name": "dice"}, labels=TAGS)
    weights = []
    for enabled in (False, True):
        model = TinyTagger()
        context = dataclasses.replace(
            step_context(model, task, loss_fn, training, CPU, total_steps=10),
            scaler=torch.amp.GradScaler("cpu", init_scale=2.0**16, enabled=enabled),
        )
        for _ in range(3):
            train_step(context, [batch])
        weights.append(model.head.weight.detach().clone())
    assert not torch.equal(weights[0], TinyTagger().head.weight)  # the steps moved it
    torch.testing.assert_close(weights[1], weights[0], rtol=1e-5, atol=1e-6)


def test_a_trial_on_auto_trains_in_fp32_on_a_cpu_where_bf16_would_be_faster(
    toy_home: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real trial (tiny-bert, in process) on ``auto``, on a CPU whose bf16 products
    would run twice as fast: fp32, and every report says so."""
    import trainables.precision as precision
    from tests.trainables.test_train import Recorder, toy_config
    from trainables.train import run_trial

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(precision, "cpu_bf16_speedup", lambda w: 2.0)
    precision.resolve.cache_clear()
    try:
        recorder = Recorder()
        assert run_trial(toy_config(epochs=1), recorder, toy_home)["precision"] == "fp32"
    finally:
        precision.resolve.cache_clear()
    assert [report["precision"] for report in recorder.reports] == ["fp32"]


def test_a_trial_reports_the_precision_it_trained_in(toy_home: Any) -> None:
    from tests.trainables.test_train import Recorder, toy_config
    from trainables.train import run_trial

    plain = Recorder()
    fp32 = run_trial(toy_config(epochs=1, precision="fp32"), plain, toy_home)
    assert fp32["precision"] == "fp32"
    assert [report["precision"] for report in plain.reports] == ["fp32"]
    bf16 = run_trial(toy_config(epochs=1, precision="bf16"), Recorder(), toy_home)
    assert bf16["precision"] == "bf16"
