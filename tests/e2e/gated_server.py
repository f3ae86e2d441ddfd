"""A real memserver (build_server, memserver's own stdio and HTTP transports) whose store build waits for the test.

    python -m tests.e2e.gated_server stdio
    python -m tests.e2e.gated_server http        # per-user (MEMSERVER_TOKENS), prints "serving MCP at URL"
    python -m tests.e2e.gated_server http --stateless --sse --max-concurrent-requests N
                                          --max-concurrent-requests-per-user N --queue-timeout S
                                          --session-idle-timeout S --max-sessions-per-user N
                                                 # options of memserver serve's names

Each user's store (user "default" over stdio) is built only once the test writes a byte into the FIFO
`$GATE_DIR/<user>` (made by the test with os.mkfifo): an event, not a sleep, so a test can see what a call does
while the store is still loading (notifications/progress), cancel it, then let the load finish. Until then the build
says "waiting for the test to open the gate". A written "f" makes the build fail instead. The store is the real
embedded engine (engines.open_backend) in `$GATE_DIR/data/<user>`, with the fake embedder (no model to load).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from memserver.transports import http, stdio
from memserver.transports.bearer import load_tokens

GATE_STAGE = "waiting for the test to open the gate"


def release(gate: Path, byte: bytes = b"x") -> None:
    """Open the gate (the test's side): the server's build thread reads one byte (b"f": fail the build)."""
    with gate.open("wb") as fifo:  # blocks until the build opens its end
        fifo.write(byte)


class GatedFactory:
    """A StagedStoreFactory: says what it waits on, then waits for the FIFO."""

    def __init__(self, gate_dir: Path) -> None:
        self.gate_dir = gate_dir
        self.report_stage: Callable[[str | None, str], None] = lambda user, stage: None

    def __call__(self, user: str | None) -> object:
        from memserver.engines import open_backend
        from tests.support.fakes import FakeEmbedder

        name = user or "default"
        self.report_stage(user, GATE_STAGE)
        with (self.gate_dir / name).open("rb") as gate:  # blocks until the test opens it for writing
            if gate.read(1) == b"f":
                raise RuntimeError("the test made this build fail")
        return open_backend(self.gate_dir / "data" / name, None, embedder=FakeEmbedder())


def main() -> None:
    mode = sys.argv[1]
    wire = stdio.claim_stdio() if mode == "stdio" else None
    import logging

    from memserver.server import build_server

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="gated %(levelname)s %(name)s: %(message)s")
    factory = GatedFactory(Path(os.environ["GATE_DIR"]))
    if mode == "stdio":
        stdio.serve_stdio(build_server(factory), wire)  # type: ignore[arg-type]
    else:
        tokens = load_tokens()
        import argparse

        from memserver.transports.limits import HttpLimits

        parser = argparse.ArgumentParser()
        for flag in ("--stateless", "--sse"):
            parser.add_argument(flag, action="store_true")
        for name, kind in [
            ("max_concurrent_requests", int),
            ("max_concurrent_requests_per_user", int),
            ("queue_timeout", float),
            ("session_idle_timeout", float),
            ("max_sessions_per_user", int),
        ]:
            parser.add_argument("--" + name.replace("_", "-"), type=kind, default=getattr(HttpLimits, name), dest=name)
        options = vars(parser.parse_args(sys.argv[2:]))
        stateless, sse = options.pop("stateless"), options.pop("sse")
        limits = HttpLimits(**options)
        server = build_server(factory, per_user=True)  # type: ignore[arg-type]
        http.serve_http(server, port=0, tokens=tokens, limits=limits, stateless=stateless, sse=sse)


if __name__ == "__main__":
    main()
