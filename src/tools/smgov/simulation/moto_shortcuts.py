"""Work moto repeats for every request of a simulated account, done once or skipped; the same answers.

moto serves the simulated accounts' AWS calls from inside botocore's send loop (its ``before-send``
stubber). Three of the things it does for each request give the same result every time:

- **answered requests**: the stubber runs after every other ``before-send`` handler, so it also sees the
  requests a double has already answered (the SageMaker double, the delivery ledger, the queues'
  visibility changes, a throttling fault), whose URL is then ``ANSWERED_URL``. No pattern of moto's
  matches that URL: it scans every service's patterns all the same, and answers nothing. Here the stubber
  returns at once for them.
- **error shapes**: moto serializes an error by looking its code up in a table it builds from the service
  model's error shapes. ``moto.core.errors.ErrorLookupFactory`` keeps the table per service, but
  ``get_error_model`` makes a new factory for every error, so the table is built again each time (every
  ``ParameterNotFound`` of a policy read). Here it is built once per service.
- **action methods**: ``BaseResponse.call_action`` lists a response class's methods (``inspect.getmembers``)
  for every request. Here each class's list is made once while the shortcuts are on; nothing patches a
  response class in between (``SimulatedCloudWatch.installed`` and the Logs prefix fix are entered before).

moto is pinned (``constraints-dev.txt``); a moto without one of these attributes fails loudly here rather
than running without the shortcut.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

from smgov.simulation.faults import ANSWERED_URL


@contextlib.contextmanager
def moto_shortcuts() -> Iterator[None]:
    """While inside: the three shortcuts above (inside ``mock_aws``, after any patch of a response class)."""
    from moto.core import errors, utils
    from moto.core.models import botocore_stubber

    process_request: Callable[[Any], Any] = botocore_stubber.process_request

    def skipping_answered(request: Any) -> Any:
        return None if request.url == ANSWERED_URL else process_request(request)

    tables: dict[str, Any] = {}
    build_table = errors.ErrorLookupFactory._create_error_lut

    def error_table(_factory: Any, service_model: Any) -> Any:
        """``ErrorLookupFactory.for_service`` with one cache for every factory (by service id, as moto's own)."""
        service_id = service_model.metadata.get("serviceId")
        if service_id is None:
            return build_table(service_model)
        table = tables.get(service_id)
        if table is None:
            table = tables[service_id] = build_table(service_model)
        return table

    names: dict[type, list[str]] = {}
    list_names = utils.method_names_from_class  # what moto.core.responses calls it by

    def method_names(clazz: Any) -> list[str]:
        found = names.get(clazz)
        if found is None:
            found = names[clazz] = list_names(clazz)
        return found

    with (
        mock.patch.object(botocore_stubber, "process_request", skipping_answered),
        mock.patch.object(errors.ErrorLookupFactory, "for_service", error_table),
        mock.patch("moto.core.responses.method_names_from_class", method_names),
    ):
        yield
