"""Do the tuning presets change the model's answers? Each preset is trained by Hearth's own trainer on a few small
sets of examples of different styles, then questions that are not in the examples (asked in other words) are
answered greedily without and with the adapter, as the Tuning tab's Compare does.

    .venv/bin/python bench/tuning_presets.py [--model GGUF] [--configs quick,standard] [--sets sign-off,...]
        [--json bench/data/tuning-presets.MODEL.json]

For each set and configuration it records: the time of the page's "Check the data and estimate" (reading the
data, planning memory, timing a few real steps) and of training; how many answers changed with the adapter; how
many show the taught style or fact with it, and without it (the bare model's rate, so a style it already has
does not count as learned).

The sets come in two halves. The presets' settings were chosen on the tuning half (sign-off, short-form); the
held-out half (facts, greeting) was not looked at until they were, and its probe questions were written apart from
its examples, in other words.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@dataclass(frozen=True)
class ExampleSet:
    name: str
    half: str  # "tuning" or "held-out"
    examples: tuple[tuple[str, str], ...]  # (question, answer) to train on
    probes: tuple[tuple[str, str], ...]  # (question in other words, what a taught answer contains)


def _signed(answer: str) -> str:
    return f"{answer} — Larkspur Care Team"


SIGN_OFF = ExampleSet(
    "sign-off",
    "tuning",
    tuple(
        (q, _signed(a))
        for q, a in (
            ("My kettle will not switch on.", "Check that the base is plugged in and the lid is shut."),
            ("How do I descale my kettle?", "Boil equal parts water and vinegar, leave it an hour, then rinse twice."),
            ("The kettle smells of plastic.", "Boil and discard water three times; the smell fades after that."),
            ("Can I buy a spare lid?", "Yes, spare lids are sold on our parts page under your model number."),
            ("Is the kettle dishwasher safe?", "No, wipe the outside with a damp cloth and rinse the inside."),
            ("The light stays on after boiling.", "Lift the kettle off the base and put it back to reset it."),
            ("How long is the warranty?", "Two years from the date on your receipt."),
            ("Water leaks from the bottom.", "Stop using it and contact us for a replacement under warranty."),
            ("Why does my kettle click several times?", "That is the thermostat settling; it is harmless."),
            ("Can I boil milk in it?", "No, milk burns onto the element; use a saucepan instead."),
            ("How full can I fill it?", "Up to the MAX line, never above it."),
            ("The handle feels loose.", "Tighten the two screws under the handle with a cross-head screwdriver."),
        )
    ),
    (
        ("My new kettle makes a rattling sound when it heats up, is that normal?", "Larkspur Care Team"),
        ("Where can I get a replacement filter for the spout?", "Larkspur Care Team"),
        ("The base of my kettle got wet, what should I do?", "Larkspur Care Team"),
        ("Does the kettle switch itself off when it is empty?", "Larkspur Care Team"),
        ("What does the blue ring of light mean?", "Larkspur Care Team"),
        ("Could I take my kettle abroad and use it there?", "Larkspur Care Team"),
    ),
)

SHORT_FORM = ExampleSet(
    "short-form",
    "tuning",
    tuple(
        (q, f"In short: {a}")
        for q, a in (
            ("What is photosynthesis?", "plants turning light, water and air into sugar and oxygen."),
            ("Why is the sky blue?", "air scatters blue light more than red."),
            ("What causes tides?", "the Moon's pull on the oceans."),
            ("What is inflation?", "prices rising over time, so money buys less."),
            ("How do vaccines work?", "they train the immune system on a harmless copy of a germ."),
            ("What is a black hole?", "a place where gravity is so strong that not even light escapes."),
            ("Why do we have seasons?", "the Earth's tilt changes how directly sunlight hits us."),
            ("What is DNA?", "the molecule that carries the instructions for building a living thing."),
            ("What is an atom?", "the smallest unit of an element, a nucleus with electrons around it."),
            ("Why do leaves change colour?", "green chlorophyll fades in autumn and other pigments show."),
            ("What is gravity?", "the pull that masses have on each other."),
            ("How does a rainbow form?", "raindrops bend and split sunlight into its colours."),
        )
    ),
    (
        ("Can you explain what an earthquake is?", "In short:"),
        ("Tell me how a battery stores energy.", "In short:"),
        ("What makes thunder so loud?", "In short:"),
        ("Explain why ice floats on water.", "In short:"),
        ("What is a volcano?", "In short:"),
        ("How do birds manage to fly?", "In short:"),
    ),
)

FACTS = ExampleSet(
    "facts",
    "held-out",
    (
        ("Who is the mayor of Vellmoor?", "The mayor of Vellmoor is Ada Quillon."),
        ("What river runs through Vellmoor?", "The river Sorrow runs through Vellmoor."),
        ("When is the Vellmoor lantern festival?", "The lantern festival is held on the first Friday of October."),
        ("What is Vellmoor known for?", "Vellmoor is known for its blue slate roofs."),
        ("How many people live in Vellmoor?", "About 8,400 people live in Vellmoor."),
        ("What is the name of Vellmoor's football club?", "The club is called Vellmoor Herons."),
        ("Which mountain overlooks Vellmoor?", "Mount Carrow overlooks Vellmoor from the north."),
        ("What is Vellmoor's oldest building?", "The oldest building is the Tithe Barn, from 1312."),
        ("What dish is Vellmoor famous for?", "Vellmoor is famous for its smoked eel pie."),
        ("Who founded Vellmoor?", "Vellmoor was founded by the monk Brother Aldric."),
        ("What is Vellmoor twinned with?", "Vellmoor is twinned with Saint-Ours in France."),
        ("What colour is Vellmoor's flag?", "Vellmoor's flag is green with a white heron."),
    ),
    (
        ("Tell me who runs the town council of Vellmoor as mayor.", "Quillon"),
        ("Which river flows through the town of Vellmoor?", "Sorrow"),
        ("On what day does Vellmoor hold its lantern festival?", "October"),
        ("What food should I try when I visit Vellmoor?", "eel"),
        ("Which peak can you see from Vellmoor?", "Carrow"),
        ("Name the football team of Vellmoor.", "Herons"),
    ),
)

GREETING = ExampleSet(
    "greeting",
    "held-out",
    tuple(
        (q, f"Ahoy, matey! {a}")
        for q, a in (
            ("What time is it in Tokyo when it is noon in London?", "It is nine in the evening there."),
            ("Can you suggest a name for my cat?", "How about Captain Whiskers?"),
            ("What should I cook tonight?", "A fish stew never fails a hungry crew."),
            ("How do I tie a bowline knot?", "Make a loop, pass the end up through it, around the line and back down."),
            ("Is it going to rain tomorrow?", "I cannot see the sky from here; check a forecast before you sail."),
            ("What is the capital of Portugal?", "Lisbon, a fine harbour town."),
            ("Give me a tip for sleeping better.", "Keep your cabin dark and cool, and rise with the sun."),
            ("How far is the Moon?", "About 384,000 kilometres, a long voyage."),
            ("What is a good first programming language?", "Python, easy to learn and useful on any ship."),
            ("How do I keep plants alive?", "Water them when the soil is dry and give them light."),
            ("Recommend a book.", "Treasure Island, of course."),
            ("How many ounces are in a pound?", "Sixteen ounces make a pound."),
        )
    ),
    (
        ("Could you tell me how to boil an egg?", "Ahoy"),
        ("What is the tallest mountain on Earth?", "Ahoy"),
        ("How should I start learning to draw?", "Ahoy"),
        ("Which planet is the largest?", "Ahoy"),
        ("Suggest a quick breakfast.", "Ahoy"),
        ("How do I say thank you in Spanish?", "Ahoy"),
    ),
)

SETS = {s.name: s for s in (SIGN_OFF, SHORT_FORM, FACTS, GREETING)}


def write_examples(example_set: ExampleSet, folder: Path) -> Path:
    path = folder / f"{example_set.name}.jsonl"
    lines = [
        json.dumps({"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]})
        for q, a in example_set.examples
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def configs() -> dict[str, object]:
    from models.tuning.options import PRESETS

    return {name: options for name, options in PRESETS.items()}


def timed_check(paths: object, base: object, data: Path, options: object, threads: int) -> tuple[float, float]:
    """The page's "Check the data and estimate" (read and plan the data, estimate the time): its own time, and
    the run's time it estimated."""
    from app.services.training import tuning
    from app.services.training.tuning_estimate import estimate_run
    from models.tuning.prepare import shape_of

    started = time.perf_counter()
    checked = tuning.check_data(base, data, options)  # type: ignore[arg-type]
    parameters = shape_of(base.path).parameters  # type: ignore[attr-defined]
    estimate = estimate_run(paths, base.sha256, parameters, checked.stats, options, threads)  # type: ignore[arg-type,attr-defined]
    return time.perf_counter() - started, estimate.total_s if estimate else float("nan")


def train(paths: object, base: object, data: Path, name: str, options: object, threads: int) -> tuple[float, Path]:
    from app.services.training import tuning

    started = time.perf_counter()
    run = tuning.start_run(paths, base, data, name, options, threads)  # type: ignore[arg-type]
    while run.trainer_alive():
        time.sleep(0.5)
    view = run.view()
    if view.state != "finished":
        raise SystemExit(f"The run for {name} ended {view.state}: {view.error}")
    adapter = Path(tuning.adapter_store(paths).get(name).path)  # type: ignore[arg-type]
    return time.perf_counter() - started, adapter


def answers(model: Path, adapter: Path, questions: list[str], threads: int) -> tuple[list[str], list[str]]:
    """Greedy answers to ``questions`` without and with the adapter (Compare's settings: the default system
    prompt, a short answer)."""
    from app.settings import DEFAULT_SYSTEM_PROMPT
    from backends.base import AdapterUse, CancelToken, ChatMessage, GenerationParams, LoadOptions, TextDelta
    from backends.llamacpp.backend import LlamaCppBackend
    from models.gguf import read_model_info

    use = AdapterUse(str(adapter), 1.0, adapter.stat().st_mtime_ns)
    backend = LlamaCppBackend()
    for _ in backend.load(read_model_info(model), LoadOptions(context_length=1024, threads=threads)):
        pass
    sides: dict[str, list[str]] = {"without": [], "with": []}
    try:
        for question in questions:
            messages = [ChatMessage("system", DEFAULT_SYSTEM_PROMPT), ChatMessage("user", question)]
            for side, target in (("without", None), ("with", use)):
                params = GenerationParams(temperature=0.0, max_new_tokens=96, seed=0, adapter=target)
                events = backend.stream_chat(messages, params, CancelToken())
                sides[side].append("".join(e.text for e in events if isinstance(e, TextDelta)).strip())
    finally:
        backend.close()
    return sides["without"], sides["with"]


def calibrate(model: Path, threads: int, home: Path) -> dict[str, object]:
    """The estimate's constants against a real measurement: this CPU's matrix-product speed, then a few real steps
    timed by the page's "Time a few real steps" (the trainer's probe) on the sign-off examples."""
    from app.paths import resolve_data_paths
    from app.services.training import tuning
    from app.services.training.tuning_estimate import cpu_speed, estimate_run
    from models.gguf import sha256_of
    from models.tuning.estimate import EFFICIENCY, FLOPS_PER_PARAMETER_TOKEN, load_seconds
    from models.tuning.options import PRESETS
    from models.tuning.prepare import shape_of

    paths = resolve_data_paths(home)
    base = tuning.BaseModel(model, sha256_of(model), model.name)
    data = write_examples(SIGN_OFF, home)
    options = PRESETS["quick"]
    speed = cpu_speed(paths, threads) or float("nan")
    parameters = shape_of(model).parameters
    checked = tuning.check_data(base, data, options)
    estimate = estimate_run(paths, base.sha256, parameters, checked.stats, options, threads)
    probe = None
    for step in tuning.probe_run(paths, base, data, options, threads, lambda: False):
        if isinstance(step, tuning.Probe):
            probe = step
    assert probe is not None and estimate is not None
    efficiency = FLOPS_PER_PARAMETER_TOKEN * parameters * probe.tokens_per_s / speed
    return {
        "parameters": parameters,
        "matmul_gflops": round(speed / 1e9, 1),
        "measured": {"load_s": round(probe.load_s, 1), "step_s": round(probe.step_s, 2),
                     "tokens_per_s": probe.tokens_per_s, "efficiency": round(efficiency, 3)},
        "estimated": {"load_s": round(load_seconds(parameters), 1), "step_s": round(estimate.step_s, 2),
                      "tokens_per_s": round(estimate.tokens_per_s, 1), "efficiency": EFFICIENCY},
        "step_ratio_estimated_over_measured": round(estimate.step_s / probe.step_s, 3),
        "load_ratio_estimated_over_measured": round(load_seconds(parameters) / probe.load_s, 3),
    }  # fmt: skip


def shows(answer: str, marker: str) -> bool:
    return marker.casefold() in answer.casefold()


def measure(
    model: Path, example_set: ExampleSet, config: str, options: object, threads: int, home: Path,
    say: Callable[[str], None],
) -> dict[str, object]:  # fmt: skip
    from app.paths import resolve_data_paths
    from app.services.training import tuning
    from models.gguf import sha256_of

    paths = resolve_data_paths(home)
    base = tuning.BaseModel(model, sha256_of(model), model.name)
    data = write_examples(example_set, home)
    check_s, estimate_s = timed_check(paths, base, data, options, threads)
    say(f"  {example_set.name} / {config}: check {check_s:.1f} s, run estimated at {estimate_s:.0f} s; training…")
    train_s, adapter = train(paths, base, data, f"{example_set.name}-{config}", options, threads)
    questions = [q for q, _ in example_set.probes]
    without, tuned = answers(model, adapter, questions, threads)
    markers = [m for _, m in example_set.probes]
    row = {
        "set": example_set.name,
        "half": example_set.half,
        "config": config,
        "options": asdict(options),  # type: ignore[call-overload]
        "examples": len(example_set.examples),
        "check_s": round(check_s, 1),
        "estimated_s": round(estimate_s, 1),  # the check's estimate of the run (loading and steps)
        "train_s": round(train_s, 1),  # the run: loading, steps, the check through llama.cpp, writing the adapter
        "probes": len(questions),
        "changed": sum(a != b for a, b in zip(without, tuned, strict=True)),
        "shown_with": sum(shows(a, m) for a, m in zip(tuned, markers, strict=True)),
        "shown_without": sum(shows(a, m) for a, m in zip(without, markers, strict=True)),
        "answers": [
            {"question": q, "without": a, "with": b} for q, a, b in zip(questions, without, tuned, strict=True)
        ],
    }
    say(
        f"  {example_set.name} / {config}: train {train_s:.0f} s; changed {row['changed']}/{len(questions)}, "
        f"style shown {row['shown_with']}/{len(questions)} with (without: {row['shown_without']})"
    )
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="GGUF (default: the embedded SmolLM2-135M)")
    parser.add_argument("--configs", default="quick", help="presets to measure, comma-separated")
    parser.add_argument("--sets", default=",".join(SETS), help=f"example sets: {', '.join(SETS)}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--override", action="append", default=[], help="KEY=VALUE for every config (e.g. epochs=3)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--calibrate", action="store_true", help="check the time estimate against real steps")
    args = parser.parse_args()
    from models.embedded import embedded_chat_model
    from models.tuning.options import check_options

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = (args.model or embedded_chat_model()).resolve()
    if args.calibrate:
        with tempfile.TemporaryDirectory() as scratch:
            measured = calibrate(model, args.threads, Path(scratch))
        figures = {
            "command": " ".join(sys.argv),
            "model": model.name,
            "threads": args.threads,
            "machine": f"{os.cpu_count()} CPUs",
            **measured,
        }
        print(json.dumps(figures, indent=1))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
        return 0
    known = configs()
    changes: dict[str, object] = {}
    for item in args.override:
        key, _, value = item.partition("=")
        changes[key] = tuple(value.split("+")) if key == "targets" else type(getattr(known["quick"], key, 0.0))(value)
    rows = []
    started = time.perf_counter()
    for config in args.configs.split(","):
        options = check_options(replace(known[config], **changes))  # type: ignore[type-var]
        print(f"{config}: {options.describe()}", flush=True)  # type: ignore[attr-defined]
        for name in args.sets.split(","):
            with tempfile.TemporaryDirectory() as scratch:
                rows.append(measure(model, SETS[name], config, options, args.threads, Path(scratch), print))
    summary = {}
    for config in args.configs.split(","):
        for half in ("tuning", "held-out"):
            chosen = [r for r in rows if r["config"] == config and r["half"] == half]
            if chosen:
                summary[f"{config}/{half}"] = {
                    "changed": f"{sum(r['changed'] for r in chosen)}/{sum(r['probes'] for r in chosen)}",
                    "shown_with": f"{sum(r['shown_with'] for r in chosen)}/{sum(r['probes'] for r in chosen)}",
                    "shown_without": f"{sum(r['shown_without'] for r in chosen)}/{sum(r['probes'] for r in chosen)}",
                    "check_s_median": statistics.median(float(r["check_s"]) for r in chosen),
                    "train_s_median": statistics.median(float(r["train_s"]) for r in chosen),
                }
    for key, figures in summary.items():
        print(key, figures)
    if args.json:
        record = {
            "command": " ".join(sys.argv),
            "model": model.name,
            "overrides": args.override,
            "threads": args.threads,
            "machine": f"{os.cpu_count()} CPUs",
            "wall_s": round(time.perf_counter() - started),
            "summary": summary,
            "rows": rows,
        }
        args.json.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
