"""OAuth sign-in when things go wrong, through the HTTP app: tokens whose dates are not dates are 401 (never 500),
an issuer whose keys cannot be fetched is one log line and a 503, and a browser session opened with an access
token ends when the token does."""

from __future__ import annotations

import logging
import math
import re
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from memserver.cli.serve import _browser
from memserver.local.store import MemoryStore
from memserver.server import build_server
from memserver.transports.http import bind_socket, http_app
from memserver.transports.limits import HttpLimits
from memserver.transports.oauth import JwtTokenVerifier
from tests.e2e.raw import INITIALIZE, MCP_HEADERS
from tests.support.fakes import FakeEmbedder
from tests.support.identity import BASE, IdentityProvider


def app_for(idp: IdentityProvider, tmp_path: Path, *, ui: bool = False, clock: Any = time.time, **settings: Any) -> Any:
    def factory(user: str | None) -> MemoryStore:
        return MemoryStore(tmp_path / str(user), "oauth", embedder=FakeEmbedder())

    oauth = idp.settings(**settings)
    issuer = JwtTokenVerifier(oauth)
    browser = _browser({}, HttpLimits(), issuer, clock=clock) if ui else None
    return http_app(build_server(factory, per_user=True), oauth=oauth, oauth_verifier=issuer, ui=browser)


def initialize(client: TestClient, token: str) -> Any:
    return client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS | {"authorization": f"Bearer {token}"})


@pytest.mark.parametrize(
    ("claim", "value"),
    [
        ("exp", math.nan),
        ("exp", math.inf),
        ("exp", "99999999999"),
        ("exp", True),
        ("exp", 10**400),
        ("exp", 1e300),
        ("exp", [int(time.time()) + 300]),
        ("iat", "now"),
        ("iat", -math.inf),
        ("iat", -(10**400)),
        ("nbf", math.nan),
        ("nbf", False),
    ],
)
def test_a_token_whose_dates_are_not_dates_is_401(
    idp: IdentityProvider, tmp_path: Path, claim: str, value: Any
) -> None:
    """NaN, infinities, strings, booleans and numbers past any calendar: refused as a bad token, not served a 500
    nor taken for an expiry in the year 10**392."""
    with TestClient(app_for(idp, tmp_path), base_url=BASE, raise_server_exceptions=False) as client:
        answer = initialize(client, idp.token(**{claim: value}))
        assert answer.status_code == 401, (claim, value, answer.text)
        assert initialize(client, idp.token()).status_code == 200


@pytest.mark.parametrize("outage", ["the key endpoint fails", "nothing listens there"])
def test_keys_that_cannot_be_fetched_are_one_log_line_and_a_503(
    idp: IdentityProvider, tmp_path: Path, caplog: pytest.LogCaptureFixture, outage: str
) -> None:
    """The token may be good: 503 with Retry-After (retry), not 401 (sign in again), naming no URL; the server logs
    one warning, without a traceback; once the keys are back the same token is served."""
    if outage == "the key endpoint fails":
        idp.jwks_status = 500
        jwks_url = idp.issuer + "/jwks"
    else:
        closed = bind_socket("127.0.0.1", 0)
        jwks_url = f"http://127.0.0.1:{closed.getsockname()[1]}/jwks"
        closed.close()
    app = app_for(idp, tmp_path, jwks_url=jwks_url, refetch_interval=0)
    token = idp.token()
    with (
        caplog.at_level(logging.INFO, logger="memserver"),
        TestClient(app, base_url=BASE, raise_server_exceptions=False) as client,
    ):
        answer = initialize(client, token)
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"].isdigit()
        assert answer.json()["error"] == "temporarily_unavailable"
        assert "127.0.0.1" not in answer.text and "jwks" not in answer.text
        warnings = [r for r in caplog.records if r.name.startswith("memserver") and r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "keys" in warnings[0].getMessage(), [r.getMessage() for r in warnings]
        assert all(r.exc_info is None for r in caplog.records)
        if outage == "the key endpoint fails":
            idp.jwks_status = 200
            assert initialize(client, token).status_code == 200


def csrf_of(page: str) -> str:
    found = re.search(r'data-csrf="([0-9a-f]+)"', page)
    assert found
    return found.group(1)


def sign_in(client: TestClient, token: str) -> Any:
    form = {"csrf": csrf_of(client.get("/ui/signin").text), "token": token}
    return client.post("/ui/signin", data=form, headers={"origin": BASE})


def test_a_browser_session_ends_when_its_access_token_expires(idp: IdentityProvider, tmp_path: Path) -> None:
    """`serve --http --ui` with OAuth: the cookie session opened with a token is signed out once the browser's
    clock passes the token's exp; a token past its `exp` (even inside the clock leeway /mcp would not grant
    either) is refused at sign-in."""
    now = [time.time()]
    app = app_for(idp, tmp_path, ui=True, clock=lambda: now[0])
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        assert sign_in(client, idp.token(exp=int(now[0]) - 5)).status_code == 401
        expires = int(now[0]) + 120
        assert sign_in(client, idp.token(exp=expires)).status_code == 303
        now[0] = expires - 1
        assert client.get("/ui/browse").status_code == 200
        now[0] = expires
        answer = client.get("/ui/browse")
        assert (answer.status_code, answer.headers.get("location")) == (303, "/ui/signin")


def test_browser_sign_in_while_the_keys_are_out_of_reach_is_a_503_page(idp: IdentityProvider, tmp_path: Path) -> None:
    idp.jwks_status = 500
    app = app_for(idp, tmp_path, ui=True, jwks_url=idp.issuer + "/jwks")
    with TestClient(app, base_url=BASE, follow_redirects=False, raise_server_exceptions=False) as client:
        answer = sign_in(client, idp.token())
        assert answer.status_code == 503 and "cannot be reached" in answer.text
