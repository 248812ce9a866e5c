"""Auto-resume's evidence readers: the hosts' log tails (moto CloudWatch Logs) and checkpoint progress (moto
S3); the calls they make match their IAM_ACTIONS; what cannot be read is reported, never raised."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from sagemaker_governance.adapters.checkpoints import CheckpointStore, split_s3_uri, step_rank
from sagemaker_governance.adapters.training_logs import TRAINING_LOG_GROUP, TrainingLogTails
from tests.adapters.conftest import CallRecorder

JOB = "llm-pretrain-7"
T = int(datetime(2026, 11, 21, 12, 0, tzinfo=UTC).timestamp() * 1000)


def write(client: Any, stream: str, lines: list[str], start_ms: int) -> None:
    client.create_log_stream(logGroupName=TRAINING_LOG_GROUP, logStreamName=stream)
    client.put_log_events(
        logGroupName=TRAINING_LOG_GROUP,
        logStreamName=stream,
        logEvents=[{"timestamp": start_ms + i * 1000, "message": line} for i, line in enumerate(lines)],
    )


@pytest.fixture
def logs(aws: None) -> Any:
    client = boto3.client("logs", region_name="us-east-1")
    client.create_log_group(logGroupName=TRAINING_LOG_GROUP)
    return client


def test_the_last_lines_of_each_host_are_read_failing_host_first(logs: Any) -> None:
    # Given two hosts: algo-2 stopped writing 10 minutes before algo-1, and an older stream of algo-1
    write(logs, f"{JOB}/algo-1-1700000000", ["old container"], T - 3_600_000)
    write(
        logs,
        f"{JOB}/algo-1-1700009000",
        [f"step {i}" for i in range(300)] + ["Watchdog caught collective operation timeout"],
        T,
    )
    write(
        logs,
        f"{JOB}/algo-2-1700009000",
        ["step 0", "RuntimeError: CUDA error: uncorrectable ECC error encountered"],
        T - 600_000,
    )
    write(logs, "other-job/algo-1-1700009000", ["not ours"], T)
    recorder = CallRecorder().attach(logs)
    # When the tails are read, 200 lines per host
    evidence = TrainingLogTails(logs).tails(JOB, lines=200, hosts=8)
    # Then the failing host comes first, each host's latest stream's last 200 lines, oldest first
    assert evidence.logs_read and [h.host for h in evidence.hosts] == ["algo-2", "algo-1"]
    algo2, algo1 = evidence.hosts
    assert algo2.lines[-1].text.startswith("RuntimeError: CUDA error")
    assert (
        len(algo1.lines) == 200
        and algo1.lines[-1].text.startswith("Watchdog")
        and algo1.lines[0].text == "step 101"
    )
    assert algo1.lines[-1].at == datetime.fromtimestamp((T + 300_000) / 1000, tz=UTC)
    assert "old container" not in {line.text for line in algo1.lines}
    assert recorder.actions <= TrainingLogTails.IAM_ACTIONS


def test_only_the_first_hosts_are_read_and_the_evidence_says_so(logs: Any) -> None:
    for n in range(1, 5):
        write(logs, f"{JOB}/algo-{n}-1700009000", [f"line of {n}"], T + n * 1000)
    evidence = TrainingLogTails(logs).tails(JOB, lines=10, hosts=2)
    assert [h.host for h in evidence.hosts] == ["algo-1", "algo-2"] and evidence.hosts_total == 4
    assert any("read 2 of 4 hosts" in note for note in evidence.notes)
    # the two left out were cut by the budget, not failed reads: no later read with the same budget reaches them
    assert evidence.hosts_cut == 2 and evidence.hosts_failed == 0


def test_no_log_group_or_no_stream_is_reported_not_raised(aws: None) -> None:
    client = boto3.client("logs", region_name="us-east-1")
    missing = TrainingLogTails(client).tails(JOB, lines=10, hosts=2)
    assert not missing.logs_read and "DescribeLogStreams failed" in missing.notes[0]
    client.create_log_group(logGroupName=TRAINING_LOG_GROUP)
    empty = TrainingLogTails(client).tails(JOB, lines=10, hosts=2)
    assert not empty.logs_read and "no log stream" in empty.notes[0]


def test_a_throttled_stream_read_is_a_note_and_the_other_hosts_are_still_read() -> None:
    client = boto3.client("logs", region_name="us-east-1")
    stubber = Stubber(client)
    streams = [
        {"logStreamName": f"{JOB}/algo-1-1700009000", "creationTime": 1, "lastEventTimestamp": T},
        {"logStreamName": f"{JOB}/algo-2-1700009000", "creationTime": 1, "lastEventTimestamp": T - 1},
    ]
    stubber.add_response(
        "describe_log_streams",
        {"logStreams": streams},
        {"logGroupName": TRAINING_LOG_GROUP, "logStreamNamePrefix": f"{JOB}/"},
    )
    stubber.add_client_error("get_log_events", "ThrottlingException", http_status_code=400)
    stubber.add_response(
        "get_log_events",
        {"events": [{"timestamp": T, "message": "step 5"}], "nextBackwardToken": "b/1", "nextForwardToken": "f/1"},
        {
            "logGroupName": TRAINING_LOG_GROUP,
            "logStreamName": f"{JOB}/algo-1-1700009000",
            "startFromHead": False,
            "limit": 50,
        },
    )
    stubber.add_response(
        "get_log_events",
        {"events": [], "nextBackwardToken": "b/1", "nextForwardToken": "f/1"},
        {
            "logGroupName": TRAINING_LOG_GROUP,
            "logStreamName": f"{JOB}/algo-1-1700009000",
            "startFromHead": False,
            "limit": 49,
            "nextToken": "b/1",
        },
    )
    with stubber:
        evidence = TrainingLogTails(client).tails(JOB, lines=50, hosts=8)
    assert [h.host for h in evidence.hosts] == ["algo-1"] and evidence.logs_read
    assert evidence.notes == ("algo-2: GetLogEvents failed (ThrottlingException)",)
    assert evidence.hosts_cut == 0 and evidence.hosts_failed == 1  # a failed read, which a later read may make


# ---- checkpoints ---------------------------------------------------------------------------------------


@pytest.fixture
def s3(aws: None) -> Any:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="acme-ckpt-us")
    for key in ("llm/step-100.pt", "llm/step-200.pt", "other/step-1.pt"):
        client.put_object(Bucket="acme-ckpt-us", Key=key, Body=b"x")
    return client


def test_objects_written_since_the_attempt_started_are_counted_under_the_prefix(s3: Any) -> None:
    store = CheckpointStore(s3, "acme-ckpt-*")
    recorder = CallRecorder().attach(s3)
    # moto stamps objects with the real time: one start before it, one after
    before = store.progress("s3://acme-ckpt-us/llm/", datetime.now(UTC) - timedelta(hours=1))
    after = store.progress("s3://acme-ckpt-us/llm/", datetime.now(UTC) + timedelta(hours=1))
    assert (before.checked, before.written, before.total) == (True, 2, 2)
    assert (after.checked, after.written, after.total) == (True, 0, 2)
    assert recorder.actions == {"s3:ListObjectsV2"}  # authorized by s3:ListBucket (IAM_ACTIONS)


def test_a_bucket_outside_the_pattern_is_not_listed(s3: Any) -> None:
    recorder = CallRecorder().attach(s3)
    progress = CheckpointStore(s3, "acme-ckpt-*").progress("s3://someone-else/llm/", datetime.now(UTC))
    assert not progress.checked and not progress.in_scope and not recorder.actions


def test_a_listing_that_fails_is_unreadable_not_raised(s3: Any) -> None:
    progress = CheckpointStore(s3, "acme-ckpt-*").progress("s3://acme-ckpt-gone/llm/", datetime.now(UTC))
    assert progress.unreadable and "NoSuchBucket" in (progress.note or "")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [("s3://b/p/q/", ("b", "p/q/")), ("s3://b", ("b", "")), ("file:///x", None), ("s3:///x", None)],
)
def test_s3_uris_split_into_bucket_and_prefix(uri: str, expected: tuple[str, str] | None) -> None:
    assert split_s3_uri(uri) == expected


# ---- a listing cut short: where a run writes its newest files ---------------------------------------------

OLD, NEW = datetime(2026, 11, 20, tzinfo=UTC), datetime(2026, 11, 21, 12, 30, tzinfo=UTC)
SINCE = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def _page(
    keys: list[tuple[str, datetime]], *, token: str | None = None, folders: tuple[str, ...] = ()
) -> dict[str, Any]:
    page: dict[str, Any] = {
        "IsTruncated": token is not None,
        "Contents": [{"Key": k, "LastModified": t} for k, t in keys],
        "KeyCount": len(keys) + len(folders),
    }
    if token is not None:
        page["NextContinuationToken"] = token
    if folders:
        page["CommonPrefixes"] = [{"Prefix": f} for f in folders]
    return page


def _listing(prefix: str, token: str | None = None, delimiter: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {"Bucket": "acme-ckpt-us", "Prefix": prefix, "MaxKeys": 2}
    if token:
        params["ContinuationToken"] = token
    if delimiter:
        params["Delimiter"] = "/"
    return params


def _stubbed_progress(client: Any, stubber: Stubber) -> Any:
    """What the store reads of ``s3://acme-ckpt-us/llm/`` since 12:00 (2 pages of 2 keys at most), every
    stubbed answer used."""
    with stubber:
        progress = CheckpointStore(client, "acme-ckpt-*", max_pages=2, page_size=2).progress(
            "s3://acme-ckpt-us/llm/", SINCE
        )
        stubber.assert_no_pending_responses()
    return progress


def _nothing_new_in(stubber: Stubber, folders: tuple[str, ...], file: str) -> None:
    """Each folder's listing: one old object."""
    for folder in folders:
        stubber.add_response("list_objects_v2", _page([(f"{folder}{file}", OLD)]), _listing(folder))


def _cut_listing(stubber: Stubber) -> None:
    """10,000 objects stand for 4 here (2 pages of 2): every one of them old, and more beyond the cut."""
    stubber.add_response(
        "list_objects_v2", _page([("llm/checkpoint-100/0.distcp", OLD)] * 2, token="t1"), _listing("llm/")
    )
    stubber.add_response(
        "list_objects_v2", _page([("llm/checkpoint-100/2.distcp", OLD)] * 2, token="t2"), _listing("llm/", "t1")
    )
    # One level down, the run's step folders, in S3's (binary) order across two pages
    stubber.add_response(
        "list_objects_v2",
        _page([], token="f1", folders=("llm/checkpoint-100/", "llm/checkpoint-1500/")),
        _listing("llm/", delimiter=True),
    )
    stubber.add_response(
        "list_objects_v2", _page([], folders=("llm/checkpoint-900/",)), _listing("llm/", "f1", delimiter=True)
    )


def test_a_cut_listing_finds_what_the_run_writes_in_its_newest_step_folder() -> None:
    # Given a location whose first 4 keys (the bound) are old checkpoints and the run writing its step 1500
    client = boto3.client("s3", region_name="us-east-1")
    stubber = Stubber(client)
    _cut_listing(stubber)
    stubber.add_response(
        "list_objects_v2",
        _page([("llm/checkpoint-1500/0.distcp", NEW), ("llm/checkpoint-1500/1.distcp", OLD)]),
        _listing("llm/checkpoint-1500/"),
    )
    # When the store is asked what was written since 12:00
    progress = _stubbed_progress(client, stubber)
    # Then the newest folder by its number (1500, though S3 lists it before 900) proves progress, and the
    # store stops there: checkpoint-900/ is not listed
    assert progress.checked and progress.written == 1 and progress.truncated
    assert progress.written_at == (NEW,)
    assert "llm/checkpoint-1500/" in (progress.note or "")


def test_a_cut_listing_with_nothing_new_in_the_newest_folders_stays_unknown() -> None:
    # Given the same location where nothing was written since 12:00
    client = boto3.client("s3", region_name="us-east-1")
    stubber = Stubber(client)
    _cut_listing(stubber)
    _nothing_new_in(stubber, ("llm/checkpoint-1500/", "llm/checkpoint-900/", "llm/checkpoint-100/"), "0.distcp")
    # When the store is asked, then the three newest folders are looked at, newest first, and the answer is
    # still unknown (the newest files may lie elsewhere): never "nothing written" from a cut listing
    progress = _stubbed_progress(client, stubber)
    assert progress.unreadable and progress.written == 0
    assert "cut after 4 objects" in (progress.note or "")
    assert "llm/checkpoint-1500/, llm/checkpoint-900/, llm/checkpoint-100/" in (progress.note or "")


@pytest.mark.parametrize(
    ("names", "newest_first"),
    [
        (["checkpoint-900/", "checkpoint-1500/", "checkpoint-100/"], ["checkpoint-1500/", "checkpoint-900/"]),
        (["global_step20/", "latest/", "global_step3/"], ["global_step20/", "global_step3/", "latest/"]),
        (["2026-11-21T09-00/", "2026-11-21T10-00/"], ["2026-11-21T10-00/", "2026-11-21T09-00/"]),
        (["step_000120/", "step_000080/"], ["step_000120/", "step_000080/"]),
        # what a trainer writes beside its step folders is not where a save writes (Hugging Face's runs/)
        (
            ["checkpoint-900/", "runs/", "wandb/", "checkpoint-1500/", "tensorboard/"],
            ["checkpoint-1500/", "checkpoint-900/"],
        ),
        # a digit outside 0-9 that str.isdigit() accepts but int() does not ('²') never raises
        (["checkpoint-2\u00b21/", "checkpoint-7/"], ["checkpoint-7/", "checkpoint-2\u00b21/"]),
    ],
)
def test_step_folders_rank_by_the_numbers_in_their_names(names: list[str], newest_first: list[str]) -> None:
    assert sorted(names, key=step_rank, reverse=True)[: len(newest_first)] == newest_first


def test_a_listing_of_short_pages_is_cut_by_pages_not_by_keys() -> None:
    # Given S3 answering fewer keys than MaxKeys (its API reference allows it): two pages of one key each, both
    # saying more follow. When the store reads its 2 pages, then the listing is cut there (botocore's MaxItems,
    # counting keys, would have read on and could trim S3's last page into a listing that looks complete), and
    # the newest folder is looked into
    client = boto3.client("s3", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.add_response("list_objects_v2", _page([("llm/a/0.pt", OLD)], token="t1"), _listing("llm/"))
    stubber.add_response("list_objects_v2", _page([("llm/a/1.pt", OLD)], token="t2"), _listing("llm/", "t1"))
    stubber.add_response(
        "list_objects_v2", _page([], folders=("llm/a/", "llm/step-9/")), _listing("llm/", delimiter=True)
    )
    stubber.add_response("list_objects_v2", _page([("llm/step-9/0.pt", NEW)]), _listing("llm/step-9/"))
    progress = _stubbed_progress(client, stubber)
    assert progress.truncated and progress.written == 1


def test_the_folder_listing_reads_at_most_its_pages() -> None:
    # Given a cut listing and a location with more pages of folders than the bound, when the store looks for
    # the newest folders, then it reads 2 pages of them (the Stubber refuses a third request) and looks into
    # the newest of what it read
    client = boto3.client("s3", region_name="us-east-1")
    stubber = Stubber(client)
    _cut_listing_pages = [("llm/a/0.pt", OLD)] * 2
    stubber.add_response("list_objects_v2", _page(_cut_listing_pages, token="t1"), _listing("llm/"))
    stubber.add_response("list_objects_v2", _page(_cut_listing_pages, token="t2"), _listing("llm/", "t1"))
    stubber.add_response(
        "list_objects_v2",
        _page([], token="f1", folders=("llm/step-1/", "llm/step-2/")),
        _listing("llm/", delimiter=True),
    )
    stubber.add_response(
        "list_objects_v2",
        _page([], token="f2", folders=("llm/step-3/", "llm/step-4/")),
        _listing("llm/", "f1", delimiter=True),
    )
    _nothing_new_in(stubber, ("llm/step-4/", "llm/step-3/", "llm/step-2/"), "0.pt")
    progress = _stubbed_progress(client, stubber)
    assert progress.unreadable and "llm/step-4/, llm/step-3/, llm/step-2/" in (progress.note or "")


def test_a_location_without_a_trailing_slash_is_its_folder_not_its_neighbours(aws: None) -> None:
    # Given numbered trials of one tuning run side by side, trial-1's location given without a trailing /
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="acme-ckpt-us")
    for key in ("hpo/trial-1/step-100.pt", "hpo/trial-10/step-900.pt", "hpo/trial-11/step-50.pt"):
        client.put_object(Bucket="acme-ckpt-us", Key=key, Body=b"x")
    # When its progress is read, then only its own folder counts: trial-10's and trial-11's files are not its
    # progress (S3 alone would match them by the prefix's characters)
    since = datetime.now(UTC) - timedelta(hours=1)
    progress = CheckpointStore(client, "acme-ckpt-*").progress("s3://acme-ckpt-us/hpo/trial-1", since)
    assert (progress.checked, progress.written, progress.total) == (True, 1, 1)
    assert CheckpointStore(client, "acme-ckpt-*").progress("s3://acme-ckpt-us/hpo/trial-1/", since).total == 1
