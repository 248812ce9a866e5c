"""The effective policy: deploy-time defaults plus the optional SSM policy document.

The deploy-time defaults (the template's Parameters) never switch governance off either: a part of them that
fails validation (CloudFormation checks each Parameter alone, not ``IdlePeriodSeconds`` x
``IdleEvaluationPeriods`` against a day) is replaced by the schema's defaults (``build_base_policy``: a guard
section's calibrated ones, its ``enabled`` kept). The replacement is logged as an error naming the Parameters
and counted (``PolicyLoadErrors``) at the container's first policy read and then once per ``cache_seconds``,
while it lasts. Before, the store refused its own defaults at start-up: every invocation of every function
failed and every event went to the dead-letter queue.

Read with ``GetParameter`` (a ``String`` parameter: no decryption) and kept for ``cache_seconds`` on the
injected clock. (Powertools' parameters utility did the reading before: its cache was never used, every
read was forced, and importing it loaded all its providers into every function's cold start.) A broken
document never switches governance off: it is logged, counted (``PolicyLoadErrors``) and the last good
policy governs. "Last good" is the newest version that validates in the parameter's history
(``GetParameterHistory``: SSM keeps its last 100 versions), read once per rejected version, in every container
alike: a warm container that last read version 1 governs with version 2 (an exemption added, a switch to
audit) as a new container does, not with what it happened to read last; its own last good document only
while the history cannot be read. Only when no version validates do the deploy-time defaults apply. Without
the history, each new container would drop the document's exemptions and team overrides and its mode until
the document is mended: stops of jobs it exempts, or enforcement switched off. A container validates a
rejected text once (not at every reaction: a document's reading may cost much) and logs (naming the version
kept) and counts its rejection at the first reaction and then once per ``cache_seconds`` while it lasts, as
for rejected deploy-time defaults.

A read that fails (throttled past botocore's retries, a 5xx, denied) keeps the policy of the container's last
answer. A new container has none: its policy is unknown, and ``current()`` raises ``PolicyUnavailable`` (so
does a rejected document whose history cannot be read), never the deploy-time defaults in the document's
place. The delivery fails and comes back from its queue; nothing is stopped, cloned or marked on it. The
defaults are an answer only when the parameter does not exist (deleting it is how to return to them); what the
container knew of a deleted document is forgotten, so a bad document put under the name later never brings the
deleted one back as "last good".

``read()`` is that cold start's answer once, with which version judged, for tools that publish what they
read (``smgov iam-policy --stack``: an SCP): they fail when the parameter cannot be read rather than
guess, as ``current()`` does in a container that has no policy yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, Final

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict

from sagemaker_governance.business_metrics import BusinessMetric, BusinessMetricsPort, EmfBusinessMetrics
from sagemaker_governance.domain.errors import AdapterError, PolicyUnavailable
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.policy_document import (
    BaseFallback,
    BasePolicy,
    PolicyDocumentError,
    build_base_policy,
    build_policy,
    parse_document,
)
from sagemaker_governance.observability import logger

HISTORY_PAGE: Final = 50  # GetParameterHistory's MaxResults at most (botocore: ssm GetParameterHistoryRequest)


class PolicyHistoryUnreadable(AdapterError):
    """The current document is rejected and its history (where the valid version that applies is) cannot be
    read: why it was rejected is in ``rejected``."""

    def __init__(self, message: str, rejected: tuple[str, ...], version: int | None) -> None:
        super().__init__(message)
        self.rejected = rejected
        self.version = version


class PolicyReading(BaseModel):
    """The policy a container that has read no document before builds now (a cold start), and from what."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    policy: Policy
    parameter: str | None  # the SSM parameter (None: none configured)
    current_version: int | None = None  # the parameter's version now (None: it does not exist)
    version: int | None = None  # the version that judged: current_version, an earlier one, or None (defaults)
    rejected: tuple[str, ...] = ()  # why the current version is rejected (empty: it is not)


class PolicyStore:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"ssm:GetParameter", "ssm:GetParameterHistory"})

    def __init__(
        self,
        base: Mapping[str, Any] | BasePolicy,
        parameter_name: str | None,
        ssm_client: Any | None,
        cache_seconds: int = 60,
        *,
        clock: Callable[[], datetime] | None = None,
        metrics: BusinessMetricsPort | None = None,
    ) -> None:
        # deploy-time defaults: validated at start-up, a part that fails replaced by the schema's defaults
        built = base if isinstance(base, BasePolicy) else build_base_policy(base)
        self._base_document = built.document
        self._base = built.policy
        self._base_fallbacks = built.fallbacks
        self._base_said_at: datetime | None = None
        self._parameter_name = parameter_name
        self._ssm = ssm_client if parameter_name else None
        self._cache_seconds = cache_seconds
        # The cache runs on the injected clock (the simulator's virtual minutes, tests).
        self._clock = clock or (lambda: datetime.now(UTC))
        self._metrics = metrics or EmfBusinessMetrics()
        self._fetched_at: datetime | None = None
        self._cached_text: str | None = None
        self._cached_version: int | None = None
        # The newest good document this container knows (read, or found in the history), its text and version.
        self._last_good: Policy | None = None
        self._last_text: str | None = None
        self._last_good_version: int | None = None
        # What the history gave for a rejected version (its text and version number): the newest valid
        # version, or None when none validates (the history is not read again for the same version).
        self._history_for: tuple[str, int | None] | None = None
        self._history_answer: tuple[int, str, Policy] | None = None
        # When a read of the history last failed: a container with a last good document keeps it without
        # reading the history again for cache_seconds (botocore's retries of a throttled read took ~30 s).
        self._history_failed_at: datetime | None = None
        # The last rejected text and why (validated once per container, not at every reaction), and when its
        # rejection was last logged and counted (once per cache_seconds while it lasts).
        self._rejected_text: str | None = None
        self._rejected_detail = ""
        self._rejected_said_at: datetime | None = None
        self._rejected_kept: int | None = None  # the version that governed when it was last said (None: defaults)
        self._seen_document = False
        # The policy of this container's last answer (a document, its history, or the defaults when there is no
        # document): kept while the document cannot be read. None until the first answer: the policy is unknown.
        self._known: Policy | None = None
        self._warned_for: Policy | None = None  # the last policy whose warnings were logged (``_say_warnings``)

    @property
    def base(self) -> Policy:
        return self._base

    @property
    def base_fallbacks(self) -> tuple[BaseFallback, ...]:
        """The parts of the deploy-time defaults replaced by the schema's defaults (empty: none)."""
        return self._base_fallbacks

    def current(self, max_age_seconds: float | None = None) -> Policy:
        """The effective policy. Raises ``PolicyUnavailable`` when it is unknown: this container never had a
        policy (no answer yet) and the document, or the history of a rejected one, cannot be read now."""
        policy = self._current(max_age_seconds)
        self._say_warnings(policy)
        return policy

    def _say_warnings(self, policy: Policy) -> None:
        """What is valid but probably not meant in the policy that governs (``Policy.warnings``: M-of-N idle
        windows, two rules of one type, an exemption naming no rule, ...), logged once per policy a container
        adopts: the document, a version of its history, or the deploy-time defaults. ``smgov policy validate``
        prints the same warnings, but only to whoever runs it; a document put with ``aws ssm put-parameter``
        reached the functions with nothing said. A warning never changes what governs, and a fault in
        computing them is logged, never raised: governance goes on with the policy."""
        if policy is self._warned_for:
            return
        self._warned_for = policy
        try:
            warnings = policy.warnings()
        except Exception as exc:  # a warning is advice: its failure must not stop the reaction
            logger.error("policy warnings could not be computed", parameter=self._parameter_name, error=str(exc))
            return
        if warnings:
            source = "deploy-time defaults" if policy is self._base else f"version {self._last_good_version}"
            logger.warning(
                "policy valid with warnings", parameter=self._parameter_name, source=source, warnings=warnings
            )

    def _current(self, max_age_seconds: float | None) -> Policy:
        self._say_base_fallbacks()
        if self._ssm is None or self._parameter_name is None:
            return self._base
        try:
            text = self._read(max(self._cache_seconds, max_age_seconds or 0))
        except AdapterError as exc:
            self._metrics.emit(BusinessMetric.POLICY_LOAD_ERRORS)
            return self._known_or_unavailable("policy document could not be read", exc)
        if text is None:
            if self._seen_document:  # deleted (or renamed) since this container read it: say so, once
                logger.warning(
                    "policy document no longer exists; the deploy-time defaults apply",
                    parameter=self._parameter_name,
                )
                self._seen_document = False
            else:
                logger.debug("no policy document; using deploy-time defaults", parameter=self._parameter_name)
            # What this container knew of the deleted document goes with it: a bad document put under the name
            # later must not bring the deleted one back as "last good" (deleting it returns to the defaults), and
            # the new parameter's history is not the old one's.
            self._last_good = self._last_text = self._last_good_version = self._rejected_text = None
            self._history_for = self._history_answer = self._history_failed_at = None
            self._known = self._base
            return self._base
        self._seen_document = True
        if text == self._last_text and self._last_good is not None:
            self._known = self._last_good
            return self._last_good
        if text != self._rejected_text:
            try:
                policy = build_policy(self._base_document, parse_document(text))
            except PolicyDocumentError as exc:
                self._rejected_text, self._rejected_detail = text, "; ".join(exc.errors)
                self._rejected_said_at = None
            else:
                self._last_good, self._last_text = policy, text
                self._last_good_version = self._cached_version
                self._rejected_text = None
                self._known = policy
                return policy
        self._known = self._rejected(text, self._rejected_detail)
        return self._known

    def _say_base_fallbacks(self) -> None:
        """Replaced parts of the deploy-time defaults: one error log naming them and a ``PolicyLoadErrors``
        datapoint, at this container's first policy read and then once per ``cache_seconds`` (as a rejected
        document is counted at each read), so ``PolicyRejectedAlarm`` stays in alarm while they last."""
        if not self._base_fallbacks:
            return
        now = self._clock()
        if self._base_said_at is not None and (now - self._base_said_at).total_seconds() < self._cache_seconds:
            return
        self._base_said_at = now
        self._metrics.emit(BusinessMetric.POLICY_LOAD_ERRORS)
        logger.error(
            "template parameters rejected: their parts of the policy fall back to the defaults",
            fallbacks=[fallback.model_dump(mode="json") for fallback in self._base_fallbacks],
        )

    def read(self) -> PolicyReading:
        """The policy as a container without a last good document builds it now, with the version that
        judged: the current version, or (rejected) the newest valid one of its history, or neither (the
        deploy-time defaults). Nothing cached, logged or counted. ``AdapterError`` when the parameter
        cannot be read, ``PolicyHistoryUnreadable`` when its rejected document's history cannot."""
        if self._ssm is None or self._parameter_name is None:
            return PolicyReading(policy=self._base, parameter=None)
        found = self._parameter()
        if found is None:
            return PolicyReading(policy=self._base, parameter=self._parameter_name)
        text, version = found
        try:
            policy = build_policy(self._base_document, parse_document(text))
        except PolicyDocumentError as exc:
            rejected = tuple(exc.errors)
            try:
                versions = self._history()
            except AdapterError as unread:
                raise PolicyHistoryUnreadable(str(unread), rejected, version) from unread
            valid = self._newest_valid(versions, text)
            earlier, _, recovered = valid if valid is not None else (None, None, None)
            return PolicyReading(
                policy=recovered or self._base,
                parameter=self._parameter_name,
                current_version=version,
                version=earlier,
                rejected=rejected,
            )
        return PolicyReading(
            policy=policy, parameter=self._parameter_name, current_version=version, version=version
        )

    def _read(self, max_age: float) -> str | None:
        """The document's text, None when the parameter does not exist. Both answers are kept for
        ``max_age`` seconds (``cache_seconds`` unless the caller accepts older; a missing document is an
        answer too: without caching it, every reaction of an invocation would read SSM again); a failed
        read is not cached."""
        now = self._clock()
        fresh = self._fetched_at is not None and (now - self._fetched_at).total_seconds() < max_age
        if not fresh:
            self._cached_text, self._cached_version = self._parameter() or (None, None)
            self._fetched_at = now
        return self._cached_text

    def _parameter(self) -> tuple[str, int | None] | None:
        """The parameter's value and version; None when it does not exist; ``AdapterError`` when it cannot
        be read."""
        assert self._ssm is not None
        try:
            answer = self._ssm.get_parameter(Name=self._parameter_name, WithDecryption=False)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
                return None
            raise AdapterError(str(exc)) from exc
        except BotoCoreError as exc:  # no answer at all (connection, timeout, retries exhausted)
            raise AdapterError(str(exc)) from exc
        version = answer["Parameter"].get("Version")
        return str(answer["Parameter"]["Value"]), None if version is None else int(version)

    def _known_or_unavailable(self, message: str, cause: AdapterError) -> Policy:
        """The policy of this container's last answer, kept while the document cannot be read; none yet (a new
        container): ``PolicyUnavailable``. Never the deploy-time defaults in its place: they would drop the
        document's exemptions and mode."""
        if self._known is None:
            logger.error(
                message, parameter=self._parameter_name, detail=str(cause), kept="nothing: policy unknown"
            )
            raise PolicyUnavailable(f"{message} and this container has no policy yet: {cause}") from cause
        kept = "deploy-time defaults" if self._known is self._base else "last good document"
        logger.error(message, parameter=self._parameter_name, detail=str(cause), kept=kept)
        return self._known

    def _rejected(self, rejected: str, detail: str) -> Policy:
        """What governs while the document is rejected: the newest valid version in the parameter's history
        (the deploy-time defaults when no version validates), in every container alike, whatever version it
        read last: a warm container that last read version 1 governs with version 2 as a new one does. Only
        when the history cannot be read: the container's last good document, or, in a container without one,
        as for an unreadable document (``PolicyUnavailable``, the history read again at the next reaction). A
        failed read is counted as a failed read of the document is; a container that keeps its last good
        document then reads the history again only ``cache_seconds`` later: at every reaction, a throttled
        read cost ~30 s of botocore's retries, more load on SSM and a datapoint each time. The rejection is logged (naming the version
        kept) and counted in ``PolicyLoadErrors`` at the first reaction that finds the text rejected and then
        once per ``cache_seconds`` while it stays rejected, as rejected deploy-time defaults are
        (``PolicyRejectedAlarm`` stays in alarm meanwhile)."""
        message = "policy document rejected"
        now = self._clock()
        failed = self._history_failed_at
        waiting = (  # a read of the history failed lately, and a last good document is at hand
            self._last_good is not None
            and failed is not None
            and (now - failed).total_seconds() < self._cache_seconds
            and (rejected, self._cached_version) != self._history_for
        )
        found: tuple[int, str, Policy] | None = None
        if not waiting:
            try:
                found = self._from_history(rejected)
            except AdapterError as exc:
                self._history_failed_at = now
                self._metrics.emit(BusinessMetric.POLICY_LOAD_ERRORS)
                logger.error(
                    "policy document history could not be read", parameter=self._parameter_name, detail=str(exc)
                )
                if self._last_good is None:
                    return self._known_or_unavailable(f"{message} ({detail}); its history could not be read", exc)
                waiting = True
            else:
                self._history_failed_at = None
        if waiting and self._last_good is not None:
            policy, version = self._last_good, self._last_good_version
            kept = f"this container's last good document (version {version}): its history could not be read"
        elif found is None:
            policy, version, kept = self._base, None, "deploy-time defaults: no version of the document validates"
        else:  # kept from now on as this container's last good document
            version, text, policy = found
            self._last_good, self._last_text, self._last_good_version = policy, text, version
            kept = f"version {version} of the document (the newest valid one in its history)"
        said = self._rejected_said_at
        if said is None or (now - said).total_seconds() >= self._cache_seconds or version != self._rejected_kept:
            self._rejected_said_at, self._rejected_kept = now, version
            self._metrics.emit(BusinessMetric.POLICY_LOAD_ERRORS)
            logger.error(
                message,
                parameter=self._parameter_name,
                version=self._cached_version,
                detail=detail,
                kept=kept,
                kept_version=version,
            )
        return policy

    def _from_history(self, rejected: str) -> tuple[int, str, Policy] | None:
        """The newest earlier version of the document that validates (its number, text and policy); None when
        there is none. Remembered for the rejected version (the history is read once for it);
        ``AdapterError`` when the history cannot be read (not remembered: ``_rejected`` says when to try
        again)."""
        key = (rejected, self._cached_version)
        if key != self._history_for:
            self._history_answer = self._newest_valid(self._history(), rejected)
            self._history_for = key
        return self._history_answer

    def _newest_valid(
        self, versions: Iterable[Mapping[str, Any]], rejected: str
    ) -> tuple[int, str, Policy] | None:
        """The newest of ``versions`` (GetParameterHistory's entries) whose document validates over the
        deploy-time defaults, with its version number and text; None when none does. A version whose text
        this container already holds as its last good document is not validated again."""
        for entry in sorted(versions, key=lambda v: int(v.get("Version") or 0), reverse=True):
            value = entry.get("Value")
            if not isinstance(value, str) or value == rejected:
                continue
            version = int(entry.get("Version") or 0)
            if value == self._last_text and self._last_good is not None:
                return version, value, self._last_good
            try:
                return version, value, build_policy(self._base_document, parse_document(value))
            except PolicyDocumentError:
                continue
        return None

    def _history(self) -> list[dict[str, Any]]:
        """Every version SSM keeps of the parameter (its last 100), in pages."""
        assert self._ssm is not None
        versions: list[dict[str, Any]] = []
        request: dict[str, Any] = {
            "Name": self._parameter_name,
            "WithDecryption": False,
            "MaxResults": HISTORY_PAGE,
        }
        try:
            while True:
                page = self._ssm.get_parameter_history(**request)
                versions.extend(page.get("Parameters") or [])
                if not page.get("NextToken"):
                    return versions
                request["NextToken"] = page["NextToken"]
        except (ClientError, BotoCoreError) as exc:
            raise AdapterError(str(exc)) from exc
