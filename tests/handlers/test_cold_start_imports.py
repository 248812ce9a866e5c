"""A handler module pauses the garbage collector only while it imports, and the container's root while it builds
the function's service on the first invocation (cold start, BENCHMARKS.md): in a fresh interpreter, after each,
the collector runs again and what they created is frozen."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import boto3
import pytest

from sagemaker_governance.composition.job_events import job_events_service
from sagemaker_governance.composition.root import Root
from sagemaker_governance.settings import Settings

PROBE = """
import gc, importlib, json, sys
if sys.argv[2] == "paused":
    gc.disable()
importlib.import_module(sys.argv[1])
print(json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}))
"""

HANDLERS = [
    "sagemaker_governance.handlers.job_events",
    "sagemaker_governance.handlers.idle_stopper",
    "sagemaker_governance.handlers.reconciler",
]


def imported(module: str, collector: str) -> dict[str, object]:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, module, collector], capture_output=True, text=True, check=False, timeout=120
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    answer: dict[str, object] = json.loads(completed.stdout.strip().splitlines()[-1])
    return answer


@pytest.mark.parametrize("module", HANDLERS)
def test_the_collector_runs_again_after_a_handler_module_is_imported(module: str) -> None:
    answer = imported(module, "running")
    assert answer["enabled"] is True
    assert isinstance(answer["frozen"], int) and answer["frozen"] > 10_000  # the imports' objects


def test_a_process_that_paused_the_collector_itself_keeps_it_paused() -> None:
    assert imported(HANDLERS[0], "paused")["enabled"] is False


BUILD = """
import gc, importlib, json, sys
handler = importlib.import_module(sys.argv[1])
from sagemaker_governance.composition.root import current
root = current()  # the container's own root, from the environment, as in Lambda
collections = []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "start" else None)
frozen = gc.get_freeze_count()
handler.service(root)  # what the first invocation builds: the boto3 clients, adapters, the service
print(json.dumps({"collections": collections, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count() - frozen}))
"""


@pytest.mark.parametrize("module", HANDLERS)
def test_the_containers_root_builds_its_function_service_with_the_collector_paused(module: str) -> None:
    # Given a fresh interpreter with a function's environment, its handler module imported
    env = {
        **os.environ,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "IDEMPOTENCY_TABLE_NAME": "ledger",
    }
    # When the first invocation builds the function's service in the container's root
    completed = subprocess.run(
        [sys.executable, "-c", BUILD, module], capture_output=True, text=True, check=False, timeout=120, env=env
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    answer = json.loads(completed.stdout.strip().splitlines()[-1])
    # Then no collection ran meanwhile (the clients' service models: many objects, no garbage), the
    # collector runs again, and what was built is frozen
    assert answer["collections"] == []
    assert answer["enabled"] is True
    assert answer["frozen"] > 10_000


def test_a_root_given_to_the_handlers_builds_with_the_collector_as_it_is() -> None:
    # Given a root the simulator, a test or a tool builds (not the container's: it is not kept for a process)
    root = Root(Settings(), boto3.session.Session(region_name="us-east-1"))
    frozen = gc.get_freeze_count()
    # When it builds a function's service
    job_events_service(root)
    # Then nothing was frozen (a process building many such roots would keep their garbage for good); frozen
    # objects freed meanwhile lower the count
    assert gc.get_freeze_count() <= frozen


# What each function does not run, so its cold start does not import it (BENCHMARKS.md, cold start): the
# other functions' event models, the resume and Spot decisions in the guard stopper, and PyYAML (read at
# the first policy document parsed or failure classified, never by the imports). The guard stopper also
# leaves out the failure classification (it validates the policy's signatures and reads log lines: their
# own modules), the clone planner and the reconciler's listing models; the job-events function the stall
# judge (it reads metrics for the efficiency record through the same port) and the reconciler's models (it
# deletes alarms with the same helpers). The stopper runs no compliance rule, resume or reconciling; the
# reconciler clones only deferred resumes and writes the efficiency record only of a job whose end event was
# lost: no Spot fallback's ledger, no queue. The job-events function does not reconcile.
NOT_IMPORTED = {
    "sagemaker_governance.handlers.job_events": {
        "yaml",
        "sagemaker_governance.events.alarms",
        "sagemaker_governance.events.schedule",
        "sagemaker_governance.service.stall_judge",
        "sagemaker_governance.domain.reconcile",
        "sagemaker_governance.service.reconciler",
    },
    "sagemaker_governance.handlers.idle_stopper": {
        "yaml",
        "sagemaker_governance.events.job_state",
        "sagemaker_governance.events.schedule",
        "sagemaker_governance.domain.resume",
        "sagemaker_governance.domain.spot_economics",
        "sagemaker_governance.domain.spot_health",
        "sagemaker_governance.domain.spot_alternatives",
        "sagemaker_governance.domain.orchestrators",
        "sagemaker_governance.domain.failures",
        "sagemaker_governance.domain.clone",
        "sagemaker_governance.domain.reconcile",
        "sagemaker_governance.service.compliance",
        "sagemaker_governance.service.resume",
        "sagemaker_governance.service.reconciler",
    },
    "sagemaker_governance.handlers.reconciler": {
        "yaml",
        "sagemaker_governance.events.alarms",
        "sagemaker_governance.events.job_state",
        "sagemaker_governance.events.queue",
        "sagemaker_governance.adapters.spot_health",
        "sagemaker_governance.adapters.queue",
    },
}

MODULES = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("module", HANDLERS)
def test_a_handler_module_does_not_import_what_its_function_does_not_run(module: str) -> None:
    # Given a fresh interpreter
    # When it imports the handler module
    completed = subprocess.run(
        [sys.executable, "-c", MODULES, module], capture_output=True, text=True, check=False, timeout=120
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    loaded = set(json.loads(completed.stdout.strip().splitlines()[-1]))
    # Then nothing its function does not run was imported
    assert module in loaded
    assert NOT_IMPORTED[module] & loaded == set()
    # and none of the developer tooling (simulator, CLI), which the Lambda artifacts do not hold
    assert not any(m == "smgov" or m.startswith("smgov.") for m in loaded)
