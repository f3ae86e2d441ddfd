"""A round-robin HTTP proxy for the stateless tests: each request goes to the next upstream in turn, as a load
balancer without sticky sessions would send it, and its answer (JSON or an SSE stream) is streamed back.

    python -m tests.e2e.round_robin URL URL ...     # prints "proxying at http://127.0.0.1:PORT" on stderr

GET /_proxy/served answers {"upstream URL": number of requests it served} (the proxy's own path, not forwarded).
"""

from __future__ import annotations

import itertools
import socket
import sys
from collections import Counter
from collections.abc import AsyncIterator

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

HOP_BY_HOP = {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "upgrade", "te"}


def proxy_app(upstreams: list[str]) -> Starlette:
    turns = itertools.cycle(upstreams)
    served: Counter[str] = Counter()
    client = httpx2.AsyncClient(timeout=httpx2.Timeout(120.0))

    async def forward(request: Request) -> Response:
        upstream = next(turns)
        served[upstream] += 1
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        outgoing = client.build_request(
            request.method,
            upstream + request.url.path + (f"?{request.url.query}" if request.url.query else ""),
            headers=headers,
            content=await request.body(),
        )
        answer = await client.send(outgoing, stream=True)
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}

        async def body() -> AsyncIterator[bytes]:
            async for chunk in answer.aiter_raw():
                yield chunk

        return StreamingResponse(body(), answer.status_code, kept, background=BackgroundTask(answer.aclose))

    async def counts(request: Request) -> Response:
        return JSONResponse(dict(served))

    methods = ["GET", "POST", "DELETE", "PUT"]
    routes = [Route("/_proxy/served", counts), Route("/{path:path}", forward, methods=methods)]
    return Starlette(routes=routes)


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"proxying at http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
    config = uvicorn.Config(proxy_app([url.rstrip("/") for url in sys.argv[1:]]), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
