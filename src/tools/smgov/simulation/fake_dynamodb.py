"""The delivery ledger's table, answered in process: ``UpdateItem`` with the expressions the ledger writes.

The idempotency table is written only by ``adapters/idempotency.py`` (``DeliveryLedger``: its only IAM
action is ``dynamodb:UpdateItem``), on every delivery the simulated functions receive. moto answers each
such call through its general expression machinery, which was a quarter of a fleet run's time; this double
answers it from a dictionary instead, as the SageMaker double: botocore still validates and serializes the
request, the answer is given before the send loop (``before-call``) and parsed by botocore's own parser
(``wire_answers``), and a request whose first attempt the fault injector throttles goes through the send
loop, where botocore retries it as any other and the double answers the retry (``before-send``). Every
other DynamoDB call (the Spot health table) still goes to moto.

What it models, from the DynamoDB developer guide ("Condition expressions", "Comparison operator and
function reference", "Update expressions") and the ``UpdateItem`` API reference:

- ``SET path = :value, ...`` (paths as ``#name`` placeholders or plain names) on the item, created with its
  key when it does not exist; the key's attributes cannot be set.
- Conditions: ``attribute_exists`` / ``attribute_not_exists``, ``=``, ``<``, ``<=``, ``>``, ``>=``
  between operands of one scalar type (numbers by value, strings by their UTF-8 bytes, binaries by their
  unsigned bytes; a missing attribute or a type mismatch compares false), ``AND``, ``OR``, ``NOT`` and parentheses, with DynamoDB's precedence
  (``NOT`` binds tighter than ``AND``, ``AND`` than ``OR``).
- A failed condition: ``ConditionalCheckFailedException``, the old item in ``Item`` when
  ``ReturnValuesOnConditionCheckFailure`` is ``ALL_OLD``; ``ReturnValues`` ``ALL_OLD`` / ``ALL_NEW`` / ``NONE``.
- A placeholder the expressions do not use, one they use and the request does not define, a plain
  attribute name that is a reserved word, a path set twice, or a value that is not a number where one is
  declared: a ``ValidationException``, as DynamoDB answers, before anything is written.

Anything else (``REMOVE``, ``ADD``, functions in ``SET``, nested paths, other conditions) is refused with a
``ValidationException`` naming what the double does not model: a change to the ledger's expressions fails
loudly here rather than being answered wrongly. ``tests/simulation/test_fake_dynamodb.py`` runs the same
requests against moto and this double and compares the answers.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders
from moto.core.botocore_stubber import MockRawResponse
from moto.dynamodb.parsing.reserved_keywords import ReservedKeywords

from smgov.simulation.faults import ANSWERED_URL, Throttler  # ANSWERED_URL: moto must not execute it too
from smgov.simulation.wire_answers import parsed_answer

_ERROR_PREFIX = "com.amazonaws.dynamodb.v20120810#"
_TOKEN = re.compile(r"\s*(?:(<>|<=|>=|[=<>(),])|([#:]?[A-Za-z_][A-Za-z0-9_]*))")
_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}

Item = dict[str, dict[str, Any]]


@cache
def _reserved() -> frozenset[str]:
    """DynamoDB's reserved words (developer guide, "Reserved words in DynamoDB"), as moto ships the list."""
    return frozenset(word.upper() for word in ReservedKeywords.get_reserved_keywords())


class DynamoDBError(Exception):
    def __init__(self, code: str, message: str, item: Item | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.item = code, message, item


def _invalid(message: str) -> DynamoDBError:
    return DynamoDBError("ValidationException", message)


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    position, text = 0, text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise _invalid(f"Invalid expression: the simulator's DynamoDB double cannot read {text!r}")
        out.append(match.group(1) or match.group(2))
        position = match.end()
    return out


class _Expression:
    """One expression's tokens, read left to right; placeholders are resolved and remembered as used."""

    def __init__(self, text: str, names: Mapping[str, str], values: Mapping[str, Any], used: set[str]) -> None:
        self.tokens, self.text = _tokens(text), text
        self.names, self.values, self.used = names, values, used
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.upper() != expected):
            raise _invalid(f"Invalid expression: expected {expected or 'more'} in {self.text!r}")
        self.position += 1
        return token

    def end(self) -> None:
        if self.peek() is not None:
            raise _invalid(f"Invalid expression: unexpected {self.peek()!r} in {self.text!r}")

    def path(self) -> str:
        token = self.take()
        if token.startswith("#"):
            if token not in self.names:
                raise _invalid(f"An expression attribute name used in the document path is not defined: {token}")
            self.used.add(token)
            return self.names[token]
        if token.startswith(":") or not token[0].isalpha():
            raise _invalid(f"Invalid expression: expected an attribute in {self.text!r}")
        if token.upper() in _reserved():
            raise _invalid(f"Invalid expression: Attribute name is a reserved keyword; reserved keyword: {token}")
        return token

    def value(self) -> dict[str, Any]:
        token = self.take()
        if token not in self.values:
            raise _invalid(f"An expression attribute value used in expression is not defined: {token}")
        self.used.add(token)
        value = dict(self.values[token])
        if "N" in value:
            _number(value["N"])
        return value

    def operand(self, item: Item) -> dict[str, Any] | None:
        token = self.peek()
        return self.value() if token is not None and token.startswith(":") else item.get(self.path())

    # Conditions: or := and (OR and)*; and := not (AND not)*; not := NOT not | primary
    def condition(self, item: Item) -> bool:
        result = self.conjunction(item)
        while (token := self.peek()) is not None and token.upper() == "OR":
            self.take()
            result = self.conjunction(item) or result  # both sides read: every placeholder counts as used
        return result

    def conjunction(self, item: Item) -> bool:
        result = self.negation(item)
        while (token := self.peek()) is not None and token.upper() == "AND":
            self.take()
            result = self.negation(item) and result
        return result

    def negation(self, item: Item) -> bool:
        token = self.peek()
        if token is not None and token.upper() == "NOT":
            self.take()
            return not self.negation(item)
        return self.primary(item)

    def primary(self, item: Item) -> bool:
        token = self.peek()
        if token == "(":
            self.take()
            result = self.condition(item)
            self.take(")")
            return result
        if token in ("attribute_exists", "attribute_not_exists"):  # function names are not case-insensitive
            self.take()
            self.take("(")
            present = self.path() in item
            self.take(")")
            return present if token == "attribute_exists" else not present
        left = self.operand(item)
        operator = self.take()
        if operator not in _COMPARISONS:
            raise _invalid(f"the simulator's DynamoDB double does not model {operator!r} in {self.text!r}")
        right = self.operand(item)
        return compare(operator, left, right)

    def assignments(self) -> list[tuple[str, dict[str, Any]]]:
        """``SET a = :v, b = :w``: the only update form the ledger writes."""
        if self.take().upper() != "SET":
            raise _invalid(f"the simulator's DynamoDB double models SET only: {self.text!r}")
        out = [self.assignment()]
        while self.peek() == ",":
            self.take()
            out.append(self.assignment())
        return out

    def assignment(self) -> tuple[str, dict[str, Any]]:
        path = self.path()
        self.take("=")
        if not (self.peek() or "").startswith(":"):
            raise _invalid(f"the simulator's DynamoDB double models 'path = :value' only: {self.text!r}")
        return path, self.value()


def _scalar(value: Mapping[str, Any] | None) -> tuple[str, Any] | None:
    """A comparable form of an attribute value: numbers by value, strings and binaries by their bytes."""
    if value is None or len(value) != 1:
        return None
    ((kind, raw),) = value.items()
    if kind == "N":
        return kind, _number(raw)
    if kind == "S":
        return kind, raw.encode()
    if kind == "B":  # base64 on the wire; compared as unsigned bytes (developer guide, "Comparison operators")
        return kind, base64.b64decode(raw)
    return None


def _number(raw: str) -> Decimal:
    try:
        number = Decimal(raw)
    except InvalidOperation:
        number = Decimal("NaN")
    if not number.is_finite():
        raise _invalid(f"The parameter cannot be converted to a numeric value: {raw}")
    return number


def compare(operator: str, left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> bool:
    """A comparison of two attribute values: false when one is missing or their types differ; a list, map,
    set or boolean is only ever equal to the same whole value."""
    if left is None or right is None:
        return False
    a, b = _scalar(left), _scalar(right)
    if a is None or b is None:
        return operator == "=" and left == right
    return a[0] == b[0] and _COMPARISONS[operator](a[1], b[1])


class LedgerTable:
    """The items of the tables the double owns, and the ``UpdateItem`` it answers."""

    def __init__(self, tables: frozenset[str]) -> None:
        self.tables = tables
        self.items: dict[str, dict[str, Item]] = {name: {} for name in tables}  # table -> key JSON -> item
        self.calls = 0

    def update_item(self, params: Mapping[str, Any]) -> dict[str, Any]:
        table = self.items[params["TableName"]]
        key: Item = params["Key"]
        names: Mapping[str, str] = params.get("ExpressionAttributeNames") or {}
        values: Mapping[str, Any] = params.get("ExpressionAttributeValues") or {}
        if "UpdateExpression" not in params:
            raise _invalid("the simulator's DynamoDB double models UpdateItem with an UpdateExpression only")
        returns = params.get("ReturnValues", "NONE")
        if returns not in ("NONE", "ALL_OLD", "ALL_NEW"):
            raise _invalid(f"the simulator's DynamoDB double does not model ReturnValues {returns}")
        if params.get("ReturnValuesOnConditionCheckFailure", "NONE") not in ("NONE", "ALL_OLD"):
            raise _invalid("ReturnValuesOnConditionCheckFailure must be NONE or ALL_OLD")
        used: set[str] = set()
        update = _Expression(params["UpdateExpression"], names, values, used)
        sets = update.assignments()
        update.end()
        paths = [path for path, _ in sets]
        if len(set(paths)) != len(paths):
            raise _invalid(f"Invalid UpdateExpression: Two document paths overlap with each other: {paths}")
        condition = params.get("ConditionExpression")
        stored_key = json.dumps(key, sort_keys=True)
        old = table.get(stored_key)
        current: Item = old if old is not None else {}
        passed = True
        if condition is not None:
            check = _Expression(condition, names, values, used)
            passed = check.condition(current)
            check.end()
        unused = sorted((set(names) | set(values)) - used)
        if unused:
            kind = "names" if unused[0].startswith("#") else "values"
            raise _invalid(f"Value provided in ExpressionAttribute{kind.capitalize()} unused in expressions: "
                           f"keys: {{{', '.join(unused)}}}")  # fmt: skip
        if keyed := [path for path in paths if path in key]:
            raise _invalid(f"One or more parameter values were invalid: Cannot update attribute {keyed[0]}. "
                           "This attribute is part of the key")  # fmt: skip
        if not passed:
            returned = old if params.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else None
            raise DynamoDBError("ConditionalCheckFailedException", "The conditional request failed", returned)
        new: Item = {**json.loads(json.dumps(current)), **{k: dict(v) for k, v in key.items()}}
        for path, value in sets:
            new[path] = value
        table[stored_key] = new
        answer: dict[str, Any] = {}
        if returns == "ALL_OLD" and old is not None:
            answer["Attributes"] = old
        elif returns == "ALL_NEW":
            answer["Attributes"] = new
        return answer

    # ---- wiring: botocore's send loop ---------------------------------------------------------------

    def attach(self, client: Any, throttler: Throttler | None = None) -> Any:
        """Answer ``client``'s ``UpdateItem`` on the owned tables before its send loop, parsed as botocore
        parses the wire's answer (``wire_answers``). ``throttler``: the fault injector's, which draws each
        request's first attempt there; a throttled request goes through the send loop, where its retries
        are answered (the throttler asked first, as the SageMaker double's)."""
        self._throttled = None if throttler is None else throttler.throttled
        self._throttler = throttler
        client.meta.events.register("before-call.dynamodb.UpdateItem", self._call)
        client.meta.events.register_first("before-send.dynamodb.UpdateItem", self._send)
        return client

    def _call(
        self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> tuple[AWSResponse, dict[str, Any]] | None:
        request = json.loads(params.get("body") or b"{}")
        if request.get("TableName") not in self.tables:
            return None  # another table: moto's
        if self._throttler is not None and not self._throttler.first_attempt(model, context):
            return None
        status, headers, body = self._answer(request)
        return parsed_answer(model, status, headers, body)

    def _send(self, request: Any, **_: Any) -> AWSResponse | None:
        if request.url == ANSWERED_URL:
            return None
        params = json.loads(request.body or b"{}")
        if params.get("TableName") not in self.tables:
            return None  # another table: moto's
        if self._throttled is not None and (throttled := self._throttled(request)) is not None:
            return throttled
        url = request.url
        request.url = ANSWERED_URL
        status, headers, body = self._answer(params)
        return AWSResponse(url, status, headers, MockRawResponse(body))

    def _answer(self, params: dict[str, Any]) -> tuple[int, HTTPHeaders, bytes]:
        """The wire's answer to ``UpdateItem`` ``params``: status, headers, JSON body."""
        self.calls += 1
        headers = HTTPHeaders()
        headers["Content-Type"] = "application/x-amz-json-1.0"
        try:
            body, status = self.update_item(params), 200
        except DynamoDBError as err:
            body = {"__type": _ERROR_PREFIX + err.code, "message": err.message}
            if err.item is not None:
                body["Item"] = err.item
            status = 400
            headers["x-amzn-ErrorType"] = err.code
        return status, headers, json.dumps(body).encode()
