"""Deterministic KubeRay-style object names derived from the adapter's entropy.

KubeRay creates Pods with ``generateName`` (``utils.PodName``: prefix cut to 50 chars, lower-cased,
``-head-`` / ``-worker-``) and lets the API server append 5 characters from
``k8s.io/apimachinery/pkg/util/rand`` (alphabet ``bcdfghjklmnpqrstvwxz2456789``). Decision code must
choose names itself (a redelivered create must not create a second Pod), so the suffix is derived
from ``entropy`` and a stable key: the same snapshot + entropy always yields the same names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
SUFFIX_LENGTH = 5


def random_suffix(entropy: str, key: str, length: int = SUFFIX_LENGTH) -> str:
    digest = hashlib.sha256(f"{entropy}\x00{key}".encode()).digest()
    number = int.from_bytes(digest, "big")
    chars = []
    for _ in range(length):
        number, rem = divmod(number, len(ALPHABET))
        chars.append(ALPHABET[rem])
    return "".join(chars)


class NameAllocator:
    """Hands out unique names: ``prefix + suffix(entropy, key#attempt)`` not already taken."""

    def __init__(self, *, entropy: str, taken: Iterable[str]) -> None:
        self._entropy = entropy
        self._taken = set(taken)

    def allocate(self, prefix: str, key: str) -> str:
        attempt = 0
        while True:
            candidate = prefix + random_suffix(self._entropy, f"{prefix}/{key}#{attempt}")
            if candidate not in self._taken:
                self._taken.add(candidate)
                return candidate
            attempt += 1

    def reserve(self, name: str) -> None:
        self._taken.add(name)

    def is_taken(self, name: str) -> bool:
        return name in self._taken
