"""A double's answer given before botocore's send loop (``before-call``), parsed as botocore parses one
that came over the wire.

A double that answers in the send loop (``before-send``) hands botocore a serialized response, which
botocore parses with the operation's output shape and, for an error, the error's modeled shape. The
same answer given at ``before-call`` skips the send loop (the request's preparation, the endpoint, the
stubbers' URL matching) but would skip the parse too: ``parsed_answer`` runs botocore's own parser on
the same body, so the caller receives what it received before, to the byte (timestamps, blobs, an
error's modeled fields such as DynamoDB's ``Item``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.parsers import ResponseParser, create_parser

_PARSERS: dict[str, ResponseParser] = {}


def _parser(protocol: str) -> ResponseParser:
    parser = _PARSERS.get(protocol)
    if parser is None:
        parser = _PARSERS[protocol] = create_parser(protocol)
    return parser


def json_wire_value(value: Any) -> Any:
    """``json.dumps``' ``default`` for an answer in a JSON protocol: timestamps as epoch seconds, as AWS sends
    them (and botocore's parser reads them back)."""
    if isinstance(value, datetime):
        return value.timestamp()
    raise TypeError(f"cannot serialize {type(value).__name__}")


def parsed_answer(
    model: Any, status: int, headers: HTTPHeaders, body: bytes
) -> tuple[AWSResponse, dict[str, Any]]:
    """``before-call``'s answer to operation ``model``: the HTTP response and what botocore's endpoint makes
    of it (``Endpoint._do_get_response``: the output shape's parse; for a status of 300 or more, the modeled
    error's fields added)."""
    service = model.service_model
    parser = _parser(getattr(service, "resolved_protocol", service.protocol))
    response = {"status_code": status, "headers": headers, "body": body, "context": {"operation_name": model.name}}
    parsed: dict[str, Any] = parser.parse(response, model.output_shape)
    if status >= 300:
        code = parsed.get("Error", {}).get("Code")
        shape = None if code is None else service.shape_for_error_code(code)
        if shape is not None:
            parsed.update(parser.parse(response, shape))
    if "ResponseMetadata" in parsed:
        parsed["ResponseMetadata"]["RetryAttempts"] = 0  # the first attempt answered (``Endpoint._send_request``)
    return AWSResponse("https://answered.before-send.invalid", status, headers, None), parsed


def moto_answer(
    model: Any, respond: Callable[[], str | bytes], content_type: str
) -> tuple[AWSResponse, dict[str, Any]]:
    """``parsed_answer`` to what ``respond`` (moto's response code for ``model``, run in process) returns, or
    to the error it raises, as moto's stubber turns one into the wire's answer (status, headers, body)."""
    from moto.core.exceptions import ServiceException
    from werkzeug.exceptions import HTTPException  # moto's RESTError's base, as its stubber catches it

    headers = HTTPHeaders()
    try:
        body = respond()
        status = 200
        headers["Content-Type"] = content_type
    except HTTPException as err:  # moto's older errors carry their own wire form
        status, body = err.code or 500, err.get_body()
        for name, value in err.get_headers() or []:
            headers[name] = value
    except ServiceException as err:  # the newer ones: a JSON protocol's error (every caller here is one)
        status, body = 400, json.dumps({"__type": err.code, "message": err.message})
        headers["Content-Type"] = content_type
        headers["x-amzn-ErrorType"] = err.code
    return parsed_answer(model, status, headers, body.encode() if isinstance(body, str) else body)
