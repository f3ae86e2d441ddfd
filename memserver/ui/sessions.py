"""The memory browser's sign-in: who a request is (its session cookie), the pages that need one, the checked form,
and the sign-in and sign-out handlers.

`BrowserSessions(check_token)` is the Browser's (app.py) second half: with `check_token` (serve --http with bearer
or OAuth tokens) every page but the sign-in needs a signed-in session, opened by a token that is checked once and
never stored (the session cookie stands for it; a session ends when its token does); without it (loopback, one
person's store) anyone gets a session. Every POST carries the session's CSRF token and comes from this origin.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memserver.errors import AuthUnavailableError
from memserver.ui import security, views
from memserver.ui.markup import Markup, el

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

logger = logging.getLogger(__name__)

# a bearer token -> its user (or its user and expiry), or None; AuthUnavailableError: it cannot be checked now
TokenCheck = Callable[[str], Awaitable[str | security.SignIn | None]]


class Refused(Exception):
    """A request this browser will not serve: `status` and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass
class Visit:
    """Who is asking: the session, its CSRF token, whose store."""

    sid: str
    user: str | None
    csrf: str
    new: bool  # the session began with this request: its cookie goes with the answer
    signed_in: bool  # show "Sign out" (a server with tokens)


class BrowserSessions:
    """Sessions tied to the tokens that opened them (see the module docstring). `clock`: the wall clock a token's
    expiry is read against."""

    def __init__(self, check_token: TokenCheck | None = None, clock: Callable[[], float] = time.time) -> None:
        self.check_token = check_token
        self.sessions = security.Sessions(clock)

    def visit(self, request: Request) -> Visit | None:
        """The visitor's session; a server without tokens starts one for anyone (loopback, one person's store)."""
        sid = request.cookies.get(security.COOKIE)
        session = self.sessions.find(sid)
        new = False
        if session is None or not session.signed_in:
            if self.check_token is not None:
                return None
            sid, new = self.sessions.start(None, signed_in=True), True
            session = self.sessions.find(sid)
        assert sid is not None and session is not None
        return Visit(sid, session.user, self.sessions.csrf(sid), new, self.check_token is not None)

    def page(
        self, handler: Callable[[Request, Visit], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """`handler` as a route that needs a session: to the sign-in page without one; a new session's cookie set."""

        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            from starlette.responses import RedirectResponse

            visit = self.visit(request)
            if visit is None:
                return RedirectResponse("/ui/signin", status_code=303)
            response = await handler(request, visit)
            if visit.new:
                security.set_cookie(response, request, visit.sid)
            return response

        return endpoint

    async def form(self, request: Request, visit: Visit | None) -> dict[str, str]:
        """A POST's fields, once its origin and CSRF token are checked (Refused 403 otherwise)."""
        if not security.same_origin(request):
            raise Refused(403, "Refused: this request did not come from a page of this server (Origin/Referer).")
        form = await request.form()
        fields = {key: value for key, value in form.items() if isinstance(value, str)}
        self.check_csrf(visit, fields.get("csrf") or request.headers.get("x-csrf-token"))
        return fields

    def check_csrf(self, visit: Visit | None, token: object) -> None:
        """Refused 403 unless `token` is the session's CSRF token."""
        if visit is None or not isinstance(token, str) or not self.sessions.csrf_ok(visit.sid, token):
            raise Refused(403, "Refused: the form's CSRF token is missing or stale; reload the page and try again.")

    def live(self, sid: str) -> bool:
        """Whether the session still stands (not signed out, its token not expired)."""
        return self.sessions.live(sid)

    async def signin(self, request: Request) -> Response:
        from starlette.responses import HTMLResponse, RedirectResponse

        if self.check_token is None:
            return RedirectResponse("/ui/", status_code=303)
        sid = request.cookies.get(security.COOKIE)
        session = self.sessions.find(sid)
        new = session is None
        if session is None:
            sid = self.sessions.start(None, signed_in=False)
        assert sid is not None
        visit = Visit(sid, None, self.sessions.csrf(sid), new, signed_in=False)
        error = None
        status = 200
        if request.method == "POST":
            fields = await self.form(request, visit)
            try:
                checked = await self.check_token(fields.get("token", "").strip())
            except AuthUnavailableError:  # logged where it happened
                checked = None
                error, status = "The identity provider cannot be reached to check the token; try again shortly.", 503
            else:
                error, status = "That token is not valid.", 401
            grant = security.SignIn(checked) if isinstance(checked, str) else checked
            if grant is not None and grant.expires_at is not None and grant.expires_at <= self.sessions.clock():
                grant = None  # inside the verifier's clock leeway, but the session would end before it began
                error, status = "That token has expired; sign in again at your identity provider.", 401
            if grant is not None:
                self.sessions.end(sid)  # a new session id on sign-in: one set before it cannot ride along
                fresh = self.sessions.start(grant.user, signed_in=True, expires_at=grant.expires_at)
                response = RedirectResponse("/ui/", status_code=303)
                security.set_cookie(response, request, fresh)
                logger.info("browser sign-in for user %s", grant.user)
                return response
        body = _signin_body(visit.csrf, error)
        markup = views.page("Sign in", body, current="", csrf=visit.csrf, signed_in=False, page_name="signin")
        page = HTMLResponse(markup, status_code=status, headers={"cache-control": "no-store"})
        if new:
            security.set_cookie(page, request, sid)
        return page

    async def signout(self, request: Request, visit: Visit) -> Response:
        from starlette.responses import RedirectResponse

        await self.form(request, visit)
        self.sessions.end(visit.sid)
        response = RedirectResponse("/ui/signin" if self.check_token else "/ui/", status_code=303)
        response.delete_cookie(security.COOKIE, path="/ui")
        return response


def _signin_body(csrf: str, error: str | None) -> Markup:
    return el(
        "section",
        el("h1", "Sign in"),
        el(
            "p",
            "Paste the bearer token your server's operator gave you. It is checked once and never "
            "stored in this browser: a session cookie stands for it.",
        ),
        el("p", error, role="alert", class_="error") if error else None,
        el(
            "form",
            views.hidden_csrf(csrf),
            views.field("Token", "token", kind="password", autocomplete="current-password", required=True),
            el("button", "Sign in", type="submit"),
            method="post",
            action="/ui/signin",
            class_="stack",
        ),
        class_="signin",
    )
