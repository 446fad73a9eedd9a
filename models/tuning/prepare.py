"""What a run knows before its model loads: the data split and tokenized with the base model's own tokenizer and
chat template, its figures, and the memory plan against what is free now. The trainer and the page's "Check"
both use it, so what the page shows is what the trainer will do."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from models.shared.errors import TuningError
from models.tuning.dataset import Example, Split, read_examples, split_examples
from models.tuning.encode import EncodedSet, encode_all
from models.tuning.lora_gguf import TUNABLE_ARCHITECTURES
from models.tuning.options import TuneOptions, total_steps
from models.tuning.plan import ModelShape, model_shape
from models.tuning.runs import RunStats


@dataclass(frozen=True)
class PreparedData:
    split: Split
    train: EncodedSet
    check: EncodedSet  # the held-out examples, or the training ones when there are too few to hold any out

    def stats(self, options: TuneOptions) -> RunStats:
        """The figures a run reports before it trains (its "stats" event)."""
        return RunStats(
            examples=len(self.split.train) + len(self.split.held_out),
            train=len(self.split.train),
            held_out=len(self.split.held_out),
            tokens=self.train.tokens,
            trained_tokens=self.train.trained_tokens,
            longest=self.train.longest,
            cut=self.train.cut,
            dropped=self.train.dropped,
            total_steps=total_steps(options, len(self.train.items)),
            checked_on_training_data=self.split.checked_on_training_data,
        )


def prepare_data(data: Path, base_path: Path, options: TuneOptions) -> PreparedData:
    """Read, split and tokenize ``data`` for ``base_path``; :class:`TrainingDataError` names the first bad line."""
    split = split_examples(read_examples(data), options.seed)
    train, check = encode_for(base_path, options, split.train, split.held_out or split.train)
    return PreparedData(split, train, check)


def check_base(base_path: Path, options: TuneOptions) -> None:
    """Refuse a model the trainer cannot tune, or a max length beyond its context."""
    from models.gguf import read_model_info

    info = read_model_info(base_path)
    if info.architecture not in TUNABLE_ARCHITECTURES:
        raise TuningError(
            f"Hearth cannot tune {info.architecture} models yet ({base_path.name}).",
            f"Tune a model of one of these architectures: {', '.join(TUNABLE_ARCHITECTURES)} "
            "(Qwen2.5 and SmolLM2 models, for example).",
        )
    if options.max_length > info.trained_context_length:
        raise TuningError(
            f"A max length of {options.max_length} tokens is longer than {base_path.name}'s context "
            f"({info.trained_context_length}).",
            f"Use a max length of at most {info.trained_context_length}.",
        )


def encode_for(
    base_path: Path, options: TuneOptions, train: Sequence[Example], check: Sequence[Example]
) -> tuple[EncodedSet, EncodedSet]:
    """Both sets as token ids, with the model's vocabulary (loaded alone, no weights) and chat template."""
    from backends.chat_template import ChatFormatter
    from backends.llamacpp.native import Vocabulary
    from models.gguf import read_model_info

    check_base(base_path, options)
    info = read_model_info(base_path)
    vocabulary = Vocabulary(info.path)
    try:
        with ChatFormatter(info.chat_template, info.bos_token, info.eos_token) as formatter:
            formatter.probe()

            def render(messages: Sequence[object], generation_prompt: bool) -> str:
                return formatter.render(messages, add_generation_prompt=generation_prompt)  # type: ignore[arg-type]

            def tokenize(text: str, add_bos: bool) -> list[int]:
                return vocabulary.tokenize(text, add_special=add_bos and info.add_bos_token)

            length = options.max_length
            return (
                encode_all(train, render, tokenize, info.bos_token, length),
                encode_all(check, render, tokenize, info.bos_token, length),
            )
    finally:
        vocabulary.close()


def shape_of(base_path: Path) -> ModelShape:
    """The shapes the memory plans need, read from the GGUF's header."""
    from models.gguf import read_model_info
    from models.gguf_reader import read_header

    info = read_model_info(base_path)
    tensors = ((t.name, t.shape) for t in read_header(info.path).tensors)
    return model_shape(tensors, info.parameter_count, info.block_count, info.vocab_size, info.head_count)


def available_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().available)
