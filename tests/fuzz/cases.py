"""Seeded fuzz cases for a memserver process: schema-aware tool calls (valid, boundary, invalid), protocol garbage
and hostile resource URIs. Each case is the bytes to send and the ids its answers must carry (None: an error with
`"id": null`), so the driver can insist on exactly one answer per request."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.raw import encode

PLACEHOLDER = "fuzz-placeholder"
MARK = "fuzzmark"  # in every memory content the fuzz sends: the server's log must never show it
TOOLS = ("remember", "recall", "list_recent", "forget")
TEXTS = [
    "the user prefers tabs",
    "Ünïcödé ßtrasse",
    "שלום עולם",  # RTL
    "\u202eevil\u202c",  # RTL override
    "emoji 😀👩‍💻🇵🇹",
    "NUL\u0000inside",
    "combining e\u0301\u0301",
    "zero\u200bwidth",
    "\ufeffbom first",
    "tab\tand\nnewline",
    "x",
    "   padded   ",
    "'; DROP TABLE memories; --",
    "<script>alert(1)</script>",
    "%00%2e%2e/",
    "\\ud83d written out",
]
GOOD_DATES = ["2026-01-31", "2024-02-29", "0001-01-01", "9999-12-31T23:59:59Z", "2026-01-31T09:30:00.123+05:30"]
BAD_DATES = ["2024-02-30", "2023-02-29", "0000-01-01", "9999-12-31", "9999-12-31T23:59:60Z", "2026-01-31T24:00"]
BAD_DATES += ["9999-12-31T23:00:00-05:00", "２０２６-01-31", "yesterday", "", "2026-1-1", "2026-01-31T09:30:00.5"]


@dataclass
class Case:
    """One message to send. `answers`: the ids its answers carry, in any order ([] for a notification).
    `contents`: the memory contents it carries; `tool`, `arguments` when it is a well-formed tool call."""

    label: str
    data: bytes
    answers: list[Any]
    contents: list[str] = field(default_factory=list)
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    large: list[str] = field(default_factory=list)  # strings of >= 1 KB it carries: no answer may repeat them


class CaseMaker:
    """Makes cases from one seed; `known_ids` are memory ids the server acknowledged (forget and read use them)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 0
        self.known_ids: list[str] = []

    def next_id(self) -> Any:
        """A fresh id: mostly small integers and short strings, sometimes ones beyond 64 bits (either sign) or a
        10,000-character string (JSON-RPC allows any; each must be answered with that id)."""
        self.n += 1
        roll = self.rng.random()
        if roll < 0.6:
            return self.n
        if roll < 0.85:
            return f"req-{self.n}"
        if roll < 0.9:
            return 2**70 + self.n
        if roll < 0.95:
            return -(10**30) - self.n
        return f"{'L' * 10_000}-{self.n}"

    # --- one case of any kind -------------------------------------------------------------------------------------

    def case(self, http: bool) -> Case:
        roll = self.rng.random()
        if roll < 0.5:
            return self.tool_call()
        if roll < 0.75:
            return self.garbage(http)
        if roll < 0.9:
            return self.resource_read()
        return self.plain()

    # --- tool calls ---------------------------------------------------------------------------------------------

    def content(self) -> str:
        rng = self.rng
        text = f"{MARK}{self.n} " + " ".join(rng.choice(TEXTS) for _ in range(rng.randrange(1, 4)))
        if rng.random() < 0.05:
            text = (text + " ") * (20_000 // (len(text) + 1))  # near the 20 000 character limit
            text = text[:20_000]
        return text

    def arguments(self, tool: str) -> tuple[dict[str, Any], str]:
        rng = self.rng
        mode = rng.choice(["valid", "valid", "boundary", "invalid"])
        args: dict[str, Any]
        if tool == "remember":
            args = {"content": self.content()}
            if rng.random() < 0.5:
                args["tags"] = rng.sample(["work", "home", "🏷", "a b", "x" * 64, "p:q"], rng.randrange(0, 4))
            if rng.random() < 0.3:
                args["source"] = rng.choice(["chat", "https://example.com/a?b=c", "/home/u/notes.md", ""])
        elif tool == "recall":
            args = {"query": rng.choice(TEXTS).strip() or "q"}
            if rng.random() < 0.5:
                args["limit"] = rng.choice([1, 5, 50])
            if rng.random() < 0.4:
                args[rng.choice(["since", "until"])] = rng.choice(GOOD_DATES)
            if rng.random() < 0.3:
                args["mode"] = rng.choice(["hybrid", "semantic", "keyword"])
            if rng.random() < 0.2:
                args["min_score"] = rng.choice([-1, 0, 0.35, 1])
        elif tool == "list_recent":
            args = {}
            if rng.random() < 0.5:
                args["limit"] = rng.choice([1, 10, 100])
            if rng.random() < 0.3:
                args["tags"] = ["work"]
        else:
            known = self.known_ids
            args = {"memory_id": rng.choice(known) if known and rng.random() < 0.7 else f"{rng.getrandbits(128):032x}"}
        if mode == "boundary":
            self.boundary(tool, args)
        elif mode == "invalid":
            self.invalid(tool, args)
        return args, mode

    def boundary(self, tool: str, args: dict[str, Any]) -> None:
        rng = self.rng
        if tool == "remember":
            args["tags"] = [f"t{i}{'y' * 60}" for i in range(20)] if rng.random() < 0.5 else ["x"]
            args["source"] = "s" * 200
        elif tool == "recall":
            args["limit"] = rng.choice([1, 50])
            args["min_score"] = rng.choice([-1, 1, -1.0, 1.0])
            args["since"], args["until"] = "0001-01-01", "9999-12-31T23:59:59Z"
            args["query"] = "q" * 2000
        elif tool == "list_recent":
            args["limit"] = rng.choice([1, 100, 100.0])
        else:
            args["memory_id"] = rng.choice(["F" * 32, " " + "a" * 32 + " ", "z" * 64])

    def invalid(self, tool: str, args: dict[str, Any]) -> None:
        rng = self.rng
        kind = rng.randrange(9)
        if kind == 0:  # wrong types
            key = rng.choice(list(args) or ["limit"])
            args[key] = rng.choice([5, 2.5, True, None, [], {}, ["a", 1], {"$ref": "#"}])
        elif kind == 1:  # missing the required key
            args.pop({"remember": "content", "recall": "query", "forget": "memory_id"}.get(tool, "limit"), None)
        elif kind == 2:  # an extra key, sometimes a huge one
            args[rng.choice(["tag", "Limit", "__proto__", "k" * 5000])] = 1
        elif kind == 3:  # huge strings
            key = {"remember": "content", "recall": "query", "forget": "memory_id"}.get(tool, "tags")
            args[key] = ["h" * 70] if key == "tags" else MARK + "h" * 200_000
        elif kind == 4:  # dates the store would refuse
            args["since"] = rng.choice(BAD_DATES)
        elif kind == 5:  # control characters where they are not allowed
            args["tags"] = [rng.choice(["a\u0000b", "a\nb", " ", "\t", "\u0007", ""])]
        elif kind == 6:  # numbers out of range
            args["limit"] = rng.choice([0, -1, 51, 101, 10**30, 1e300])
            args["min_score"] = rng.choice([-1.0001, 2, 1e308])
        elif kind == 7:
            args["mode"] = rng.choice(["", "HYBRID", "fuzzy", 1])
        else:
            args[rng.choice(["content", "query", "source"])] = rng.choice(["   ", "\u3000", "\n\t"])

    def tool_call(self) -> Case:
        rng = self.rng
        tool = rng.choice(TOOLS) if rng.random() < 0.95 else rng.choice(["", "Remember", "x" * 3000, "rm -rf /"])
        request_id = self.next_id()
        args, mode = self.arguments(tool) if tool in TOOLS else ({}, "unknown tool")
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
        message["params"] = {"name": tool}
        if rng.random() < 0.97:
            message["params"]["arguments"] = args
        contents = [v for k, v in args.items() if k == "content" and isinstance(v, str)]
        case = Case(f"tools/call {tool[:20]} ({mode})", b"", [request_id], contents, tool, args, _large(message))
        roll = rng.random()
        if roll < 0.04:  # NaN written into the text: not JSON
            message["params"]["x"] = PLACEHOLDER
            case.label, case.answers, case.tool = "tools/call with NaN", [None], None
            case.data = encode(message).replace(f'"{PLACEHOLDER}"'.encode(), b"NaN")
        elif roll < 0.08:  # a lone surrogate escape in the arguments: valid JSON, not Unicode
            message["params"]["arguments"] = {**args, "since": PLACEHOLDER}
            case.label, case.tool = "tools/call with a lone surrogate", None
            case.data = encode(message).replace(PLACEHOLDER.encode(), b"\\ud83d")
        else:
            case.data = encode(message)
        return case

    # --- resources -------------------------------------------------------------------------------------------------

    def resource_read(self) -> Case:
        rng = self.rng
        known = rng.choice(self.known_ids) if self.known_ids else "0" * 32
        uri = rng.choice(
            [
                "memory://stats",
                "memory://recent",
                "memory://tags",
                "memory://tags/work",
                "memory://tags/a%20b",
                f"memory://memories/{known}",
                f"memory://memories/{known.upper()}",
                f"memory://memories/%20{known}",
                "memory://memories/../../../etc/passwd",
                "memory://memories/..%2F..%2Fetc%2Fpasswd",
                "memory://tags/..%2F..%2F..%2Fetc",
                "memory://tags/%ff%fe%00",
                "memory://tags/%",
                "memory://tags/" + "%41" * 3000,
                "memory://memories/" + "a" * 100_000,
                "memory://" + "/" * 500,
                "file:///etc/passwd",
                "http://169.254.169.254/latest/meta-data/",
                "MEMORY://stats",
                "memory://stats/",
                "memory://stats?x=1",
                "memory://stats#frag",
                "memory://memories/",
                "memory://tags/\u202eevil",
                "memory://tags/😀",
                "",
                "memory://tags/\u0000",
                "memory://recent?namespace=user%3Aalice",
                f"memory://memories/{known}?namespace=elsewhere",
                "memory://recent?namespace=",
                "memory://recent?",
                "memory://tags?namespace=a&namespace=b",
                "memory://tags/work?namespace=%0Aevil",
                "memory://stats?namespace=" + "%41" * 300,
                "memory://namespaces?namespace=../../etc",
            ]
        )
        request_id = self.next_id()
        message = {"jsonrpc": "2.0", "id": request_id, "method": "resources/read", "params": {"uri": uri}}
        return Case(f"resources/read {uri[:40]!r}", encode(message), [request_id], large=_large(message))

    # --- protocol garbage --------------------------------------------------------------------------------------------

    def garbage(self, http: bool) -> Case:
        rng = self.rng
        rid = self.next_id()
        ping = {"jsonrpc": "2.0", "id": rid, "method": "ping"}
        table: list[tuple[str, bytes, list[Any]]] = [
            ("truncated", encode(ping)[: rng.randrange(1, len(encode(ping)) - 1)], [None]),
            ("random bytes", rng.randbytes(rng.randrange(1, 200)).replace(b"\n", b" ") or b"x", [None]),
            ("bom", b"\xef\xbb\xbf" + encode(ping), [None]),
            ("invalid utf-8", encode(ping).replace(b'"ping"', b'"pi\xffng"'), [None]),
            ("overlong utf-8", encode(ping).replace(b'"ping"', b'"\xc0\xafping"'), [None]),
            ("jsonrpc 1.0", encode({**ping, "jsonrpc": "1.0"}), [rid]),
            ("no jsonrpc", encode({"id": rid, "method": "ping"}), [rid]),
            ("params array", encode({**ping, "params": [1, 2]}), [rid]),
            ("params string", encode({**ping, "params": "x"}), [rid]),
            ("id object", encode({**ping, "id": {"a": rid}}), [None]),
            ("id array", encode({**ping, "id": [rid]}), [None]),
            ("id float", encode({**ping, "id": 1.5}), [None]),
            ("id bool", encode({**ping, "id": True}), [None]),
            ("id null", encode({**ping, "id": None}), [None]),
            ("id long string", encode({**ping, "id": f"{'i' * 10_000}{rid}"}), [f"{'i' * 10_000}{rid}"]),
            ("id beyond 64 bits", encode({**ping, "id": 2**70 + self.n}), [2**70 + self.n]),
            ("id below -10**30", encode({**ping, "id": -(10**30) - self.n}), [-(10**30) - self.n]),
            ("id of 5000 digits", b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', [None]),
            ("method number", encode({**ping, "method": 5}), [rid]),
            ("method empty", encode({**ping, "method": ""}), [rid]),
            ("method huge", encode({**ping, "method": "m" * 5000}), [rid]),
            ("unknown method", encode({**ping, "method": "memory/steal"}), [rid]),
            ("result and method", encode({**ping, "result": {}}), [rid]),
            ("batch", encode([ping, {"jsonrpc": "2.0", "id": f"{rid}-b", "method": "ping"}]), [rid, f"{rid}-b"]),
            ("empty batch", b"[]", [None]),
            ("batch of junk", b"[1, 2]", [None]),
            ("number", b"42", [None]),
            ("string", b'"ping"', [None]),
            ("null", b"null", [None]),
            ("deep", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b"[" * 5000 + b"]" * 5000 + b"}", [None]),
            ("deep object", ('{"a":' * 300 + "1" + "}" * 300).encode(), [None]),
            ("infinity", encode(ping).replace(b'"ping"', b'"ping", "params": {"x": Infinity}'), [None]),
            (
                "lone surrogate",
                encode({**ping, "params": {"x": PLACEHOLDER}}).replace(PLACEHOLDER.encode(), b"\\udfff"),
                [rid],
            ),
            (
                "surrogate in method",
                encode({**ping, "method": PLACEHOLDER}).replace(PLACEHOLDER.encode(), b"\\ud800"),
                [rid],
            ),
            ("response", encode({"jsonrpc": "2.0", "id": rid, "result": {}}), []),  # a response to nothing: dropped
            ("bad response", encode({"jsonrpc": "2.0", "id": rid, "result": {}, "error": {}}), [None]),
            ("notification", encode({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}), []),
            ("bad notification", encode({"jsonrpc": "2.0", "method": "notifications/x", "params": [1]}), [None]),
            ("cancel unknown", encode({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}), []),
            ("huge unparseable", b"{" + b"x" * (2 * 1024 * 1024), [None]),
        ]
        label, data, answers = rng.choice(table)
        return Case(f"garbage: {label}", data, answers)

    # --- the rest of the surface -----------------------------------------------------------------------------------

    def plain(self) -> Case:
        rid = self.next_id()
        method = self.rng.choice(["ping", "tools/list", "resources/list", "resources/templates/list", "prompts/list"])
        params = self.rng.choice([None, {}, {"cursor": "x" * 10}, {"_meta": {"progressToken": rid}}])
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        return Case(method, encode(message), [rid])


HOSTILE_HEADERS: list[dict[str, str]] = [
    {"mcp-protocol-version": "garbage"},
    {"mcp-protocol-version": "2026-07-28"},  # the 2026 era, without its envelope
    {"mcp-protocol-version": "1" * 4000},
    {"mcp-session-id": "0" * 32},
    {"mcp-session-id": "../../etc/passwd"},
    {"mcp-session-id": "s" * 4000},
    {"accept": "text/html"},
    {"accept": "application/json"},
    {"content-type": "text/plain"},
    {"content-type": "application/json; charset=latin-1"},
    {"origin": "http://evil.example"},
    {"origin": "null"},
    {"host": "evil.example:80"},
    {"mcp-method": "tools/call", "mcp-name": "x" * 1000},
    {"authorization": "Bearer " + "t" * 4000},
]


def _large(message: Any) -> list[str]:
    """The strings of 1 KB or more inside a message (keys included)."""
    found: list[str] = []
    stack = [message]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and len(item) >= 1024:
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def echoes(answer_text: str, large: list[str]) -> bool:
    """Whether an answer repeats 1 KB of any of the large strings (three windows of each are looked for)."""
    for text in large:
        for start in (0, len(text) // 2 - 512, len(text) - 1024):
            window = json.dumps(text[max(start, 0) : max(start, 0) + 1024], ensure_ascii=False)[1:-1]
            if window in answer_text:
                return True
    return False
