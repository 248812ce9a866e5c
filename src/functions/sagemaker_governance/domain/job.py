"""The training job as governance sees it.

One model reads both shapes SageMaker gives us: the ``detail`` of a ``SageMaker Training Job State
Change`` event and a ``DescribeTrainingJob`` response. They carry the same PascalCase fields, but differ
in how they encode things: events put timestamps as epoch milliseconds (numbers or numeric strings) and
tags as a map, boto3 gives ``datetime`` objects and ``ListTags`` gives a Key/Value list. Only the fields
governance needs are modelled; unknown fields are tolerated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

TERMINAL_STATUSES = frozenset({"Completed", "Failed", "Stopped"})
# How much later than an event's ``time`` a transition it reports may say it began (two clocks, and the
# event's time may be set before the transition is written): far shorter than any stint between two
# transitions of the same status (a first Starting and a Spot restart's).
EVENT_TIME_SLACK = timedelta(seconds=60)
# The secondary statuses SageMaker documents as a ``SecondaryStatusTransition`` (botocore, sagemaker
# ``SecondaryStatusTransition.Status``); ``SecondaryStatus`` also takes Pending, Interrupted and
# MaxWaitTimeExceeded, which that list leaves out.
RECORDED_TRANSITIONS = frozenset(
    {
        "Starting",
        "Downloading",
        "Training",
        "Uploading",
        "Completed",
        "Failed",
        "MaxRuntimeExceeded",
        "Stopped",
        "Stopping",
    }
)

# Set by the SageMaker adapter on a DescribeTrainingJob answer: the paths botocore's model did not know.
# Not an AWS member name (those are PascalCase words), so it never collides with one.
UNMODELLED_FIELDS_KEY: Final = "smgov:unmodelled-fields"

# A training job's name (CreateTrainingJob's TrainingJobName): the guards check the job an alarm names, the
# clone planner names clones (domain/clone.py).
NAME_MAX: Final = 63
NAME_PATTERN: Final = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")


def is_valid_job_name(name: str) -> bool:
    return len(name) <= NAME_MAX and NAME_PATTERN.fullmatch(name) is not None


def parse_timestamp(value: Any) -> datetime | None:
    """Epoch milliseconds (number or numeric string), ISO-8601 text, or a datetime, to an aware UTC datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, bool):
        raise ValueError("a timestamp cannot be a boolean")
    if isinstance(value, int | float):
        try:
            millis = float(value)
        except OverflowError:  # an int beyond any float: JSON allows it
            raise ValueError("epoch milliseconds out of range") from None
        return _from_epoch_millis(millis)
    if isinstance(value, str):
        text = value.strip()
        try:
            return _from_epoch_millis(float(text))
        except ValueError:
            pass
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(
                f"not a timestamp: {_short(value)} (expected epoch milliseconds or ISO-8601)"
            ) from exc
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise ValueError(f"not a timestamp: {_short(value)}")


def _from_epoch_millis(millis: float) -> datetime:
    if not math.isfinite(millis):
        raise ValueError("a timestamp must be a finite number")
    if not 0 <= millis < 253_402_300_800_000:  # year 1970 .. 9999
        raise ValueError(f"epoch milliseconds out of range: {millis}")
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis)


_TAG_SCALARS = (str, int, float, bool)


def _tag_text(value: Any, what: str) -> str:
    """A tag key or value as text: AWS sends strings; numbers and booleans are read as written."""
    if value is None:
        return ""
    if not isinstance(value, _TAG_SCALARS):
        raise ValueError(f"a tag {what} must be text, got {type(value).__name__}")
    return str(value)


def parse_tags(value: Any) -> dict[str, str] | None:
    """A tag map ``{"k": "v"}`` or a Key/Value list ``[{"Key": "k", "Value": "v"}]`` to a map."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return {_tag_text(k, "key"): _tag_text(v, f"value ({k!r})") for k, v in value.items()}
    if isinstance(value, list):
        tags: dict[str, str] = {}
        for item in value:
            if not isinstance(item, Mapping) or item.get("Key") is None:
                raise ValueError(f"a tag list entry must be {{'Key': ..., 'Value': ...}}, got {_short(item)}")
            key = _tag_text(item["Key"], "key")
            tags[key] = _tag_text(item.get("Value"), f"value ({key!r})")
        return tags
    raise ValueError("Tags must be a map or a list of Key/Value pairs")


def _short(value: Any, limit: int = 80) -> str:
    """``repr`` for error messages, cut short and safe on deeply nested input."""
    if isinstance(value, Mapping | list):
        return f"a {type(value).__name__} of {len(value)} item(s)"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls_unsaid(cls, data: Any) -> Any:
        """A member sent as JSON ``null`` says no more than its absence. SageMaker's state-change events write
        absent members as ``null`` (a captured event: ``"FailureReason": null``), so a null list or section
        (``InstanceGroups``, ``MetricDefinitions``, ``ResourceConfig`` ...) takes its default, and a section
        left null is "unsaid" (``unsaid_sections``: the job is read again), instead of failing the event.
        A required member that is null is still an error (it was never said)."""
        if isinstance(data, Mapping) and any(v is None for v in data.values()):
            return {k: v for k, v in data.items() if v is not None}
        return data


class InstanceGroup(_Model):
    name: str = Field(alias="InstanceGroupName")
    instance_type: str = Field(alias="InstanceType")
    instance_count: int = Field(alias="InstanceCount", ge=0)


class InstancePreference(_Model):
    instance_type: str = Field(alias="InstanceType")
    # SageMaker's model (InstancePreference.InstanceCount): set on every preference, or on none of them and
    # given once as ResourceConfig.InstanceCount for all; None here is "not on this preference".
    instance_count: int | None = Field(default=None, alias="InstanceCount", ge=0)


class ResourceConfig(_Model):
    instance_type: str | None = Field(default=None, alias="InstanceType")
    # None: the source does not say (optional in SageMaker's model since InstancePreferences; an event may
    # leave it out), never read as 0 instances
    instance_count: int | None = Field(default=None, alias="InstanceCount", ge=0)
    instance_groups: tuple[InstanceGroup, ...] = Field(default=(), alias="InstanceGroups")
    keep_alive_seconds: int | None = Field(default=None, alias="KeepAlivePeriodInSeconds")
    volume_kms_key_id: str | None = Field(default=None, alias="VolumeKmsKeyId")
    # Flexible instance selection (SageMaker's model, ResourceConfig): an ordered list of types "mutually
    # exclusive with InstanceType, InstanceGroups ..."; SageMaker launches on the first with capacity and
    # DescribeTrainingJob then returns SelectedInstanceType / SelectedInstanceCount (read-only).
    instance_preferences: tuple[InstancePreference, ...] = Field(default=(), alias="InstancePreferences")
    selected_instance_type: str | None = Field(default=None, alias="SelectedInstanceType")
    selected_instance_count: int | None = Field(default=None, alias="SelectedInstanceCount", ge=0)

    def preference_count(self, preference: InstancePreference) -> int | None:
        """The instances a preference launches: its own ``InstanceCount``, or the job's one count
        (``ResourceConfig.InstanceCount``) that SageMaker applies to every preference; None when neither
        is given."""
        return preference.instance_count if preference.instance_count is not None else self.instance_count


class StoppingCondition(_Model):
    max_runtime_seconds: int | None = Field(default=None, alias="MaxRuntimeInSeconds")
    max_wait_seconds: int | None = Field(default=None, alias="MaxWaitTimeInSeconds")


class StatusTransition(_Model):
    status: str = Field(alias="Status")
    start_time: datetime | None = Field(default=None, alias="StartTime")
    end_time: datetime | None = Field(default=None, alias="EndTime")
    message: str | None = Field(default=None, alias="StatusMessage")

    _times = field_validator("start_time", "end_time", mode="before")(parse_timestamp)


class MetricDefinition(_Model):
    name: str = Field(alias="Name")
    regex: str = Field(alias="Regex")


class AlgorithmSpecification(_Model):
    training_image: str | None = Field(default=None, alias="TrainingImage")
    metric_definitions: tuple[MetricDefinition, ...] = Field(default=(), alias="MetricDefinitions")


# What the service reads of a state-change event beyond its name and status. AWS documents no complete schema
# of the event (its sample predates Managed Spot), so where one is left out the job is read again, and the
# job-events function logs which (EVENT_SECTIONS_MISSING; `smgov doctor`'s `events` check counts them). The
# transitions are read again before the delivery is keyed on them (service/job_events.py).
TRANSITIONS_SECTION: Final = "SecondaryStatusTransitions"
EVENT_SECTIONS: Final = (
    ("spot", "EnableManagedSpotTraining"),
    ("resources", "ResourceConfig"),
    ("stopping", "StoppingCondition"),
    ("algorithm", "AlgorithmSpecification"),
    ("tags", "Tags"),
    ("transitions", TRANSITIONS_SECTION),
)
EVENT_SECTIONS_MISSING: Final = "state-change event leaves out what the service reads"


class TrainingJob(_Model):
    """A training job: what an event detail or a ``DescribeTrainingJob`` answer says about it."""

    # SageMaker's own name rule: an event naming something else is malformed (rejected, never sent to AWS)
    name: str = Field(
        alias="TrainingJobName", min_length=1, max_length=NAME_MAX, pattern=f"^{NAME_PATTERN.pattern}$"
    )
    arn: str | None = Field(default=None, alias="TrainingJobArn")
    status: str = Field(alias="TrainingJobStatus", min_length=1)
    secondary_status: str | None = Field(default=None, alias="SecondaryStatus")
    failure_reason: str | None = Field(default=None, alias="FailureReason")
    role_arn: str | None = Field(default=None, alias="RoleArn")
    resources: ResourceConfig = Field(default_factory=ResourceConfig, alias="ResourceConfig")
    stopping: StoppingCondition = Field(default_factory=StoppingCondition, alias="StoppingCondition")
    spot: bool = Field(default=False, alias="EnableManagedSpotTraining")
    checkpoint_s3_uri: str | None = Field(default=None, alias="CheckpointConfig")
    algorithm: AlgorithmSpecification = Field(
        default_factory=AlgorithmSpecification, alias="AlgorithmSpecification"
    )
    creation_time: datetime | None = Field(default=None, alias="CreationTime")
    training_start_time: datetime | None = Field(default=None, alias="TrainingStartTime")
    training_end_time: datetime | None = Field(default=None, alias="TrainingEndTime")
    last_modified_time: datetime | None = Field(default=None, alias="LastModifiedTime")
    transitions: tuple[StatusTransition, ...] = Field(default=(), alias="SecondaryStatusTransitions")
    # An ended job's times (DescribeTrainingJob; the efficiency record's cost and Spot savings)
    billable_seconds: int | None = Field(default=None, alias="BillableTimeInSeconds", ge=0)
    training_time_seconds: int | None = Field(default=None, alias="TrainingTimeInSeconds", ge=0)
    # None means "not known from this source" (DescribeTrainingJob has no tags; an event may omit them, and its
    # empty map says nothing either: ``as_event_says``).
    tags: dict[str, str] | None = Field(default=None, validation_alias=AliasChoices("Tags", "tags"))

    _times = field_validator(
        "creation_time", "training_start_time", "training_end_time", "last_modified_time", mode="before"
    )(parse_timestamp)
    _tags = field_validator("tags", mode="before")(parse_tags)

    @field_validator("checkpoint_s3_uri", mode="before")
    @classmethod
    def _checkpoint_uri(cls, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, Mapping):
            uri = value.get("S3Uri")
            return str(uri) if uri else None
        raise ValueError("CheckpointConfig must be an object with S3Uri")

    @field_validator("spot", mode="before")
    @classmethod
    def _spot(cls, value: Any) -> bool:
        if isinstance(value, str) and value.lower() in ("true", "false"):  # never bool("false")
            return value.lower() == "true"
        if isinstance(value, bool):
            return value
        raise ValueError(f"EnableManagedSpotTraining must be a boolean, got {_short(value)}")

    def unsaid_sections(self) -> tuple[str, ...]:
        """The sections the service reads that its source left out (``EVENT_SECTIONS``, as the source names
        them): none from ``DescribeTrainingJob``; an event is no complete schema AWS documents."""
        present = self.model_fields_set - ({"tags"} if self.tags is None else set())
        return tuple(name for field, name in EVENT_SECTIONS if field not in present)

    @property
    def spot_known(self) -> bool:
        """Whether the source said if the job is Managed Spot (``EnableManagedSpotTraining`` present):
        ``DescribeTrainingJob`` does; an event may not, and is then no proof of On-Demand."""
        return "spot" in self.model_fields_set

    # ---- derived facts -------------------------------------------------------------------------

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def instance_groups(self) -> tuple[InstanceGroup, ...]:
        """Every group of instances: a homogeneous job is one group named after its instance type; a job of
        ``InstancePreferences`` is one group of the type SageMaker selected, once it has (none before).

        A single group whose count the source does not say counts 0 here (no hosts to watch or price, as a
        job without instances); the rules read ``largest_possible_instance_count``, None then."""
        resources = self.resources
        if resources.instance_groups:
            return resources.instance_groups
        instance_type = resources.instance_type or resources.selected_instance_type
        if not instance_type:
            return ()
        count = self._single_group_count()
        return (InstanceGroup(name="default", instance_type=instance_type, instance_count=count or 0),)

    def _single_group_count(self) -> int | None:
        """The count of a homogeneous job, or of the type SageMaker selected from ``InstancePreferences``
        (``SelectedInstanceCount``, else the chosen preference's count, else the job's one count)."""
        resources = self.resources
        if resources.instance_type:
            return resources.instance_count
        if resources.selected_instance_count is not None:
            return resources.selected_instance_count
        chosen = [p for p in resources.instance_preferences if p.instance_type == resources.selected_instance_type]
        return resources.preference_count(chosen[0]) if chosen else resources.instance_count

    @property
    def instance_types(self) -> tuple[str, ...]:
        return tuple(group.instance_type for group in self.instance_groups)

    @property
    def total_instance_count(self) -> int:
        return sum(group.instance_count for group in self.instance_groups)

    @property
    def possible_instance_types(self) -> tuple[str, ...]:
        """The types the job runs on, or before SageMaker selected one of its ``InstancePreferences``, every
        type it may select (compliance judges each: any of them may be the one launched)."""
        return self.instance_types or tuple(p.instance_type for p in self.resources.instance_preferences)

    @property
    def largest_possible_instance_count(self) -> int | None:
        """``total_instance_count``, or before a selection the largest count among the preferences (each its
        own or the job's one count); None when the source does not say a count (never read as 0)."""
        resources = self.resources
        if resources.instance_groups:
            return self.total_instance_count
        if self.instance_groups:
            return self._single_group_count()
        counts = [resources.preference_count(p) for p in resources.instance_preferences]
        known = [count for count in counts if count is not None]
        return max(known) if known and len(known) == len(counts) else None

    @property
    def awaits_instance_selection(self) -> bool:
        """A job of ``InstancePreferences`` that SageMaker has not yet placed on one of them."""
        return bool(self.resources.instance_preferences) and not self.instance_groups

    @property
    def is_heterogeneous(self) -> bool:
        return bool(self.resources.instance_groups)

    def tag(self, key: str) -> str | None:
        return (self.tags or {}).get(key)

    def with_tags(self, tags: Mapping[str, str]) -> TrainingJob:
        return self.model_copy(update={"tags": dict(tags)})

    def as_event_says(self) -> TrainingJob:
        """This state-change event's job with its ``Tags`` as the service reads them: an empty map is not said
        (None, as a map left out), so the job's own tags are read (``ListTags``) before a team, an owner or a
        mark is judged from them. AWS's documented sample event carries ``"Tags": {}``: an event's empty map is
        no proof that the job has no tags (``ListTags``'s empty answer is). A map with tags is the job's."""
        return self.model_copy(update={"tags": None}) if self.tags == {} else self

    def with_transitions_of(self, described: TrainingJob, at: datetime | None = None) -> TrainingJob | None:
        """This event's job with the transitions of ``described`` (the job read again) as they stood at this
        event (``at``: the event's time; None: unknown): up to the last one that entered this event's
        secondary status no later than ``at`` (give or take ``EVENT_TIME_SLACK``; the job may have gone on since: a Starting event read while
        the job trains, or a first Starting retried after a Spot restart). A secondary status SageMaker
        documents as a ``SecondaryStatusTransition`` that ``described`` has not entered means the answer
        lags the event: None (the caller retries). Pending, Interrupted and MaxWaitTimeExceeded are
        ``SecondaryStatus`` values the transitions' documentation does not list (botocore, sagemaker
        ``SecondaryStatusTransition.Status``): a job read at or past such an event may never show one, so the
        event takes the transitions that began by ``at`` rather than wait for one that may never come. An
        event without a secondary status takes them all when ``described`` has its status."""
        history = described.transitions
        if self.secondary_status is None:
            return self.model_copy(update={"transitions": history}) if described.status == self.status else None
        begun = [t for t in history if at is None or t.start_time is None or t.start_time <= at + EVENT_TIME_SLACK]
        entered = [i for i, transition in enumerate(begun) if transition.status == self.secondary_status]
        if entered:
            return self.model_copy(update={"transitions": begun[: entered[-1] + 1]})
        if self.secondary_status in RECORDED_TRANSITIONS and not self._reached_by(described):
            return None
        return self.model_copy(update={"transitions": begun})

    def _reached_by(self, described: TrainingJob) -> bool:
        """Whether ``described`` is at this event's state or past it: the same status and secondary status,
        or an end after an event of a running (or stopping) job."""
        if (described.status, described.secondary_status) == (self.status, self.secondary_status):
            return True
        return described.is_terminal and not self.is_terminal

    def count_transitions(self, status: str) -> int:
        return sum(1 for transition in self.transitions if transition.status == status)

    def training_seconds(self, now: datetime) -> float:
        """Time spent in the ``Training`` secondary status, summed over restarts, from SageMaker's own
        transition timestamps. An open ``Training`` interval runs to the job's end time or ``now``."""
        total = 0.0
        end_fallback = self.training_end_time or now
        for transition in self.transitions:
            if transition.status != "Training" or transition.start_time is None:
                continue
            end = transition.end_time or end_fallback
            total += max(0.0, (end - transition.start_time).total_seconds())
        return total


def training_entries(event: TrainingJob, reread: TrainingJob) -> int:
    """How many times a job has entered ``Training``, from its ``Training`` event and its re-read: the more
    of the two counts. The re-read shows later stints than a late event does; the event shows its own stint
    when the re-read, made right after it, still answers the job as it stood before (DescribeTrainingJob
    lagging the event)."""
    return max(event.count_transitions("Training"), reread.count_transitions("Training"))
