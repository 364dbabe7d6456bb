"""The process's heap once the hub has started: what it loaded to start (modules, schemas,
extensions, their compiled validators) lives as long as the process, so the garbage
collector is told to skip it (`gc.freeze()`). A full collection walks every object it
tracks, and before this one in two of them were start-up objects: in bench/soak.py the
collections of the oldest generation were the event loop's longest pauses once retention
ran beside the loop (see docs/benchmarks/index.md)."""

from __future__ import annotations

import gc

__all__ = ["settle_heap"]


def settle_heap() -> int:
    """Collect what start-up left as garbage, then freeze the rest out of later collections
    (for ``hub run``, once the hub has started; not for a process that starts many hubs,
    whose earlier hubs' objects would be kept). Returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
