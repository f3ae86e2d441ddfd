"""OAuth 2.1 sign-in for HTTP (`serve --http --oauth-issuer URL`): memserver as a resource server.

An identity provider (the authorization server) issues JWT access tokens; memserver checks each one against the
issuer's published keys (JWKS) and turns its subject into a user with their own store, exactly as a static bearer
token's user (bearer.py). What is checked, and why:
  - the signature, with a key from the issuer's JWKS and an algorithm from a pinned list: `alg: none`, unsigned
    tokens and HMAC tokens signed with a public key as the secret are all refused before any key is looked at;
  - `iss` is the configured issuer, `aud` names this server (RFC 8707: a token minted for another service is not
    ours to accept), `exp` is in the future (a small leeway for clock skew); `exp`, `iat` and `nbf` are JSON
    numbers that can be dates (not strings, booleans, NaN, infinities or 10**400, which PyJWT alone lets through);
  - the JWKS is fetched once and cached; a token with a `kid` the cache lacks refetches it (the issuer rotated its
    key), at most once per `refetch_interval` so a stream of made-up kids cannot make us hammer the issuer;
  - when the keys cannot be fetched (or the answer is not JSON, nested too deep to parse included), that is one
    warning per attempt and AuthUnavailableError for the tokens that needed them: HTTP answers 503 (the client
    should retry), not 401 (the token is not at fault).

The SDK supplies the rest: BearerAuthBackend calls `verify_token`, RequireAuthMiddleware answers 401 with
`WWW-Authenticate: Bearer ... resource_metadata="..."`, and create_protected_resource_routes serves the RFC 9728
metadata that names the issuer. The SDK has no JWT verifier of its own (its examples introspect), so this is ours.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.authentication import AuthenticationBackend, AuthenticationError

from memserver.errors import AuthUnavailableError, ConfigError

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken, TokenVerifier
    from starlette.requests import HTTPConnection
    from starlette.responses import Response

    from memserver.transports.introspection import IntrospectionSettings

logger = logging.getLogger(__name__)

# Asymmetric algorithms only: with an HMAC algorithm allowed, a public key could be used as the shared secret.
DEFAULT_ALGORITHMS = ("RS256", "ES256")
ALLOWED_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
DEFAULT_READ_SCOPE = "memory:read"
DEFAULT_WRITE_SCOPE = "memory:write"
CLOCK_LEEWAY_SECONDS = 30
MAX_NUMERIC_DATE = 253402300799  # 9999-12-31T23:59:59Z: a later "date" is no date any clock or datetime holds
RETRY_FAILED_FETCH_SECONDS = 5.0  # after a failed fetch of the keys, try again this soon (or refetch_interval)
_SAFE_USER_RE = re.compile(r"^[a-z0-9_-]{1,32}$")


@dataclass(frozen=True)
class OAuthSettings:
    """Which issuer's tokens memserver accepts and for which audience (see the module docstring)."""

    issuer: str
    audience: str
    jwks_url: str | None = None  # None: discovered from the issuer's RFC 8414 / OpenID metadata
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    user_claim: str = "sub"
    read_scope: str = DEFAULT_READ_SCOPE
    write_scope: str = DEFAULT_WRITE_SCOPE
    refetch_interval: float = 30.0
    resource_url: str | None = None  # the public URL of /mcp for RFC 9728; None: the audience
    introspection: IntrospectionSettings | None = None  # ask the issuer about each token instead (RFC 7662)

    def __post_init__(self) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(self.issuer)
        if not (parts.scheme == "https" or (parts.scheme == "http" and is_loopback_url(self.issuer))):
            raise ConfigError(f"--oauth-issuer {self.issuer!r} must be an https:// URL (http:// on loopback only)")
        if not self.audience:
            raise ConfigError(
                "--oauth-issuer needs --oauth-audience (MEMSERVER_OAUTH_AUDIENCE): the `aud` your identity provider "
                "puts in tokens meant for this server, usually its public URL such as https://memory.example.com/mcp"
            )
        unknown = [name for name in self.algorithms if name not in ALLOWED_ALGORITHMS]
        if unknown or not self.algorithms:
            raise ConfigError(
                f"--oauth-algorithms: {', '.join(unknown) or 'none given'} not allowed; choose from "
                f"{', '.join(sorted(ALLOWED_ALGORITHMS))} (asymmetric signatures only)"
            )

    @property
    def scopes(self) -> list[str]:
        return [self.read_scope, self.write_scope]

    @property
    def resource(self) -> str:
        return self.resource_url or self.audience


def oauth_settings(
    issuer: str | None = None,
    audience: str | None = None,
    *,
    jwks_url: str | None = None,
    algorithms: Sequence[str] | None = None,
    user_claim: str | None = None,
    introspection_url: str | None = None,
    client_id: str | None = None,
    client_secret_file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> OAuthSettings | None:
    """The settings from flags, falling back to MEMSERVER_OAUTH_ISSUER, _AUDIENCE, _JWKS_URL, _ALGORITHMS,
    _USER_CLAIM, _INTROSPECTION_URL, _CLIENT_ID and _CLIENT_SECRET_FILE; the client secret itself only from
    MEMSERVER_OAUTH_CLIENT_SECRET or that file (a flag's value is visible to every account in `ps`). None when no
    issuer is given (no OAuth).

    Raises:
        ConfigError: an issuer without an audience, an algorithm outside the asymmetric list, introspection mixed
            with JWT settings, half a client, or a secret file others may read.
    """
    env = os.environ if environ is None else environ

    def pick(given: str | None, name: str) -> str | None:
        return given if given is not None else (env.get(f"MEMSERVER_OAUTH_{name}", "").strip() or None)

    issuer = pick(issuer, "ISSUER")
    if issuer is None:
        return None
    chosen_algorithms = algorithms or [a.strip() for a in (pick(None, "ALGORITHMS") or "").split(",") if a.strip()]
    introspection = None
    if (url := pick(introspection_url, "INTROSPECTION_URL")) is not None:
        from memserver.transports.introspection import IntrospectionSettings

        if pick(jwks_url, "JWKS_URL") is not None or chosen_algorithms:
            raise ConfigError(
                "--oauth-introspection-url asks the issuer about every token: --oauth-jwks-url and "
                "--oauth-algorithms (for JWTs checked here) do not apply; give one or the other"
            )
        secret = _client_secret(pick(client_secret_file, "CLIENT_SECRET_FILE"), env)
        introspection = IntrospectionSettings(url, client_id=pick(client_id, "CLIENT_ID"), client_secret=secret)
    elif pick(client_id, "CLIENT_ID") is not None or pick(client_secret_file, "CLIENT_SECRET_FILE") is not None:
        raise ConfigError("--oauth-client-id and the client secret are for --oauth-introspection-url only")
    return OAuthSettings(
        issuer=issuer,
        audience=pick(audience, "AUDIENCE") or "",
        jwks_url=pick(jwks_url, "JWKS_URL"),
        algorithms=tuple(chosen_algorithms) or DEFAULT_ALGORITHMS,
        user_claim=pick(user_claim, "USER_CLAIM") or "sub",
        introspection=introspection,
    )


def _client_secret(path: str | None, env: Mapping[str, str]) -> str | None:
    """memserver's client secret at the introspection endpoint: the file's first line (private to this account,
    as a token file), else MEMSERVER_OAUTH_CLIENT_SECRET."""
    if path is None:
        return env.get("MEMSERVER_OAUTH_CLIENT_SECRET", "").strip() or None
    from pathlib import Path

    from memserver.transports.bearer import check_private

    where = Path(path).expanduser()
    try:
        with where.open(encoding="utf-8") as file:
            check_private(where, os.fstat(file.fileno()), "--oauth-client-secret-file", "the client secret")
            secret = file.readline().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read --oauth-client-secret-file {where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--oauth-client-secret-file {where} is not UTF-8 text") from None
    if not secret:
        raise ConfigError(f"--oauth-client-secret-file {where} is empty")
    return secret


def is_loopback_url(url: str) -> bool:
    """Whether `url` names a loopback host (where plain http:// is allowed)."""
    from urllib.parse import urlsplit

    from memserver.transports.http import is_loopback

    return is_loopback(urlsplit(url).hostname or "")


def token_verifier(settings: OAuthSettings) -> TokenVerifier:
    """The verifier of the issuer's tokens: introspection when an endpoint is configured, else JWTs over JWKS."""
    if settings.introspection is not None:
        from memserver.transports.introspection import IntrospectionVerifier

        return IntrospectionVerifier(settings)
    return JwtTokenVerifier(settings)


def tenant_of(value: str) -> str:
    """The user (store) name for a token's subject: the subject itself when it is a safe lower-case folder name
    (so `alice` is the same user as static token user `alice`), else `u-` and a digest of it (subjects such as
    `auth0|5f1c...` or e-mail addresses, which must not become paths and must not differ only in case)."""
    if _SAFE_USER_RE.match(value):
        return value
    return "u-" + hashlib.sha256(value.encode()).hexdigest()[:30]


def bad_numeric_date(claims: Mapping[str, Any], names: Sequence[str] = ("exp", "iat", "nbf")) -> str | None:
    """The first of `names` present in `claims` that is not a RFC 7519 NumericDate memserver can use (a JSON
    number, not a boolean, between 0 and MAX_NUMERIC_DATE; NaN fails every comparison), or None."""
    for name in names:
        if name not in claims:
            continue
        value = claims[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_NUMERIC_DATE:
            return name
    return None


@dataclass
class _KeyCache:
    keys: dict[str, Any] = field(default_factory=dict)  # kid -> jwt.PyJWK
    fetched_at: float | None = None
    failure: str | None = None  # why the last fetch failed; None after a good one


class JwtTokenVerifier:
    """The SDK's TokenVerifier for JWT access tokens of one issuer (see the module docstring)."""

    def __init__(self, settings: OAuthSettings) -> None:
        self.settings = settings
        self._cache = _KeyCache()
        self._lock = asyncio.Lock()
        self._jwks_url = settings.jwks_url

    async def verify_token(self, token: str) -> AccessToken | None:
        import jwt
        from mcp.server.auth.provider import AccessToken

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        algorithm = header.get("alg")
        if algorithm not in self.settings.algorithms:  # `none`, HS256 and the unexpected stop here
            logger.info("OAuth token refused: algorithm %r is not one of %s", algorithm, self.settings.algorithms)
            return None
        key = await self._key(header.get("kid"))
        if key is None:
            return None
        try:
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[algorithm],
                audience=self.settings.audience,
                issuer=self.settings.issuer,
                leeway=CLOCK_LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            logger.info("OAuth token refused: %s", exc)
            return None
        if (bad := bad_numeric_date(claims)) is not None:
            logger.info("OAuth token refused: its %r claim is not a date", bad)
            return None
        user = claims.get(self.settings.user_claim)
        if not isinstance(user, str) or not user:
            logger.info("OAuth token refused: no %r claim", self.settings.user_claim)
            return None
        return AccessToken(
            token=token,
            client_id=tenant_of(user),
            scopes=scopes_of(claims),
            expires_at=int(claims["exp"]),
            resource=self.settings.resource,
            subject=str(claims.get("sub", user)),
            claims={"iss": claims["iss"]},
        )

    async def _key(self, kid: Any) -> Any:
        """The JWKS key named `kid` (the only key when the token names none), refetching the set once when it is
        unknown and the last fetch is older than refetch_interval (RETRY_FAILED_FETCH_SECONDS after a failed one).

        Raises:
            AuthUnavailableError: the key is not cached and the keys cannot be fetched.
        """
        async with self._lock:
            key = self._cached(kid)
            last = self._cache.fetched_at
            wait = self.settings.refetch_interval
            if self._cache.failure is not None:
                wait = min(wait, RETRY_FAILED_FETCH_SECONDS)
            if key is None and (last is None or time.monotonic() - last >= wait):
                await self._refresh()
                key = self._cached(kid)
            failure = self._cache.failure
        if key is None and failure is not None:
            raise AuthUnavailableError(f"the OAuth issuer's keys cannot be fetched: {failure}")
        if key is None:
            logger.info("OAuth token refused: no key %r in the issuer's JWKS", kid)
        return key

    def _cached(self, kid: Any) -> Any:
        keys = self._cache.keys
        if kid is None:
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid) if isinstance(kid, str) else None

    async def _refresh(self) -> None:
        import httpx2
        import jwt

        self._cache.fetched_at = time.monotonic()
        try:
            async with httpx2.AsyncClient(timeout=10, follow_redirects=False) as client:
                if self._jwks_url is None:
                    self._jwks_url = await _discover_jwks_url(client, self.settings.issuer)
                answer = await client.get(self._jwks_url)
                answer.raise_for_status()
                keys = jwt.PyJWKSet.from_dict(answer.json()).keys
        except (
            httpx2.HTTPError,
            ValueError,
            TypeError,
            AttributeError,
            jwt.PyJWTError,
            LookupError,
            RecursionError,  # a JSON answer nested deeper than the parser follows: as bad as one that is not JSON
        ) as exc:
            # One line, no traceback: the tokens waiting on these keys get a 503 saying the same.
            where = self._jwks_url or self.settings.issuer
            self._cache.failure = f"{where}: {type(exc).__name__}: {exc}"
            logger.warning("cannot fetch the OAuth issuer's keys (%s)", self._cache.failure)
            return
        self._cache.failure = None
        self._cache.keys = {str(key.key_id): key for key in keys if key.key_id is not None} or {
            f"#{i}": key for i, key in enumerate(keys)
        }


async def _discover_jwks_url(client: Any, issuer: str) -> str:
    """The issuer's jwks_uri from its RFC 8414 metadata, else its OpenID Connect discovery document."""
    base = issuer.rstrip("/")
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        answer = await client.get(base + path)
        if answer.status_code == 200 and isinstance(url := answer.json().get("jwks_uri"), str):
            return url
    raise LookupError(f"{issuer} publishes no jwks_uri in its metadata; set --oauth-jwks-url")


def scopes_of(claims: Mapping[str, Any]) -> list[str]:
    """RFC 9068 `scope` (space-separated), or the `scp` list some providers send."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return scope.split()
    scp = claims.get("scp")
    return [str(s) for s in scp] if isinstance(scp, list) else []


class OutageAware(AuthenticationBackend):
    """The SDK's BearerAuthBackend, with a token that cannot be checked now (AuthUnavailableError: the issuer's
    keys or its introspection endpoint out of reach) answered 503 with Retry-After instead of a 500: the token may
    be good, so the client should retry rather than sign in again. The cause is logged where it happens, once; the
    answer names no URL and repeats nothing the identity provider said."""

    RETRY_AFTER_SECONDS = 5

    def __init__(self, backend: AuthenticationBackend) -> None:
        self.backend = backend

    async def authenticate(self, conn: HTTPConnection) -> Any:
        try:
            return await self.backend.authenticate(conn)
        except AuthUnavailableError as exc:
            raise AuthenticationError(str(exc)) from None  # the only one raised: BearerAuthBackend raises none

    @staticmethod
    def unavailable(conn: HTTPConnection, exc: Exception) -> Response:
        from starlette.responses import JSONResponse

        description = "the identity provider cannot be reached to check this token; try again shortly"
        return JSONResponse(
            {"error": "temporarily_unavailable", "error_description": description},
            status_code=503,
            headers={"retry-after": str(OutageAware.RETRY_AFTER_SECONDS)},
        )


class FirstThatAccepts:
    """A TokenVerifier trying each verifier in turn: static tokens and OAuth tokens side by side."""

    def __init__(self, *verifiers: TokenVerifier) -> None:
        self.verifiers = verifiers

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            access = await verifier.verify_token(token)
            if access is not None:
                return access
        return None


# Tools that only read; any other tool (remember, forget, forget_matching, ones added later) needs the write scope:
# a tool nobody classified is refused to a read-only token rather than let through.
READ_ONLY_TOOLS = frozenset({"recall", "list_recent", "search_in_memory", "browse_memories"})
_NO_SCOPE_METHODS = frozenset({"initialize", "ping"})


class ScopeGate:
    """Per-request scope checks for OAuth tokens: a read-only tool call, resources and every listing need the read
    scope, any other tool call the write scope; a missing one is answered 403 with `WWW-Authenticate: Bearer
    error="insufficient_scope", scope="..."` (MCP authorization spec: step-up). Static tokens are not limited.

    The SDK's RequireAuthMiddleware checks scopes per route only, and every MCP request shares the one route, so
    this runs in McpGuard, where the message is already parsed."""

    def __init__(self, settings: OAuthSettings, resource_metadata_url: str) -> None:
        self.settings = settings
        self.resource_metadata_url = resource_metadata_url

    def missing_scope(self, access: AccessToken, method: str, params: Mapping[str, Any] | None) -> str | None:
        """The scope `access` lacks for this request, or None."""
        if (access.claims or {}).get("iss") != self.settings.issuer or method in _NO_SCOPE_METHODS:
            return None  # a static token, or a request any signed-in client may make
        needed = self.settings.read_scope
        if method == "tools/call" and (params or {}).get("name") not in READ_ONLY_TOOLS:
            needed = self.settings.write_scope
        return None if needed in access.scopes else needed

    async def refuse(self, send: Any, needed: str) -> None:
        """Answer 403 insufficient_scope, naming the scope the client should ask for."""
        import json

        description = f"this request needs the {needed} scope; sign in again asking for it"
        body = json.dumps({"error": "insufficient_scope", "error_description": description}).encode()
        challenge = (
            f'Bearer error="insufficient_scope", scope="{needed}", error_description="{description}", '
            f'resource_metadata="{self.resource_metadata_url}"'
        )
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", challenge.encode()),
        ]
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": body})
