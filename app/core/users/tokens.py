"""Tokens from an identity provider: bearer JWTs checked against its published keys.

`TokenVerifier` fetches the provider's JWKS (AGENT_JWT_JWKS_URL), keeps it, and fetches
it again when a token names a key id it does not hold (the provider rotated its keys) or
when it is older than JWKS_MAX_AGE_S; never more often than once per REFETCH_AFTER_S, so
tokens with made-up key ids cannot make the service hammer the provider. A token is the
user's `sub`, checked for signature, `exp`, `nbf`, `iss` and `aud` (LEEWAY_S of clock
skew). Only public-key algorithms are taken: `alg: none` and HMAC (which a forger could
"sign" with the provider's public key) are refused before any key is looked at.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import httpx
import jwt

from app.core.errors import Unauthorized
from app.core.users.identity import TOKEN_PREFIX, Caller

logger = logging.getLogger(__name__)

ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
LEEWAY_S = 30
JWKS_MAX_AGE_S = 300.0
REFETCH_AFTER_S = 1.0
FETCH_TIMEOUT_S = 5.0

NOT_A_TOKEN = "the bearer credential is neither a key nor a token this server accepts"
BAD_ALGORITHM = "token refused: algorithm {alg!r} is not accepted (use RS256, ES256 or similar)"
UNKNOWN_KEY = "token refused: it is signed with a key the identity provider does not publish"
REFUSED = "token refused: {reason}"
NO_KEYS = "the identity provider's keys could not be fetched ({reason}): try again shortly"


class TokenVerifier:
    """Checks bearer JWTs against one identity provider's published keys."""

    def __init__(
        self,
        jwks_url: str,
        *,
        issuer: str | None,
        audience: str | None,
        admin_claim: str | None,
        http: httpx.AsyncClient,
    ) -> None:
        self._url = jwks_url
        self._issuer = issuer
        self._audience = audience
        self._admin = _claim_rule(admin_claim)
        self._http = http
        self._keys: dict[str | None, dict[str, Any]] = {}
        self._fetched_at = float("-inf")
        self._fetching = asyncio.Lock()

    async def verify(self, token: str) -> Caller:
        """The token's user, or Unauthorized saying why it is refused."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _refused(NOT_A_TOKEN) from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise _refused(BAD_ALGORITHM.format(alg=str(alg)[:20]))
        data = await self._key(header.get("kid"))
        try:
            key = jwt.PyJWK(data, algorithm=alg)
            if data.get("alg") not in (None, alg):
                raise jwt.InvalidAlgorithmError("the key is for another algorithm")
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=self._audience,
                issuer=self._issuer,
                leeway=LEEWAY_S,
                options={
                    "require": ["exp", "sub"],
                    "verify_aud": self._audience is not None,
                },
            )
        except jwt.PyJWTError as exc:
            raise _refused(REFUSED.format(reason=_reason(exc))) from None
        subject = str(claims["sub"])
        return Caller(TOKEN_PREFIX + subject, admin=self._admin(claims), via="token")

    async def _key(self, kid: Any) -> dict[str, Any]:
        if kid not in self._keys or time.monotonic() - self._fetched_at > JWKS_MAX_AGE_S:
            await self._refetch()
        found = self._keys.get(kid)
        if found is None and kid is None and len(self._keys) == 1:
            found = next(iter(self._keys.values()))  # a provider with one key may omit `kid`
        if found is None:
            raise _refused(UNKNOWN_KEY)
        return found

    async def _refetch(self) -> None:
        async with self._fetching:
            if time.monotonic() - self._fetched_at < REFETCH_AFTER_S:
                return  # fetched just now (by another request, or for an unknown key id)
            try:
                response = await self._http.get(self._url, timeout=FETCH_TIMEOUT_S)
                response.raise_for_status()
                keys = response.json()["keys"]
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                logger.warning(
                    "could not fetch the identity provider's keys: %s", type(exc).__name__
                )
                if not self._keys:
                    raise _refused(NO_KEYS.format(reason=type(exc).__name__)) from None
                return
            self._keys = {
                key.get("kid"): key
                for key in keys
                if isinstance(key, dict) and key.get("kty") in ("RSA", "EC", "OKP")
            }
            self._fetched_at = time.monotonic()


def _refused(message: str) -> Unauthorized:
    return Unauthorized("unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


def _reason(exc: jwt.PyJWTError) -> str:
    reasons = {
        jwt.ExpiredSignatureError: "it has expired",
        jwt.ImmatureSignatureError: "it is not valid yet",
        jwt.InvalidIssuerError: "it was issued by another issuer",
        jwt.InvalidAudienceError: "it is meant for another audience",
        jwt.MissingRequiredClaimError: "it lacks a required claim",
        jwt.InvalidSignatureError: "its signature does not verify",
    }
    for kind, reason in reasons.items():
        if isinstance(exc, kind):
            return reason
    return "it is malformed or signed for another key"


def _claim_rule(rule: str | None) -> Any:
    """AGENT_JWT_ADMIN_CLAIM as a test of a token's claims: `name` (the claim is true) or
    `name=value` (the claim is `value`, or a list holding it)."""
    if not rule:
        return lambda claims: False
    name, _, wanted = rule.partition("=")

    def is_admin(claims: dict[str, Any]) -> bool:
        value = claims.get(name)
        if not wanted:
            return value is True
        return value == wanted or (isinstance(value, list) and wanted in value)

    return is_admin
