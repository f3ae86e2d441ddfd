"""JSON-RPC 2.0 on the wire: what every incoming message is checked for, and the errors sent back, shared by the
stdio and HTTP transports.

The SDK parses messages with pydantic: a message it cannot validate is dropped without an answer over stdio (the
client waits forever) and answered with a pydantic dump over HTTP. So each message passes `inspect()` first:

    not UTF-8, a byte order mark, not JSON, NaN/Infinity, nested deeper than the parser allows
        -> -32700 Parse error, id null (JSON-RPC 2.0 section 5.1)
    valid JSON but not a JSON-RPC 2.0 message: jsonrpc not "2.0", params not an object, an id that is neither a
    string nor an integer, both result and error, a batch (MCP removed batching in 2025-06-18)
        -> -32600 Invalid Request, with the request's id when it can be read
    a lone UTF-16 surrogate escape (\\ud83d) in params: valid JSON grammar, but not Unicode text (MCP messages are
    UTF-8; RFC 7493 forbids them)
        -> -32602 Invalid params, with the id
    a method name no MCP method could have (over MAX_METHOD_CHARS)
        -> -32601 Method not found, with the id
    "jsonrpc", "id", "method" or "params" twice in one message (parsers disagree on which one counts)
        -> -32600 Invalid Request, with the id unless it is the id that is repeated

Anything that passes goes to the SDK unchanged. No answer repeats the input beyond the id, and no answer
carries a parser's own message.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import pydantic_core
from pydantic import ValidationError

MAX_METHOD_CHARS = 128  # the longest MCP method name is ~40 characters
MAX_DEPTH = 200  # pydantic-core's fixed nesting limit; the Python fallback parser is held to the same
BATCHES_REMOVED = "2025-06-18"  # the MCP revision that removed JSON-RPC batching

logger = logging.getLogger(__name__)

_BOM = b"\xef\xbb\xbf"
# an id whole within the head: a string to its closing quote, a number followed by what ends a member
_ID_SNIFF = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?=\s*[,}]))')
_SIMPLE_KEY = re.compile(r"[A-Za-z0-9_$@./:-]{1,40}")


@dataclass(frozen=True)
class Accepted:
    """A well-formed JSON-RPC 2.0 message, for the SDK."""

    message: types.JSONRPCMessage


@dataclass(frozen=True)
class Refused:
    """A message the SDK must not see: `answer` is the encoded reply (an error, or an array of errors for a batch);
    `ids` the request ids it answers; `reason` a short description for the log (never the input itself)."""

    answer: bytes
    reason: str
    ids: list[types.RequestId] = field(default_factory=list)


Inbound = Accepted | Refused


def inspect(data: bytes) -> Inbound:
    """Check one message (one stdio line, one HTTP body) and say whether the SDK may have it."""
    unicode = True  # pydantic-core refuses a lone surrogate escape: what it parses is Unicode text throughout
    try:
        obj = pydantic_core.from_json(data, allow_inf_nan=False)
    except ValueError:
        unicode = False
        # pydantic-core refuses more than JSON does (lone surrogates, deep nesting); the standard library says why.
        parsed = _parse_slowly(data)
        if isinstance(parsed, Refused):
            return parsed
        obj = parsed
    if isinstance(obj, list):
        return _refuse_batch(obj)
    repeated = _repeated_members(data) if isinstance(obj, dict) and _may_repeat_members(data) else []
    if repeated:  # a parser keeps the last of them, another the first: which request is it?
        readable = obj.get("id") if "id" not in repeated and _echoable(obj.get("id")) else None
        names = " and ".join(f'"{name}"' for name in repeated)
        return refusal(readable, types.INVALID_REQUEST, f"Invalid Request: more than one {names} member")
    request_id, problem, code = _check(obj, unicode)
    if problem is not None:
        return refusal(request_id, code, problem)
    # _check() has told which of the four it is: validating against that model alone costs half the union's.
    model = _model(obj)
    try:
        message = (
            model.model_validate(obj, by_name=False)
            if model
            else types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
        )
    except ValidationError:
        return refusal(request_id, types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
    return Accepted(message)


def _model(obj: dict[str, Any]) -> type[types.JSONRPCRequest | types.JSONRPCNotification] | None:
    """The model of a message _check() passed, when it has a method (a response: None, the union decides)."""
    if "method" not in obj:
        return None
    return types.JSONRPCRequest if "id" in obj else types.JSONRPCNotification


def refusal(request_id: types.RequestId | None, code: int, message: str, data: Any = None) -> Refused:
    """A Refused carrying one error for `request_id` (None: the id is unknown)."""
    return Refused(error_bytes(request_id, code, message, data), message, [] if request_id is None else [request_id])


def error_bytes(request_id: types.RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    """A JSON-RPC error response, encoded (plain json: it never fails on odd input, and needs no model)."""
    return json.dumps(_error(request_id, code, message, data), separators=(",", ":")).encode()


def log_refused(logger: logging.Logger, refused: Refused, size: int) -> None:
    """One log line for a refused message: its size, its ids and the reason, never its content (a message may
    carry a token or a memory, which must not reach the log)."""
    ids = ", ".join(repr(i) for i in refused.ids[:5]) + (" ..." if len(refused.ids) > 5 else "") or "none"
    logger.warning("refused a message of %d bytes (id %s): %s", size, ids, refused.reason)


def sniff_id(head: bytes) -> types.RequestId | None:
    """The id of a message known only by its first bytes (one too long to read), if it shows one early."""
    found = _ID_SNIFF.search(head)
    if not found:
        return None
    try:
        value = json.loads(found.group(1))
    except ValueError:
        return None
    return value if _echoable(value) else None


def encode(message: types.JSONRPCMessage) -> bytes | None:
    """A message from the SDK, encoded for the wire, or None when it must not be sent. A message that cannot be
    encoded (text that is not Unicode) is not a crash of the writer: an answer becomes an internal error for its
    request; a request or notification of the server's is logged and dropped (an error in its place would read
    as the answer to the client's own request with that id)."""
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode()
    except pydantic_core.PydanticSerializationError:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            return error_bytes(message.id, types.INTERNAL_ERROR, "Internal error: the answer could not be encoded")
        what = message.method if isinstance(message, types.JSONRPCRequest | types.JSONRPCNotification) else "message"
        logger.error("dropped a %s of the server's that could not be encoded (text that is not Unicode)", what[:64])
        return None


def id_key(request_id: types.RequestId) -> str:
    """What makes two request ids the same to the SDK, which coerces a numeric string to its integer
    (mcp.shared.dispatcher.coerce_request_id: "7", " 07" and 7 are one request). Two requests in flight with the
    same key get one answer between them over HTTP, so the second is refused (MCP: ids are unique in a session)."""
    if isinstance(request_id, str):
        try:
            return str(int(request_id))
        except ValueError:
            return request_id
    return str(request_id)


def duplicate(request_id: types.RequestId) -> Refused:
    """The answer to a request whose id is already in use by one in flight."""
    return refusal(
        request_id,
        types.INVALID_REQUEST,
        "Invalid Request: this id is in use by a request in progress; ids must be unique",
    )


def has_modern_envelope(params: Any) -> bool:
    """Whether request params carry the 2026-07-28 per-request envelope (`_meta` with the protocol version): such
    a request needs no initialize handshake."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and types.PROTOCOL_VERSION_META_KEY in meta


# --- the checks ------------------------------------------------------------------------------------------------


def _parse_slowly(data: bytes) -> Any:
    """Parse with the standard library, which accepts lone surrogates and explains what it refuses."""
    if data.startswith(_BOM):
        return _parse_error("the message starts with a byte order mark (send UTF-8 without one)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _parse_error(f"the message is not valid UTF-8 (at byte {exc.start})")
    try:
        obj = json.loads(text, parse_constant=_refuse_constant)
    except _NotJson:
        return _parse_error("NaN and Infinity are not JSON")
    except json.JSONDecodeError as exc:
        return _parse_error(f"the message is not valid JSON (line {exc.lineno}, column {exc.colno})")
    except RecursionError:
        return _parse_error(f"the message is nested deeper than {MAX_DEPTH} levels")
    except ValueError:  # e.g. an integer of more than 4300 digits
        return _parse_error("the message holds a number too large to read")
    if _depth(obj) > MAX_DEPTH:
        return _parse_error(f"the message is nested deeper than {MAX_DEPTH} levels")
    return obj


_ENVELOPE = ("jsonrpc", "id", "method", "params")
_ESCAPED_ASCII_LETTER = re.compile(rb"\\u00[4-7][0-9a-fA-F]")  # how a key could spell "id" without the bytes id


def _may_repeat_members(data: bytes) -> bool:
    """A cheap first look: whether the message could name an envelope member twice."""
    quoted = (f'"{name}"'.encode() for name in _ENVELOPE)
    return any(data.count(name) > 1 for name in quoted) or _ESCAPED_ASCII_LETTER.search(data) is not None


def _repeated_members(data: bytes) -> list[str]:
    """The envelope members the message's top-level object has more than once (JSON allows it, RFC 8259 4: "the
    names within an object SHOULD be unique"; every parser then keeps one of them, each its own)."""
    objects: list[list[tuple[str, Any]]] = []

    def keep(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        objects.append(pairs)  # innermost first: the message itself is the last
        return dict(pairs)

    try:
        json.loads(data, object_pairs_hook=keep)
    except (ValueError, RecursionError):
        return []
    names = [name for name, _ in objects[-1]] if objects else []
    return [name for name in _ENVELOPE if names.count(name) > 1]


class _NotJson(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotJson(name)


def _parse_error(reason: str) -> Refused:
    return refusal(None, types.PARSE_ERROR, f"Parse error: {reason}")


def _check(obj: Any, unicode: bool = False) -> tuple[types.RequestId | None, str | None, int]:
    """(the id to answer with, what is wrong or None, the error code). `unicode`: the parser has already refused
    lone surrogates, so the walk that looks for them (the dearest check for a long message) is skipped."""
    if not isinstance(obj, dict):
        return None, "Invalid Request: a JSON-RPC message is an object", types.INVALID_REQUEST
    raw_id = obj.get("id")
    request_id = raw_id if _echoable(raw_id) else None
    invalid = types.INVALID_REQUEST
    if obj.get("jsonrpc") != "2.0":
        return request_id, 'Invalid Request: "jsonrpc" must be "2.0"', invalid
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str) or not method:
            return request_id, 'Invalid Request: "method" must be a non-empty string', invalid
        if "result" in obj or "error" in obj:
            return request_id, 'Invalid Request: a request has no "result" or "error"', invalid
        if "id" in obj and not _valid_id(raw_id):
            return request_id, 'Invalid Request: "id" must be a string or an integer', invalid
        if "id" in obj and request_id is None:
            return None, 'Invalid Request: "id" contains a lone surrogate escape, which is not Unicode text', invalid
        if obj.get("params") is not None and not isinstance(obj["params"], dict):  # null: as if absent (the SDK's)
            return request_id, 'Invalid Request: "params" must be an object', invalid
        where = None if unicode else _lone_surrogate(obj.get("params"), "params")
        if where is not None:
            message = f"Invalid params: {where} contains a lone surrogate escape, which is not Unicode text"
            return request_id, message, types.INVALID_PARAMS
        if not unicode and _lone_surrogate(method, "method") is not None:
            return request_id, 'Invalid Request: "method" contains a lone surrogate escape', invalid
        if len(method) > MAX_METHOD_CHARS:
            return request_id, "Method not found", types.METHOD_NOT_FOUND
        return request_id, None, 0
    if "result" in obj or "error" in obj:  # a response to a request of ours
        if ("result" in obj) == ("error" in obj):
            return None, 'Invalid Request: a response has either "result" or "error"', invalid
        if not _valid_id(raw_id) and not ("error" in obj and raw_id is None):
            return None, 'Invalid Request: a response needs the "id" of its request', invalid
        if not unicode and _lone_surrogate(obj, "") is not None:
            return None, "Invalid Request: the response contains a lone surrogate escape", invalid
        return None, None, 0
    return request_id, 'Invalid Request: neither a request ("method") nor a response ("result" or "error")', invalid


def _refuse_batch(items: list[Any]) -> Refused:
    """JSON-RPC batches were removed from MCP in 2025-06-18 (the SDK never had them): each request of the batch is
    answered with an error carrying its id, in one array, as JSON-RPC 2.0 answers a batch."""
    message = (
        f"Invalid Request: batches are not supported (MCP removed JSON-RPC batching in {BATCHES_REMOVED}); "
        "send each message on its own"
    )
    ids = [item["id"] for item in items if isinstance(item, dict) and _echoable(item.get("id"))]
    errors = [_error(request_id, types.INVALID_REQUEST, message) for request_id in ids]
    if not errors:  # an empty batch, or only notifications: one error for the whole batch
        return refusal(None, types.INVALID_REQUEST, message)
    return Refused(json.dumps(errors, separators=(",", ":")).encode(), message, list(ids))


def _error(request_id: types.RequestId | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _valid_id(value: Any) -> bool:
    """MCP: a request id is a string or an integer (not null, not a bool)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _echoable(value: Any) -> bool:
    """Whether an id may be sent back as it came: valid and Unicode. Its size is not limited here: JSON-RPC allows
    any string or number, and the message-size limit already bounds it (an integer of more than 4300 digits cannot
    be read at all, and is a parse error)."""
    if isinstance(value, str):
        return _lone_surrogate(value, "") is None
    return _valid_id(value)


def _lone_surrogate(value: Any, path: str) -> str | None:
    """The path of the first string (or key) holding a lone surrogate, else None. Iterative: no recursion limit."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if not _is_unicode(item):
                return where or "the message"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not _is_unicode(key):
                    return f"a key of {where}" if where else "a key"
                stack.append((child, f"{where}.{_show_key(key)}" if where else _show_key(key)))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item))
    return None


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _show_key(key: str) -> str:
    """A key as it may appear in an error message: short plain keys as they are, others not at all."""
    return key if _SIMPLE_KEY.fullmatch(key) else "<key>"


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest
