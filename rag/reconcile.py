"""What reconciling a collection's chunks with its manifest changes. Pure: the caller reads both and applies it.

A file's chunks are written to the vector store before the manifest records the file, so a process killed in
between leaves chunks that no row owns (and that deleting the file would never remove). The converse, a row
whose chunks are gone, follows a crash while a file is being removed, or a vector store rebuilt by `hearth repair`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

# On a Chroma server, passages younger than this that no record owns may be another Hearth's file on its way (its
# record is written last): left alone. Older, they were left by an add cut short, and removed.
GRACE_S = 3600.0


@dataclass(frozen=True)
class ReconcilePlan:
    orphans: dict[str, list[str]]  # path -> ids of chunks that no indexed row owns: remove them
    missing: list[str]  # indexed rows with fewer chunks in the store than recorded: index those files again

    @property
    def orphan_ids(self) -> list[str]:
        return [chunk_id for ids in self.orphans.values() for chunk_id in ids]


def plan_reconciliation(
    indexed: Mapping[str, int], stored: Mapping[str, Sequence[str]], recent: Collection[str] = ()
) -> ReconcilePlan:
    """``indexed``: chunks recorded per file the manifest lists as indexed; ``stored``: chunk ids per file in the
    vector store. Skipped files own no chunks, so chunks under their path are orphans too, unless the path is among
    ``recent`` (written lately, perhaps by another Hearth whose record of it is still to come)."""
    orphans = {
        path: list(ids) for path, ids in sorted(stored.items()) if path not in indexed and ids and path not in recent
    }
    missing = sorted(path for path, chunks in indexed.items() if len(stored.get(path, ())) < chunks)
    return ReconcilePlan(orphans, missing)
