"""The one set of Powertools observability singletons; everybody imports them from here.

No X-Ray ``Tracer``: its SDK would put a second botocore in the layer (shadowing the runtime's boto3
pairing) and cost cold start, and X-Ray's write actions cannot be scoped to a resource (least
privilege). Structured logs and EMF metrics carry what operators need.

**LogLevel governs the diagnostics, never the audit trail.** The template's ``LogLevel`` reaches the logger
as ``POWERTOOLS_LOG_LEVEL``. Audit records (``audit.py``) are written at INFO, so a LogLevel of WARNING or
ERROR used to drop every one of them, silently: the saved queries, the dashboard and `smgov audit`/`report`
found nothing. Now the logger lets INFO through and a filter drops the diagnostics below LogLevel, but never
a record carrying an audit record (``AUDIT_KEY``): each decision's line is the one written at INFO (same
keys, ``level`` INFO). A tool that silences the service outright (``logger.setLevel("CRITICAL")``: the
simulator, `smgov explain`) silences the audit records too, as before. (Powertools' debug sampling,
``POWERTOOLS_LOGGER_SAMPLE_RATE``, which the template does not set, would be filtered at LogLevel as well.)

The reconciler's run summary (``RECONCILE_KEY``, one line per run) passes the filter the same way: it is
operational evidence, not a diagnostic; `smgov doctor` reads it to tell that the reconciler runs, and at
WARNING it used to be dropped, so the doctor reported a healthy reconciler as failing.
"""

from __future__ import annotations

import logging
from typing import Final

from aws_lambda_powertools import Logger, Metrics

SERVICE = "sagemaker-governance"
NAMESPACE = "SageMakerGovernance"
AUDIT_KEY: Final = "audit"  # the log line's key holding an audit record (``LogAuditSink``)
RECONCILE_KEY: Final = "reconcile"  # the log line's key holding a reconciler run's summary
ANY_LEVEL_KEYS: Final = (AUDIT_KEY, RECONCILE_KEY)  # a line carrying one is written whatever LogLevel says

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


class DiagnosticsLevel(logging.Filter):
    """Drops a log record below ``level`` unless it carries an audit record or a reconciler run's summary."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level or any(
            getattr(record, key, None) is not None for key in ANY_LEVEL_KEYS
        )


DIAGNOSTICS: Final = DiagnosticsLevel(logging.NOTSET)
logger.addFilter(DIAGNOSTICS)


def govern_diagnostics_only(level: int) -> None:
    """Log the diagnostics at ``level`` and the audit records always: the logger at INFO at most (DEBUG when
    ``level`` is), the diagnostics below ``level`` filtered out."""
    DIAGNOSTICS.level = level
    logger.setLevel(min(level, logging.INFO))


govern_diagnostics_only(logger.log_level)  # the level Powertools read from POWERTOOLS_LOG_LEVEL
