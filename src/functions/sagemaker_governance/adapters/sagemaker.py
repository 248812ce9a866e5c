"""SageMaker training jobs: read, tag lookup, stop; list the jobs in progress; mark a job as evaluated."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.adapters.read_failures import DENIED_CODES, error_code
from sagemaker_governance.adapters.sagemaker_model import unmodelled_paths
from sagemaker_governance.domain.errors import (
    AdapterError,
    JobNotFound,
    StopDenied,
    StopOutcome,
    StopRefused,
    StopUnanswered,
)
from sagemaker_governance.domain.job import UNMODELLED_FIELDS_KEY, TrainingJob, parse_tags
from sagemaker_governance.observability import logger

if TYPE_CHECKING:  # the listings are the reconciler's: the stopper never imports their models (cold start)
    from sagemaker_governance.domain.reconcile import JobListing, JobSummary


def _is_not_found(exc: ClientError) -> bool:
    error = exc.response.get("Error", {})
    return (
        error.get("Code") in {"ValidationException", "ResourceNotFound"}
        and "not found" in str(error.get("Message", "")).lower()
    )


class SageMakerJobs:
    """Reads, tags and stops training jobs.

    ``describe`` also reports what botocore dropped: the raw JSON of a ``DescribeTrainingJob`` answer is
    kept (botocore's ``before-parse`` event) and compared with the model, and the paths the model does
    not know are returned under ``UNMODELLED_FIELDS_KEY`` (the clone planner reports them).
    """

    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"sagemaker:DescribeTrainingJob", "sagemaker:ListTags", "sagemaker:StopTrainingJob"}
    )

    def __init__(self, client: Any) -> None:
        self._client = client
        self._raw: bytes | None = None
        self._stop_attempts = threading.local()  # ``record``: the attempts of the stop in progress on this thread
        events = getattr(getattr(client, "meta", None), "events", None)
        if events is not None:
            events.register("before-parse.sagemaker.DescribeTrainingJob", self._keep_raw)
            events.register("needs-retry.sagemaker.StopTrainingJob", self._note_stop_attempt)

    def _keep_raw(self, response_dict: dict[str, Any] | None = None, **_: Any) -> None:
        body = (response_dict or {}).get("body")
        self._raw = body if isinstance(body, bytes) else None

    def _note_stop_attempt(self, response: Any = None, caught_exception: Any = None, **_: Any) -> None:
        """botocore's ``needs-retry`` after each attempt of a StopTrainingJob (its endpoint's send loop, the
        calling thread): notes whether that attempt may have been applied (True: answered 5xx, or not at all;
        False: answered 4xx, a refusal: throttled, denied, not stoppable) in the record of the stop this adapter
        is making on this thread, if any. Returns None, which leaves botocore's retry decision as its own retry
        handler makes it (``Endpoint._needs_retry`` takes the first answer that is not None)."""
        record = getattr(self._stop_attempts, "record", None)
        if record is not None:
            record.append(_perhaps_applied(response, caught_exception))

    def describe(self, name: str) -> dict[str, Any]:
        self._raw = None
        try:
            response: dict[str, Any] = self._client.describe_training_job(TrainingJobName=name)
        except ClientError as exc:
            if _is_not_found(exc):
                raise JobNotFound(name) from exc
            raise AdapterError(f"DescribeTrainingJob {name} failed: {exc}") from exc
        except BotoCoreError as exc:  # no answer at all (connection, timeout): a failed read, as above
            raise AdapterError(f"DescribeTrainingJob {name} failed: {exc}") from exc
        response.pop("ResponseMetadata", None)
        unmodelled = self._unmodelled()
        if unmodelled:
            logger.warning("fields unknown to botocore", job=name, fields=unmodelled)
            response[UNMODELLED_FIELDS_KEY] = unmodelled
        return response

    def _unmodelled(self) -> list[str]:
        raw, self._raw = self._raw, None
        if not raw:
            return []
        try:
            return unmodelled_paths(json.loads(raw), self._client.meta.service_model)
        except (ValueError, RecursionError):  # not JSON: botocore's parser will have said so
            return []

    def list_tags(self, arn: str) -> dict[str, str]:
        """Every page of ``ListTags``."""
        tags: dict[str, str] = {}
        try:
            for page in self._client.get_paginator("list_tags").paginate(ResourceArn=arn):
                tags.update(parse_tags(page.get("Tags") or []) or {})
        except (ClientError, BotoCoreError) as exc:
            raise AdapterError(f"ListTags {arn} failed: {exc}") from exc
        except ValueError as exc:  # botocore does not validate answers
            raise AdapterError(f"ListTags {arn}: unreadable answer: {exc}") from exc
        return tags

    def get_job(self, name: str, tags: Mapping[str, str] | None = None) -> TrainingJob:
        """The job as it is now, tags included: ``tags`` when the caller knows them (the state-change event
        carries the job's tags: no ``ListTags``), else ``ListTags`` (``DescribeTrainingJob`` has none)."""
        description = self.describe(name)
        if tags is None:
            arn = description.get("TrainingJobArn")
            if not isinstance(arn, str) or not arn:
                raise AdapterError(f"DescribeTrainingJob {name}: the answer has no TrainingJobArn")
            tags = self.list_tags(arn)
        return TrainingJob.model_validate({**description, "Tags": dict(tags)})

    def stop(self, name: str) -> StopOutcome:
        """Stop a job; a job that is already stopping or has ended counts as success.

        botocore retries an attempt answered 5xx or not at all (and a throttled one), and raises the last
        attempt's answer. Whether an attempt before that answer may have been applied (answered 5xx or not at
        all) is read from each attempt's answer as botocore's send loop gets it (``_note_stop_attempt``): a call
        whose earlier attempts, if any, were all refused (answered 4xx: throttled, say) applied nothing before its
        last answer, and a refusal then was not applied (``StopRefused``). After an attempt answered 5xx or not at
        all, a refusal says nothing of it: it may have been applied. A client that answers before the send loop
        (a double, botocore's Stubber) shows no attempts: its answer's ``RetryAttempts`` (``ResponseMetadata``)
        is read instead, any earlier attempt taken as perhaps applied; an answer that does not say either is read
        as the call's only one, but for a throttled answer, which is taken as perhaps applied (a delivery's retry
        takes it for made only when the job shows a stop)."""
        record: list[bool] = []
        self._stop_attempts.record = record
        try:
            self._client.stop_training_job(TrainingJobName=name)
        except ClientError as exc:
            self._stop_attempts.record = None
            earlier = _earlier_applied(exc, record)
            # SageMaker answers a job it cannot stop with ValidationException; its model's one error for
            # StopTrainingJob is ResourceNotFound. Either way the job's own status says what happened (and
            # DescribeTrainingJob raises JobNotFound for a job that does not exist).
            if error_code(exc) in {"ValidationException", "ResourceNotFound"}:
                return self._not_stoppable(name, exc, earlier is True)
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500:
                # a server error: the stop may have been applied before it failed
                raise StopUnanswered(f"StopTrainingJob {name} failed: {exc}") from exc
            if earlier:
                # this answer (throttled, say) refused the last attempt only: an earlier one, answered 5xx or not
                # at all and retried by botocore, may have been applied (stop_noted)
                raise AdapterError(
                    f"StopTrainingJob {name} failed after {_retry_attempts(exc)} retries: {exc}"
                ) from exc
            if error_code(exc) in DENIED_CODES:  # no attempt of the call applied
                raise StopDenied(f"StopTrainingJob {name} failed: {exc}") from exc
            if earlier is False:  # every attempt of the call answered with a refusal: not applied
                raise StopRefused(f"StopTrainingJob {name} failed: {exc}") from exc
            raise AdapterError(f"StopTrainingJob {name} failed: {exc}") from exc
        except BotoCoreError as exc:  # no answer (the stop may have been made: stopping again is success)
            raise StopUnanswered(f"StopTrainingJob {name} failed: {exc}") from exc
        finally:
            self._stop_attempts.record = None
        return StopOutcome.STOPPED

    def _not_stoppable(self, name: str, exc: ClientError, earlier: bool) -> StopOutcome:
        """A stop SageMaker answered "not stoppable" (``exc``), by the job's status now. When no earlier attempt
        of the call may have been applied (the call's only answer, the answer to a retry of attempts all refused,
        or one that says nothing of the attempts before it): the job was stopping or had ended before the call
        or while botocore waited to retry it, by someone else's doing (``ALREADY_ENDED``), or the stop was refused
        (``StopRefused``, a status that cannot be read included: nothing of ours was applied). When one may
        (``earlier``: answered 5xx or not at all), it may have made the job stopping; a job ``Stopping`` or
        ``Stopped`` is taken as stopped by this call, as a delivery's retry takes a stop noted as perhaps applied
        (``stopped_earlier``), and a status that cannot be read leaves the stop perhaps applied (a plain
        ``AdapterError``: ``stop_noted``)."""
        try:
            status = self.describe(name).get("TrainingJobStatus")
        except JobNotFound:
            raise
        except AdapterError as unread:
            if earlier:
                raise AdapterError(f"StopTrainingJob {name} retried and refused ({exc}); {unread}") from unread
            raise StopRefused(f"StopTrainingJob {name} refused ({exc}); {unread}") from unread
        if earlier and status in {"Stopping", "Stopped"}:
            logger.info(
                "stop taken as this call's: an earlier attempt of it may have been applied",
                job=name,
                status=status,
                retries=_retry_attempts(exc),
            )
            return StopOutcome.STOPPED
        if status in {"Stopping", "Stopped", "Completed", "Failed"}:
            return StopOutcome.ALREADY_ENDED
        if earlier:
            raise AdapterError(f"StopTrainingJob {name} retried and rejected while {status}: {exc}") from exc
        raise StopRefused(f"StopTrainingJob {name} rejected while {status}: {exc}") from exc


def _perhaps_applied(response: Any, caught_exception: Any) -> bool:
    """Whether a StopTrainingJob attempt botocore's send loop got ``response`` (the HTTP response and its parse)
    or ``caught_exception`` for may have been applied: yes unless SageMaker answered it 4xx (a refusal)."""
    if caught_exception is not None or not isinstance(response, tuple) or not response:
        return True
    status = getattr(response[0], "status_code", None)
    return not (isinstance(status, int) and 400 <= status < 500)


def _earlier_applied(exc: ClientError, record: list[bool]) -> bool | None:
    """Whether an attempt of a failed StopTrainingJob before the one ``exc`` answers may have been applied:
    by the call's ``record`` (``_note_stop_attempt``: one entry per attempt, the last ``exc``'s) when botocore's
    send loop made any; else by ``RetryAttempts`` (any earlier attempt perhaps applied), None when ``exc`` does
    not say it (a client double's answer)."""
    if record:
        return any(record[:-1])
    retries = _retry_attempts(exc)
    return None if retries is None else retries > 0


def _retry_attempts(exc: ClientError) -> int | None:
    """How many attempts botocore sent before the one ``exc`` answers (``ResponseMetadata.RetryAttempts``, which
    its endpoint sets on the last answer); None when the answer does not say (a client double's)."""
    attempts = exc.response.get("ResponseMetadata", {}).get("RetryAttempts")
    return attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else None


class SageMakerJobInventory:
    """The jobs in progress and the jobs that failed lately (the reconciler), page by page of
    ``ListTrainingJobs``, newest first, until the listing's window is read or the run's time is spent.

    SageMaker pages before it filters: "the MaxResults number of training jobs are first retrieved ignoring
    the StatusEquals parameter and then they are filtered by the StatusEquals parameter" (botocore's SageMaker
    model, ListTrainingJobs). A listing by status alone therefore reads every job the account ever ran (a
    page per hundred, most of them empty); each listing here is bounded in time (``CreationTimeAfter``,
    ``LastModifiedTimeAfter``) and asks ``more()`` before each further page."""

    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"sagemaker:ListTrainingJobs"})
    # List calls cannot be scoped to a resource: IAM grants them on Resource "*" only.
    UNSCOPED_ACTIONS: ClassVar[frozenset[str]] = frozenset({"sagemaker:ListTrainingJobs"})
    PAGE_SIZE = 100  # the API's maximum

    def __init__(self, client: Any) -> None:
        self._client = client

    def in_progress(
        self, created_after: datetime, more: Callable[[], bool], created_before: datetime | None = None
    ) -> JobListing:
        """The jobs in progress created after ``created_after`` (``IN_PROGRESS_HORIZON`` ago: the longest a job
        can be in progress) and before ``created_before`` (none: now). Listed without ``StatusEquals`` and kept
        here: SageMaker pages jobs of every status before it filters, so the filter saves no request, and the
        listing then knows where its pages stopped (``reached``: the oldest job read, whatever its status), from
        which a listing cut short is continued by a later run."""
        window = {"CreationTimeAfter": created_after}
        if created_before is not None:
            window["CreationTimeBefore"] = created_before
        listing = self._listing(None, window, more)
        kept = tuple(job for job in listing.jobs if job.status == "InProgress")
        return listing.model_copy(update={"jobs": kept})

    def failed_since(self, since: datetime, more: Callable[[], bool]) -> JobListing:
        """The jobs that failed and were last modified at or after ``since`` (deferred resumes): the time is
        checked here again for an answer that ignored it."""
        listing = self._listing("Failed", {"LastModifiedTimeAfter": since}, more)
        kept = tuple(j for j in listing.jobs if j.last_modified_time is None or j.last_modified_time >= since)
        return listing.model_copy(update={"jobs": kept})

    def _listing(self, status: str | None, window: dict[str, datetime], more: Callable[[], bool]) -> JobListing:
        from sagemaker_governance.domain.reconcile import JobListing, JobSummary

        jobs: list[JobSummary] = []
        pages = 0
        filtered = {"StatusEquals": status} if status is not None else {}
        try:
            for page in self._client.get_paginator("list_training_jobs").paginate(
                SortBy="CreationTime",
                SortOrder="Descending",
                PaginationConfig={"PageSize": self.PAGE_SIZE},
                **filtered,
                **window,
            ):
                pages += 1
                jobs += [JobSummary.model_validate(item) for item in page.get("TrainingJobSummaries", [])]
                if page.get("NextToken") and not more():
                    return JobListing(jobs=tuple(jobs), complete=False, pages=pages, reached=_oldest(jobs))
        except (ClientError, BotoCoreError) as exc:
            # One page failed past botocore's retries: the pages read are kept, the listing is not complete (what
            # the reconciler already handles safely: nothing is done to a job it did not reach), and says why.
            error = f"ListTrainingJobs ({status or 'any status'}) page {pages + 1} failed: {exc}"
            logger.error("job listing cut short by a failed page", pages=pages, error=error)
            return JobListing(jobs=tuple(jobs), complete=False, pages=pages, reached=_oldest(jobs), error=error)
        return JobListing(jobs=tuple(jobs), complete=True, pages=pages, reached=_oldest(jobs))


def _oldest(jobs: list[JobSummary]) -> datetime | None:
    return min((job.creation_time for job in jobs if job.creation_time is not None), default=None)


class SageMakerJobMarks:
    """Tags a job once compliance has evaluated it, so that the reconciler knows (``AddTags``)."""

    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"sagemaker:AddTags"})

    def __init__(self, client: Any) -> None:
        self._client = client

    def mark(self, arn: str, key: str, value: str) -> None:
        """Connection errors too become ``AdapterError``: the mark is best effort (without it the
        reconciler evaluates the job again, which repeats the same decision)."""
        try:
            self._client.add_tags(ResourceArn=arn, Tags=[{"Key": key, "Value": value}])
        except (ClientError, BotoCoreError) as exc:
            raise AdapterError(f"AddTags {arn} failed: {exc}") from exc
