"""`Stores.start()` also runs the server's warm-up (what a first request would otherwise pay for: the tools'
argument validators), once, in the background, whether or not the store itself loads (issue 26, item 5)."""

from __future__ import annotations

import threading
from typing import Any

import anyio

from memserver.loader import Stores


def test_start_runs_the_warm_up_once_in_another_thread() -> None:
    ran: list[threading.Thread] = []
    done = threading.Event()

    def warm_up() -> None:
        ran.append(threading.current_thread())
        done.set()

    stores = Stores(lambda user: Any, per_user=True, warm_up=warm_up)
    stores.start()
    stores.start()
    assert done.wait(30)
    assert len(ran) == 1 and ran[0] is not threading.current_thread()


def test_a_failing_warm_up_is_logged_and_the_store_still_loads() -> None:
    def warm_up() -> None:
        raise RuntimeError("no jsonschema today")

    store: Any = object()
    stores = Stores(lambda user: store, warm_up=warm_up)
    stores.start()
    assert anyio.run(stores.get, None) is store
