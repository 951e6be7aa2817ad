"""Naming the slow leaf pair (pure: no I/O): the fabric step of nccl localization.

A fault between two leaves (a slow spine, a cable between switches, the uplinks that carry
their flows) slows every job holding nodes of both leaves, and no job inside one leaf. Over
nodes known good, a job over a set of leaves T fails exactly when the pair lies inside T: the
candidates start as every pair of leaves and each such job keeps the pairs inside T (it
failed) or drops them (it passed). `design` plans one round of such probes: each leaf takes
part in at most as many probes as it has free good nodes (one node per probe), and the probes
split the candidates into as many small classes as they can (which probes fail tells the
class). With few nodes per leaf a round splits the candidates by about ten, with one good
node per candidate pair it names the pair at once.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence

Pair = tuple[str, str]  # two leaves, in name order


def all_pairs(leaves: Iterable[str]) -> set[Pair]:
    return set(_all_pairs(tuple(sorted(set(leaves) - {""}))))


@functools.lru_cache(maxsize=8)
def _all_pairs(leaves: tuple[str, ...]) -> frozenset[Pair]:
    # Asked again after every job while the leaves stay the same (312 leaves: 48,516 pairs).
    return frozenset(itertools.combinations(leaves, 2))


def narrow(cands: set[Pair], leaves: Collection[str], failed: bool) -> set[Pair]:
    """What a job over nodes known good on `leaves` leaves of the candidates."""
    lvs = sorted(set(leaves) - {""})
    if len(lvs) * (len(lvs) - 1) // 2 < len(cands):  # the job's own pairs: fewer to look at
        inside = {p for p in itertools.combinations(lvs, 2) if p in cands}
    else:
        inside = {p for p in cands if p[0] in leaves and p[1] in leaves}
    return inside if failed else cands - inside


def score(cands: Collection[Pair], labels: Mapping[str, int]) -> tuple[int, int]:
    """(the sum of squared class sizes, the pairs no probe holds): a pair's class is the set
    of probes holding both its leaves (bit masks)."""
    get = labels.get
    sizes = Counter(get(a, 0) & get(b, 0) for a, b in cands)
    return sum(v * v for v in sizes.values()), sizes.get(0, 0)


def _bits(mask: int) -> list[int]:
    """The set bits of `mask`, lowest first (a step per set bit, not per bit)."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _blocks(active: Sequence[str], m: int) -> dict[str, int]:
    """m blocks of the leaves, a probe per two blocks: leaf labels (bit i: probe i)."""
    pairs = list(itertools.combinations(range(m), 2)) or [(0, 0)]
    out = {}
    for i, lf in enumerate(active):
        b = i % m
        out[lf] = sum(1 << t for t, (x, y) in enumerate(pairs) if b in (x, y))
    return out


def _direct(cands: Collection[Pair]) -> dict[str, int]:
    """One probe per candidate pair."""
    out: dict[str, int] = {}
    for t, (a, b) in enumerate(sorted(cands)):
        out[a] = out.get(a, 0) | 1 << t
        out[b] = out.get(b, 0) | 1 << t
    return out


def _fit(labels: dict[str, int], cap: Mapping[str, int], rng: random.Random) -> dict[str, int]:
    """Each leaf in at most `cap` probes: keep a random `cap` of its bits."""
    out = {}
    for lf, mask in labels.items():
        if mask.bit_count() <= cap.get(lf, 0):
            out[lf] = mask
            continue
        out[lf] = sum(1 << i for i in rng.sample(_bits(mask), cap.get(lf, 0)))
    return out


def design(
    cands: Collection[Pair], cap: Mapping[str, int], seed: int = 0, cover: bool = False
) -> list[tuple[str, ...]]:
    """One round of probes (each the leaves it runs over) that split `cands` best: the least
    sum of squared class sizes (with `cover`, first the fewest pairs no probe holds: no job
    has yet shown there is a pair), then the fewest probes. Block designs (a probe per two of
    m blocks), one probe per pair, and random ones (each leaf in as many of T probes as its
    nodes allow) are tried; probes over fewer than two leaves are dropped."""
    active = sorted({lf for p in cands for lf in p if cap.get(lf, 0) > 0})
    if len(active) < 2 or not cands:
        return []
    rng = random.Random(seed)
    tried: list[dict[str, int]] = [_direct(cands)]
    most = max(cap[lf] for lf in active)
    for m in range(2, min(len(active), most + 1) + 1):
        tried.append(_blocks(active, m))
    # Each design is scored over every candidate pair: past 4,096 candidates (about 90
    # leaves) fewer random designs per width, so a round's design stays well under a second
    # at 312 leaves (48,516 pairs).
    reps = 12 if len(cands) <= 4096 else max(2, 12 * 4096 // len(cands))
    for t in (2, 3, 4, 6, 8, 12, 16):
        for _ in range(reps):
            tried.append({lf: sum(1 << i for i in rng.sample(range(t), min(t, cap[lf])))
                          for lf in active})  # fmt: skip
    best: tuple[tuple[int, int, int], list[tuple[str, ...]]] | None = None
    for labels in tried:
        fitted = _fit(labels, cap, rng)
        probes = _probes(fitted)
        sq, uncovered = score(cands, fitted)
        key = (uncovered if cover else 0, sq, len(probes))
        if best is None or key < best[0]:
            best = (key, probes)
    return best[1] if best is not None else []


def _probes(labels: Mapping[str, int]) -> list[tuple[str, ...]]:
    """Probe t: the leaves whose label has bit t, probes in bit order, each once."""
    by_bit: dict[int, list[str]] = {}
    for lf, m in labels.items():
        for t in _bits(m):
            by_bit.setdefault(t, []).append(lf)
    out: list[tuple[str, ...]] = []
    seen: set[tuple[str, ...]] = set()
    for t in sorted(by_bit):
        leaves = tuple(sorted(by_bit[t]))
        if len(leaves) >= 2 and leaves not in seen:
            seen.add(leaves)
            out.append(leaves)
    return out


def assign(
    probes: Sequence[Sequence[str]], free: Mapping[str, Sequence[str]]
) -> list[tuple[str, ...]]:
    """The nodes of each probe: one free node of each of its leaves, none used twice."""
    left = {lf: list(ns) for lf, ns in free.items()}
    out = []
    for leaves in probes:
        if all(left.get(lf) for lf in leaves):
            out.append(tuple(sorted(left[lf].pop(0) for lf in leaves)))
    return out
