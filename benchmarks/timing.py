"""Timing and progress for the benchmark's measurements."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

__all__ = ["log", "stopwatch"]


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


@contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """Measure the block's wall time; call the yielded function afterwards for seconds."""
    started = time.perf_counter()
    elapsed: list[float] = []
    yield lambda: elapsed[0]
    elapsed.append(time.perf_counter() - started)
