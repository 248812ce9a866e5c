"""The delivery ledger's in-process table answers as moto's DynamoDB does: the same requests, sent to both,
get the same answers and leave the same items (simulation/fake_dynamodb.py)."""

from __future__ import annotations

import base64
import random
import uuid
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from sagemaker_governance.adapters import idempotency
from sagemaker_governance.adapters.idempotency import DeliveryLedger
from smgov.simulation.backoff import virtual_backoff
from smgov.simulation.fake_dynamodb import LedgerTable
from smgov.simulation.faults import FaultInjector, FaultSpec, Throttler
from tests.adapters.conftest import NOW

TABLE = "ledger"
OTHER = "spot-health"


def _table(client: Any, name: str) -> None:
    client.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )


@pytest.fixture
def clients() -> Iterator[tuple[Any, Any, LedgerTable]]:
    """moto's client, and a client whose ledger-table writes the double answers (the same moto behind it)."""
    with mock_aws():
        moto_client = boto3.client("dynamodb", region_name="us-east-1")
        _table(moto_client, TABLE)
        _table(moto_client, OTHER)
        double = LedgerTable(frozenset({TABLE}))
        double_client = double.attach(boto3.client("dynamodb", region_name="us-east-1"))
        yield moto_client, double_client, double


def _answer(client: Any, request: dict[str, Any]) -> dict[str, Any]:
    """What a caller sees: the response without its metadata, or the error's code and returned item."""
    try:
        response = client.update_item(TableName=TABLE, **request)
    except ClientError as exc:
        return {"error": exc.response["Error"]["Code"], "item": exc.response.get("Item")}
    response.pop("ResponseMetadata", None)
    # moto reports the capacity consumed unasked; DynamoDB only with ReturnConsumedCapacity (API reference)
    response.pop("ConsumedCapacity", None)
    return dict(response)


def _moto_items(client: Any) -> dict[str, dict[str, Any]]:
    return {item["id"]["S"]: item for item in client.scan(TableName=TABLE)["Items"]}


def _double_items(double: LedgerTable) -> dict[str, dict[str, Any]]:
    """The double's items as botocore parses them from moto (it keeps the wire form: binaries in base64)."""

    def parsed(value: dict[str, Any]) -> dict[str, Any]:
        return {"B": base64.b64decode(value["B"])} if "B" in value else value

    return {
        item["id"]["S"]: {name: parsed(value) for name, value in item.items()}
        for item in double.items[TABLE].values()
    }


def _ledger_steps(seed: int, count: int) -> list[tuple[str, str, str, int, int]]:
    """A random run of claims, completions and releases over a few keys and owners, time moving on."""
    draw = random.Random(seed)
    steps, at = [], 0
    for _ in range(count):
        at += draw.choice((0, 1, 30, 61, 400, 3_700))
        steps.append(
            (
                draw.choice(("claim", "claim", "complete", "release")),
                draw.choice(("k-1", "k-2", "k-3")),
                draw.choice(("m-1", "m-2")),
                at,
                draw.choice((0, 60, 900)),
            )
        )
    return steps


def _run_ledger(client: Any, steps: list[tuple[str, str, str, int, int]], monkeypatch: Any) -> list[Any]:
    tokens = iter(uuid.UUID(int=n) for n in range(1, 10_000))
    # the ledger's own claim tokens (only its module's: botocore draws an invocation id per request it sends,
    # and the double answers before the send loop)
    monkeypatch.setattr(idempotency, "uuid", SimpleNamespace(uuid4=lambda: next(tokens)))
    ledger = DeliveryLedger(client, TABLE, ttl_seconds=3_600)
    granted: dict[str, str] = {}  # key -> the token of the last granted claim
    outcomes: list[Any] = []
    for action, key, owner, seconds, hold in steps:
        now = NOW + timedelta(seconds=seconds)
        if action == "claim":
            claim = ledger.claim(key, owner, now, hold)
            if claim.granted and claim.token:
                granted[key] = claim.token
            outcomes.append(claim)
        elif action == "complete":
            ledger.complete(key, granted.get(key, "never-granted"), now)
        else:
            ledger.release(key, owner, now, [f"audit|{key}|{seconds}"])
    return outcomes


@pytest.mark.parametrize("seed", range(4))
def test_the_ledger_decides_the_same_on_the_double_as_on_moto(
    clients: tuple[Any, Any, LedgerTable], monkeypatch: Any, seed: int
) -> None:
    moto_client, double_client, double = clients
    steps = _ledger_steps(seed, 60)
    on_moto = _run_ledger(moto_client, steps, monkeypatch)
    on_double = _run_ledger(double_client, steps, monkeypatch)
    assert on_double == on_moto
    assert _double_items(double) == _moto_items(moto_client)
    assert double.calls == len(steps)  # every write answered by the double, none reached moto
    granted = sum(1 for outcome in on_moto if getattr(outcome, "granted", False))
    assert 0 < granted < len(steps)  # the run exercised both answers


EXPRESSIONS: list[dict[str, Any]] = [
    # a new item, and ALL_OLD of an item that did not exist
    {"UpdateExpression": "SET #s = :a", "ExpressionAttributeNames": {"#s": "status"},
     "ExpressionAttributeValues": {":a": {"S": "x"}}, "ReturnValues": "ALL_OLD"},
    {"UpdateExpression": "SET #s = :a, n = :n", "ExpressionAttributeNames": {"#s": "status"},
     "ExpressionAttributeValues": {":a": {"S": "y"}, ":n": {"N": "10"}}, "ReturnValues": "ALL_NEW"},
    # numbers compare by value ("10" > "9"), strings by their bytes
    {"UpdateExpression": "SET m = :m", "ConditionExpression": "n > :nine",
     "ExpressionAttributeValues": {":m": {"S": "a"}, ":nine": {"N": "9"}}, "ReturnValues": "ALL_NEW"},
    {"UpdateExpression": "SET m = :m", "ConditionExpression": "#s < :z",
     "ExpressionAttributeNames": {"#s": "status"}, "ExpressionAttributeValues": {":m": {"S": "b"}, ":z": {"S": "Z"}},
     "ReturnValuesOnConditionCheckFailure": "ALL_OLD"},
    {"UpdateExpression": "SET m = :m", "ConditionExpression": "n = :ten",
     "ExpressionAttributeValues": {":m": {"S": "c"}, ":ten": {"N": "10.0"}}, "ReturnValues": "ALL_OLD"},
    # a missing attribute compares false
    {"UpdateExpression": "SET m = :m", "ConditionExpression": "gone <= :s",
     "ExpressionAttributeValues": {":m": {"S": "e"}, ":s": {"S": "10"}}},
    # NOT, AND, OR and parentheses with DynamoDB's precedence
    {"UpdateExpression": "SET m = :m", "ConditionExpression": "NOT attribute_exists(m) OR n = :ten AND #s = :y",
     "ExpressionAttributeNames": {"#s": "status"},
     "ExpressionAttributeValues": {":m": {"S": "f"}, ":ten": {"N": "10"}, ":y": {"S": "y"}}},
    {"UpdateExpression": "SET m = :m", "ConditionExpression": "(attribute_not_exists(m) OR n = :ten) AND #s = :x",
     "ExpressionAttributeNames": {"#s": "status"},
     "ExpressionAttributeValues": {":m": {"S": "g"}, ":ten": {"N": "10"}, ":x": {"S": "x"}},
     "ReturnValuesOnConditionCheckFailure": "ALL_OLD"},
    # ... where the grouping decides (the item has status "y", n 10 and m): true only as A OR (B AND C); false
    # only as (NOT A) AND B; NOT itself; numbers with fractions
    {"UpdateExpression": "SET p = :p", "ConditionExpression": "attribute_exists(m) OR n = :nine AND #s = :x",
     "ExpressionAttributeNames": {"#s": "status"},
     "ExpressionAttributeValues": {":p": {"S": "p"}, ":nine": {"N": "9"}, ":x": {"S": "x"}}},
    {"UpdateExpression": "SET q = :q", "ConditionExpression": "NOT n = :nine AND #s = :x",
     "ExpressionAttributeNames": {"#s": "status"},
     "ExpressionAttributeValues": {":q": {"S": "q"}, ":nine": {"N": "9"}, ":x": {"S": "x"}}},
    {"UpdateExpression": "SET q = :q", "ConditionExpression": "NOT n = :nine",
     "ExpressionAttributeValues": {":q": {"S": "q"}, ":nine": {"N": "9"}}},
    {"UpdateExpression": "SET r = :r", "ConditionExpression": "n > :nine AND n < :eleven",
     "ExpressionAttributeValues": {":r": {"S": "r"}, ":nine": {"N": "9.5"}, ":eleven": {"N": "10.5"}}},
    # binaries compare as unsigned bytes (0x00 < 0xff, though their base64 forms order the other way)
    {"UpdateExpression": "SET b = :low", "ConditionExpression": "attribute_not_exists(b)",
     "ExpressionAttributeValues": {":low": {"B": b"\x00"}}},
    {"UpdateExpression": "SET c = :c", "ConditionExpression": "b < :high",
     "ExpressionAttributeValues": {":c": {"S": "c"}, ":high": {"B": b"\xff"}}},
    {"UpdateExpression": "SET l = :l", "ConditionExpression": "attribute_not_exists(l) AND n <= :ten",
     "ExpressionAttributeValues": {":l": {"L": [{"S": "one"}, {"N": "2"}]}, ":ten": {"N": "10"}},
     "ReturnValues": "ALL_NEW"},
    # validation: an unused placeholder, an undefined one, the key, a reserved word
    {"UpdateExpression": "SET m = :m", "ConditionExpression": "missing <= :s",
     "ExpressionAttributeValues": {":m": {"S": "e"}, ":s": {"S": "10"}}},
    {"UpdateExpression": "SET m = :m", "ExpressionAttributeNames": {"#s": "status"},
     "ExpressionAttributeValues": {":m": {"S": "h"}}},
    {"UpdateExpression": "SET m = :m", "ExpressionAttributeValues": {":m": {"S": "i"}, ":unused": {"N": "1"}}},
    {"UpdateExpression": "SET m = :undefined", "ExpressionAttributeValues": {":m": {"S": "j"}}},
    {"UpdateExpression": "SET id = :m", "ExpressionAttributeValues": {":m": {"S": "k"}}},
    {"UpdateExpression": "SET m = :m, m = :n", "ExpressionAttributeValues": {":m": {"S": "l"}, ":n": {"S": "o"}}},
]  # fmt: skip


def test_conditions_and_returned_values_match_moto(clients: tuple[Any, Any, LedgerTable]) -> None:
    moto_client, double_client, double = clients
    answers = []
    for request in EXPRESSIONS:
        item_key = {"Key": {"id": {"S": "item"}}}
        on_moto, on_double = (
            _answer(moto_client, {**item_key, **request}),
            _answer(double_client, {**item_key, **request}),
        )
        assert on_double == on_moto, request
        answers.append(on_moto)
    assert _double_items(double) == _moto_items(moto_client)
    codes = [a.get("error") for a in answers]
    # the list covers both outcomes of a condition and each validation failure
    assert codes.count("ConditionalCheckFailedException") >= 3 and codes.count("ValidationException") == 6
    assert any(a.get("item") for a in answers)  # an old item returned with a failed condition


def test_values_of_different_types_never_compare(clients: tuple[Any, Any, LedgerTable]) -> None:
    # "{"S":"6"} does not equal {"N":"6"}" (developer guide, "Writing conditions with legacy parameters");
    # moto cannot be asked: its comparison of a number with a string raises inside the mock (TypeError)
    _, double_client, double = clients
    key = {"Key": {"id": {"S": "item"}}}
    assert "error" not in _answer(double_client, {**key, "UpdateExpression": "SET n = :n",
                                                  "ExpressionAttributeValues": {":n": {"N": "6"}}})  # fmt: skip
    for condition in ("n = :s", "n >= :s", "n <= :s"):
        answer = _answer(double_client, {**key, "UpdateExpression": "SET m = :s", "ConditionExpression": condition,
                                         "ExpressionAttributeValues": {":s": {"S": "6"}}})  # fmt: skip
        assert answer == {"error": "ConditionalCheckFailedException", "item": None}, condition
    assert double.items[TABLE]['{"id": {"S": "item"}}'] == {"id": {"S": "item"}, "n": {"N": "6"}}


@pytest.mark.parametrize(
    "update",
    ["REMOVE m", "SET m = if_not_exists(m, :v)", "SET m = :v ADD n :v", "SET a.b = :v"],
)
def test_an_update_the_double_does_not_model_is_refused_not_guessed(
    clients: tuple[Any, Any, LedgerTable], update: str
) -> None:
    _, double_client, double = clients
    answer = _answer(double_client, {"Key": {"id": {"S": "x"}}, "UpdateExpression": update,
                                     "ExpressionAttributeValues": {":v": {"N": "1"}}})  # fmt: skip
    assert answer["error"] == "ValidationException"
    assert double.items[TABLE] == {}


@pytest.mark.parametrize(
    "request_",
    [
        {"UpdateExpression": "SET v = :v", "ReturnValues": "UPDATED_NEW"},
        {"UpdateExpression": "SET v = :v", "ReturnValuesOnConditionCheckFailure": "ALL_NEW"},
        {"UpdateExpression": "SET v = :v", "ConditionExpression": "ATTRIBUTE_NOT_EXISTS(v)"},
        {"UpdateExpression": "SET v = :bad"},
    ],
)
def test_a_request_the_double_refuses_writes_nothing(
    clients: tuple[Any, Any, LedgerTable], request_: dict[str, Any]
) -> None:
    _, double_client, double = clients
    values = {":v": {"N": "1"}} if ":bad" not in request_["UpdateExpression"] else {":bad": {"N": "1e"}}
    answer = _answer(double_client, {"Key": {"id": {"S": "x"}}, "ExpressionAttributeValues": values, **request_})
    assert answer["error"] == "ValidationException"
    assert double.items[TABLE] == {}


def test_a_condition_the_double_does_not_model_is_refused(clients: tuple[Any, Any, LedgerTable]) -> None:
    _, double_client, _ = clients
    for condition in ("m <> :v", "begins_with(m, :v)", "m IN (:v)"):
        answer = _answer(double_client, {"Key": {"id": {"S": "x"}}, "UpdateExpression": "SET m = :v",
                                         "ConditionExpression": condition,
                                         "ExpressionAttributeValues": {":v": {"S": "1"}}})  # fmt: skip
        assert answer["error"] == "ValidationException", condition


def test_other_tables_and_operations_stay_with_moto(clients: tuple[Any, Any, LedgerTable]) -> None:
    moto_client, double_client, double = clients
    double_client.update_item(
        TableName=OTHER, Key={"id": {"S": "a"}}, UpdateExpression="SET v = :v",
        ExpressionAttributeValues={":v": {"N": "1"}},
    )  # fmt: skip
    assert moto_client.get_item(TableName=OTHER, Key={"id": {"S": "a"}})["Item"]["v"] == {"N": "1"}
    assert double.calls == 0 and double.items[TABLE] == {}


def test_a_throttled_attempt_is_retried_by_botocore_and_written_once(monkeypatch: Any) -> None:
    waited: list[float] = []
    with mock_aws(), virtual_backoff(waited.append):
        double = LedgerTable(frozenset({TABLE}))
        throttler = Throttler(FaultInjector(FaultSpec.parse("throttle=0.5"), seed=0))
        draws = iter([True, False])  # the first attempt throttled (drawn before the send loop), the retry not
        attempts: list[bool] = []

        def draw(name: str) -> bool:
            attempts.append(drawn := next(draws))
            return drawn

        monkeypatch.setattr(throttler.injector, "draw", draw)
        client = boto3.client(
            "dynamodb", region_name="us-east-1", config=Config(retries={"mode": "standard", "max_attempts": 3})
        )
        double.attach(client, throttler)
        client.update_item(
            TableName=TABLE, Key={"id": {"S": "a"}}, UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"N": "1"}},
        )  # fmt: skip
        assert attempts == [True, False] and double.calls == 1 and len(waited) == 1  # one backoff, virtual
        assert throttler.injector.injected["throttle"] == 1
        assert double.items[TABLE] == {'{"id": {"S": "a"}}': {"id": {"S": "a"}, "v": {"N": "1"}}}
