"""The effective policy: deploy-time defaults plus the optional SSM policy document.

Read with ``GetParameter`` (a ``String`` parameter: no decryption) and kept for ``cache_seconds`` on the
injected clock. (Powertools' parameters utility did the reading before: its cache was never used, every
read was forced, and importing it loaded all its providers into every function's cold start.) A broken
document never switches governance off: it is logged, counted (``PolicyLoadErrors``) and the last good
policy is kept. A container that never read a good document (every cold start after a bad edit) finds the
last good one in the parameter's history (``GetParameterHistory``: SSM keeps its last 100 versions), the
newest version that validates; only when none does (or the history cannot be read) the deploy-time
defaults apply. Without that, each new container would drop the document's exemptions and team overrides
and its mode until the document is mended: stops of jobs it exempts, or enforcement switched off.

``read()`` is that cold start's answer once, with which version judged, for tools that publish what they
read (``smgov iam-policy --stack``: an SCP): they fail when the parameter cannot be read rather than
guess, where ``current()`` keeps governance on with what it has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, Final

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict

from sagemaker_governance.business_metrics import BusinessMetric, BusinessMetricsPort, EmfBusinessMetrics
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.policy_document import PolicyDocumentError, build_policy, parse_document
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
        base_document: Mapping[str, Any],
        parameter_name: str | None,
        ssm_client: Any | None,
        cache_seconds: int = 60,
        *,
        clock: Callable[[], datetime] | None = None,
        metrics: BusinessMetricsPort | None = None,
    ) -> None:
        self._base_document = dict(base_document)
        self._base = build_policy(self._base_document)  # deploy-time defaults: validated at start-up
        self._parameter_name = parameter_name
        self._ssm = ssm_client if parameter_name else None
        self._cache_seconds = cache_seconds
        # The cache runs on the injected clock (the simulator's virtual minutes, tests).
        self._clock = clock or (lambda: datetime.now(UTC))
        self._metrics = metrics or EmfBusinessMetrics()
        self._fetched_at: datetime | None = None
        self._cached_text: str | None = None
        self._last_good: Policy | None = None
        self._last_text: str | None = None
        # A rejected text whose history holds no valid version (not read again for the same text).
        self._no_history_for: str | None = None
        self._seen_document = False

    @property
    def base(self) -> Policy:
        return self._base

    def current(self, max_age_seconds: float | None = None) -> Policy:
        if self._ssm is None or self._parameter_name is None:
            return self._base
        try:
            text = self._read(max(self._cache_seconds, max_age_seconds or 0))
        except AdapterError as exc:
            return self._fallback("policy document could not be read", str(exc))
        if text is None:
            if self._seen_document:  # deleted (or renamed) since this container read it: say so, once
                logger.warning(
                    "policy document no longer exists; the deploy-time defaults apply",
                    parameter=self._parameter_name,
                )
                self._seen_document = False
            else:
                logger.debug("no policy document; using deploy-time defaults", parameter=self._parameter_name)
            return self._base
        self._seen_document = True
        if text == self._last_text and self._last_good is not None:
            return self._last_good
        try:
            policy = build_policy(self._base_document, parse_document(text))
        except PolicyDocumentError as exc:
            return self._fallback("policy document rejected", "; ".join(exc.errors), rejected=text)
        self._last_good, self._last_text = policy, text
        return policy

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
            earlier, recovered = self._newest_valid(versions, text)
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
            self._cached_text = self._get_parameter()
            self._fetched_at = now
        return self._cached_text

    def _get_parameter(self) -> str | None:
        """The parameter's value; None when it does not exist; ``AdapterError`` when it cannot be read."""
        found = self._parameter()
        return None if found is None else found[0]

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

    def _fallback(self, message: str, detail: str, rejected: str | None = None) -> Policy:
        self._metrics.emit(BusinessMetric.POLICY_LOAD_ERRORS)
        kept = "last good document"
        if self._last_good is None and rejected is not None:
            version, recovered = self._from_history(rejected)
            if recovered is not None:  # kept from now on like a document read in this container
                self._last_good, kept = recovered, f"version {version} of the document (its history)"
        if self._last_good is None:
            kept = "deploy-time defaults"
        logger.error(message, parameter=self._parameter_name, detail=detail, kept=kept)
        return self._last_good or self._base

    def _from_history(self, rejected: str) -> tuple[int, Policy] | tuple[None, None]:
        """The newest earlier version of the document that validates, with its version number; (None, None)
        when there is none (remembered for this text) or the history cannot be read (not remembered: the
        next reaction tries again)."""
        if rejected == self._no_history_for:
            return None, None
        try:
            versions = self._history()
        except AdapterError as exc:
            logger.error(
                "policy document history could not be read", parameter=self._parameter_name, detail=str(exc)
            )
            return None, None
        found = self._newest_valid(versions, rejected)
        if found[1] is None:
            self._no_history_for = rejected
        return found

    def _newest_valid(
        self, versions: Iterable[Mapping[str, Any]], rejected: str
    ) -> tuple[int, Policy] | tuple[None, None]:
        """The newest of ``versions`` (GetParameterHistory's entries) whose document validates over the
        deploy-time defaults, with its version number; (None, None) when none does."""
        for entry in sorted(versions, key=lambda v: int(v.get("Version") or 0), reverse=True):
            value = entry.get("Value")
            if not isinstance(value, str) or value == rejected:
                continue
            try:
                return int(entry.get("Version") or 0), build_policy(self._base_document, parse_document(value))
            except PolicyDocumentError:
                continue
        return None, None

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
