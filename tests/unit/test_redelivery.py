"""The retry ladder of a record going back to its queue (domain/redelivery.py) and the queue URL its
visibility change is addressed to (adapters/queue.py)."""

from __future__ import annotations

import pytest

from sagemaker_governance.adapters.queue import queue_url
from sagemaker_governance.domain.redelivery import (
    FIRST_RETRY_SECONDS,
    HELD_MARGIN_SECONDS,
    MAX_VISIBILITY_SECONDS,
    SECOND_RETRY_SECONDS,
    held_visibility,
    retry_visibility,
)


@pytest.mark.parametrize(
    ("receive_count", "seconds"),
    [(1, 60), (2, 300), (3, None), (4, None), (5, None), (None, None), (0, None)],
)
def test_a_minute_after_the_first_receive_five_after_the_second_then_the_queues_timeout(
    receive_count: int | None, seconds: int | None
) -> None:
    assert retry_visibility(receive_count) == seconds


def test_the_ladder_is_within_what_sqs_accepts_and_shorter_than_the_queues_timeout() -> None:
    # ChangeMessageVisibility takes 0 to 43,200 s; the queues' VisibilityTimeout is 1,800 s (template.yaml)
    assert 0 < FIRST_RETRY_SECONDS < SECOND_RETRY_SECONDS < 1800 <= MAX_VISIBILITY_SECONDS


@pytest.mark.parametrize(("hold", "seconds"), [(900.0, 960), (899.2, 960), (0.0, 60), (300, 360)])
def test_a_held_record_stays_invisible_past_the_longest_hold_by_the_margin(hold: float, seconds: int) -> None:
    assert HELD_MARGIN_SECONDS == 60
    assert held_visibility(hold) == seconds


@pytest.mark.parametrize(
    "hold", [-1.0, float("nan"), float("inf"), MAX_VISIBILITY_SECONDS - HELD_MARGIN_SECONDS + 0.5]
)
def test_a_hold_that_is_no_duration_or_that_sqs_could_not_wait_out_is_rejected(hold: float) -> None:
    with pytest.raises(ValueError):
        held_visibility(hold)
    assert held_visibility(MAX_VISIBILITY_SECONDS - HELD_MARGIN_SECONDS) == MAX_VISIBILITY_SECONDS


@pytest.mark.parametrize(
    ("arn", "url"),
    [
        (
            "arn:aws:sqs:us-east-1:123456789012:gov-JobEventsQueue",
            "https://sqs.us-east-1.amazonaws.com/123456789012/gov-JobEventsQueue",
        ),
        (
            "arn:aws-cn:sqs:cn-north-1:123456789012:gov-AlarmQueue",
            "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/gov-AlarmQueue",
        ),
        (
            "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:q",
            "https://sqs.us-gov-west-1.amazonaws.com/123456789012/q",
        ),
        ("arn:aws-iso:sqs:us-iso-east-1:123456789012:q", "https://sqs.us-iso-east-1.c2s.ic.gov/123456789012/q"),
        ("arn:aws:sns:us-east-1:123456789012:topic", None),
        ("arn:aws-unknown:sqs:xx-east-1:123456789012:q", None),
        ("arn:aws:sqs:us-east-1:123456789012", None),
        ("", None),
    ],
)
def test_the_queue_url_is_the_arns_in_its_partitions_domain(arn: str, url: str | None) -> None:
    assert queue_url(arn) == url
