"""The policy store's ``GetParameter``, answered before botocore's send loop from moto's SSM backend.

Every container of the simulated functions reads the policy parameter (once per ``cache_seconds``): a
fleet run sends about a thousand, most of them answered ``ParameterNotFound`` (a scenario without a
policy document). moto's wire answered each after botocore prepared and sent it and moto matched its URL
against every service's patterns. Here the same backend lookup and the same answer as moto's
``SimpleSystemManagerResponse.get_parameter`` (the parameter's ``response_object``, or
``ParameterNotFound`` with moto's message), serialized in SSM's JSON protocol and parsed by botocore's own
parser (``wire_answers``). Names under ``/aws/reference/`` (moto checks the decryption flag for them) and
a request whose first attempt the fault injector throttles go through moto's wire as before.
"""

from __future__ import annotations

import json
from typing import Any

from smgov.simulation.wire_answers import json_wire_value, moto_answer


class ParameterReads:
    def __init__(self, account: str, region: str, throttler: Any = None) -> None:
        from moto.ssm.models import ssm_backends

        self._backend = ssm_backends[account][region]
        self._region = region
        self._throttler = throttler

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-call.ssm.GetParameter", self._call)
        return client

    def _call(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> Any:
        request = json.loads(params.get("body") or b"{}")
        name = str(request.get("Name", ""))
        if name.startswith("/aws/reference/"):
            return None  # moto's wire
        if self._throttler is not None and not self._throttler.first_attempt(model, context):
            return None
        return moto_answer(
            model, lambda: self._respond(name, request.get("WithDecryption")), "application/x-amz-json-1.1"
        )

    def _respond(self, name: str, with_decryption: Any) -> str:
        from moto.ssm.exceptions import ParameterNotFound

        found = self._backend.get_parameter(name)
        if found is None:
            raise ParameterNotFound(f"Parameter {name} not found.")
        return json.dumps(
            {"Parameter": found.response_object(with_decryption, self._region)}, default=json_wire_value
        )
