"""What AWS checks of a request and botocore does not: the service model's ``pattern``, ``enum`` and ``max``.

botocore validates a request against the service model before sending it, but only types, required
members and minimum lengths (``botocore.validate.range_check`` reads ``min`` alone). The service checks the
rest. A name longer than its ``max``, an id outside its ``pattern`` (a ``MetricDataQuery.Id`` with a dash),
or a value outside its ``enum`` is refused by AWS with a validation error. moto and our doubles would
otherwise accept it, so a test could pass while every such call fails in a real account.

``install`` registers ``check_request`` on a session's or client's events: every request the handlers
make in the simulator and in the local harness is held to the model's constraints first, and a violation
is answered as AWS answers it: a ``ClientError`` with the service's validation code, before any double
or moto sees the request.

Patterns are the model's own. They are written for Java's regex engine (``\\p{L}``, possessive classes):
the ``regex`` module compiles most of them, and one it cannot compile is skipped, never guessed. A
pattern must match the whole value, as AWS applies it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import regex
from botocore.exceptions import ClientError

MAX_REPORTED = 3  # violations named in one error message


def install(events: Any) -> None:
    """Hold every request sent through ``events`` (a session's or a client's) to the model's constraints."""
    events.register("before-parameter-build", check_request)


def check_request(params: Mapping[str, Any], model: Any, **_: Any) -> None:
    shape = model.input_shape
    if shape is None:
        return
    problems = list(violations(shape, params, ""))
    if problems:
        # The query-protocol services (CloudWatch, SNS, EC2; CloudWatch also speaks CBOR now) answer
        # ValidationError, the JSON ones ValidationException (each API reference's common errors).
        service = model.service_model
        protocols = service.metadata.get("protocols") or [service.protocol]
        code = "ValidationError" if {"query", "ec2"} & set(protocols) else "ValidationException"
        message = f"{len(problems)} validation error(s) detected: " + "; ".join(problems[:MAX_REPORTED])
        response: Any = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}}
        raise ClientError(response, model.name)


def violations(shape: Any, value: Any, path: str) -> Iterator[str]:
    """Each constraint of ``shape`` that ``value`` breaks, with where (``Metrics[0].Id``)."""
    kind = shape.type_name
    if kind == "structure" and isinstance(value, Mapping):
        for name, member in shape.members.items():
            if name in value:
                yield from violations(member, value[name], f"{path}.{name}" if path else name)
    elif kind == "list" and isinstance(value, list | tuple):
        if len(value) > shape.metadata.get("max", len(value)):
            yield f"{path}: {len(value)} items, at most {shape.metadata['max']}"
        for index, item in enumerate(value):
            yield from violations(shape.member, item, f"{path}[{index}]")
    elif kind == "map" and isinstance(value, Mapping):
        for key, item in value.items():
            yield from violations(shape.key, key, f"{path} key")
            yield from violations(shape.value, item, f"{path}[{key}]")
    elif kind == "string" and isinstance(value, str):
        yield from _string(shape, value, path)


def _string(shape: Any, value: str, path: str) -> Iterator[str]:
    meta = shape.metadata
    if "max" in meta and len(value) > meta["max"]:
        yield f"{path}: {len(value)} characters, at most {meta['max']}"
    if shape.enum and value not in shape.enum:
        yield f"{path}: {value!r} is not one of {', '.join(shape.enum)}"
    if "pattern" in meta:
        compiled = _compiled(meta["pattern"])
        if compiled is not None and compiled.fullmatch(value) is None:
            yield f"{path}: {value!r} does not match the pattern {meta['pattern']}"


@cache
def _compiled(pattern: str) -> Any:
    try:
        return regex.compile(pattern)
    except regex.error:  # Java-only syntax: not guessed at
        return None
