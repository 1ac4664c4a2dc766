"""Service-managed keys: their shape, and a check whose time says nothing about the key."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from app.core.users import keys

ROUNDS = 20_000  # timings of each case


def test_a_key_is_recognisable_by_its_prefix_and_names_its_id() -> None:
    made = keys.new_key()

    assert made.key.startswith("ra_")
    assert keys.key_id_of(made.key) == made.key_id
    assert made.digest == keys.digest(made.key) and made.key not in made.digest
    assert keys.key_id_of("sk-" + made.key[3:]) is None
    assert keys.new_key().key != made.key


def test_only_the_key_it_was_made_from_matches_its_digest() -> None:
    made = keys.new_key()

    assert keys.matches(made.key, made.digest)
    assert not keys.matches(made.key[:-1] + ("A" if made.key[-1] != "A" else "B"), made.digest)
    assert not keys.matches("", made.digest)


def _spread(check: Callable[[str, str], bool]) -> float:
    """How much longer the slowest of a right key, one wrong at its start and one wrong at
    its end takes to check than the fastest (medians of many timings of each)."""
    made = keys.new_key()
    right = made.key
    wrong_at_start = "ra_" + ("0" if right[3] != "0" else "1") + right[4:]
    wrong_at_end = right[:-1] + ("A" if right[-1] != "A" else "B")
    presented = {"right": right, "wrong at start": wrong_at_start, "wrong at end": wrong_at_end}
    timings: dict[str, list[int]] = {name: [] for name in presented}
    # Interleaved call by call: a spell of load on the machine weighs on every case alike
    # (in blocks of one case each, CI once saw one case's block slowed by half).
    for _ in range(ROUNDS):
        for name, key in presented.items():
            started = time.perf_counter_ns()
            check(key, right)
            timings[name].append(time.perf_counter_ns() - started)
    typical = [statistics.median(values) for values in timings.values()]
    return max(typical) / min(typical)


def _stops_at_the_first_difference(presented: str, stored: str) -> bool:
    if len(presented) != len(stored):
        return False
    for a, b in zip(presented, stored, strict=True):  # noqa: SIM110 (the early exit is the point)
        if a != b:
            return False
    return True


def test_checking_a_wrong_key_costs_what_checking_the_right_one_does() -> None:
    # The measurement sees a check that stops at the first wrong character...
    assert _spread(_stops_at_the_first_difference) > 2
    # ...and sees none in ours: the presented key is hashed first, the digests compared
    # in constant time, so where (or whether) it is wrong changes nothing.
    assert _spread(lambda key, right: keys.matches(key, keys.digest(right))) < 1.5
