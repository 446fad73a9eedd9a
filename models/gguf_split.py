"""GGUF models split into several files, named as llama.cpp writes and reads them: ``NAME-00001-of-00003.gguf``,
``NAME-00002-of-00003.gguf``, … in one folder. llama.cpp is given the first part and opens the others by these names,
so Hearth keeps the names as they are. Pure: names only."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PART = re.compile(r"^(?P<prefix>.+)-(?P<number>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
MAX_PARTS = 512  # the most parts Hearth reads for one model (the largest published models have a few dozen)


@dataclass(frozen=True)
class SplitName:
    prefix: str  # the name before ``-0000k-of-0000N.gguf``
    number: int  # 1 for the first part
    count: int

    def part(self, number: int) -> str:
        return f"{self.prefix}-{number:05d}-of-{self.count:05d}.gguf"

    @property
    def parts(self) -> list[str]:
        return [self.part(number) for number in range(1, self.count + 1)]


def split_name(file_name: str) -> SplitName | None:
    """The part ``file_name`` is, when it is named as one part of a split model with at least two parts."""
    found = _PART.match(file_name)
    if found is None:
        return None
    number, count = int(found.group("number")), int(found.group("count"))
    if not 1 <= number <= count or count < 2:
        return None
    return SplitName(found.group("prefix"), number, count)


def without_split(file_name: str) -> str:
    """``NAME.gguf`` for any part of a split model named ``NAME-0000k-of-0000N.gguf``; other names as they are."""
    split = split_name(file_name)
    return f"{split.prefix}.gguf" if split is not None else file_name
