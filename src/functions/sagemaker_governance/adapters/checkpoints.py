"""What a job's checkpoint location holds: did the failed attempt write any checkpoint? (S3 ``ListObjectsV2``)

Auto-resume lists ``CheckpointConfig.S3Uri`` (bucket and prefix) and counts the objects whose
``LastModified`` is at or after the failed attempt's start. Only buckets the deployment names
(``CheckpointBucketPattern``, a name or glob) are listed: the function's ``s3:ListBucket`` grant names
exactly those buckets, so any other location is reported as not checked rather than attempted. The listing is bounded
(``MAX_PAGES`` pages of 1,000 keys): a longer listing is cut short and says so; a written object found
before the cut is enough to prove progress.

Nothing here raises for what cannot be read (denied, throttled after botocore's retries, no such bucket):
the answer is ``CheckpointProgress.unknown`` with the reason.
"""

from __future__ import annotations

from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any, ClassVar, Final

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.adapters.read_failures import ReadFailures
from sagemaker_governance.business_metrics import BusinessMetricsPort
from sagemaker_governance.domain.failure_evidence import CheckpointProgress

MAX_PAGES: Final = 10


def split_s3_uri(uri: str) -> tuple[str, str] | None:
    """``s3://bucket/prefix/`` -> ``("bucket", "prefix/")``; None when it is not an S3 URI."""
    if not uri.startswith("s3://"):
        return None
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    return (bucket, prefix) if bucket else None


class CheckpointStore:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"s3:ListBucket"})
    LAZY_CLIENT: ClassVar[bool] = True  # the client is built at the first failed job, not at cold start

    def __init__(self, client: Any, bucket_pattern: str, metrics: BusinessMetricsPort | None = None) -> None:
        self._client = client
        self._pattern = bucket_pattern
        self._failures = ReadFailures(metrics)

    def progress(self, s3_uri: str, since: datetime) -> CheckpointProgress:
        where = split_s3_uri(s3_uri)
        if where is None:
            return CheckpointProgress.out_of_scope(f"not an S3 URI: {s3_uri}")
        bucket, prefix = where
        if not self._pattern or not fnmatchcase(bucket, self._pattern):
            return CheckpointProgress.out_of_scope(f"bucket {bucket} does not match CheckpointBucketPattern")
        written = total = 0
        latest: datetime | None = None
        written_at: list[datetime] = []
        since = since if since.tzinfo else since.replace(tzinfo=UTC)
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix, PaginationConfig={"MaxItems": MAX_PAGES * 1000, "PageSize": 1000}
            )
            truncated = False
            for page in pages:
                truncated = bool(page.get("IsTruncated"))
                for item in page.get("Contents") or []:
                    modified = item.get("LastModified")
                    if not isinstance(modified, datetime):
                        continue
                    total += 1
                    latest = modified if latest is None or modified > latest else latest
                    if modified >= since:
                        written += 1
                        written_at.append(modified)
        except (ClientError, BotoCoreError) as exc:
            code = self._failures.failed("ListObjectsV2", exc)
            return CheckpointProgress.unknown(f"ListObjectsV2 on {bucket} failed ({code})")
        if truncated and not written:  # the newest keys may lie beyond the cut: not proof of no progress
            return CheckpointProgress.unknown(f"listing cut after {total} objects, none written yet")
        note = f"listing cut after {total} objects" if truncated else None
        return CheckpointProgress(
            checked=True,
            written=written,
            total=total,
            latest=latest,
            note=note,
            written_at=tuple(sorted(written_at)),
            truncated=truncated,
        )
