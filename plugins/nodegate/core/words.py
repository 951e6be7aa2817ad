"""Words in the lines people read: a count and its noun agree ("1 node", "2 nodes")."""

from __future__ import annotations


def plural(n: int, word: str, words: str | None = None) -> str:
    """`n` and the noun in the number `n` takes: the singular for exactly one.

    >>> plural(1, "test"), plural(3, "test"), plural(0, "node address", "node addresses")
    ('1 test', '3 tests', '0 node addresses')
    """
    return f"{n} {word if n == 1 else (words or word + 's')}"
