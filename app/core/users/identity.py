"""Who a request comes from, as every layer above sees it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.core.storage.runs import ADMIN_ID

# How the caller proved who it is: a key (AGENT_API_KEY or one `react-agent users add`
# printed), an identity provider's token, a trusted proxy's header, or nothing (a service
# with no way in configured, on loopback only).
Via = Literal["key", "token", "proxy", "open"]
# Prefixes that keep the three sources' names apart: a token's `sub` or a proxy's header
# can never name a user of a key (whose names have no colon), nor the admin.
TOKEN_PREFIX = "jwt:"
PROXY_PREFIX = "proxy:"


@dataclass(frozen=True, slots=True)
class Caller:
    """A request's user: its id (the owner recorded on what it creates), whether it is an
    admin (sees and manages everything, and is not limited), and how it signed in."""

    user_id: str
    admin: bool
    via: Via

    @property
    def limited(self) -> bool:
        """Whether the per-user limits apply (an admin's runs and requests are not counted
        against it: one-person setups and operators are never throttled)."""
        return not self.admin


OPEN = Caller(ADMIN_ID, admin=True, via="open")
SINGLE_ADMIN = Caller(ADMIN_ID, admin=True, via="key")
