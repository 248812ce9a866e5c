"""The effective policy: deploy-time defaults plus the optional SSM policy document.

Read with ``GetParameter`` (a ``String`` parameter: no decryption) and kept for ``cache_seconds`` on the
injected clock. (Powertools' parameters utility did the reading before: its cache was never used, every
read was forced, and importing it loaded all its providers into every function's cold start.) A broken
document never switches governance off: it is logged, counted (``PolicyLoadErrors``) and the last good
policy is kept (or, if no document was ever good in this container, the deploy-time defaults).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.business_metrics import BusinessMetric, BusinessMetricsPort, EmfBusinessMetrics
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.policy_document import PolicyDocumentError, build_policy, parse_document
from sagemaker_governance.observability import logger


class PolicyStore:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"ssm:GetParameter"})

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
            logger.debug("no policy document; using deploy-time defaults", parameter=self._parameter_name)
            return self._base
        if text == self._last_text and self._last_good is not None:
            return self._last_good
        try:
            policy = build_policy(self._base_document, parse_document(text))
        except PolicyDocumentError as exc:
            return self._fallback("policy document rejected", "; ".join(exc.errors))
        self._last_good, self._last_text = policy, text
        return policy

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
        assert self._ssm is not None
        try:
            answer = self._ssm.get_parameter(Name=self._parameter_name, WithDecryption=False)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
                return None
            raise AdapterError(str(exc)) from exc
        except BotoCoreError as exc:  # no answer at all (connection, timeout, retries exhausted)
            raise AdapterError(str(exc)) from exc
        return str(answer["Parameter"]["Value"])

    def _fallback(self, message: str, detail: str) -> Policy:
        kept = "last good document" if self._last_good is not None else "deploy-time defaults"
        logger.error(message, parameter=self._parameter_name, detail=detail, kept=kept)
        self._metrics.emit(BusinessMetric.POLICY_LOAD_ERRORS)
        return self._last_good or self._base
