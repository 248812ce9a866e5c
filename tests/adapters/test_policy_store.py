from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sagemaker_governance.adapters.policy_store import PolicyStore
from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.errors import PolicyUnavailable
from sagemaker_governance.domain.guards.idle import IDLE
from tests.adapters.conftest import CallRecorder

NOW = datetime(2026, 11, 27, tzinfo=UTC)
BASE = {"mode": "audit", "rules": [{"type": "max-instance-count", "max": 4}]}
NAME = "/sagemaker-governance/policy"


@pytest.fixture
def ssm(aws: None) -> Any:
    return boto3.client("ssm", region_name="us-east-1")


def store(ssm: Any) -> PolicyStore:
    return PolicyStore(BASE, NAME, ssm, cache_seconds=0)


def test_no_document_means_deploy_time_defaults(ssm: Any) -> None:
    policy = store(ssm).current()
    assert policy.mode is Mode.AUDIT and policy.rules[0].max == 4  # type: ignore[union-attr]


def test_document_is_merged_over_defaults(ssm: Any) -> None:
    ssm.put_parameter(
        Name=NAME, Type="String", Value="mode: enforce\nrules:\n  - {id: max-instance-count, max: 8}\n"
    )
    recorder = CallRecorder().attach(ssm)
    policy = store(ssm).current()
    assert policy.mode is Mode.ENFORCE and policy.rules[0].max == 8  # type: ignore[union-attr]
    assert recorder.actions == {"ssm:GetParameter"}  # the history only when a document is rejected


def test_json_documents_work_too(ssm: Any) -> None:
    ssm.put_parameter(Name=NAME, Type="String", Value=json.dumps({"mode": "enforce"}))
    assert store(ssm).current().mode is Mode.ENFORCE


def test_a_broken_document_keeps_the_last_good_policy(
    ssm: Any, capsys: pytest.CaptureFixture[str], log_output: io.StringIO
) -> None:
    # Given a store that has read a good document
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    policies = store(ssm)
    assert policies.current().mode is Mode.ENFORCE
    # When somebody uploads a broken one
    ssm.put_parameter(
        Name=NAME,
        Type="String",
        Value="mode: enforce\nrules: [{type: max-instance-count, max: 0}]\n",
        Overwrite=True,
    )
    # Then governance stays on with the last good policy, and the error is logged and counted
    assert policies.current().mode is Mode.ENFORCE
    assert "policy document rejected" in log_output.getvalue()
    assert '"PolicyLoadErrors":[1.0]' in capsys.readouterr().out


def test_a_rejected_document_is_validated_once_and_counted_once_per_cache_period(
    ssm: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], log_output: io.StringIO
) -> None:
    # Given a warm container with a 60 s cache that has read a good document, and then a bad edit
    from sagemaker_governance.adapters import policy_store
    from sagemaker_governance.domain.policy_document import parse_document

    now = [NOW]
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD)
    policies = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0])
    assert policies.current().rules[0].max == 8  # type: ignore[union-attr]
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN, Overwrite=True)
    now[0] += timedelta(seconds=61)
    capsys.readouterr()
    parsed: list[str] = []

    def parse_counted(text: str) -> dict[str, Any]:
        parsed.append(text)
        return parse_document(text)

    monkeypatch.setattr(policy_store, "parse_document", parse_counted)
    # When every reaction of the next two minutes asks for the policy (ten every 30 s; SSM read each minute)
    for _ in range(4):
        for _ in range(10):
            assert policies.current().rules[0].max == 8  # type: ignore[union-attr]
        now[0] += timedelta(seconds=30)
    # Then the bad text is validated once in the container (a document of nested aliases costs its reading
    # once, not at every reaction), and its rejection is logged and counted once per cache period
    assert parsed.count(BROKEN) == 1
    assert capsys.readouterr().out.count('"PolicyLoadErrors":[1.0]') == 2
    assert log_output.getvalue().count("policy document rejected") == 2


def test_a_broken_document_never_valid_at_cold_start_falls_back_to_defaults(ssm: Any) -> None:
    ssm.put_parameter(Name=NAME, Type="String", Value="{not: [valid")
    assert store(ssm).current().mode is Mode.AUDIT


GOOD = "mode: enforce\nrules:\n  - {id: max-instance-count, max: 8}\nexemptions:\n  - {job_name_prefix: bench-, rules: [max-instance-count], expires: 2099-12-31, reason: INC-1}\n"
BROKEN = "mode: enforce\nrules: [{type: max-instance-count, max: 0}]\n"


def test_a_cold_container_after_a_bad_edit_keeps_the_newest_valid_version_from_the_history(
    ssm: Any, capsys: pytest.CaptureFixture[str], log_output: io.StringIO
) -> None:
    # Given a document that was good (version 1), then an edit that is still good (2), then a bad edit (3)
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD, Overwrite=True)
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN, Overwrite=True)
    recorder = CallRecorder().attach(ssm)
    history: list[str] = []
    ssm.meta.events.register("before-call.ssm.GetParameterHistory", lambda **_: history.append("read"))
    # When a new container reads it (it never saw version 2)
    policies = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: NOW)
    policy = policies.current()
    # Then version 2 governs (its mode, its rule, its exemption), not the deploy-time defaults, and the
    # rejection is logged and counted as before, naming what was kept
    assert policy.mode is Mode.ENFORCE and policy.rules[0].max == 8  # type: ignore[union-attr]
    assert [e.job_name_prefix for e in policy.exemptions] == ["bench-"]
    assert "version 2 of the document" in log_output.getvalue()
    assert '"PolicyLoadErrors":[1.0]' in capsys.readouterr().out
    assert recorder.actions == PolicyStore.IAM_ACTIONS
    # and the history is read once, not at every reaction while the document stays bad
    assert policies.current().rules[0].max == 8  # type: ignore[union-attr]
    assert history == ["read"]


def test_after_a_bad_edit_a_warm_container_governs_with_the_version_a_new_one_takes(
    ssm: Any, log_output: io.StringIO
) -> None:
    # Given a warm container that read version 1 (enforce, no exemption) and was not invoked while version 2
    # added an exemption, and then a bad edit (3)
    now = [NOW]
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    warm = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0])
    assert warm.current().exemptions == ()
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD, Overwrite=True)
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN, Overwrite=True)
    now[0] += timedelta(minutes=5)
    # When it reacts, as a container started after the bad edit does
    warm_policy = warm.current()
    new_policy = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0]).current()
    # Then both govern with version 2, the newest valid one in the history (its exemption), not the warm
    # container with version 1, and the version kept is logged
    assert [e.job_name_prefix for e in warm_policy.exemptions] == ["bench-"]
    assert warm_policy.digest() == new_policy.digest() == warm.read().policy.digest()
    rejected = [json.loads(line) for line in log_output.getvalue().splitlines() if "document rejected" in line]
    assert [(entry["version"], entry["kept_version"]) for entry in rejected] == [(3, 2), (3, 2)]


def test_a_warm_container_whose_history_cannot_be_read_keeps_its_last_good_version(
    ssm: Any, log_output: io.StringIO
) -> None:
    # Given a warm container that read version 1, then a good version 2 and a bad edit (3), and a history
    # read that is throttled once
    now = [NOW]
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    warm = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0])
    warm.current()
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD, Overwrite=True)
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN, Overwrite=True)
    now[0] += timedelta(minutes=5)
    refuse(ssm, "GetParameterHistory", "ThrottlingException")
    # When it reacts, Then it keeps version 1 (what it knows), saying so, and takes version 2 once the
    # history can be read (tried again a cache period later)
    assert warm.current().exemptions == ()
    rejected = [json.loads(line) for line in log_output.getvalue().splitlines() if "document rejected" in line]
    assert [entry["kept_version"] for entry in rejected] == [1]
    now[0] += timedelta(seconds=60)
    assert [e.job_name_prefix for e in warm.current().exemptions] == ["bench-"]
    rejected = [json.loads(line) for line in log_output.getvalue().splitlines() if "document rejected" in line]
    assert [entry["kept_version"] for entry in rejected] == [1, 2]


def test_a_warm_container_tries_a_failed_history_read_again_only_a_cache_period_later(
    ssm: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a warm container that governs with a good document (version 1), then a bad edit (version 2),
    # and a history read that is throttled for a while (each failure is ~30 s of botocore's retries)
    now = [NOW]
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD)
    warm = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0])
    assert warm.current().mode is Mode.ENFORCE
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN, Overwrite=True)
    now[0] += timedelta(minutes=5)
    reads: list[str] = []
    ssm.meta.events.register("before-call.ssm.GetParameterHistory", lambda **_: reads.append("history"))
    refuse(ssm, "GetParameterHistory", "ThrottlingException", times=2)
    capsys.readouterr()
    # When it reacts to 20 events within one cache period
    policies = [warm.current() for _ in range(20)]
    # Then every reaction keeps version 1, the history is read once, and one failure is counted
    assert all(p.mode is Mode.ENFORCE and p.exemptions for p in policies)
    assert reads == ["history"]
    assert capsys.readouterr().out.count('"PolicyLoadErrors":[1.0]') == 2  # the failed read, the rejection
    # And a cache period later it reads the history again (throttled once more), then once it answers
    now[0] += timedelta(seconds=60)
    assert warm.current().exemptions
    assert reads == ["history", "history"]
    now[0] += timedelta(seconds=59)
    assert warm.current().exemptions and reads == ["history", "history"]
    now[0] += timedelta(seconds=1)
    assert warm.current().exemptions and reads == ["history", "history", "history"]
    assert warm.current().exemptions and reads == ["history", "history", "history"]


def test_a_bad_document_with_no_valid_version_in_its_history_falls_back_to_defaults_reading_it_once(
    ssm: Any,
) -> None:
    ssm.put_parameter(Name=NAME, Type="String", Value="{not: [valid")
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN, Overwrite=True)
    reads: list[str] = []
    ssm.meta.events.register("before-call.ssm.GetParameterHistory", lambda **_: reads.append("history"))
    policies = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: NOW)
    assert policies.current().mode is Mode.AUDIT and policies.current().mode is Mode.AUDIT
    assert reads == ["history"]


def test_the_history_is_read_in_pages_and_its_newest_valid_version_wins(ssm: Any) -> None:
    # Given more versions than one page of GetParameterHistory holds (50), the newest valid one the 60th
    for n in range(1, 61):
        ssm.put_parameter(
            Name=NAME,
            Type="String",
            Value=f"mode: enforce\nrules: [{{id: max-instance-count, max: {n}}}]\n",
            Overwrite=True,
        )
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN, Overwrite=True)
    policy = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: NOW).current()
    assert policy.rules[0].max == 60  # type: ignore[union-attr]


def refuse(ssm: Any, operation: str, code: str, times: int = 1) -> None:
    """``operation`` answers ``code`` (after botocore's retries) ``times`` times, then as moto does."""
    answers = iter([ClientError({"Error": {"Code": code, "Message": "no"}}, operation)] * times)

    def refuse_once(**_: Any) -> None:
        error = next(answers, None)
        if error is not None:
            raise error

    ssm.meta.events.register(f"before-call.ssm.{operation}", refuse_once)


def test_an_unreadable_history_leaves_a_new_container_without_a_policy_and_is_tried_again(
    ssm: Any, capsys: pytest.CaptureFixture[str], log_output: io.StringIO
) -> None:
    # Given a good document, then a bad edit, and a new container whose history read is denied once
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD)
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN, Overwrite=True)
    refuse(ssm, "GetParameterHistory", "AccessDeniedException")
    policies = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: NOW)
    # Then the policy is unknown (not the deploy-time defaults, which would drop version 1's mode and
    # exemption), counted and logged
    with pytest.raises(PolicyUnavailable):
        policies.current()
    assert "policy document history could not be read" in log_output.getvalue()
    assert '"PolicyLoadErrors":[1.0]' in capsys.readouterr().out
    # and the next reaction reads the history again and governs with version 1
    assert policies.current().rules[0].max == 8  # type: ignore[union-attr]


@pytest.mark.parametrize("code", ["ThrottlingException", "AccessDeniedException", "InternalServerError"])
def test_a_new_container_that_cannot_read_the_document_has_no_policy_until_it_can(
    ssm: Any, code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a document (enforce mode, an exemption) and a new container whose GetParameter fails once
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD)
    refuse(ssm, "GetParameter", code)
    policies = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: NOW)
    # Then the policy is unknown, not the deploy-time defaults (audit mode, no exemption), and it is counted
    with pytest.raises(PolicyUnavailable):
        policies.current()
    assert '"PolicyLoadErrors":[1.0]' in capsys.readouterr().out
    # and the next reaction reads it (a failed read is not cached)
    policy = policies.current()
    assert policy.mode is Mode.ENFORCE and [e.job_name_prefix for e in policy.exemptions] == ["bench-"]


def test_a_warm_container_keeps_its_last_good_policy_when_a_read_fails(ssm: Any) -> None:
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD)
    policies = store(ssm)
    assert policies.current().rules[0].max == 8  # type: ignore[union-attr]
    refuse(ssm, "GetParameter", "ThrottlingException")
    assert policies.current().rules[0].max == 8  # type: ignore[union-attr]


def test_a_container_that_found_no_document_keeps_the_defaults_when_a_read_fails(ssm: Any) -> None:
    # Deleting the parameter is how to return to the defaults: they are a known answer, kept like a document
    policies = store(ssm)
    assert policies.current().mode is Mode.AUDIT
    refuse(ssm, "GetParameter", "ThrottlingException")
    assert policies.current().mode is Mode.AUDIT


def test_a_deleted_document_is_said_once_and_the_defaults_apply(ssm: Any, log_output: io.StringIO) -> None:
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD)
    policies = store(ssm)
    assert policies.current().mode is Mode.ENFORCE
    ssm.delete_parameter(Name=NAME)
    assert policies.current().mode is Mode.AUDIT and policies.current().mode is Mode.AUDIT
    assert log_output.getvalue().count("policy document no longer exists") == 1


def test_a_deleted_document_is_not_brought_back_by_a_bad_one_uploaded_after(ssm: Any) -> None:
    # Given a warm container that governed with a good document, then saw it deleted (the defaults apply)
    policies = store(ssm)
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD)
    assert policies.current().mode is Mode.ENFORCE
    ssm.delete_parameter(Name=NAME)
    assert policies.current().mode is Mode.AUDIT
    # When a bad document is put under the name (a new parameter: its history holds only the bad version)
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN)
    # Then the deleted document does not come back: the defaults still apply, as in a new container
    assert policies.current().mode is Mode.AUDIT
    assert PolicyStore(BASE, NAME, ssm, cache_seconds=0).current().mode is Mode.AUDIT


def test_after_a_deletion_a_rejected_document_reads_the_new_parameters_history(ssm: Any) -> None:
    # Given a warm container that found a bad document with no valid version, then saw the parameter deleted
    policies = store(ssm)
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN)
    assert policies.current().mode is Mode.AUDIT
    ssm.delete_parameter(Name=NAME)
    assert policies.current().mode is Mode.AUDIT
    # When the parameter is made again, a good version and then the same bad text
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD)
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN, Overwrite=True)
    # Then the new history is read (what the container knew of the old one is gone): the good version governs
    assert policies.current().rules[0].max == 8  # type: ignore[union-attr]


def test_no_parameter_configured_never_calls_ssm() -> None:
    assert PolicyStore(BASE, None, None).current().mode is Mode.AUDIT


# Deploy-time defaults two parts of which fail validation: an idle window CloudWatch refuses (30 one-hour
# periods) in a guard switched off, and a rule
INVALID_BASE = {
    "mode": "enforce",
    "rules": [{"id": "max-instances", "type": "max-instance-count", "max": 0}, {"type": "spot-checkpoint"}],
    "idle": {"enabled": False, "period_seconds": 3600, "evaluation_periods": 30, "datapoints_to_alarm": 30},
}


def test_invalid_defaults_fall_back_part_by_part_said_once_per_cache_period(
    ssm: Any, capsys: pytest.CaptureFixture[str], log_output: io.StringIO
) -> None:
    # Given a store on such defaults, with a 60 s cache
    now = [NOW]
    policies = PolicyStore(INVALID_BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0])
    # When the functions read their policy at start-up, 30 s later and 61 s later
    policy = policies.current()
    now[0] += timedelta(seconds=30)
    policies.current()
    now[0] += timedelta(seconds=31)
    policies.current()
    # Then governance stays on: the valid parts govern (the mode, the other rule); the idle section has its
    # defaults with its switch as set (off); the rejected rule is left out
    assert policy.mode is Mode.ENFORCE and [r.id for r in policy.rules] == ["spot-checkpoint"]
    idle = IDLE.config(policy)
    assert (idle.enabled, idle.period_seconds, idle.evaluation_periods) == (False, 60, 30)
    assert [f.part for f in policies.base_fallbacks] == ["rules.max-instances", "idle"]
    # and it is logged and counted at the first read and then once per cache period, while it lasts
    logged = [json.loads(line) for line in log_output.getvalue().splitlines() if "template parameters" in line]
    assert [entry["level"] for entry in logged] == ["ERROR", "ERROR"]
    assert [f["part"] for f in logged[0]["fallbacks"]] == ["rules.max-instances", "idle"]
    assert capsys.readouterr().out.count('"PolicyLoadErrors":[1.0]') == 2


def test_a_document_is_merged_over_the_defaults_that_replaced_a_rejected_part(
    ssm: Any, log_output: io.StringIO
) -> None:
    # Given a document that changes the idle guard's grace only, over deploy-time defaults whose idle window
    # was rejected
    ssm.put_parameter(Name=NAME, Type="String", Value="idle: {grace_minutes: 5}\n")
    # When it is read, then it governs (merged over the idle defaults), not rejected in turn
    idle = IDLE.config(PolicyStore(INVALID_BASE, NAME, ssm, cache_seconds=0).current())
    assert (idle.grace_minutes, idle.period_seconds) == (5, 60)
    assert "policy document rejected" not in log_output.getvalue()


def test_the_cache_runs_on_the_injected_clock(ssm: Any) -> None:
    # Given a store with a 60 s cache on a clock we control
    from datetime import UTC, datetime, timedelta

    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    now = [datetime(2026, 11, 21, tzinfo=UTC)]
    policies = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0])
    reads: list[str] = []
    ssm.meta.events.register("before-call.ssm.GetParameter", lambda **_: reads.append("read"))
    policies.current()
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: audit\n", Overwrite=True)
    # When less than the cache time passes, the old document is still used (no new read)
    now[0] += timedelta(seconds=59)
    assert policies.current().mode is Mode.ENFORCE
    # and once it has passed, the new document is read
    now[0] += timedelta(seconds=2)
    assert policies.current().mode is Mode.AUDIT
    assert len(reads) == 2


def test_a_missing_document_is_cached_too(ssm: Any) -> None:
    # Given no policy document and a 60 s cache (the default deployment until a document is put)
    from datetime import UTC, datetime, timedelta

    now = [datetime(2026, 11, 21, tzinfo=UTC)]
    policies = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0])
    reads: list[str] = []
    ssm.meta.events.register("before-call.ssm.GetParameter", lambda **_: reads.append("read"))
    # When every reaction of an invocation asks for the policy, SSM is read once
    for _ in range(4):
        assert policies.current().rules[0].max == 4  # type: ignore[union-attr]
    assert len(reads) == 1
    # and a document put later is picked up once the cache expires
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    now[0] += timedelta(seconds=61)
    assert policies.current().mode is Mode.ENFORCE
    assert len(reads) == 2


def test_a_caller_may_accept_an_older_document(ssm: Any) -> None:
    # Given a store with a 60 s cache, read at minute 0 (a job's Starting event)
    from datetime import UTC, datetime, timedelta

    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    now = [datetime(2026, 11, 21, tzinfo=UTC)]
    policies = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0])
    reads: list[str] = []
    ssm.meta.events.register("before-call.ssm.GetParameter", lambda **_: reads.append("read"))
    policies.current()
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: audit\n", Overwrite=True)
    # When a caller that accepts a 10-minute-old document asks 7 minutes later (its Training event)
    now[0] += timedelta(minutes=7)
    # Then it gets the cached document without a read, while a caller with the cache time gets the new one
    assert policies.current(max_age_seconds=600).mode is Mode.ENFORCE
    assert len(reads) == 1
    assert policies.current().mode is Mode.AUDIT
    assert len(reads) == 2
    # and a longer cache time wins over a shorter acceptance
    now[0] += timedelta(seconds=30)
    assert policies.current(max_age_seconds=10).mode is Mode.AUDIT
    assert len(reads) == 2


# ---- read(): a cold start's answer once, with the version that judged (the tools' `--stack`) ---------


def test_read_names_the_version_that_judged(ssm: Any) -> None:
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: audit\n")
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD, Overwrite=True)
    reading = store(ssm).read()
    assert (reading.parameter, reading.current_version, reading.version, reading.rejected) == (NAME, 2, 2, ())
    assert reading.policy.rules[0].max == 8  # type: ignore[union-attr]


def test_read_without_the_parameter_is_the_defaults(ssm: Any) -> None:
    reading = store(ssm).read()
    assert (reading.current_version, reading.version) == (None, None)
    assert reading.policy == store(ssm).base


def test_read_of_a_rejected_document_is_the_newest_valid_version_as_current_gives_it(ssm: Any) -> None:
    # Given a good version 2 and a bad edit (3)
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    ssm.put_parameter(Name=NAME, Type="String", Value=GOOD, Overwrite=True)
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN, Overwrite=True)
    # When read, then version 2 judges (what a new container's current() governs with), and why 3 is
    # rejected is kept
    reading = store(ssm).read()
    assert (reading.current_version, reading.version) == (3, 2) and reading.rejected
    assert reading.policy == store(ssm).current()


def test_read_of_a_rejected_document_with_no_valid_version_is_the_defaults(ssm: Any) -> None:
    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN)
    reading = store(ssm).read()
    assert (reading.current_version, reading.version) == (1, None) and reading.rejected
    assert reading.policy == store(ssm).base


@pytest.mark.parametrize("operation", ["GetParameter", "GetParameterHistory"])
def test_read_never_guesses_when_ssm_cannot_be_read(ssm: Any, operation: str) -> None:
    from sagemaker_governance.adapters.policy_store import PolicyHistoryUnreadable
    from sagemaker_governance.domain.errors import AdapterError

    ssm.put_parameter(Name=NAME, Type="String", Value=BROKEN)

    def refused(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, operation)

    ssm.meta.events.register(f"before-call.ssm.{operation}", refused)
    expected = PolicyHistoryUnreadable if operation == "GetParameterHistory" else AdapterError
    with pytest.raises(expected) as unread:
        store(ssm).read()
    if isinstance(unread.value, PolicyHistoryUnreadable):
        assert unread.value.version == 1 and unread.value.rejected


M_OF_N = "mode: enforce\nidle:\n  evaluation_periods: 30\n  datapoints_to_alarm: 20\n"


def warning_records(log_output: io.StringIO) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in log_output.getvalue().splitlines() if line.startswith("{")]
    return [r for r in records if r.get("message") == "policy valid with warnings"]


def test_a_document_valid_with_warnings_is_said_once_per_adopted_version(
    ssm: Any, log_output: io.StringIO
) -> None:
    # Given a document that is valid but judges idleness M-of-N (what `smgov policy validate` warns about), put
    # straight into SSM: nobody ran validate
    ssm.put_parameter(Name=NAME, Type="String", Value=M_OF_N)
    policies = store(ssm)
    # When the container reads it at every reaction
    assert policies.current().mode is Mode.ENFORCE and policies.current().mode is Mode.ENFORCE
    # Then the warnings reach the function's log once, naming the version that governs
    (said,) = warning_records(log_output)
    assert said["source"] == "version 1" and any("datapoints_to_alarm" in w for w in said["warnings"])
    # When a version without warnings replaces it, nothing more is said; a later one with warnings is said again
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n", Overwrite=True)
    assert policies.current().mode is Mode.ENFORCE
    assert len(warning_records(log_output)) == 1
    ssm.put_parameter(Name=NAME, Type="String", Value=M_OF_N, Overwrite=True)
    assert policies.current().mode is Mode.ENFORCE
    assert [r["source"] for r in warning_records(log_output)] == ["version 1", "version 3"]


def test_warnings_that_cannot_be_computed_never_keep_the_policy_from_governing(
    ssm: Any, log_output: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a fault in computing a policy's warnings
    from sagemaker_governance.domain.policy import Policy

    def broken(self: Policy) -> list[str]:
        raise RuntimeError("warning bug")

    monkeypatch.setattr(Policy, "warnings", broken)
    ssm.put_parameter(Name=NAME, Type="String", Value=M_OF_N)
    # When the container reads the document, then it governs with it and the fault is logged, not raised
    assert store(ssm).current().mode is Mode.ENFORCE
    assert "policy warnings could not be computed" in log_output.getvalue()
    assert warning_records(log_output) == []
