"""One botocore data loader for every session the offline tools make in a process.

Every boto3 session gets its own botocore ``Loader``, which parses the service models (JSON; SageMaker's
alone is several megabytes) again on first use, so a test suite or a simulator run that builds a fresh
account for every test or scenario spends much of its time parsing the same files. The models are data
botocore only reads once loaded (its clients of one session share them already), so the offline tools
share one loader per data path across sessions. Only the simulator and the test harness call this; the
Lambda functions never import it.
"""

from __future__ import annotations

import functools

import botocore.session
from botocore.loaders import Loader, create_loader


@functools.cache
def _shared_loader(search_path: str | None = None) -> Loader:
    return create_loader(search_path)


def share_models() -> None:
    """From now on every new botocore session of this process uses the shared loader (idempotent)."""
    botocore.session.create_loader = _shared_loader
