"""Python's cyclic garbage collector around blocks that allocate much next to a large heap: paused or frozen."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_frozen() -> Iterator[bool]:
    """Keep the objects alive on entering out of the cyclic garbage collector's passes within the block.

    For a block that allocates many short-lived objects next to a large long-lived heap: judge calls, next to the
    judges' libraries (ragas and langchain alone hold about 260,000 objects). Every full pass of the collector,
    triggered by the calls' allocations, walks that heap, and no judge request is sent meanwhile (a visible share of
    a run at 32 requests in flight: ``benchmarks/judge_speed.py`` measures the judges against the ideal time).
    ``gc.freeze`` moves the objects alive on entering to the permanent generation, so the passes within the block
    walk only the objects created in it (collected as usual); on leaving, ``gc.unfreeze`` returns the others to the
    oldest generation, where the next full pass collects whatever of them became garbage: a collection is put off,
    nothing is kept. When objects are frozen already on entering (by the embedding process), the block changes
    nothing (and the block gets False, else True: it may then freeze again, :func:`refreeze`, the exit unfreezes).
    """
    if gc.get_freeze_count():
        yield False
        return
    gc.freeze()
    try:
        yield True
    finally:
        gc.unfreeze()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector within the block (reference counting still frees memory).

    For a block that allocates many objects and creates no reference cycle: every full pass of the collector,
    triggered by the allocations, walks every live object (the predictions' retrieved chunks included) and
    finds nothing to free. The collector is enabled again on leaving the block if it was enabled on entering.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
