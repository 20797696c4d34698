"""How every runner bounds a test's output: the start and the end kept, the middle counted.

A test may print without end; a runner keeps at most ``max_output_bytes`` of it
in memory, whether the output arrives through a pipe (the local sandbox) or in
one piece from a remote sandbox, so every runner's ``output`` reads the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import IO


class BoundedOutput:
    """Keeps the start and the end of a stream, ``limit`` bytes in all, and counts the rest.

    The end is kept because that is where a test runner writes its summary and
    a dying process its traceback. ``on_flood`` is called once when the stream
    passes ``stop_after`` bytes; reading goes on (and stores nothing) until the
    writer is gone.
    """

    def __init__(
        self,
        limit: int,
        *,
        stop_after: int | None = None,
        on_flood: Callable[[], None] | None = None,
    ) -> None:
        self.tail_limit = limit // 4
        self.head_limit = limit - self.tail_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.stop_after = stop_after
        self.on_flood = on_flood
        self.flooded = False

    def drain(self, stream: IO[bytes]) -> None:
        """Read ``stream`` until its writer is gone, keeping what fits."""
        while chunk := os.read(stream.fileno(), 65536):
            self.feed(chunk)

    def feed(self, chunk: bytes) -> None:
        """Take the next ``chunk`` of the stream, keeping what fits."""
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_limit:
            self.tail = (self.tail + chunk)[-self.tail_limit :]
        if self.stop_after is not None and self.total > self.stop_after and not self.flooded:
            self.flooded = True
            if self.on_flood is not None:
                self.on_flood()

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + tail
        marker = (
            f"\n[output truncated: {self.total} bytes in all; "
            f"kept the first {len(self.head)} and the last {len(self.tail)}]\n"
        )
        return head + marker + tail
