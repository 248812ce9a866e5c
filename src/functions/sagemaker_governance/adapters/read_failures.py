"""Evidence reads that fail quietly, counted so that a blind service is not a silent one.

Some reads never raise, by design: the stall judge's metrics and log lines, a failed job's last log lines,
its checkpoint listing, EC2's facts of an instance type our table lacks. When one fails the decision it
feeds does no harm (no stop, no clone, no alarm from a guessed GPU count) and the record says what was not
read. That is right for one job, and wrong for a service whose reads all fail: an SCP or a permissions
boundary that denies ``logs:FilterLogEvents``, or a request AWS refuses that our doubles accept, would
make every stall judgement "insufficient evidence", and nothing would page anyone.

So every such failure is counted: ``EvidenceReadErrors`` (business metric) with the dimension ``kind``,
and one warning log line naming the read and AWS's error code. The template's ``EvidenceReadsAlarm``
fires on the kinds that persist until someone changes something:

| kind | from | persists |
| --- | --- | --- |
| ``denied`` | an authorization code (IAM, an SCP, a permissions boundary, a bucket policy) | yes |
| ``refused`` | any other 4xx answer (a parameter AWS rejects, a token it does not know) | yes: our request is not what AWS accepts |
| ``throttled`` | a code botocore's standard retry mode treats as throttling, after its retries | no (counted, not alarmed) |
| ``unavailable`` | a 5xx answer, or no answer (connection, timeout) | no (counted, not alarmed) |

"Not found" (no such log group, bucket, instance type) is a fact about the job or the account, not a
failure of ours: it is not counted (each reader says what it means in its own evidence).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.business_metrics import BusinessMetric, BusinessMetricsPort
from sagemaker_governance.observability import logger

# botocore/retries/standard.py, ThrottledRetryableChecker._THROTTLED_ERROR_CODES (what standard mode retries
# as throttling); a request still answered with one of these was throttled beyond botocore's retries.
THROTTLING_CODES: Final = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
# The codes AWS answers an authorization failure with: ``AccessDenied`` (query and REST-XML services:
# CloudWatch, S3), ``AccessDeniedException`` (JSON services: CloudWatch Logs), ``UnauthorizedOperation``
# (EC2). S3 answers a key policy's refusal (SSE-KMS) with ``AccessDenied`` too.
DENIED_CODES: Final = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
NOT_FOUND_CODES: Final = frozenset(
    {"ResourceNotFoundException", "ResourceNotFound", "NoSuchBucket", "NoSuchKey", "InvalidInstanceType"}
)


class ReadFailure(StrEnum):
    """The ``kind`` dimension of ``EvidenceReadErrors``."""

    DENIED = "denied"
    REFUSED = "refused"
    THROTTLED = "throttled"
    UNAVAILABLE = "unavailable"


ALARMED: Final = (ReadFailure.DENIED, ReadFailure.REFUSED)  # the kinds EvidenceReadsAlarm sums


def error_code(exc: Exception) -> str:
    """AWS's error code of a ``ClientError``; the exception's class name for no answer at all."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "ClientError")
    return type(exc).__name__


def classify(exc: Exception) -> ReadFailure | None:
    """What kind of failure ``exc`` is; None for "not found" (not a failure of the read)."""
    if not isinstance(exc, ClientError):
        return ReadFailure.UNAVAILABLE  # BotoCoreError: connection, timeout, retries exhausted
    code = error_code(exc)
    if code in NOT_FOUND_CODES:
        return None
    if code in THROTTLING_CODES:
        return ReadFailure.THROTTLED
    if code in DENIED_CODES:
        return ReadFailure.DENIED
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if isinstance(status, int) and status >= 500:
        return ReadFailure.UNAVAILABLE
    return ReadFailure.REFUSED


class ReadFailures:
    """Counts and logs one reader's failed reads (``metrics`` None: logged only, as in tools and tests)."""

    def __init__(self, metrics: BusinessMetricsPort | None) -> None:
        self._metrics = metrics

    def failed(self, read: str, exc: BotoCoreError | ClientError) -> str:
        """Count ``exc`` as a failure of ``read`` (an API name) and return its error code for the evidence."""
        code = error_code(exc)
        kind = classify(exc)
        if kind is not None:
            logger.warning("evidence read failed", read=read, kind=kind.value, error=code)
            if self._metrics is not None:
                self._metrics.emit(BusinessMetric.EVIDENCE_READ_ERRORS, kind=kind.value)
        return code
