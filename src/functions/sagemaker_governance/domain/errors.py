"""Our own errors and outcomes, shared by ports and adapters: adapters translate botocore ``ClientError``
codes into these (``raise ... from exc``), and a call that got no answer at all (botocore's
``BotoCoreError``: a connection error, a read timeout, retries spent) into ``AdapterError`` too, so that a
caller that carries on after a failed call (the reconciler's next item) does so whatever the failure was; the
service layer handles them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final


class AdapterError(RuntimeError):
    """An AWS call failed in a way the caller may want to handle."""


class JobNotFound(AdapterError):
    pass


class Throttled(AdapterError):
    """AWS still refused the request for its request-rate quota after botocore's retries (or botocore's
    retry quota was spent): the caller may defer the work to a later run instead of failing."""


class StopUnanswered(AdapterError):
    """StopTrainingJob's last attempt got no answer (botocore's ``BotoCoreError``: a read timeout, a connection
    error) or a server error (5xx): SageMaker may have applied the stop. The last attempt's answer says nothing of
    the earlier ones: a call whose first attempt was applied and answered 5xx, and whose retries were throttled,
    ends in a plain ``AdapterError``, so a failed stop is taken as perhaps applied unless refused (``StopRefused``:
    ``stop_noted``)."""


class StopRefused(AdapterError):
    """SageMaker answered StopTrainingJob's last attempt with a refusal (throttled, or not stoppable in the job's
    status, which could then not be read) and every attempt before it, if any, with a refusal too (a 4xx, seen by
    the adapter's hook in botocore's send loop; botocore's ``RetryAttempts`` 0 when that loop shows none): the stop
    was not made, by this call or any attempt of it, and is not noted (``stop_noted``)."""


class StopDenied(StopRefused):
    """SageMaker refused StopTrainingJob for want of permission (``AccessDenied``-like: IAM, an SCP, a permissions
    boundary). botocore does not retry that answer; after no attempt that may have been applied (none, or only
    refused ones; or an answer that does not say how many attempts it ended) the stop was not made."""


class NotOurAlarm(AdapterError):
    pass


class PolicyUnavailable(AdapterError):
    """The governance policy is unknown: this container never had a good policy and the policy document (or,
    after a rejected document, its history) cannot be read now. Not the deploy-time defaults: acting on those
    would drop the document's exemptions and mode (an exempt job stopped, a violation never stopped). The
    delivery fails and is retried (its queue, then the dead-letter queue); nothing is stopped, cloned or
    marked evaluated on it."""


class DescriptionBehind(AdapterError):
    """DescribeTrainingJob has not yet entered the state an event reports (its answer lags the event): the
    delivery fails, and its queue delivers it again later (a minute later: ``domain/redelivery.py``)."""


class LogsUnread(AdapterError):
    """A resume decided while some hosts' logs could not be read, too long after the failure to hand it to the
    reconciler by a ``smgov:resume-after`` tag (its look-back counts from the failure, and may leave the job before its
    next run): nothing is recorded, and the decision is retried on a new read: the event's delivery by its queue (a
    minute later, ``domain/redelivery.py``; the dead-letter queue after its receives), the reconciler's pass by name
    (``RESUME_HOLD_PASSES``)."""


class PatternTimeout(Exception):
    """A policy's pattern (a required tag's, a failure signature's) was still matching untrusted text when the
    time bound its use case set ran out (``TimeBound``, ``service/ports.py``): Python's ``re`` has no timeout of its
    own, and the backtracking check (``domain/backtracking.py``) does not catch every slow pattern. The bound raises
    it wherever the work was; the code that runs the pattern names it (``naming``), so that the decision and the log
    say which one to fix. ``subject``: what the pattern was matched against (``tag cost-center``,
    ``signature my-plugin-transport``)."""

    def __init__(self, seconds: float, *, pattern: str | None = None, subject: str | None = None) -> None:
        named = f" ({subject}: {pattern!r})" if pattern is not None else ""
        super().__init__(f"a pattern did not finish matching within {seconds:g} s{named}")
        self.seconds = seconds
        self.pattern = pattern
        self.subject = subject

    def naming(self, pattern: str, subject: str) -> PatternTimeout:
        """This timeout, with the pattern that was matching when it came and what it was matched against."""
        return PatternTimeout(self.seconds, pattern=pattern, subject=subject)

    def evidence(self) -> dict[str, Any]:
        """What a decision it made records under ``PATTERN_TIMEOUT``."""
        return {"subject": self.subject, "pattern": self.pattern, "bound_seconds": self.seconds}


# The evidence key of a decision made because a pattern did not finish within its time bound (``PatternTimeout``)
PATTERN_TIMEOUT: Final = "pattern_timeout"


class StopOutcome(StrEnum):
    STOPPED = "stopped"
    ALREADY_ENDED = "already-ended"


@dataclass(frozen=True)
class Claim:
    """A delivery ledger's answer to a claim: ``granted`` (process the delivery) or not (a duplicate);
    ``done``: the effects an earlier attempt of the same delivery completed before it failed; ``token``:
    the granted claim's own (what marks it completed); ``pending``: refused because a claim not yet completed
    holds the key (rather than one completed)."""

    granted: bool
    done: frozenset[str] = frozenset()
    token: str | None = None
    # Refused while an unfinished claim holds the key (not completed: its holder may still fail and release it)
    pending: bool = False
