"""The checkpoints simulated jobs write, as S3 would list them (``ListObjectsV2``) on the virtual clock.

A job with a ``CheckpointConfig`` saves its progress every ``checkpoint_every_minutes`` of training; each
save is one object under its ``S3Uri`` (``step-<training minute>.pt``) whose ``LastModified`` is the
virtual time it was written. Auto-resume lists the location to see whether the failed attempt wrote any
(``adapters/checkpoints.py``). A script phase with ``checkpoint_files_every_minutes`` (a long save of a
sharded model) writes one object there every N minutes while it lasts, into a folder of its own
(``save-<first minute>/<minute>.distcp``, as a sharded save writes one step's folder), which the stall
judge lists before a stop. A job may find its location full already (``earlier(...)``: an earlier run's
shards, in ``earlier-run/``, dated the day before), more than a listing reads. moto stamps objects with the wall clock, so this double answers the
listing instead, after botocore has validated the request (like the SageMaker double); every other S3
call still goes to moto.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders

PAGE: int = 1000  # ListObjectsV2's default and largest MaxKeys


def split(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix


class CheckpointObjects:
    def __init__(self, at: Callable[[int], datetime], now: Callable[[], int] = lambda: 0) -> None:
        self._at = at  # virtual minute -> datetime
        self._now = now  # the current virtual minute
        self.objects: dict[str, dict[str, datetime]] = {}  # bucket -> key -> LastModified
        self.listings = 0
        self._pending: dict[int, dict[str, Any]] = {}
        self._writers: dict[str, list[list[int | None]]] = {}  # uri -> [start, end (None: open), every]

    def save(self, uri: str, training_minute: int, minute: int) -> None:
        """A checkpoint of ``training_minute`` minutes of work written at virtual ``minute``."""
        bucket, prefix = split(uri)
        self.objects.setdefault(bucket, {})[f"{prefix}step-{training_minute:07d}.pt"] = self._at(minute)

    def earlier(self, uri: str, count: int, minute: int) -> None:
        """``count`` objects under ``uri`` written a day before virtual ``minute`` (an earlier run's)."""
        bucket, prefix = split(uri)
        keys = self.objects.setdefault(bucket, {})
        for n in range(count):
            keys[f"{prefix}earlier-run/{n:06d}.distcp"] = self._at(minute - 1440)

    def writing(self, uri: str, every: int | None, minute: int) -> None:
        """From ``minute`` on, a file lands under ``uri`` every ``every`` minutes (None: no more files)."""
        segments = self._writers.setdefault(uri, [])
        if segments and segments[-1][1] is None:
            segments[-1][1] = minute
        if every:
            segments.append([minute, None, every])

    def complete(self) -> None:
        """The files the writing phases have completed by now, as objects."""
        now = self._now()
        for uri, segments in self._writers.items():
            bucket, prefix = split(uri)
            keys = self.objects.setdefault(bucket, {})
            for start, end, every in segments:
                assert start is not None and every is not None
                last = now if end is None else min(end, now)
                for minute in range(start + every, last + 1, every):
                    keys.setdefault(f"{prefix}save-{start:07d}/{minute:07d}.distcp", self._at(minute))

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-parameter-build.s3.ListObjectsV2", self._capture)
        client.meta.events.register("before-call.s3.ListObjectsV2", self._list)
        return client

    def _capture(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._pending[id(model)] = dict(params)

    def _list(self, model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        self.listings += 1
        self.complete()
        request = self._pending.pop(id(model), {})
        bucket = str(request.get("Bucket") or "")
        prefix = str(request.get("Prefix") or "")
        token = str(request.get("ContinuationToken") or "")
        limit = min(int(request.get("MaxKeys") or PAGE), PAGE)
        delimiter = str(request.get("Delimiter") or "")
        # S3's order (binary) over keys and, with a delimiter, the common prefixes that roll up the keys with
        # the delimiter after the prefix; a page holds up to MaxKeys of both together
        entries = sorted(
            {
                self._rolled(key, prefix, delimiter)
                for key in self.objects.get(bucket, {})
                if key.startswith(prefix)
            }
        )
        entries = [e for e in entries if e > token]
        page, rest = entries[:limit], entries[limit:]
        folders = [e for e in page if delimiter and e.endswith(delimiter) and e not in self.objects[bucket]]
        body: dict[str, Any] = {
            "Name": bucket,
            "Prefix": prefix,
            "KeyCount": len(page),
            "MaxKeys": limit,
            "IsTruncated": bool(rest),
            "Contents": [
                {"Key": key, "LastModified": self.objects[bucket][key], "Size": 1, "StorageClass": "STANDARD"}
                for key in page
                if key not in folders
            ],
            "ResponseMetadata": {"HTTPStatusCode": 200, "RequestId": "fake"},
        }
        if delimiter:
            body["Delimiter"] = delimiter
            body["CommonPrefixes"] = [{"Prefix": folder} for folder in folders]
        if rest:
            body["NextContinuationToken"] = page[-1]
        return AWSResponse("https://s3.fake", 200, HTTPHeaders(), None), body

    @staticmethod
    def _rolled(key: str, prefix: str, delimiter: str) -> str:
        """The key, or with a delimiter after the prefix, the common prefix it rolls up into."""
        if not delimiter or (cut := key.find(delimiter, len(prefix))) < 0:
            return key
        return key[: cut + len(delimiter)]
