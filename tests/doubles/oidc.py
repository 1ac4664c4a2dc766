"""IdentityProvider: an OIDC-style issuer on 127.0.0.1 (its JWKS, and tokens it signs).

    with IdentityProvider() as idp:       # AGENT_JWT_JWKS_URL=idp.jwks_url
        token = idp.token("alice")        # RS256, iss/aud/exp/nbf as a provider sets them
        idp.rotate()                      # a new signing key, published under a new kid

Keys are made by the test (`cryptography`), tokens signed with PyJWT: what a real
provider publishes at its `jwks_uri` and puts in an access token, nothing more.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.doubles._server import ServedDouble, ServerThread

ISSUER = "https://idp.example"
AUDIENCE = "react-agent"
ALGORITHM_OF = {"RSA": "RS256", "EC": "ES256"}


class IdentityProvider(ServedDouble):
    """Publishes its public keys at `/jwks.json`; signs tokens with its current key."""

    def __init__(self, kind: str = "RSA") -> None:
        self._lock = threading.Lock()
        self._keys: list[tuple[str, Any, str]] = []  # (kid, private key, algorithm)
        self.fetches = 0
        self.rotate(kind)
        self._server = ServerThread(Starlette(routes=[Route("/jwks.json", self._jwks)]))

    @property
    def jwks_url(self) -> str:
        return f"{self._server.url}/jwks.json"

    def rotate(self, kind: str = "RSA") -> str:
        """Sign with a new key from now on (published beside the old ones); its kid."""
        key: Any = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if kind == "RSA"
            else ec.generate_private_key(ec.SECP256R1())
        )
        kid = uuid.uuid4().hex[:12]
        with self._lock:
            self._keys.append((kid, key, ALGORITHM_OF[kind]))
        return kid

    def retire_all_but_newest(self) -> None:
        with self._lock:
            self._keys = self._keys[-1:]

    def token(
        self,
        subject: str,
        *,
        issuer: str = ISSUER,
        audience: str = AUDIENCE,
        expires_in: float = 300.0,
        not_before_in: float = 0.0,
        **claims: Any,
    ) -> str:
        """A token for `subject` signed with the current key."""
        with self._lock:
            kid, key, algorithm = self._keys[-1]
        now = time.time()
        payload = {
            "sub": subject,
            "iss": issuer,
            "aud": audience,
            "iat": int(now),
            "nbf": int(now + not_before_in),
            "exp": int(now + expires_in),
            **claims,
        }
        return jwt.encode(payload, key, algorithm=algorithm, headers={"kid": kid})

    def public_jwk(self) -> dict[str, Any]:
        """The current key as its JWKS lists it."""
        with self._lock:
            kid, key, algorithm = self._keys[-1]
        return _jwk(kid, key, algorithm)

    async def _jwks(self, request: Request) -> JSONResponse:
        with self._lock:
            self.fetches += 1
            keys = [_jwk(kid, key, algorithm) for kid, key, algorithm in self._keys]
        return JSONResponse({"keys": keys})


def _jwk(kid: str, key: Any, algorithm: str) -> dict[str, Any]:
    algo = jwt.algorithms.RSAAlgorithm if algorithm == "RS256" else jwt.algorithms.ECAlgorithm
    jwk: dict[str, Any] = json.loads(algo.to_jwk(key.public_key()))
    return {**jwk, "kid": kid, "use": "sig", "alg": algorithm}


def unsigned(subject: str, *, issuer: str = ISSUER, audience: str = AUDIENCE) -> str:
    """An `alg: none` token: what a forger sends hoping the server skips the signature."""
    now = int(time.time())
    claims = {"sub": subject, "iss": issuer, "aud": audience, "exp": now + 300, "nbf": now}
    return jwt.encode(claims, key=None, algorithm="none")


def hmac_with_public_key(provider: IdentityProvider, subject: str) -> str:
    """An HS256 token keyed with the provider's public key (published, so anyone has it):
    the algorithm-confusion forgery. Signed by hand: PyJWT itself refuses to make it."""
    jwk = provider.public_jwk()
    now = int(time.time())
    claims = {"sub": subject, "iss": ISSUER, "aud": AUDIENCE, "exp": now + 300, "nbf": now}
    header = {"alg": "HS256", "typ": "JWT", "kid": jwk["kid"]}
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    secret = json.dumps(jwk, sort_keys=True).encode()
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
