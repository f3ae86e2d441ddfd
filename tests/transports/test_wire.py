"""wire.inspect(): what every incoming message (a stdio line, an HTTP body) is checked for before the SDK sees it.
The same cases through real processes, over both transports, are in tests/e2e/test_e2e_messages.py."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest

from memserver.transports import wire

PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}


def refused(data: bytes) -> dict[str, Any]:
    inbound = wire.inspect(data)
    assert isinstance(inbound, wire.Refused), inbound
    answer = json.loads(inbound.answer)
    assert inbound.reason == (answer["error"]["message"] if isinstance(answer, dict) else inbound.reason)
    return answer


@pytest.mark.parametrize(
    "data",
    [
        json.dumps(PING).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        b'{"jsonrpc":"2.0","id":"x","result":{}}',
        b'{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}',
        b'{"jsonrpc":"2.0","id":7,"method":"ping","params":null}',
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"t":"\\ud83d\\ude00"}}}',  # a pair
        b' {"jsonrpc":"2.0","id":7,"method":"ping"}\r\n',
    ],
)
def test_well_formed_messages_pass(data: bytes) -> None:
    assert isinstance(wire.inspect(data), wire.Accepted)


@pytest.mark.parametrize(
    "data",
    [
        json.dumps(PING).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}',
        b'{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"recall","arguments":{"query":"q"}}}',
        b'{"jsonrpc":"2.0","id":7,"method":"ping","params":null}',
        b'{"jsonrpc":"2.0","id":"x","result":{}}',
        b'{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}',
    ],
)
def test_an_accepted_message_is_the_model_the_sdk_would_make_of_it(data: bytes) -> None:
    """inspect() validates a request or notification against its one model, not the SDK's union: same result."""
    inbound = wire.inspect(data)
    assert isinstance(inbound, wire.Accepted)
    expected = types.jsonrpc_message_adapter.validate_json(data)
    assert type(inbound.message) is type(expected)
    assert inbound.message == expected and inbound.message.model_fields_set == expected.model_fields_set


@pytest.mark.parametrize(
    ("data", "code", "request_id"),
    [
        (b"", types.PARSE_ERROR, None),
        (b"\xef\xbb\xbf" + json.dumps(PING).encode(), types.PARSE_ERROR, None),
        (b'{"jsonrpc":"2.0","id":7,"method":"p\xc3"}', types.PARSE_ERROR, None),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":-Infinity}}', types.PARSE_ERROR, None),
        (b"[" * 300 + b"]" * 300, types.PARSE_ERROR, None),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":' + b"9" * 5000 + b"}}", types.PARSE_ERROR, None),
        (
            b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":' + b"[" * 250 + b'"\\ud83d"' + b"]" * 250 + b"}}",
            -32700,
            None,
        ),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"\\udc00"}}', types.INVALID_PARAMS, 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"\\ud800":1}}', types.INVALID_PARAMS, 7),
        (b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', types.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":7,"method":"\\ud800"}', types.INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.1","id":7,"method":"ping"}', types.INVALID_REQUEST, 7),
        (b'{"id":7,"method":"ping"}', types.INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":"x"}', types.INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', types.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', types.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', types.PARSE_ERROR, None),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","result":{}}', types.INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.0","id":7}', types.INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.0","result":{}}', types.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","method":"notifications/x","params":[1]}', types.INVALID_REQUEST, None),
        (json.dumps({**PING, "method": "m" * 200}).encode(), types.METHOD_NOT_FOUND, 7),
        (b"[]", types.INVALID_REQUEST, None),
        (b'"ping"', types.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}', types.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":7,"\\u0069d":8,"method":"ping"}', types.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","method":"tools/list"}', types.INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.0","jsonrpc":"1.0","id":7,"method":"ping"}', types.INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{},"params":{"_meta":{}}}', types.INVALID_REQUEST, 7),
    ],
)
def test_each_refusal_has_the_json_rpc_code_and_the_id_when_readable(data: bytes, code: int, request_id: Any) -> None:
    answer = refused(data)
    assert answer["jsonrpc"] == "2.0" and answer["id"] == request_id and answer["error"]["code"] == code
    assert len(answer["error"]["message"]) < 200


def test_a_batch_gets_one_error_per_request_in_an_array() -> None:
    batch = [PING, {**PING, "id": "b"}, {"jsonrpc": "2.0", "method": "notifications/x"}, 5]
    inbound = wire.inspect(json.dumps(batch).encode())
    assert isinstance(inbound, wire.Refused) and inbound.ids == [7, "b"]
    answers = json.loads(inbound.answer)
    assert [a["id"] for a in answers] == [7, "b"] and {a["error"]["code"] for a in answers} == {types.INVALID_REQUEST}


def test_no_refusal_repeats_the_input() -> None:
    """Neither the parser's message nor the message's content reach the answer."""
    secret = "my-token-" + "s" * 2000
    for data in [
        b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"t":"' + secret.encode() + b'"',
        json.dumps({"jsonrpc": "1.0", "id": 7, "method": "ping", "params": {"t": secret}}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": secret}).encode(),
    ]:
        assert b"my-token" not in wire.inspect(data).answer  # type: ignore[union-attr]


@pytest.mark.parametrize("request_id", [2**63, 2**70, -(10**30), "i" * 10_000])
def test_an_id_beyond_64_bits_or_256_characters_is_passed_on(request_id: Any) -> None:
    """JSON-RPC allows any number or string as an id: the SDK gets the request, and a refusal would carry it."""
    inbound = wire.inspect(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode())
    assert isinstance(inbound, wire.Accepted) and inbound.message.id == request_id  # type: ignore[union-attr]
    head = json.dumps({"jsonrpc": "2.0", "id": request_id, "params": "xxxx"}).encode()
    assert wire.sniff_id(head) == request_id
    assert wire.sniff_id(b'{"jsonrpc":"2.0","id":12345') is None  # a number cut off by the head is not an id


def test_ids_the_sdk_takes_for_one_are_one() -> None:
    assert wire.id_key(7) == wire.id_key("7") == wire.id_key(" 07") != wire.id_key("7a")


def test_an_id_is_found_at_the_start_of_an_over_long_message() -> None:
    assert wire.sniff_id(b'{"jsonrpc":"2.0","id":"big","params":"xxxx') == "big"
    assert wire.sniff_id(b'{"jsonrpc":"2.0","id": 42, "params":"xxxx') == 42
    assert wire.sniff_id(b'{"jsonrpc":"2.0","params":"xxxx') is None


def test_an_answer_that_cannot_be_encoded_becomes_an_internal_error_for_its_request() -> None:
    answer = types.JSONRPCResponse(jsonrpc="2.0", id=5, result={"text": "\ud83d"})
    encoded = wire.encode(answer)
    assert encoded is not None
    error = json.loads(encoded)
    assert error["id"] == 5 and error["error"]["code"] == types.INTERNAL_ERROR


@pytest.mark.parametrize(
    "message",
    [
        types.JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"data": "\ud83d"}),
        types.JSONRPCRequest(jsonrpc="2.0", id=5, method="elicitation/create", params={"message": "\ud83d"}),
    ],
    ids=["notification", "request"],
)
def test_a_servers_own_message_that_cannot_be_encoded_is_dropped(
    message: types.JSONRPCMessage, caplog: pytest.LogCaptureFixture
) -> None:
    """Not an error answer: for a request of the server's, one with its id would read as the answer to the
    client's own request 5."""
    assert wire.encode(message) is None
    assert "could not be encoded" in caplog.text


def test_members_named_like_the_envelope_inside_params_are_fine() -> None:
    """Only the message's own members must be unique: "id" in the arguments (forget's) and in nested objects."""
    call = {"name": "forget", "arguments": {"id": "x"}, "_meta": {"id": 3, "method": "m"}}
    inbound = wire.inspect(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}).encode())
    assert isinstance(inbound, wire.Accepted)
