"""Tuning, measured against plain transformers + peft in the same run, and adapters against the bare model.

    .venv/bin/python bench/tuning.py [--model GGUF] [--data JSONL] [--steps 20] [--threads 1,2]

1. Training tokens/s: Hearth's trainer (its own process, the Trainer, checkpoints off) against a plain loop
   (forward, backward, AdamW, the same LoRA, batches and learning-rate schedule) in a process of its own, on the
   same tokenized data, threads and settings; the two alternate, and the ratio is Hearth / plain.
2. Adapter switch: llama_set_adapters_lora on a loaded llama.cpp model, to the adapter and back to none (the
   first switch also reads the adapter's file).
3. Decode speed with the adapter attached against without it, alternating answers of the same prompt.

The machine is shared and noisy: read the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RANK, ALPHA, LEARNING_RATE, BATCH, MAX_LENGTH = 16, 32, 1e-3, 2, 256


def default_data(folder: Path) -> Path:
    """Plain text from a real document: the GPL (Debian ships it), cut into examples of about 3,000 characters."""
    text = Path("/usr/share/common-licenses/GPL-3").read_text(encoding="utf-8")
    chunks, current = [], ""
    for paragraph in text.split("\n\n"):
        current += paragraph + "\n\n"
        if len(current) > 3000:
            chunks.append(current)
            current = ""
    path = folder / "gpl.jsonl"
    path.write_text("".join(json.dumps({"text": chunk}) + "\n" for chunk in chunks), encoding="utf-8")
    return path


def hearth_tokens_per_s(model: Path, data: Path, steps: int, threads: int, home: Path) -> float:
    from app.paths import resolve_data_paths
    from app.services.training import tuning
    from models.gguf import sha256_of
    from models.tuning.options import TuneOptions

    options = TuneOptions(
        rank=RANK,
        alpha=ALPHA,
        learning_rate=LEARNING_RATE,
        max_steps=steps,
        batch_size=BATCH,
        max_length=MAX_LENGTH,
        save_every=10 * steps,
    )
    name = f"bench-{threads}-{time.monotonic_ns()}"
    base = tuning.BaseModel(model, sha256_of(model), model.name)
    run = tuning.start_run(resolve_data_paths(home), base, data, name, options, threads)
    while run.trainer_alive():
        time.sleep(0.5)
    view = run.view()
    if view.state != "finished":
        raise SystemExit(f"Hearth's run ended {view.state}: {view.error}")
    return view.steps[-1].tokens_per_s


def plain_tokens_per_s(model: Path, data: Path, steps: int, threads: int) -> float:
    command = [sys.executable, __file__, "--plain-loop", str(model), str(data), str(steps), str(threads)]
    result = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    return float(result.stdout.strip().splitlines()[-1])


def plain_loop(model_path: Path, data: Path, steps: int, threads: int) -> float:
    """The reference: the same data and LoRA, trained by hand."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, get_linear_schedule_with_warmup

    from models.tuning.dataset import read_examples, split_examples
    from models.tuning.encode import IGNORE
    from models.tuning.options import ALL_TARGETS, TuneOptions
    from models.tuning.prepare import encode_for

    torch.set_num_threads(threads)
    split = split_examples(read_examples(data))
    encoded, _ = encode_for(model_path, TuneOptions(max_length=MAX_LENGTH), split.train, split.train[:1])
    model = AutoModelForCausalLM.from_pretrained(str(model_path.parent), gguf_file=model_path.name, dtype=torch.float32)
    config = LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=list(ALL_TARGETS), lora_dropout=0.0)
    model = get_peft_model(model, config)
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LEARNING_RATE)
    schedule = get_linear_schedule_with_warmup(optimizer, 0, steps)
    items = list(encoded.items)
    generator = torch.Generator().manual_seed(0)
    order: list[int] = []
    tokens = 0
    started = time.perf_counter()
    for _ in range(steps):
        if not order:  # a new epoch, shuffled; its last batch may be short, as the Trainer's is
            order = torch.randperm(len(items), generator=generator).tolist()
        batch = [items[i] for i in order[:BATCH]]
        del order[:BATCH]
        width = max(len(item.input_ids) for item in batch)
        ids = torch.full((len(batch), width), 0, dtype=torch.long)
        labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, item in enumerate(batch):
            ids[row, : len(item.input_ids)] = torch.tensor(item.input_ids)
            labels[row, : len(item.labels)] = torch.tensor(item.labels)
            mask[row, : len(item.input_ids)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        tokens += int(mask.sum())
    return tokens / (time.perf_counter() - started)


def adapter_figures(model: Path, adapter: Path, answers: int) -> dict[str, float]:
    from backends.base import AdapterUse, CancelToken, ChatMessage, GenerationParams, LoadOptions, Usage
    from backends.llamacpp.backend import LlamaCppBackend
    from backends.llamacpp.native import NativeModel
    from models.gguf import read_model_info

    use = AdapterUse(str(adapter), 1.0, adapter.stat().st_mtime_ns)
    native = NativeModel(model, LoadOptions(context_length=512, threads=1))
    first = time.perf_counter()
    native.use_adapter(use)
    first_switch_ms = (time.perf_counter() - first) * 1000
    switches = []
    for _ in range(20):
        for target in (None, use):
            started = time.perf_counter()
            native.use_adapter(target)
            switches.append((time.perf_counter() - started) * 1000)
    native.close()

    backend = LlamaCppBackend()
    for _ in backend.load(read_model_info(model), LoadOptions(context_length=1024, threads=1)):
        pass
    speeds: dict[str, list[float]] = {"bare": [], "adapter": []}
    question = [ChatMessage("user", "Write three sentences about the sea.")]
    for _ in range(answers):
        for label, target in (("bare", None), ("adapter", use)):
            params = GenerationParams(temperature=0.0, max_new_tokens=64, repeat_penalty=1.0, adapter=target)
            events = list(backend.stream_chat(question, params, CancelToken()))
            speeds[label] += [e.decode_tokens_per_s for e in events if isinstance(e, Usage)]
    backend.close()
    bare, attached = statistics.median(speeds["bare"]), statistics.median(speeds["adapter"])
    return {
        "first_switch_ms": first_switch_ms,
        "switch_ms_median": statistics.median(switches),
        "switch_ms_max": max(switches),
        "decode_bare_tps": bare,
        "decode_adapter_tps": attached,
        "decode_ratio": attached / bare,
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--plain-loop":
        model, data, steps, threads = sys.argv[2:6]
        print(plain_loop(Path(model), Path(data), int(steps), int(threads)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="GGUF (default: the embedded SmolLM2-135M)")
    parser.add_argument("--data", type=Path, help="JSON Lines (default: the GPL as plain text)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--answers", type=int, default=5)
    args = parser.parse_args()
    from models.embedded import embedded_chat_model

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = (args.model or embedded_chat_model()).resolve()
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch)
        data = args.data or default_data(home)
        results: dict[str, object] = {
            "model": model.name,
            "steps": args.steps,
            "batch": BATCH,
            "max_length": MAX_LENGTH,
        }
        for threads in (int(t) for t in args.threads.split(",")):
            plain = plain_tokens_per_s(model, data, args.steps, threads)
            hearth = hearth_tokens_per_s(model, data, args.steps, threads, home)
            results[f"threads_{threads}"] = {"hearth_tps": hearth, "plain_tps": plain, "ratio": hearth / plain}
            print(f"{threads} thread(s): Hearth {hearth:.0f} tokens/s, plain loop {plain:.0f} -> {hearth / plain:.3f}x")
        adapter = next(Path(home, "adapters").glob("*/adapter.gguf"))
        figures = adapter_figures(model, adapter, args.answers)
        results["adapter"] = figures
        print(
            f"adapter switch: first {figures['first_switch_ms']:.1f} ms (reads the file), then median "
            f"{figures['switch_ms_median']:.2f} ms (max {figures['switch_ms_max']:.2f}); decode with the adapter "
            f"{figures['decode_adapter_tps']:.1f} vs {figures['decode_bare_tps']:.1f} tokens/s bare -> "
            f"{figures['decode_ratio']:.3f}x"
        )
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
