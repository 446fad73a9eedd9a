"""The training process: ``python -m models.tuning.worker RUN_FOLDER``.

It reads the run's job, checks and tokenizes the data, trains a LoRA with transformers' ``Trainer`` and peft on
the GGUF dequantized, exports the adapter in llama.cpp's format, checks it through llama.cpp, and adds it to the
adapter store, writing every step to the run's events. It runs at a lower priority than chat, so answers stay
quick while it trains. A ``cancel`` file or SIGTERM stops it at the next step, with a checkpoint; a run that was
killed resumes from its last complete checkpoint when started again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import resource
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.shared.errors import HearthError, TrainingDataError, TuningError
from models.tuning.encode import IGNORE, EncodedSet
from models.tuning.pace import TrainingPace
from models.tuning.prepare import available_memory, prepare_data, shape_of
from models.tuning.runs import Job, RunFolder

if TYPE_CHECKING:
    from models.tuning.options import TuneOptions
    from models.tuning.placement import GpuRoom, Placement

log = logging.getLogger("hearth.tuning")
_stop_requested = False


def main(argv: Sequence[str]) -> int:
    run = RunFolder(Path(argv[1]))
    run.mark_trainer(os.getpid())
    signal.signal(signal.SIGTERM, _ask_to_stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C in a terminal is for the command, which cancels us
    with contextlib.suppress(OSError):
        os.nice(10)  # chat first: training takes what the answers leave
    logging.basicConfig(filename=run.log_file, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        train(run)
        return 0
    except HearthError as exc:
        run.append("failed", message=exc.message, remedy=exc.remedy)
    except OSError as exc:
        log.exception("tuning failed")
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            run.append(
                "failed",
                message="The disk filled up while the run was saving.",
                remedy="Free some space, then resume: the last complete checkpoint is kept.",
            )
        else:
            run.append("failed", message=f"The run could not write a file: {exc}.", remedy="Check the data folder.")
    except Exception as exc:  # a library error: say what it was, keep the details in the log
        log.error("tuning failed:\n%s", traceback.format_exc())
        run.append(
            "failed",
            message=f"Training failed ({type(exc).__name__}: {exc}).",
            remedy=f"See {run.log_file} for details; try other settings or another model.",
        )
    finally:
        run.pid_file.unlink(missing_ok=True)
    return 1


def _ask_to_stop(_signum: int, _frame: object) -> None:
    global _stop_requested
    _stop_requested = True


def stop_wanted(run: RunFolder) -> bool:
    return _stop_requested or run.cancel_file.exists()


def train(run: RunFolder) -> None:
    job = run.job()
    options = job.options
    probing = job.probe_steps > 0
    run.cancel_file.unlink(missing_ok=True)
    resume_from = None if probing else last_checkpoint(run.checkpoints)
    run.append("started", resume_from=resume_from.name if resume_from else None)
    run.append("phase", message="Reading and tokenizing the data with the model's own tokenizer and chat template")
    prepared = prepare_data(run.data_file, Path(job.base_path), options)
    split, train_set, check_set = prepared.split, prepared.train, prepared.check
    if len(train_set.items) < options.batch_size:
        raise TrainingDataError(
            f"There are {len(train_set.items)} examples to train on; one batch takes {options.batch_size}.",
            "Add examples, or lower the batch size.",
        )
    stats = prepared.stats(options)
    run.append("stats", **dataclasses.asdict(stats))
    steps = stats.total_steps
    placement = _place(run, job, train_set.longest)
    if stop_wanted(run):
        run.append("cancelled", step=0)
        return
    loading = time.perf_counter()
    held = check_set if split.held_out and not probing else None
    model, trainer, counter = _trainer(run, job, placement, train_set, held, job.probe_steps or steps)
    load_s = time.perf_counter() - loading
    if held is not None and resume_from is None:
        run.append("phase", message="Measuring the held-out examples before training")
        run.append("held_out", step=0, loss=float(trainer.evaluate()["eval_loss"]))
    doing = "Measuring a few steps" if probing else "Training"
    run.append("phase", message=f"{doing} {placement.describe()}")
    counter.restart()
    training_started = time.time()
    trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    step = int(trainer.state.global_step)
    # Linux reports the peak in KiB: what the plan is checked against (on a GPU: what torch allocated there).
    peaks = {"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    if placement.where == "gpu":
        import torch

        peaks["peak_gpu_bytes"] = int(torch.cuda.max_memory_allocated())
    run.append("memory", **peaks)
    if stop_wanted(run):
        run.append("cancelled", step=step)
        return
    if probing:
        _report_probe(run, load_s, training_started, steps)
        return
    held_out_after = None
    if split.held_out:
        run.append("phase", message="Measuring the held-out examples after training")
        held_out_after = float(trainer.evaluate()["eval_loss"])
        run.append("held_out", step=step, loss=held_out_after)
    run.append("phase", message="Writing the adapter in llama.cpp's format")
    _export(run, job, model)
    del model, trainer
    if placement.where == "gpu":
        import torch

        torch.cuda.empty_cache()
    _check_and_add(run, job, check_set, split.checked_on_training_data, step, held_out_after)


def _report_probe(run: RunFolder, load_s: float, training_started: float, steps: int) -> None:
    """The pace of a probe's steps after the first (which warms up), as the estimate for the whole run."""
    points = run.view().steps
    if len(points) >= 3:
        per_step = (points[-1].elapsed_s - points[1].elapsed_s) / (points[-1].step - points[1].step)
    elif points:
        per_step = (points[-1].elapsed_s - training_started) / max(1, points[-1].step)
    else:
        per_step = 0.0
    tokens_per_s = points[-1].tokens_per_s if points else 0.0
    run.append("probe", load_s=load_s, step_s=per_step, tokens_per_s=tokens_per_s, total_steps=steps)
    run.append("finished", probe=True)


def _place(run: RunFolder, job: Job, longest: int) -> Placement:
    """Choose the GPU or the CPU before the model loads, and refuse a run that fits neither, saying what would."""
    from models.tuning.placement import choose_placement
    from models.tuning.plan import check_fits, plan_loading

    options = job.options
    shape = shape_of(Path(job.base_path))
    placement = choose_placement(shape, options, longest, _gpu_room(options), options.device)
    available = available_memory()
    # On a GPU the host still reads the whole model in full precision while loading it.
    plan = placement.plan if placement.where == "cpu" else plan_loading(shape)
    run.append(
        "plan",
        total_bytes=placement.plan.total_bytes,
        available_bytes=available if placement.where == "cpu" else placement.gpu_free_bytes,
        text=placement.plan.describe(),
        where=placement.where,
        placement=placement.describe(),
        window=placement.window,
    )
    check_fits(plan, options, available, longest)
    return placement


def _gpu_room(options: TuneOptions) -> GpuRoom | None:
    """The GPU this process can train on, or None; :class:`TuningError` when one was asked for and none is there."""
    from models.tuning.placement import GpuRoom

    if options.device == "cpu":
        return None
    try:
        import torch

        usable = torch.cuda.is_available()
    except Exception:  # a broken CUDA install reads as no GPU
        usable = False
    if not usable:
        if options.device == "gpu":
            raise TuningError(
                "No CUDA GPU is usable by the trainer (torch sees none).",
                "Train on the CPU (device auto or cpu), or install a CUDA build of torch.",
            )
        return None
    free, _total = torch.cuda.mem_get_info(0)
    name, bf16 = torch.cuda.get_device_name(0), bool(torch.cuda.is_bf16_supported())
    return GpuRoom.capped(name, int(free), bf16, options.gpu_memory_mib)


def last_checkpoint(folder: Path) -> Path | None:
    """The newest complete checkpoint; incomplete ones (a save cut short by a kill or a full disk) are removed."""
    if not folder.is_dir():
        return None
    found: list[tuple[int, Path]] = []
    for path in folder.iterdir():
        number = path.name.removeprefix("checkpoint-")
        if not (path.is_dir() and number.isdigit()):
            continue
        if (path / "trainer_state.json").is_file():  # the Trainer writes it last
            found.append((int(number), path))
        else:
            shutil.rmtree(path, ignore_errors=True)
    return max(found)[1] if found else None


def _trainer(
    run: RunFolder,
    job: Job,
    placement: Placement,
    train_set: EncodedSet,
    check_set: EncodedSet | None,
    steps: int,
) -> Any:
    run.append("phase", message=f"Loading the model for training {placement.describe()}")
    import torch
    from transformers import Trainer, TrainerCallback

    options = replace(job.options, gradient_checkpointing=placement.gradient_checkpointing)
    torch.set_num_threads(max(1, job.threads))
    model = _adapted_model(Path(job.base_path), options, placement)
    streaming = placement.window is not None
    if streaming:
        from models.tuning.streaming import stream_layers

        stream_layers(model, "cuda:0", int(placement.window or 0))
    counter = TrainingPace()
    pad_id = int(model.config.eos_token_id if isinstance(model.config.eos_token_id, int) else 0)

    def collate(items: list[dict[str, Any]]) -> dict[str, Any]:
        width = max(len(item["input_ids"]) for item in items)
        ids = torch.full((len(items), width), pad_id, dtype=torch.long)
        labels = torch.full((len(items), width), IGNORE, dtype=torch.long)
        mask = torch.zeros((len(items), width), dtype=torch.long)
        for row, item in enumerate(items):
            size = len(item["input_ids"])
            ids[row, :size] = torch.tensor(item["input_ids"])
            labels[row, :size] = torch.tensor(item["labels"])
            mask[row, :size] = 1
        if items[0].get("held_out"):
            counter.pause()  # an evaluation batch: neither its tokens nor its time are training
        else:
            counter.trained(int(mask.sum()))
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    def rows(encoded: EncodedSet, held_out: bool = False) -> list[dict[str, Any]]:
        return [{"input_ids": list(i.input_ids), "labels": list(i.labels), "held_out": held_out} for i in encoded.items]

    class Progress(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            logs = kwargs.get("logs") or {}
            if "loss" in logs:
                run.append(
                    "step", step=state.global_step, loss=float(logs["loss"]), tokens_per_s=round(counter.per_second, 1)
                )
            if "eval_loss" in logs:
                run.append("held_out", step=state.global_step, loss=float(logs["eval_loss"]))

        def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            counter.resume()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if stop_wanted(run):
                control.should_training_stop = True
                control.should_save = True

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            run.append("checkpoint", step=state.global_step)

    arguments = _arguments(run, job, options, placement, steps, check_set is not None)

    class PlacedTrainer(Trainer):
        def _move_model_to_device(self, model: Any, device: Any) -> None:
            if not streaming:  # streamed layers stay where stream_layers put them
                super()._move_model_to_device(model, device)

    trainer = PlacedTrainer(
        model=model,
        args=arguments,
        train_dataset=rows(train_set),
        eval_dataset=rows(check_set, held_out=True) if check_set is not None else None,
        data_collator=collate,
        callbacks=[Progress()],
    )
    return model, trainer, counter


def _adapted_model(base: Path, options: TuneOptions, placement: Placement) -> Any:
    """The base model as transformers reads it from the GGUF, with a LoRA adapter on ``options.targets``."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from models.tuning.gguf_reading import reading_once

    dtype = torch.bfloat16 if placement.dtype == "bfloat16" else torch.float32
    try:
        with reading_once():
            model: Any = AutoModelForCausalLM.from_pretrained(str(base.parent), gguf_file=base.name, dtype=dtype)
    except (ValueError, KeyError, OSError) as exc:
        raise TuningError(
            f"transformers cannot load {base.name} for training: {exc}.",
            "Tune a llama or qwen2 model (SmolLM2, Qwen2.5).",
        ) from exc
    # transformers marks a model read from a GGUF as "quantized" although its weights are now dequantized floats,
    # and its Trainer refuses such a model; the mark is dropped (the adapter trains on the floats).
    model.hf_quantizer = None
    model.is_quantized = False
    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    missing = [t for t in options.targets if t not in present]
    if missing:
        raise TuningError(f"{base.name} has no {', '.join(missing)} layers.", "Choose other layers to adapt.")
    config = LoraConfig(
        r=options.rank,
        lora_alpha=options.alpha,
        target_modules=list(options.targets),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, config)  # the adapter's weights are float32 whatever the base's type
    if options.gradient_checkpointing:
        model.enable_input_require_grads()
    return model


def _arguments(run: RunFolder, job: Job, options: TuneOptions, placement: Placement, steps: int, checked: bool) -> Any:
    """transformers' training arguments for this run: its settings, checkpoints in the run's folder, the held-out
    loss measured five times over the run (``checked``: when there are held-out examples)."""
    from transformers import TrainingArguments

    evaluate_every = max(1, steps // 5)
    return TrainingArguments(
        output_dir=str(run.checkpoints),
        per_device_train_batch_size=options.batch_size,
        per_device_eval_batch_size=options.batch_size,
        learning_rate=options.learning_rate,
        num_train_epochs=options.epochs,
        max_steps=job.probe_steps or options.max_steps or -1,
        lr_scheduler_type="linear",
        logging_steps=1,
        save_strategy="no" if job.probe_steps else "steps",
        save_steps=options.save_every,
        save_total_limit=2,
        eval_strategy="steps" if checked else "no",
        eval_steps=evaluate_every,
        # Only the held-out loss is wanted: without this the evaluation keeps every batch's logits (a vocabulary's
        # worth of floats per token) and concatenates them, hundreds of megabytes on top of the training peak.
        prediction_loss_only=True,
        gradient_checkpointing=options.gradient_checkpointing,
        use_cpu=placement.where == "cpu",
        report_to=[],
        disable_tqdm=True,
        seed=options.seed,
        data_seed=options.seed,
        dataloader_num_workers=0,
        remove_unused_columns=False,
        label_names=["labels"],
        log_level="warning",
    )


def _export(run: RunFolder, job: Job, model: Any) -> None:
    from peft import get_peft_model_state_dict

    from models.gguf import read_model_info
    from models.tuning.lora_gguf import BASE_SHA_KEY, write_adapter

    info = read_model_info(Path(job.base_path))
    tensors = {key: value.detach().float().cpu().numpy() for key, value in get_peft_model_state_dict(model).items()}
    metadata = {BASE_SHA_KEY: job.base_sha256, "general.name": job.adapter_name}
    write_adapter(
        run.adapter_file, info.architecture, tensors, job.options.alpha, info.head_count, info.head_count_kv, metadata
    )


def _check_and_add(
    run: RunFolder, job: Job, check_set: EncodedSet, on_training_data: bool, steps: int, held_out_after: float | None
) -> None:
    import gc

    from models.adapters import AdapterRecord, AdapterStore
    from models.gguf import read_model_info
    from models.tuning.lora_gguf import check_adapter
    from models.tuning.perplexity import perplexity

    gc.collect()
    base = Path(job.base_path)
    check_adapter(run.adapter_file, read_model_info(base))
    where = "training" if on_training_data else "held-out"
    run.append("phase", message=f"Checking the adapter through llama.cpp on the {where} examples")
    before = perplexity(base, None, check_set.items, job.threads)
    after = perplexity(base, run.adapter_file, check_set.items, job.threads)
    if not after < before:
        raise TuningError(
            f"The adapter did not help: perplexity on the {where} examples went from {before:.2f} to {after:.2f} "
            "through llama.cpp.",
            "Train longer (more epochs or steps) or with a higher learning rate, or check that the examples agree.",
        )
    held = [loss for step, loss in run.view().held_out if step == 0]
    record = AdapterRecord(
        name=job.adapter_name,
        base_sha256=job.base_sha256,
        base_name=job.base_name,
        data_label=job.data_label,
        settings=job.options.describe(),
        steps=steps,
        held_out_before=held[0] if held else None,
        held_out_after=held_out_after,
        perplexity_before=before,
        perplexity_after=after,
        checked_on_training_data=on_training_data,
    )
    AdapterStore(Path(job.adapters_dir)).add(run.adapter_file, record)
    run.append(
        "finished",
        adapter=job.adapter_name,
        steps=steps,
        perplexity_before=before,
        perplexity_after=after,
        held_out_before=record.held_out_before,
        held_out_after=held_out_after,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))
