"""Who a request comes from: the one check every surface calls (`Access.caller`).

Three ways in, tried in this order for a bearer credential: AGENT_API_KEY (the single
admin), a key `react-agent users add` made (`ra_...`), an identity provider's JWT (when
AGENT_JWT_JWKS_URL is set). Without a bearer credential, a trusted proxy's header
(AGENT_TRUSTED_USER_HEADER, believed only from AGENT_TRUSTED_PROXIES). A service with
none of these configured and no keys in its database is open: everyone is the admin,
which `react-agent serve` allows on loopback only.

Keys are looked up in the database and kept for KEY_CACHE_S at most (AGENT_RUN_LEASE_S):
a key revoked on one replica is refused by every other within that bound, without a
restart. Every bearer credential is hashed before it is compared, in constant time.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Sequence

import httpx

from app.core.errors import Unauthorized
from app.core.storage.runs import RunStore
from app.core.storage.users import KeyRow
from app.core.users import keys
from app.core.users.identity import OPEN, PROXY_PREFIX, SINGLE_ADMIN, Caller
from app.core.users.tokens import TokenVerifier
from app.settings import Settings

NO_CREDENTIAL = "sign in: send Authorization: Bearer <your key or token>"
WRONG_KEY = "this key is not valid (wrong, revoked, or from another server)"
NO_TOKENS = "this key is not valid, and this server takes no identity provider's tokens"
BAD_PROXY_USER = "the trusted proxy's user header holds no usable name"
# The most keys kept in memory: enough for every user of a team's server.
MAX_CACHED_KEYS = 10_000


class Access:
    """Turns a request's credentials into its `Caller`, or refuses it (401)."""

    def __init__(self, settings: Settings, store: RunStore, http: httpx.AsyncClient) -> None:
        self._store = store
        api_key = settings.agent_api_key
        self._admin_digest = keys.digest(api_key.get_secret_value()) if api_key else None
        self._tokens = (
            TokenVerifier(
                settings.agent_jwt_jwks_url,
                issuer=settings.agent_jwt_issuer,
                audience=settings.agent_jwt_audience,
                admin_claim=settings.agent_jwt_admin_claim,
                http=http,
            )
            if settings.agent_jwt_jwks_url
            else None
        )
        self._proxy_header = settings.agent_trusted_user_header
        self._proxies = _networks(settings.agent_trusted_proxies)
        self._ttl = settings.agent_run_lease_s
        self._keys: dict[str, tuple[KeyRow | None, float]] = {}
        self._open: tuple[bool, float] | None = None

    @property
    def configured(self) -> bool:
        """Whether a way in is configured besides the database's keys."""
        return bool(self._admin_digest or self._tokens or self._proxy_header)

    async def caller(
        self, *, bearer: str | None, proxy_user: str | None, peer: str | None
    ) -> Caller:
        """The request's user, from its bearer credential, or else a trusted proxy's
        header (`proxy_user`, from the connection's `peer` address); Unauthorized else."""
        if bearer:
            return await self._bearer(bearer)
        if proxy_user is not None and self._trusted(peer):
            name = proxy_user.strip()
            if not name or len(name) > 256:
                raise _unauthorized(BAD_PROXY_USER)
            return Caller(PROXY_PREFIX + name, admin=False, via="proxy")
        if await self.is_open():
            return OPEN
        raise _unauthorized(NO_CREDENTIAL)

    async def is_open(self) -> bool:
        """No way in is configured and the database holds no key (checked once per
        KEY_CACHE_S: a first `users add` closes a running service within that bound)."""
        if self.configured:
            return False
        now = time.monotonic()
        if self._open is None or now - self._open[1] > self._ttl:
            self._open = (await self._store.open_keys() == 0, now)
        return self._open[0]

    async def _bearer(self, credential: str) -> Caller:
        presented = credential.strip()
        if self._admin_digest is not None and keys.matches(presented, self._admin_digest):
            return SINGLE_ADMIN
        key_id = keys.key_id_of(presented)
        if key_id is not None:
            row = await self._key(key_id)
            # Hashed and compared whether or not the id was found: a made-up id costs
            # what a wrong secret does.
            digest = row.digest if row is not None else keys.digest("")
            if keys.matches(presented, digest) and row is not None and row.revoked_at is None:
                return Caller(row.user_id, admin=row.admin, via="key")
            raise _unauthorized(WRONG_KEY)
        if self._tokens is not None:
            return await self._tokens.verify(presented)
        if await self.is_open():
            return OPEN  # an open service ignores credentials, as it always has
        raise _unauthorized(NO_TOKENS if self._admin_digest is None else WRONG_KEY)

    async def _key(self, key_id: str) -> KeyRow | None:
        now = time.monotonic()
        cached = self._keys.get(key_id)
        if cached is not None and now - cached[1] <= self._ttl:
            return cached[0]
        row = await self._store.key(key_id)
        if len(self._keys) >= MAX_CACHED_KEYS:
            self._keys.clear()
        if row is not None:
            self._keys[key_id] = (row, now)
        return row

    def _trusted(self, peer: str | None) -> bool:
        if not self._proxy_header or peer is None:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self._proxies)


def _networks(entries: Sequence[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(entry, strict=False) for entry in entries]


def _unauthorized(message: str) -> Unauthorized:
    return Unauthorized("unauthorized", message, headers={"WWW-Authenticate": "Bearer"})
