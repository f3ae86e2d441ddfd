"""The loopback servers the OAuth tests sign in against: an identity provider (RSA signing keys, its JWKS and RFC
8414 metadata served over HTTP in a thread, and the access tokens it signs, as a real issuer would), and any ASGI
app served by uvicorn on a loopback socket (an authorization server, an introspection endpoint, memserver)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa

from memserver.transports.oauth import OAuthSettings

AUDIENCE = "http://127.0.0.1:8000/mcp"
BASE = "http://127.0.0.1:8000"


class IdentityProvider:
    """A loopback issuer: RSA keys, its JWKS and RFC 8414 metadata over HTTP, and the tokens it signs."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.jwks_fetches = 0
        self.jwks_status = 200  # set 500 to play an issuer whose key endpoint fails
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/jwks" and provider.jwks_status != 200:
                    self.send_error(provider.jwks_status)
                    return
                if self.path == "/jwks":
                    provider.jwks_fetches += 1
                    body = {"keys": [provider.public_jwk(kid) for kid in provider.keys]}
                elif self.path == "/.well-known/oauth-authorization-server":
                    body = {"issuer": provider.issuer, "jwks_uri": provider.issuer + "/jwks"}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.rotate("key-1")

    def rotate(self, kid: str) -> None:
        """A new signing key replaces the old one in the published set."""
        self.keys = {kid: rsa.generate_private_key(public_exponent=65537, key_size=2048)}
        self.kid = kid

    def public_jwk(self, kid: str) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.keys[kid].public_key()))
        return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}

    def token(self, **overrides: Any) -> str:
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": AUDIENCE, "sub": "alice", "exp": now + 300, "iat": now}
        claims |= {"scope": "memory:read memory:write"}
        claims |= overrides
        claims = {name: value for name, value in claims.items() if value is not None}
        return jwt.encode(claims, self.keys[self.kid], algorithm="RS256", headers={"kid": self.kid})

    def settings(self, **overrides: Any) -> OAuthSettings:
        return OAuthSettings(**{"issuer": self.issuer, "audience": AUDIENCE, **overrides})


class Served:
    """An ASGI app served by uvicorn on a loopback socket in a thread, until stop()."""

    def __init__(self, app: Any, sock: Any) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        started = threading.Event()

        def watch() -> None:
            while not self.server.started and self.thread.is_alive():
                time.sleep(0.01)
            started.set()

        threading.Thread(target=watch, daemon=True).start()
        started.wait(30)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
