"""Shards: a deterministic part of a tasks file, so that several machines share one batch.

``agent batch --shard I/N`` runs the tasks whose shard is I: a task's shard follows
from its ID alone (a hash of it), so N shards together hold every task exactly once,
whatever order the lines are in, and a task keeps its shard when lines are added or
removed. Each shard writes its own results file; ``agent report`` takes them all.
"""

from __future__ import annotations

import hashlib
import re

from ..errors import UsageError

#: The most shards a tasks file may be cut into.
MAX_SHARDS = 10_000
_SHARD = re.compile(r"([0-9]{1,5})/([0-9]{1,5})")


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (from 1): the shard's number and the number of shards.

    :raises UsageError: it is not two whole numbers with 1 <= I <= N <= :data:`MAX_SHARDS`.
    """
    match = _SHARD.fullmatch(text.strip())
    if match is not None:
        index, count = int(match.group(1)), int(match.group(2))
        if 1 <= index <= count <= MAX_SHARDS:
            return index, count
    raise UsageError(
        f"--shard must be I/N with 1 <= I <= N <= {MAX_SHARDS:,} (such as 2/4), not {text!r}"
    )


def shard_of(task_id: str, count: int) -> int:
    """The shard (from 1) of the task with ID ``task_id`` among ``count`` shards."""
    digest = hashlib.sha256(task_id.encode("utf-8", errors="surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1
