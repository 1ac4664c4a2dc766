"""Service-managed keys: made here, shown once, stored as a digest, checked in constant time.

A key reads `ra_<key id>_<secret>`: the `ra_` prefix lets secret scanners recognise a
leaked one, the key id (public, shown by `react-agent users list`) finds its row, and the
secret is 32 random bytes. Only SHA-256 of the whole key is stored: a key carries 256
bits of randomness, so a slow password hash would add cost and no safety.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import NamedTuple

PREFIX = "ra_"
KEY = re.compile(r"^ra_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$")


class NewKey(NamedTuple):
    """A key just made: the key itself (shown once), its id and its digest (stored)."""

    key: str
    key_id: str
    digest: str


def new_key() -> NewKey:
    key_id = secrets.token_hex(6)
    key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    return NewKey(key, key_id, digest(key))


def key_id_of(key: str) -> str | None:
    """The key id a presented key names, or None when it is not shaped as ours."""
    found = KEY.match(key)
    return found.group(1) if found else None


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def matches(presented: str, stored_digest: str) -> bool:
    """Whether `presented` is the key `stored_digest` was made from. The presented key is
    hashed first and the digests compared in constant time: how long a wrong key takes
    says nothing about how much of it was right."""
    return hmac.compare_digest(digest(presented), stored_digest)
