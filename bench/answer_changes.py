"""Two runs of `hearth eval answers` on the same questions, side by side: how many each got right, every answer that
changed (with both texts), and, for a run with `--keep-passages`, how many prompt tokens were joined from kept
passages and in how many questions — so which changes came with a join and which did not.

    .venv/bin/python bench/answer_changes.py BEFORE.json AFTER.json [--out FILE.txt]

Both files are `hearth eval answers … --output` results of the same question set and part.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def _results(path: Path) -> dict[int, dict[str, Any]]:
    document = json.loads(path.read_text(encoding="utf-8"))
    return {int(result["line"]): result for result in document["results"]}


def report(before_path: Path, after_path: Path) -> list[str]:
    before, after = _results(before_path), _results(after_path)
    if set(before) != set(after):
        raise SystemExit("the two runs asked different questions")
    lines = [
        f"# .venv/bin/python bench/answer_changes.py {before_path} {after_path}",
        f"right: {sum(r['correct'] for r in before.values())}/{len(before)} before, "
        f"{sum(r['correct'] for r in after.values())}/{len(after)} after",
    ]
    joined = {line: int(r.get("joined_tokens") or 0) for line, r in after.items()}
    prompt = sum(int(r["prompt_tokens"]) for r in after.values())
    lines.append(
        f"after: {sum(joined.values())} of {prompt} prompt tokens joined from kept passages "
        f"({sum(joined.values()) / max(prompt, 1):.2f}), in {sum(1 for n in joined.values() if n)} of {len(after)} "
        "questions"
    )
    changed = [line for line in sorted(before) if before[line]["answer"].strip() != after[line]["answer"].strip()]
    with_join = [line for line in changed if joined[line]]
    lines.append(
        f"answers changed: {len(changed)} of {len(before)} ({len(with_join)} of them in questions that joined "
        f"kept passages, {len(changed) - len(with_join)} in questions that joined none)"
    )
    for line in changed:
        was, now = before[line], after[line]
        lines.append(f"- line {line}: {was['question']} (joined {joined[line]} tokens)")
        lines.append(f"    before ({'right' if was['correct'] else 'wrong'}): {was['answer'].strip()!r}")
        lines.append(f"    after  ({'right' if now['correct'] else 'wrong'}): {now['answer'].strip()!r}")
    lines.append(
        "median seconds per question: before "
        f"{statistics.median(r['seconds'] for r in before.values()):.2f}, after "
        f"{statistics.median(r['seconds'] for r in after.values()):.2f}"
    )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args()
    lines = report(args.before, args.after)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
