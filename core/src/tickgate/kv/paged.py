"""The ``paged`` KV allocator: fixed-size pages, counted per owner, no prefix cache."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..interfaces import KvAllocator
from ..util.errors import PluginError


class PagedAllocator(KvAllocator):
    name = "paged"
    description = "Fixed-size KV pages per request; capacity is never exceeded."

    def __init__(self, capacity: int, page_size: int) -> None:
        self.capacity = capacity
        self.page_size = page_size
        self._used = 0
        self._held: dict[str, int] = {}

    @classmethod
    def build(cls, options: Mapping[str, Any], capacity: int, page_size: int) -> PagedAllocator:
        return cls(capacity, page_size)

    @property
    def used(self) -> int:
        return self._used

    def reserve(self, owner: str, pages: int) -> None:
        if owner in self._held:
            raise PluginError(f"paged allocator: {owner!r} already holds pages")
        self._take(pages)
        self._held[owner] = pages

    def grow(self, owner: str, pages: int) -> None:
        if owner not in self._held:
            raise PluginError(f"paged allocator: {owner!r} holds no pages")
        self._take(pages)
        self._held[owner] += pages

    def _take(self, pages: int) -> None:
        if pages < 0 or self._used + pages > self.capacity:
            raise PluginError(
                f"paged allocator: taking {pages} pages with {self._used} of "
                f"{self.capacity} used would exceed capacity"
            )
        self._used += pages

    def free(self, owner: str) -> int:
        pages = self._held.pop(owner, 0)
        self._used -= pages
        return pages

    def held(self, owner: str) -> int:
        return self._held.get(owner, 0)
