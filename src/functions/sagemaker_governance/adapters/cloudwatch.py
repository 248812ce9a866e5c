"""CloudWatch alarms of the alarm guards: upsert, delete, read tags, reset state, arm, list.

``DescribeAlarms`` cannot be scoped to this stack's alarms for a listing: with ``AlarmNamePrefix`` AWS
authorizes it against ``alarm:*`` (a grant on ``alarm:<prefix>*`` is denied, aws-samples/amazon-cloudwatch-
auto-alarms issue 1), and its API reference says composite alarms are returned only when the permission is
"scoped to ``*``". So only the reconciler lists alarms (``Resource: "*"``, read-only, justified in the
template); the stopper reads one alarm's existence and ownership with ``ListTagsForResource``, which can be
scoped, and (``Resource: "*"`` for the same reason: its alarms may be composite) when that one alarm last
changed state. The lifecycle reads one named metric alarm (``AlarmNames``, ``AlarmTypes`` ``MetricAlarm``
only) on ``Resource: "*"`` too: no AWS text says a read by name is authorized against the named alarm's ARN
rather than ``alarm:*``, and a narrower grant AWS denied would switch that read off without a sign.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.adapters.read_failures import THROTTLING_CODES, error_code
from sagemaker_governance.domain.alarm_deletion import DELETE_BATCH_NAMES
from sagemaker_governance.domain.errors import AdapterError, Throttled
from sagemaker_governance.domain.guards.base import (
    AlarmKind,
    AlarmPlan,
    AlarmState,
    DescribedAlarm,
)

if TYPE_CHECKING:  # the listing is the reconciler's: the stopper never imports its models (cold start)
    from sagemaker_governance.domain.reconcile import AlarmListing


def _not_found(exc: ClientError) -> bool:
    return error_code(exc) in {"ResourceNotFound", "ResourceNotFoundException"}


def _blocked_by_composite(exc: ClientError) -> bool:
    """CloudWatch refuses to delete an alarm a composite alarm still depends on (``ValidationError``, "Cannot
    delete ... as there are composite alarm(s) depending on it", as seen by aws-nuke and Cloud Custodian).
    DeleteAlarms' reference allows a composite and metric alarms in one request without saying whether the
    children's check sees the composite deleted in the same request: such a refusal is retried in order."""
    message = str(exc.response.get("Error", {}).get("Message", ""))
    return error_code(exc) == "ValidationError" and "depending on" in message.lower()


def _throttled(exc: ClientError) -> bool:
    return error_code(exc) in THROTTLING_CODES  # what botocore retried as throttling


def _described(client: Any, name: str, types: Sequence[str]) -> dict[str, Any] | None:
    """The alarm named ``name`` as ``DescribeAlarms`` gives it (one call; ``None``: no such alarm of ``types``).
    Without ``AlarmTypes`` a composite alarm is not returned."""
    try:
        response = client.describe_alarms(AlarmNames=[name], AlarmTypes=list(types))
    except (ClientError, BotoCoreError) as exc:
        raise AdapterError(f"DescribeAlarms {name} failed: {exc}") from exc
    alarms = [*response.get("MetricAlarms", []), *response.get("CompositeAlarms", [])]
    return next((a for a in alarms if a.get("AlarmName") == name), None)


def _reset(client: Any, names: Sequence[str], reason: str) -> None:
    for name in names:
        try:
            client.set_alarm_state(AlarmName=name, StateValue="OK", StateReason=reason[:1023])
        except ClientError as exc:
            if not _not_found(exc):
                raise AdapterError(f"SetAlarmState {name} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise AdapterError(f"SetAlarmState {name} failed: {exc}") from exc


class CloudWatchAlarmLifecycle:
    """Creates, updates, deletes and re-arms a job's guard alarms (the job-events function and the reconciler),
    and reads whether a metric alarm's actions are on (a put that could not read whether a guard was armed)."""

    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {
            "cloudwatch:PutMetricAlarm",
            "cloudwatch:PutCompositeAlarm",
            "cloudwatch:TagResource",  # PutMetricAlarm / PutCompositeAlarm with Tags
            "cloudwatch:DeleteAlarms",
            "cloudwatch:SetAlarmState",
            "cloudwatch:DescribeAlarms",  # one named metric alarm, on "*" (the module's docstring)
        }
    )
    # Granted on Resource "*" only: the PutCompositeAlarm API reference requires a permission "scoped to
    # *" (conditioned on the alarm topic as its only action, in the template); DescribeAlarms (above).
    UNSCOPED_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"cloudwatch:PutCompositeAlarm", "cloudwatch:DescribeAlarms"}
    )

    def __init__(self, client: Any) -> None:
        self._client = client

    def put(self, plan: AlarmPlan) -> None:
        """Upsert every alarm of the plan in its order (children before their composite)."""
        try:
            for alarm in plan.alarms:
                if alarm.kind is AlarmKind.COMPOSITE:
                    self._client.put_composite_alarm(**alarm.request)
                else:
                    self._client.put_metric_alarm(**alarm.request)
        except (ClientError, BotoCoreError) as exc:
            raise AdapterError(f"creating the {plan.what} of {plan.job_name} failed: {exc}") from exc

    def delete(self, names: Sequence[str]) -> list[str]:
        """Delete in the given order (a composite before its children; at most one composite per call, as
        the DeleteAlarms API reference allows: a job has one). Its reference says the alarms with correct
        names "are still deleted" when some are not found, and does not say whether the call then fails; a
        batch that fails that way is retried name by name, so every alarm is gone either way (the names
        reported deleted may then omit some the batch call deleted). A batch refused because a composite
        depends on one of its alarms (``_blocked_by_composite``) is retried name by name too: the composite,
        first, goes alone, then its children; a child whose composite is not in the batch is still refused.
        A request still throttled after botocore's retries raises ``Throttled`` (nothing after it was
        deleted)."""
        deleted: list[str] = []
        for start in range(0, len(names), DELETE_BATCH_NAMES):
            batch = list(names[start : start + DELETE_BATCH_NAMES])
            try:
                self._client.delete_alarms(AlarmNames=batch)
                deleted += batch
                continue
            except ClientError as exc:
                if _throttled(exc):
                    raise Throttled(f"DeleteAlarms throttled: {exc}") from exc
                if not (_not_found(exc) or _blocked_by_composite(exc)):
                    raise AdapterError(f"DeleteAlarms failed: {exc}") from exc
            except BotoCoreError as exc:
                raise AdapterError(f"DeleteAlarms failed: {exc}") from exc
            for name in batch:
                try:
                    self._client.delete_alarms(AlarmNames=[name])
                    deleted.append(name)
                except ClientError as exc:
                    if _throttled(exc):
                        raise Throttled(f"DeleteAlarms {name} throttled: {exc}") from exc
                    if not _not_found(exc):
                        raise AdapterError(f"DeleteAlarms {name} failed: {exc}") from exc
                except BotoCoreError as exc:
                    raise AdapterError(f"DeleteAlarms {name} failed: {exc}") from exc
        return deleted

    def reset(self, names: Sequence[str], reason: str) -> None:
        _reset(self._client, names, reason)

    def metric_alarm(self, name: str) -> dict[str, Any] | None:
        """The metric alarm as ``DescribeAlarms`` lists it (``None``: no such metric alarm). Metric alarms only:
        the alarm asked about (a stall alarm) is one."""
        return _described(self._client, name, ["MetricAlarm"])


class CloudWatchAlarmOwnership:
    """Reads an alarm's tags (existence and ownership) and when it last changed state, and resets its state
    (the stopper)."""

    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"cloudwatch:ListTagsForResource", "cloudwatch:SetAlarmState", "cloudwatch:DescribeAlarms"}
    )
    # Granted on Resource "*" only: see the module docstring.
    UNSCOPED_ACTIONS: ClassVar[frozenset[str]] = frozenset({"cloudwatch:DescribeAlarms"})

    def __init__(self, client: Any, arn_of: Callable[[str], str]) -> None:
        self._client = client
        self._arn_of = arn_of  # alarm name -> its ARN in this account and region

    def tags(self, name: str) -> dict[str, str] | None:
        try:
            response = self._client.list_tags_for_resource(ResourceARN=self._arn_of(name))
        except ClientError as exc:
            if _not_found(exc):
                return None
            raise AdapterError(f"ListTagsForResource {name} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise AdapterError(f"ListTagsForResource {name} failed: {exc}") from exc
        return {tag["Key"]: tag.get("Value", "") for tag in response.get("Tags", [])}

    def current_state(self, name: str) -> AlarmState | None:
        """``StateValue`` and ``StateTransitionedTimestamp``: "the date and time that the alarm's StateValue
        most recently changed" (botocore's cloudwatch model, metric and composite alarms alike). Not
        ``StateUpdatedTimestamp``, which also moves without a change of state (a composite's "even if
        StateValue doesn't change"): taken for a state change, it would make a current notification look
        superseded and leave its alarm unreset. An answer without the field gives ``None`` (taken as current)."""
        alarm = self._described(name)
        if alarm is None or not isinstance(when := alarm.get("StateTransitionedTimestamp"), datetime):
            return None
        return AlarmState(str(alarm.get("StateValue", "")), when)

    def definition(self, name: str) -> DescribedAlarm | None:
        """The alarm's ``AlarmDescription`` and terms (threshold, comparison, periods): what a composite's child
        was planned to watch and on which terms it fires, which its parent's notification does not repeat.
        ``None``: no such alarm."""
        alarm = self._described(name)
        if alarm is None:
            return None
        return DescribedAlarm.of(name, alarm)

    def _described(self, name: str) -> dict[str, Any] | None:
        """The alarm as ``DescribeAlarms`` gives it (one call), metric or composite."""
        return _described(self._client, name, ["MetricAlarm", "CompositeAlarm"])

    def reset(self, names: Sequence[str], reason: str) -> None:
        _reset(self._client, names, reason)


class CloudWatchAlarmEnabling:
    """Turns alarms' actions on (the reconciler: a guard alarm the stopper muted, once its stretch has ended or
    its guard can act on the job)."""

    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"cloudwatch:EnableAlarmActions"})

    def __init__(self, client: Any) -> None:
        self._client = client

    def enable_actions(self, names: Sequence[str]) -> None:
        """Enabling actions of a missing alarm is not an error in CloudWatch (nothing happens)."""
        try:
            self._client.enable_alarm_actions(AlarmNames=list(names))
        except (ClientError, BotoCoreError) as exc:
            raise AdapterError(f"EnableAlarmActions {', '.join(names)} failed: {exc}") from exc


class CloudWatchAlarmArming(CloudWatchAlarmEnabling):
    """Turns an alarm's actions on and off (the stopper arms and disarms what a guard's verdict says, and mutes
    an alarm whose judgement held its stretch)."""

    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"cloudwatch:EnableAlarmActions", "cloudwatch:DisableAlarmActions"}
    )

    def disable_actions(self, names: Sequence[str]) -> None:
        try:
            self._client.disable_alarm_actions(AlarmNames=list(names))
        except (ClientError, BotoCoreError) as exc:
            raise AdapterError(f"DisableAlarmActions {', '.join(names)} failed: {exc}") from exc


class CloudWatchAlarmWindows:
    """Widens the window of a guard's existing alarm after the stall judge vetoed its stop (the stopper).

    ``PutMetricAlarm`` on an existing alarm "completely overwrites the previous configuration" and leaves
    its state unchanged; tags in the request "are ignored" on an update (API reference), so the requests
    carry none and no ``cloudwatch:TagResource`` is needed."""

    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"cloudwatch:PutMetricAlarm"})

    def __init__(self, client: Any) -> None:
        self._client = client

    def update(self, requests: Sequence[dict[str, Any]]) -> None:
        for request in requests:
            try:
                self._client.put_metric_alarm(**request)
            except (ClientError, BotoCoreError) as exc:
                raise AdapterError(f"PutMetricAlarm {request.get('AlarmName')} failed: {exc}") from exc


class CloudWatchAlarmInventory:
    """The names of this stack's alarms, metric and composite, through every page of ``DescribeAlarms`` (the
    reconciler). ``AlarmTypes`` names both: without it "only metric alarms are returned, even if composite
    alarms ... exist" (its API reference), and a lost composite alarm could never be noticed."""

    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"cloudwatch:DescribeAlarms"})
    # Granted on Resource "*" only: see the module docstring.
    UNSCOPED_ACTIONS: ClassVar[frozenset[str]] = frozenset({"cloudwatch:DescribeAlarms"})
    PAGE_SIZE = 100  # the API's maximum

    def __init__(self, client: Any) -> None:
        self._client = client

    def alarm_names(self, prefix: str) -> list[str]:
        return [listing.name for listing in self.alarm_states(prefix)]

    def alarm_states(self, prefix: str) -> list[AlarmListing]:
        """Every alarm under ``prefix`` with its state, when it last changed, whether its actions are on, its
        description (which stack made it), its actions (which topic it notifies) and, a metric alarm, what it
        fires on (``alarm_definition``: compared with what its guard plans now) (all in the same
        ``DescribeAlarms`` pages: no extra request)."""
        from sagemaker_governance.domain.alarm_compare import alarm_definition
        from sagemaker_governance.domain.reconcile import AlarmListing

        listings: list[AlarmListing] = []
        try:
            pages = self._client.get_paginator("describe_alarms").paginate(
                AlarmNamePrefix=prefix,
                AlarmTypes=["MetricAlarm", "CompositeAlarm"],
                PaginationConfig={"PageSize": self.PAGE_SIZE},
            )
            for page in pages:
                metric = [(alarm, alarm_definition(alarm)) for alarm in page.get("MetricAlarms", [])]
                for alarm, definition in [*metric, *((alarm, None) for alarm in page.get("CompositeAlarms", []))]:
                    listings.append(
                        AlarmListing(
                            name=alarm["AlarmName"],
                            state=alarm.get("StateValue"),
                            # when its state value last changed; an answer without it gives the time of
                            # its last update (later, never earlier: a reset only comes later)
                            updated=alarm.get("StateTransitionedTimestamp") or alarm.get("StateUpdatedTimestamp"),
                            actions_enabled=bool(alarm.get("ActionsEnabled", True)),
                            description=alarm.get("AlarmDescription"),
                            actions=tuple(alarm.get("AlarmActions") or ()),
                            definition=definition,
                        )
                    )
        except (ClientError, BotoCoreError) as exc:
            raise AdapterError(f"DescribeAlarms {prefix}* failed: {exc}") from exc
        return listings
