"""What a job's checkpoint location holds: did the failed attempt write any checkpoint? (S3 ``ListObjectsV2``)

Auto-resume lists ``CheckpointConfig.S3Uri`` (bucket and prefix) and counts the objects whose
``LastModified`` is at or after the failed attempt's start. Only buckets the deployment names
(``CheckpointBucketPattern``, a name or glob) are listed: the function's ``s3:ListBucket`` grant names
exactly those buckets, so any other location is reported as not checked rather than attempted. The listing is bounded
(``MAX_PAGES`` pages of up to 1,000 keys, counted by page: S3 may answer fewer keys than asked): a longer
listing is cut short and says so; a written object found before the cut is enough to prove progress.

S3 lists keys in UTF-8 binary order, not by age, so the objects a job is writing now may lie beyond the cut.
A large sharded job (hundreds of files a checkpoint, a checkpoint an hour) passes 10,000 objects within a
day or two, and its stall judgement or resume check would then read "cut short, none written". Before
giving that answer the store looks where a run writes its newest files: one level down (``Delimiter``
``/``), the ``NEWEST_PREFIXES`` "folders" that sort last when the numbers in their names are compared as
numbers (``checkpoint-1500/`` after ``checkpoint-900/``, ``global_step2000/``, ``step_000120/``, a date),
those named with a number first (``runs/`` or ``wandb/`` beside the steps are not where a save writes).
An object written since then is proof of progress, as before; finding none there leaves the answer
unknown (the newest files may lie elsewhere), so the probe can only replace an unknown with proof, never
turn a listing into "nothing written".

The location is a folder: a ``S3Uri`` without a trailing ``/`` is listed as ``<prefix>/``. S3 matches a
prefix by its characters, so ``s3://b/trial-1`` would also list ``trial-10/``, ``trial-11/`` (other jobs'
checkpoints: the numbered trials of one tuning run, say), and their files would count as this job's
progress, keeping a stalled job from being stopped or cloning a failed one that wrote nothing. That the
job's own files land under ``<prefix>/`` is inferred (it is what syncing a folder to that URI writes, like
``aws s3 sync``; the developer guide does not spell out the keys); were they to land beside it, this
reader would see none: no veto and no clone, the side that does no harm. SageMaker's own download of the
location at a job's start does match by characters (it restores ``trial-10``'s files into ``trial-1``:
syne-tune/syne-tune#363, which ends its URIs with ``/`` for that reason).

Nothing here raises for what cannot be read (denied, throttled after botocore's retries, no such bucket):
the answer is ``CheckpointProgress.unknown`` with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any, ClassVar, Final

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.adapters.read_failures import ReadFailures
from sagemaker_governance.business_metrics import BusinessMetricsPort
from sagemaker_governance.domain.failure_evidence import CheckpointProgress

MAX_PAGES: Final = 10
PAGE_SIZE: Final = 1000  # ListObjectsV2's largest MaxKeys
NEWEST_PREFIXES: Final = 3  # "folders" listed after a cut listing: the newest steps by their names' numbers


def split_s3_uri(uri: str) -> tuple[str, str] | None:
    """``s3://bucket/prefix/`` -> ``("bucket", "prefix/")``; None when it is not an S3 URI."""
    if not uri.startswith("s3://"):
        return None
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    return (bucket, prefix) if bucket else None


def location_folder(prefix: str) -> str:
    """The location's folder (``trial-1`` -> ``trial-1/``), not every key that begins with its characters."""
    return prefix if not prefix or prefix.endswith("/") else f"{prefix}/"


class CheckpointStore:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"s3:ListBucket"})
    LAZY_CLIENT: ClassVar[bool] = True  # the client is built at the first failed job, not at cold start

    def __init__(
        self,
        client: Any,
        bucket_pattern: str,
        metrics: BusinessMetricsPort | None = None,
        *,
        max_pages: int = MAX_PAGES,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._client = client
        self._pattern = bucket_pattern
        self._failures = ReadFailures(metrics)
        self._max_pages, self._page_size = max_pages, page_size

    def progress(self, s3_uri: str, since: datetime) -> CheckpointProgress:
        where = split_s3_uri(s3_uri)
        if where is None:
            return CheckpointProgress.out_of_scope(f"not an S3 URI: {s3_uri}")
        bucket, prefix = where
        prefix = location_folder(prefix)
        if not self._pattern or not fnmatchcase(bucket, self._pattern):
            return CheckpointProgress.out_of_scope(f"bucket {bucket} does not match CheckpointBucketPattern")
        since = since if since.tzinfo else since.replace(tzinfo=UTC)
        seen = _Seen(since)
        try:
            truncated = self._list(bucket, prefix, seen)
            newest: tuple[str, ...] = ()
            found_in = None
            if truncated and not seen.written_at:  # the newest keys may lie beyond the cut: where a run writes?
                newest = self._newest_prefixes(bucket, prefix)
                for folder in newest:
                    self._list(bucket, folder, seen, stop_at_written=True)
                    if seen.written_at:
                        found_in = folder
                        break
        except (ClientError, BotoCoreError) as exc:
            code = self._failures.failed("ListObjectsV2", exc)
            return CheckpointProgress.unknown(f"ListObjectsV2 on {bucket} failed ({code})")
        if truncated and not seen.written_at:  # not proof of no progress
            looked = f"; nothing written under the newest prefixes {', '.join(newest)}" if newest else ""
            return CheckpointProgress.unknown(f"listing cut after {seen.total} objects, none written yet{looked}")
        note = None
        if truncated:
            note = f"listing cut after {seen.total} objects"
            if found_in:
                note += f"; written since found under {found_in}, the newest step prefix by its number"
        return CheckpointProgress(
            checked=True,
            written=len(seen.written_at),
            total=seen.total,
            latest=seen.latest,
            note=note,
            written_at=tuple(sorted(seen.written_at)),
            truncated=truncated,
        )

    def _pages(self, bucket: str, prefix: str, **extra: str) -> Iterator[dict[str, Any]]:
        """S3's pages of the listing, at most ``max_pages`` of them. Counted by page, not by key: S3 may answer
        fewer keys than ``MaxKeys`` (its API reference), and botocore's ``MaxItems`` counts ``Contents`` only
        and trims a page without saying so in the page (a listing cut there would look complete)."""
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": self._page_size}, **extra
        )
        for number, page in enumerate(pages, start=1):
            yield page
            if number >= self._max_pages:
                return

    def _list(self, bucket: str, prefix: str, seen: _Seen, *, stop_at_written: bool = False) -> bool:
        """Count the objects under ``prefix`` into ``seen``, at most ``max_pages`` pages; whether it was cut
        short (``stop_at_written``: done at the first page that holds a written object)."""
        truncated = False
        for page in self._pages(bucket, prefix):
            truncated = bool(page.get("IsTruncated"))
            for item in page.get("Contents") or []:
                seen.add(item.get("LastModified"), written_only=stop_at_written)
            if stop_at_written and seen.written_at:
                break
        return truncated

    def _newest_prefixes(self, bucket: str, prefix: str) -> tuple[str, ...]:
        """The ``NEWEST_PREFIXES`` "folders" right under ``prefix`` (what ``Delimiter`` ``/`` lists of them in
        ``max_pages`` pages) that look newest: those with a number in their name first (a step, an epoch, a
        date: ``runs/``, ``wandb/`` or ``logs/`` beside ``checkpoint-900/`` are not where a save writes), then
        by their names with the numbers compared as numbers."""
        folders = [
            str(p["Prefix"])
            for page in self._pages(bucket, prefix, Delimiter="/")
            for p in page.get("CommonPrefixes") or []
            if p.get("Prefix")
        ]
        return tuple(sorted(folders, key=lambda f: step_rank(f[len(prefix) :]), reverse=True)[:NEWEST_PREFIXES])


def step_rank(name: str) -> tuple[bool, tuple[tuple[int, int, str], ...]]:
    """How new a folder looks by its name (larger: newer): named with a number first, then ``natural_key``."""
    return any(c.isdecimal() for c in name), natural_key(name)


def natural_key(name: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key comparing the runs of digits in ``name`` as numbers: ``step-900`` < ``step-1500``."""
    return tuple((0, int(part), "") if part.isdecimal() else (1, 0, part) for part in _DIGITS.split(name) if part)


_DIGITS: Final = re.compile(r"(\d+)")


class _Seen:
    """What the listings of one location found: every object, and those written since ``since``."""

    def __init__(self, since: datetime) -> None:
        self.since = since
        self.total = 0
        self.latest: datetime | None = None
        self.written_at: list[datetime] = []

    def add(self, modified: Any, *, written_only: bool = False) -> None:
        """One listed object (``written_only``: a second look at keys the first listing may have counted,
        which counts the written ones only: the first listing found none)."""
        if not isinstance(modified, datetime) or (written_only and modified < self.since):
            return
        self.total += 1
        self.latest = modified if self.latest is None or modified > self.latest else self.latest
        if modified >= self.since:
            self.written_at.append(modified)
