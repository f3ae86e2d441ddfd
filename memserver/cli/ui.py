"""`memserver ui`: the memory browser (memserver/ui/) on 127.0.0.1, over the store the CLI's options name.

No sign-in here: it listens on loopback only, for the person whose store it is. Prints one line,
`memserver ui: http://127.0.0.1:PORT/ui/`, once it accepts connections; opens the default browser unless
--no-open; runs until SIGINT/SIGTERM (exit 0).
"""

from __future__ import annotations

import argparse
import sys

from memserver.cli.options import DATABASE_HELP, check_database, database_url


def add_ui_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ui = commands.add_parser(
        "ui",
        help="browse, search and tend your memories in a web browser (on 127.0.0.1)",
        description="Serve the memory browser on 127.0.0.1 and open it: search, browse, edit, forget, import, "
        "export and stats over the local store (or --database). See docs/ui.md.",
        epilog="Example: memserver ui --port 8765 --no-open",
    )
    ui.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    ui.add_argument("--no-open", action="store_true", help="do not open a browser; just print the URL")
    ui.add_argument("--data-dir", help="data directory (default: MCP_MEMORY_PATH or the platform's)")
    ui.add_argument("--collection", help="collection (default: MCP_MEMORY_COLLECTION or personal_memory)")
    ui.add_argument("--database", metavar="URL", help=DATABASE_HELP)
    ui.add_argument("--namespace", help="the namespace the pages open on (default: default)")
    ui.set_defaults(func=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    import logging
    import os

    level = os.environ.get("MEMSERVER_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(stream=sys.stderr, level=level, format="memserver %(levelname)s %(name)s: %(message)s")
    database = database_url(args)
    if database:
        check_database(database)
    if args.namespace:
        from memserver.contract import inputs

        inputs.check_namespace(args.namespace, "--namespace")
    from memserver.cli.options import open_store
    from memserver.loader import Stores
    from memserver.transports import http
    from memserver.ui.app import Browser

    stores = Stores(lambda user: open_store(args))
    stores.start()
    browser = Browser(stores, home_namespace=args.namespace)
    sock = http.bind_socket(http.DEFAULT_HOST, args.port)
    port = sock.getsockname()[1]
    url = f"http://{http.DEFAULT_HOST}:{port}/ui/"
    try:
        http.serve_browser(browser.asgi(), sock, on_ready=lambda: _ready(url, open_browser=not args.no_open))
    finally:
        stores.close()
    return 0


def _ready(url: str, *, open_browser: bool) -> None:
    print(f"memserver ui: {url}", flush=True)
    if open_browser:
        import contextlib
        import webbrowser

        with contextlib.suppress(Exception):  # no browser here: the printed URL is enough
            webbrowser.open(url)
