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

import weakref
from collections.abc import Callable, Iterator, Mapping
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
    if shape is None or _holds(shape, params):
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


# A request is checked first by a plan of its input shape, made once per shape: a test per constrained
# member that says only whether the value holds, skipping every member with no constraint below it and
# building no path. Only a request that breaks a constraint is walked again by ``violations``, for the
# message. (Every request the handlers make is checked: walking the whole request and formatting the path
# of every member was about 2 % of a fleet run.)
Plan = Callable[[Any], bool]
# Per service model (its shape resolver), each shape's plan (None: nothing under it is constrained). botocore
# makes a new shape object each time a member is resolved, so a shape is known by its name, its type and its
# constraints (a member's own traits are merged into them); by the resolver: two services name shapes alike.
_PLANS: weakref.WeakKeyDictionary[Any, dict[tuple[str, str, str], Plan | None]] = weakref.WeakKeyDictionary()
_MAKING: Plan = lambda _value: True  # noqa: E731 - a plan being made (a recursive shape met again)


def _holds(shape: Any, value: Any) -> bool:
    """Whether ``value`` breaks no constraint of ``shape``: ``not any(violations(shape, value, ""))``."""
    plan = _plan(shape)
    return plan is None or plan(value)


def _plan(shape: Any) -> Plan | None:
    plans = _PLANS.setdefault(shape._shape_resolver, {})
    key = (shape.name, shape.type_name, repr(sorted(shape.metadata.items())))
    if key in plans:
        made = plans[key]
        if made is _MAKING:  # recursive (DynamoDB's AttributeValue): checked by its plan once made
            return lambda value: _holds(shape, value)
        return made
    plans[key] = _MAKING
    try:
        plan = _make(shape)
    except BaseException:
        del plans[key]
        raise
    plans[key] = plan
    return plan


def _make(shape: Any) -> Plan | None:
    """What ``violations`` checks of ``shape``, as one test (None: nothing under it is constrained)."""
    maker = _MAKERS.get(shape.type_name)
    return maker(shape) if maker is not None else None


def _structure(shape: Any) -> Plan | None:
    members = [(name, plan) for name, member in shape.members.items() if (plan := _plan(member)) is not None]
    if not members:
        return None

    def structure(value: Any) -> bool:
        if not isinstance(value, Mapping):
            return True
        return all(name not in value or plan(value[name]) for name, plan in members)

    return structure


def _list(shape: Any) -> Plan | None:
    most = shape.metadata.get("max")
    each = _plan(shape.member)
    if most is None and each is None:
        return None

    def listing(value: Any) -> bool:
        if not isinstance(value, list | tuple):
            return True
        if most is not None and len(value) > most:
            return False
        return each is None or all(each(item) for item in value)

    return listing


def _map(shape: Any) -> Plan | None:
    keys, values = _plan(shape.key), _plan(shape.value)
    if keys is None and values is None:
        return None

    def mapping(value: Any) -> bool:
        if not isinstance(value, Mapping):
            return True
        return all((keys is None or keys(key)) and (values is None or values(item)) for key, item in value.items())

    return mapping


def _string_plan(shape: Any) -> Plan | None:
    meta = shape.metadata
    longest = meta.get("max")
    enum = shape.enum
    pattern = _compiled(meta["pattern"]) if "pattern" in meta else None
    if longest is None and not enum and pattern is None:
        return None

    def string(value: Any) -> bool:
        if not isinstance(value, str):
            return True
        if longest is not None and len(value) > longest:
            return False
        if enum and value not in enum:
            return False
        return pattern is None or pattern.fullmatch(value) is not None

    return string


_MAKERS: dict[str, Callable[[Any], Plan | None]] = {
    "structure": _structure,
    "list": _list,
    "map": _map,
    "string": _string_plan,
}


@cache
def _compiled(pattern: str) -> Any:
    try:
        return regex.compile(pattern)
    except regex.error:  # Java-only syntax: not guessed at
        return None
