"""One worker's KV pool in blocks, as vLLM 0.31.0's block pool keeps it (vllm/v1/core/block_pool.py,
kv_cache_manager.py): blocks a request in flight holds, and cached blocks kept for reuse.

- A request in flight holds its blocks: privately (`allocate`, its own tokens) or by reference
  (`acquire`, a cached prefix it shares, counted once however many requests hold it).
- What no request holds stays cached, for prefix reuse, until evicted: least recently used first,
  and only when an allocation needs the room (vLLM's free queue hands out the oldest free block).
- An allocation succeeds only if the pool has that many blocks no request holds; otherwise it is
  refused and the scheduler waits or preempts (sim.py). Nothing is ever held beyond the pool.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable


class Cache:
    def __init__(self, capacity_blocks: int) -> None:
        self.capacity = capacity_blocks
        self.items: OrderedDict = OrderedDict()  # cached entries (prefixes, finished tails): key -> blocks
        self.used = 0  # cached blocks, referenced or not
        self.pinned = 0  # blocks requests in flight hold privately
        self.refs: dict = {}  # cached key -> requests in flight holding it
        self.referenced = 0  # cached blocks some request holds
        self.peak = 0  # the most blocks held at once (pinned + referenced): kv_blocks_peak

    def in_use(self) -> int:
        return self.pinned + self.referenced

    def free(self) -> int:
        """Blocks an allocation could get now: what no request holds (cached ones are evicted for it)."""
        return self.capacity - self.in_use()

    def _mark(self) -> None:
        self.peak = max(self.peak, self.in_use())

    def has(self, key: Hashable) -> bool:
        if key in self.items:
            self.items.move_to_end(key)
            return True
        return False

    def acquire(self, key: Hashable) -> bool:
        """A request takes a reference on a cached entry: True if it was cached (now unevictable)."""
        if not self.has(key):
            return False
        if key not in self.refs:
            self.referenced += self.items[key]
        self.refs[key] = self.refs.get(key, 0) + 1
        self._mark()
        return True

    def release(self, key: Hashable) -> None:
        self.refs[key] -= 1
        if not self.refs[key]:
            del self.refs[key]
            self.referenced -= self.items[key]

    def _evict_for(self, blocks: int) -> None:
        """Evict unreferenced entries, least recent first, until `blocks` more fit beside what is cached."""
        over = self.used + self.pinned + blocks - self.capacity
        if over <= 0:
            return  # the common case: it fits beside what is cached (no walk of the entries)
        victims = []
        for key, size in self.items.items():
            if key not in self.refs:
                victims.append(key)
                over -= size
                if over <= 0:
                    break
        for key in victims:
            self.used -= self.items.pop(key)

    def allocate(self, blocks: int) -> bool:
        """Hold `blocks` more privately, evicting cached blocks no request holds; False (nothing
        changed) if the pool has fewer than that not held by requests."""
        if blocks > self.free():
            return False
        self._evict_for(blocks)
        self.pinned += blocks
        self._mark()
        return True

    def unpin(self, blocks: int) -> None:
        self.pinned -= blocks

    def insert(self, key: Hashable, blocks: int) -> bool:
        """Keep `blocks` (just unpinned) cached under `key`, evicting unreferenced entries; True if
        `key` is cached afterwards. A full pool drops them instead: they were free blocks."""
        if key in self.items:
            self.items.move_to_end(key)
            return True
        self._evict_for(blocks)
        if self.used + self.pinned + blocks <= self.capacity:
            self.items[key] = blocks
            self.used += blocks
            return True
        return False
