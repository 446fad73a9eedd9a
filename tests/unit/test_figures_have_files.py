"""Every file under bench/data/ that the README, the pages in docs/ and the CHANGELOG name as the source of a
figure exists. A name may hold shell braces and globs, as the texts write them
(``bench/data/tool-answers.{tuning,held-out}.*.json``): each alternative must match at least one file."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
NAMED = re.compile(r"bench/data/[A-Za-z0-9_.*{},/\-]+")


def alternatives(pattern: str) -> list[str]:
    """``a.{b,c}.json`` as ``a.b.json`` and ``a.c.json`` (nested and repeated braces too)."""
    braces = re.search(r"\{([^{}]*)\}", pattern)
    if braces is None:
        return [pattern]
    head, tail = pattern[: braces.start()], pattern[braces.end() :]
    return list(itertools.chain.from_iterable(alternatives(head + one + tail) for one in braces.group(1).split(",")))


def named_files() -> list[tuple[str, str]]:
    texts = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = []
    for text in texts:
        for name in sorted(set(NAMED.findall(text.read_text(encoding="utf-8")))):
            found.append((text.name, name.rstrip(".,;:")))
    return found


def test_the_braces_of_a_name_are_read_as_the_shell_reads_them() -> None:
    assert alternatives("bench/data/x.{a,b}.{c,d}.json") == [
        "bench/data/x.a.c.json",
        "bench/data/x.a.d.json",
        "bench/data/x.b.c.json",
        "bench/data/x.b.d.json",
    ]


def test_every_file_a_figure_names_exists() -> None:
    named = named_files()
    assert len(named) > 50  # the texts do name their files
    missing = [
        f"{text}: {name} ({pattern} matches nothing)"
        for text, name in named
        for pattern in alternatives(name)
        if not pattern.endswith("/") and not list(ROOT.glob(pattern))
    ]
    assert missing == []


def test_every_link_between_the_readme_and_its_pages_resolves() -> None:
    """The README is a front door to docs/: each relative link (a page, a picture) leads somewhere."""
    broken = []
    for text in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text.read_text(encoding="utf-8")):
            if not link.startswith(("http://", "https://")) and not (text.parent / link).exists():
                broken.append(f"{text.name}: {link}")
    assert broken == []
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250  # a front door, not a manual
