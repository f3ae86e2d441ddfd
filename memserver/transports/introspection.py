"""OAuth token introspection (RFC 7662, `serve --http --oauth-issuer URL --oauth-introspection-url URL`).

For identity providers whose access tokens are opaque (or whose operators would rather ask than verify keys):
each token is POSTed to the issuer's introspection endpoint, authenticated as memserver's client
(`client_secret_basic`), and the answer must say `active: true`. Then the same checks as a JWT's (oauth.py):
`exp` present and not passed (a date, not NaN, a string or 10**400), `nbf` not ahead, `aud` naming this server
(RFC 8707: a token for another service is refused even by its own issuer), `iss` the configured issuer when the
answer names one (the endpoint is the issuer's own, so an answer without `iss` is its word), the user claim a
non-empty string, and not a refresh token. Scopes come from `scope`, as for JWTs.

Load and failure:
  - answers are cached by the token's SHA-256 (never the token) for `cache_seconds`, never past the token's `exp`,
    at most `max_cached` of them (the oldest go first): a token used for a session's requests is asked about once
    every half minute, not once per request, and a revoked one stops working within that time;
  - requests arriving together with the same unseen token wait for one call (single flight), not one call each;
  - one httpx client (one connection pool) serves every call, and at most `max_concurrent` calls are in flight
    (the rest wait, within the same `timeout`): a burst of new tokens cannot open a connection each. The client
    belongs to one event loop: `aclose()` closes it (the app's lifespan does), and a verifier used from a new loop
    closes the old loop's client before making its own;
  - an endpoint that does not answer within `timeout`, cannot be reached, answers anything but 200 with a JSON
    object (a JSON answer nested too deep to parse included), is one warning and AuthUnavailableError (HTTP 503:
    try again), never a 401 for a token that may be good. Nothing the endpoint says is logged or passed on:
    refusals are logged by the check that failed.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus, urlsplit

import anyio

from memserver.errors import AuthUnavailableError, ConfigError
from memserver.transports.oauth import CLOCK_LEEWAY_SECONDS, bad_numeric_date, is_loopback_url, scopes_of, tenant_of

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

    from memserver.transports.oauth import OAuthSettings

logger = logging.getLogger(__name__)

MAX_TOKEN_CHARS = 16 * 1024  # longer is no access token: it is not sent on to the endpoint


@dataclass(frozen=True)
class IntrospectionSettings:
    """Where to ask about tokens and as which client (see the module docstring)."""

    url: str
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    cache_seconds: float = 30.0
    max_cached: int = 10_000
    max_concurrent: int = 16
    timeout: float = 5.0

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if not (parts.scheme == "https" or (parts.scheme == "http" and is_loopback_url(self.url))):
            raise ConfigError(
                f"--oauth-introspection-url {self.url!r} must be an https:// URL (http:// on loopback only): the "
                "tokens and the client secret travel in it"
            )
        if (self.client_id is None) != (self.client_secret is None):
            raise ConfigError(
                "--oauth-introspection-url needs both --oauth-client-id and the client secret "
                "(MEMSERVER_OAUTH_CLIENT_SECRET or --oauth-client-secret-file), or neither"
            )
        if self.cache_seconds < 0 or self.max_cached < 1 or self.max_concurrent < 1 or not self.timeout > 0:
            raise ConfigError("introspection: cache_seconds >= 0, max_cached and max_concurrent >= 1, timeout > 0")


@dataclass
class _Answer:
    access: AccessToken | None  # None: the token is refused
    asked: float  # the clock when the endpoint answered (a clock set back before it ends the answer too)
    until: float  # the clock after which it is asked about again


class IntrospectionVerifier:
    """The SDK's TokenVerifier by introspection at the issuer's endpoint (see the module docstring).

    `clock`: seconds since the epoch (time.time), for the token's dates and the cache's."""

    def __init__(self, settings: OAuthSettings, *, clock: Callable[[], float] = time.time) -> None:
        assert settings.introspection is not None
        self.settings = settings
        self.endpoint = settings.introspection
        self.clock = clock
        self.waiting = 0  # calls waiting for a free slot now (max_concurrent in flight)
        self._cache: OrderedDict[bytes, _Answer] = OrderedDict()
        self._flights: dict[bytes, asyncio.Future[AccessToken | None]] = {}  # token digest -> the call asking
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: Any = None  # httpx2.AsyncClient of _loop
        self._slots: asyncio.Semaphore | None = None

    @property
    def closed(self) -> bool:
        """Whether no HTTP client is open (none made yet, or aclose() closed it)."""
        return self._http is None

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's AccessToken, None when refused.

        Raises:
            AuthUnavailableError: the endpoint cannot tell now (down, slow, or answering nonsense).
        """
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        key = hashlib.sha256(token.encode()).digest()
        cached = self._cache.get(key)
        if cached is not None and cached.asked <= self.clock() < cached.until:
            return cached.access
        await self._bind_loop()
        flight = self._flights.get(key)
        if flight is None:  # the first to ask; the others with this token wait for its answer
            flight = asyncio.ensure_future(self._check(token, key))
            self._flights[key] = flight
            flight.add_done_callback(lambda done: self._landed(key, done))
        return await asyncio.shield(flight)  # one caller cancelled does not cancel the others' answer

    async def aclose(self) -> None:
        """Close the shared client (the app's lifespan ends); a later call makes a new one."""
        if self._http is not None:
            http, self._http, self._loop, self._slots = self._http, None, None, None
            await http.aclose()

    async def _check(self, token: str, key: bytes) -> AccessToken | None:
        """Ask about `token`, judge the answer and cache the verdict (see verify_token)."""
        access, reason = self._judge(await self._ask(token), token)
        if access is None:
            logger.info("OAuth token refused by introspection: %s", reason)
        now = self.clock()
        ttl = self.endpoint.cache_seconds
        if access is not None and access.expires_at is not None:
            ttl = min(ttl, access.expires_at - now)  # a token past its exp is not served from the cache
        self._cache[key] = _Answer(access, now, now + ttl)
        self._cache.move_to_end(key)
        while len(self._cache) > self.endpoint.max_cached:
            self._cache.popitem(last=False)
        return access

    def _landed(self, key: bytes, flight: asyncio.Future[AccessToken | None]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight.cancelled():
            flight.exception()  # retrieved: an outage nobody is left waiting for is not logged as unhandled

    async def _bind_loop(self) -> None:
        """Make the client, the slots and the flights this event loop's; a client of another loop is closed after
        (in its own loop when that still runs; else here, as far as a closed loop allows).

        The new client is in place before the first await, so that a second call racing onto the new loop finds it
        and does not make (and leak) one of its own."""
        import httpx2

        loop = asyncio.get_running_loop()
        if self._loop is loop and self._http is not None and self._slots is not None:
            return
        old, old_loop = self._http, self._loop
        limits = httpx2.Limits(max_connections=self.endpoint.max_concurrent)
        self._http = httpx2.AsyncClient(timeout=self.endpoint.timeout, follow_redirects=False, limits=limits)
        self._slots = asyncio.Semaphore(self.endpoint.max_concurrent)
        self._loop = loop
        self._flights = {}
        if old is not None and old_loop is not None and old_loop is not loop:
            try:
                if old_loop.is_running():
                    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(old.aclose(), old_loop))
                else:
                    await old.aclose()
            except RuntimeError:  # its loop is closed, and its sockets with nothing left to close them
                logger.debug("the introspection client of an ended event loop was dropped")

    def _client(self) -> tuple[Any, asyncio.Semaphore]:
        """The running loop's client and the semaphore bounding calls (made by _bind_loop)."""
        if self._http is None or self._slots is None:
            raise AuthUnavailableError("the OAuth introspection client was closed")  # aclose() while asking
        return self._http, self._slots

    async def _ask(self, token: str) -> Mapping[str, Any]:
        """The endpoint's answer about `token`, a JSON object; AuthUnavailableError when there is none."""
        import httpx2

        client, slots = self._client()
        headers = {"accept": "application/json"}
        if self.endpoint.client_id is not None and self.endpoint.client_secret is not None:
            # RFC 6749 2.3.1: each part form-urlencoded before the Basic encoding
            pair = f"{quote_plus(self.endpoint.client_id, safe='')}:{quote_plus(self.endpoint.client_secret, safe='')}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        form = {"token": token, "token_type_hint": "access_token"}
        problem = None
        try:
            with anyio.fail_after(self.endpoint.timeout):
                self.waiting += 1
                try:
                    await slots.acquire()  # waiting for a slot counts too
                finally:
                    self.waiting -= 1
                try:
                    answer = await client.post(self.endpoint.url, data=form, headers=headers)
                finally:
                    slots.release()
        except TimeoutError:
            problem = f"no answer within {self.endpoint.timeout:g} s"
        except httpx2.HTTPError as exc:
            problem = f"{type(exc).__name__}"
        else:
            if answer.status_code != 200:
                problem = f"HTTP {answer.status_code}"  # 401: memserver's client id or secret is wrong
            else:
                try:
                    body = answer.json()
                except (ValueError, RecursionError):  # not JSON, or nested past what the parser will follow
                    body = None
                if isinstance(body, dict):
                    return body
                problem = "an answer that is not a JSON object"
        logger.warning("OAuth introspection at %s failed: %s", self.endpoint.url, problem)
        raise AuthUnavailableError(f"the OAuth introspection endpoint failed: {problem}")

    def _judge(self, answer: Mapping[str, Any], token: str) -> tuple[AccessToken | None, str]:
        """The AccessToken the answer grants, or None and why not (naming a claim, never its value)."""
        from mcp.server.auth.provider import AccessToken

        if answer.get("active") is not True:
            return None, "not active"
        if (bad := bad_numeric_date(answer)) is not None:
            return None, f"its {bad!r} is not a date"
        now = self.clock()
        exp = answer.get("exp")
        if exp is None or exp <= now:
            return None, "expired" if exp is not None else "no 'exp'"
        if answer.get("nbf", 0) > now + CLOCK_LEEWAY_SECONDS:
            return None, "not valid yet ('nbf')"
        if "iss" in answer and answer["iss"] != self.settings.issuer:
            return None, "issued by another issuer"
        audiences = answer.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences
        if not isinstance(audiences, list) or self.settings.audience not in audiences:
            return None, "for another audience ('aud')"
        if "refresh" in str(answer.get("token_type", "")).lower():
            return None, "a refresh token"
        user = answer.get(self.settings.user_claim)
        if not isinstance(user, str) or not user:
            return None, f"no {self.settings.user_claim!r}"
        subject = answer.get("sub")
        return AccessToken(
            token=token,
            client_id=tenant_of(user),
            scopes=scopes_of(answer),
            expires_at=int(exp),
            resource=self.settings.resource,
            subject=subject if isinstance(subject, str) else user,
            claims={"iss": self.settings.issuer},  # ScopeGate tells OAuth tokens from static ones by it
        ), ""
