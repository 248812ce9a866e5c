from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

import botocore.session
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from sagemaker_governance.domain.job import (
    NAME_MAX,
    NAME_PATTERN,
    TrainingJob,
    is_valid_job_name,
    parse_timestamp,
    training_entries,
)
from tests.builders import describe


def test_tags_as_map_and_as_key_value_list_read_the_same() -> None:
    # Given the two tag shapes AWS sends
    as_map = TrainingJob.model_validate({**describe(), "Tags": {"team": "nlp", "owner": "bob"}})
    as_list = TrainingJob.model_validate(
        {**describe(), "Tags": [{"Key": "team", "Value": "nlp"}, {"Key": "owner", "Value": "bob"}]}
    )
    # Then both give the same map
    assert as_map.tags == as_list.tags == {"team": "nlp", "owner": "bob"}


def test_missing_tags_mean_unknown_not_empty() -> None:
    assert TrainingJob.model_validate(describe()).tags is None
    assert TrainingJob.model_validate({**describe(), "Tags": {}}).tags == {}


@pytest.mark.parametrize(
    "raw",
    [1763719200000, "1763719200000", 1763719200000.0, "2025-11-21T10:00:00Z", "2025-11-21T10:00:00+00:00"],
)
def test_timestamps_as_numbers_numeric_strings_and_iso(raw: object) -> None:
    job = TrainingJob.model_validate({**describe(), "CreationTime": raw})
    assert job.creation_time == datetime(2025, 11, 21, 10, 0, tzinfo=UTC)


def test_boto3_datetimes_are_accepted_and_made_aware() -> None:
    naive = datetime(2025, 11, 21, 10, 0)
    job = TrainingJob.model_validate({**describe(), "CreationTime": naive})
    assert job.creation_time == naive.replace(tzinfo=UTC)


@pytest.mark.parametrize("raw", ["yesterday", True, -5, "1e30", [1]])
def test_bad_timestamps_are_rejected(raw: object) -> None:
    with pytest.raises(ValidationError):
        TrainingJob.model_validate({**describe(), "CreationTime": raw})


def test_missing_optional_fields_are_fine() -> None:
    job = TrainingJob.model_validate({"TrainingJobName": "x", "TrainingJobStatus": "InProgress"})
    assert job.instance_groups == ()
    assert job.stopping.max_runtime_seconds is None
    assert job.spot is False


@pytest.mark.parametrize(
    ("member", "unsaid"),
    [
        (("ResourceConfig", "InstanceGroups"), ()),
        (("AlgorithmSpecification", "MetricDefinitions"), ()),
        (("SecondaryStatusTransitions",), ("SecondaryStatusTransitions",)),
        (("FailureReason",), ()),
        (("ResourceConfig",), ("ResourceConfig",)),
        (("StoppingCondition",), ("StoppingCondition",)),
        (("AlgorithmSpecification",), ("AlgorithmSpecification",)),
        (("EnableManagedSpotTraining",), ("EnableManagedSpotTraining",)),
        (("Tags",), ("Tags",)),
    ],
)
def test_a_member_sent_as_null_reads_as_left_out(member: tuple[str, ...], unsaid: tuple[str, ...]) -> None:
    # Given an event whose detail writes an absent member as JSON null (SageMaker's events do), nested or not
    detail: dict[str, Any] = {**describe(), "Tags": {"team": "nlp"}, "FailureReason": "x"}
    detail["AlgorithmSpecification"] = {"TrainingImage": "img", "MetricDefinitions": [{"Name": "l", "Regex": "l"}]}
    detail["SecondaryStatusTransitions"] = [{"Status": "Training", "StartTime": 1763719200000}]
    *path, last = member
    section = detail
    for key in path:
        section[key] = dict(section[key])
        section = section[key]
    section[last] = None
    # Then the event is read (not rejected); a null section is "unsaid", so the job is read again
    job = TrainingJob.model_validate(detail)
    assert set(unsaid) <= set(job.unsaid_sections())
    # while a required member sent as null is still refused
    with pytest.raises(ValidationError):
        TrainingJob.model_validate({**describe(), "TrainingJobName": None})


def test_heterogeneous_cluster_counts_every_group() -> None:
    job = TrainingJob.model_validate(
        {
            **describe(),
            "ResourceConfig": {
                "InstanceGroups": [
                    {"InstanceGroupName": "cpu", "InstanceType": "ml.c5.xlarge", "InstanceCount": 2},
                    {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 3},
                ]
            },
        }
    )
    assert job.instance_types == ("ml.c5.xlarge", "ml.p4d.24xlarge")
    assert job.total_instance_count == 5
    assert job.is_heterogeneous


def test_training_time_counts_days_not_just_seconds_of_the_day() -> None:
    # Given a job that trained for 26 hours (timedelta.seconds would say 2 hours)
    start = 1_763_719_200_000
    job = TrainingJob.model_validate(
        {
            **describe(),
            "TrainingJobStatus": "Failed",
            "SecondaryStatusTransitions": [
                {"Status": "Starting", "StartTime": start - 60_000, "EndTime": start},
                {"Status": "Training", "StartTime": start, "EndTime": start + 26 * 3_600_000},
                {"Status": "Failed", "StartTime": start + 26 * 3_600_000},
            ],
        }
    )
    assert job.training_seconds(now=datetime(2030, 1, 1, tzinfo=UTC)) == 26 * 3600


def test_training_time_sums_spot_restarts() -> None:
    start = 1_763_719_200_000
    job = TrainingJob.model_validate(
        {
            **describe(),
            "SecondaryStatusTransitions": [
                {"Status": "Training", "StartTime": start, "EndTime": start + 3_600_000},
                {"Status": "Interrupted", "StartTime": start + 3_600_000, "EndTime": start + 3_700_000},
                {"Status": "Training", "StartTime": start + 3_700_000},
            ],
        }
    )
    now = parse_timestamp(start + 3_700_000 + 1_800_000)
    assert now is not None
    assert job.training_seconds(now) == 5400
    assert job.count_transitions("Interrupted") == 1


@given(st.one_of(st.none(), st.integers(), st.floats(), st.text(), st.booleans(), st.lists(st.integers())))
@example(10**400)  # an int beyond any float (JSON allows it): was OverflowError
@example(-(10**400))
@example("9" * 5000)
def test_timestamp_parser_never_raises_anything_but_value_error(raw: object) -> None:
    with contextlib.suppress(ValueError):
        parse_timestamp(raw)


def test_the_job_name_rule_is_sagemakers_own() -> None:
    # The guards check the job an alarm names and the clone planner names clones with this rule: it must be
    # the one CreateTrainingJob enforces (botocore's model of the TrainingJobName shape), not our reading of it
    shape = botocore.session.get_session().get_service_model("sagemaker").shape_for("TrainingJobName")
    assert (NAME_PATTERN.pattern, NAME_MAX) == (shape.metadata["pattern"], shape.metadata["max"])
    assert is_valid_job_name("a" * 63) and is_valid_job_name("llm-7b-run-2")
    assert not any(map(is_valid_job_name, ("a" * 64, "-lead", "trail-", "under_score", "dot.ted", "")))


@pytest.mark.parametrize(
    ("value", "spot", "known"),
    [(True, True, True), (False, False, True), ("false", False, True), ("True", True, True), (None, False, False)],
)
def test_managed_spot_is_read_as_a_boolean_and_its_absence_is_known(value: Any, spot: bool, known: bool) -> None:
    # bool("false") is True: a string must be read, never cast
    job = TrainingJob.model_validate(
        {"TrainingJobName": "j", "TrainingJobStatus": "InProgress", "EnableManagedSpotTraining": value}
    )
    assert (job.spot, job.spot_known) == (spot, known)
    unsaid = TrainingJob.model_validate({"TrainingJobName": "j", "TrainingJobStatus": "InProgress"})
    assert (unsaid.spot, unsaid.spot_known) == (False, False)
    assert not unsaid.with_tags({"team": "a"}).spot_known  # a copy keeps what the source said


def test_a_managed_spot_value_that_is_no_boolean_is_refused() -> None:
    with pytest.raises(ValidationError, match="EnableManagedSpotTraining must be a boolean"):
        TrainingJob.model_validate(
            {"TrainingJobName": "j", "TrainingJobStatus": "InProgress", "EnableManagedSpotTraining": "yes"}
        )


def test_a_job_of_instance_preferences_has_its_groups_once_sagemaker_selected_a_type() -> None:
    # SageMaker's model: InstancePreferences is mutually exclusive with InstanceType and InstanceGroups;
    # DescribeTrainingJob returns SelectedInstanceType / SelectedInstanceCount once a type is selected
    preferences = [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2},
        {"InstanceType": "ml.g6e.48xlarge", "InstanceCount": 4},
    ]
    base = {"TrainingJobName": "j", "TrainingJobStatus": "InProgress"}
    waiting = TrainingJob.model_validate({**base, "ResourceConfig": {"InstancePreferences": preferences}})
    assert waiting.instance_groups == () and waiting.awaits_instance_selection
    assert waiting.possible_instance_types == ("ml.p5.48xlarge", "ml.g6e.48xlarge")
    assert waiting.largest_possible_instance_count == 4
    selected = {
        "InstancePreferences": preferences,
        "SelectedInstanceType": "ml.g6e.48xlarge",
        "SelectedInstanceCount": 4,
    }
    placed = TrainingJob.model_validate({**base, "ResourceConfig": selected})
    assert [(g.instance_type, g.instance_count) for g in placed.instance_groups] == [("ml.g6e.48xlarge", 4)]
    assert not placed.awaits_instance_selection and placed.possible_instance_types == ("ml.g6e.48xlarge",)


def test_a_selected_preference_without_its_count_has_the_jobs_one_count() -> None:
    # Given a job of InstancePreferences with one count for the job (ResourceConfig.InstanceCount), placed by
    # SageMaker, its answer without SelectedInstanceCount
    preferences = [{"InstanceType": "ml.p5.48xlarge"}, {"InstanceType": "ml.g6e.48xlarge"}]
    resources = {
        "InstanceCount": 16,
        "InstancePreferences": preferences,
        "SelectedInstanceType": "ml.g6e.48xlarge",
    }
    placed = TrainingJob.model_validate({**describe(), "ResourceConfig": resources})
    # Then its one group is the selected type on the job's 16 instances (what guards, pricing and Spot read)
    assert [(g.instance_type, g.instance_count) for g in placed.instance_groups] == [("ml.g6e.48xlarge", 16)]
    assert placed.total_instance_count == placed.largest_possible_instance_count == 16


def test_an_instance_count_no_source_says_is_unknown_not_zero() -> None:
    preferences = [{"InstanceType": "ml.p5.48xlarge"}, {"InstanceType": "ml.g6e.48xlarge"}]
    for resources in (
        {"InstancePreferences": preferences},
        {"InstancePreferences": preferences, "SelectedInstanceType": "ml.p5.48xlarge"},
        {"InstanceType": "ml.p5.48xlarge"},
    ):
        unsaid = TrainingJob.model_validate({**describe(), "ResourceConfig": resources})
        assert unsaid.largest_possible_instance_count is None, resources


def test_the_instance_preference_fields_are_the_models() -> None:
    model: Any = botocore.session.get_session().get_service_model("sagemaker")
    members = model.shape_for("ResourceConfig").members
    assert {"InstancePreferences", "SelectedInstanceType", "SelectedInstanceCount"} <= set(members)
    assert {"InstanceType", "InstanceCount"} <= set(members["InstancePreferences"].member.members)


SPOT_HISTORY = [
    {"Status": status, "StartTime": str(1763719201000 + index * 60_000)}
    for index, status in enumerate(["Starting", "Downloading", "Training", "Interrupted", "Starting", "Training"])
]


@pytest.mark.parametrize(
    ("secondary", "expected"),
    [
        ("Training", 6),  # the job read again is at the event's state: every transition
        ("Interrupted", 4),  # the job went on since: the transitions up to the event's own
        ("Starting", 5),  # the restart's Starting, not the first start's
    ],
)
def test_an_event_takes_the_transitions_read_again_as_they_stood_at_the_event(
    secondary: str, expected: int
) -> None:
    # Given a Spot job's event that left its transitions out, and the job as DescribeTrainingJob gives it now
    event = TrainingJob.model_validate(describe(SecondaryStatus=secondary, SecondaryStatusTransitions=None))
    described = TrainingJob.model_validate(
        describe(SecondaryStatus="Training", SecondaryStatusTransitions=SPOT_HISTORY)
    )
    # When the event takes the transitions read again
    said = event.with_transitions_of(described)
    # Then it has them up to the last that entered its own secondary status, and they are said
    assert said is not None and len(said.transitions) == expected
    assert said.transitions[-1].status == secondary and "SecondaryStatusTransitions" not in said.unsaid_sections()


FIRST_START = datetime.fromtimestamp(1763719201, tz=UTC)


def test_a_first_start_s_event_read_again_after_a_spot_restart_takes_the_first_starting() -> None:
    # Given the first Starting event of a Spot job, transitions left out, read again (a retry) after a restart
    event = TrainingJob.model_validate(describe(SecondaryStatus="Starting", SecondaryStatusTransitions=None))
    described = TrainingJob.model_validate(
        describe(SecondaryStatus="Training", SecondaryStatusTransitions=SPOT_HISTORY)
    )
    # When it takes the transitions as they stood at the event's time
    said = event.with_transitions_of(described, FIRST_START)
    # Then it is the first start (one Starting), not the restart's
    assert said is not None and said.count_transitions("Starting") == 1


@pytest.mark.parametrize(
    ("status", "secondary", "described_status", "described_secondary"),
    [
        ("Stopped", "MaxWaitTimeExceeded", "Stopped", "MaxWaitTimeExceeded"),  # at the event's state
        ("InProgress", "Pending", "InProgress", "Pending"),
        ("InProgress", "Interrupted", "InProgress", "Training"),  # gone on since: trains again
        ("Failed", "Failed", "Failed", "Failed"),  # an end the transitions do not show
    ],
)
def test_a_status_the_transitions_never_show_is_not_taken_for_a_lagging_answer(
    status: str, secondary: str, described_status: str, described_secondary: str
) -> None:
    # Given an event whose secondary status the job read again does not list among its transitions
    # (SageMaker documents Pending, Interrupted and MaxWaitTimeExceeded as SecondaryStatus values only)
    event = TrainingJob.model_validate(
        describe(TrainingJobStatus=status, SecondaryStatus=secondary, SecondaryStatusTransitions=None)
    )
    described = TrainingJob.model_validate(
        describe(
            TrainingJobStatus=described_status,
            SecondaryStatus=described_secondary,
            SecondaryStatusTransitions=[t for t in SPOT_HISTORY if t["Status"] != "Interrupted"],
        )
    )
    # When it takes the transitions read again, then it has those begun by its time: it is never retried
    # for a transition that may never come (the record would end in the dead-letter queue)
    said = event.with_transitions_of(described, FIRST_START.replace(year=2030))
    assert said is not None and len(said.transitions) == 5


def test_an_event_the_job_read_again_has_not_reached_takes_no_transitions() -> None:
    # Given a Failed event, and DescribeTrainingJob still answering Training (its answer lags the event)
    event = TrainingJob.model_validate(
        describe(TrainingJobStatus="Failed", SecondaryStatus="Failed", SecondaryStatusTransitions=None)
    )
    described = TrainingJob.model_validate(
        describe(SecondaryStatus="Training", SecondaryStatusTransitions=SPOT_HISTORY)
    )
    # Then nothing is taken: the delivery is retried rather than keyed on a history without its failure
    assert event.with_transitions_of(described) is None


@pytest.mark.parametrize(
    ("event_upto", "reread_upto", "entries"),
    [
        (6, 6, 2),  # the re-read at the event's state
        (6, 5, 2),  # the restart's Training event, its re-read still before it (lagging): the event counts
        (3, 6, 2),  # the first stint's late Training event, the job restarted since: the re-read counts
        (3, 2, 1),  # the first Training event, its re-read lagging (still Downloading)
    ],
)
def test_entries_into_training_count_the_event_and_the_reread_whichever_shows_more(
    event_upto: int, reread_upto: int, entries: int
) -> None:
    def upto(n: int) -> TrainingJob:
        history = SPOT_HISTORY[:n]
        return TrainingJob.model_validate(
            describe(SecondaryStatus=history[-1]["Status"], SecondaryStatusTransitions=history)
        )

    assert training_entries(upto(event_upto), upto(reread_upto)) == entries


@pytest.mark.parametrize(
    ("tags", "said"),
    [({}, None), (None, None), ({"team": "nlp"}, {"team": "nlp"})],
    ids=["empty-map", "left-out", "tagged"],
)
def test_an_events_empty_tag_map_is_not_said(tags: dict[str, str] | None, said: dict[str, str] | None) -> None:
    # Given an event detail whose Tags map is empty (AWS's documented sample), left out, or the job's tags
    job = TrainingJob.model_validate({**describe(), **({"Tags": tags} if tags is not None else {})})
    # Then only a map with tags is the job's: an empty one is read as left out, and its section is unsaid
    assert job.as_event_says().tags == said
    assert ("Tags" in job.as_event_says().unsaid_sections()) is (said is None)
    # while tags read with ListTags keep their empty answer: that job has none
    assert job.with_tags({}).tags == {}
