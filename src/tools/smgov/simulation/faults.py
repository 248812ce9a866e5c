"""Fault injection for the simulator: what the platform does to an event-driven service on a bad day.

``smgov simulate --faults duplicate,reorder,drop,throttle,crash,lag`` (each optionally ``=rate``) makes the
engine misbehave the way AWS is allowed to:

- **duplicate**: an event is delivered twice. Half of the time it is EventBridge / SNS redelivering
  the *same* event (same ``id`` / ``MessageId``: at-least-once delivery), half of the time SageMaker
  emitting the same state change again under a *new* id (it sends several events per change). The copy
  arrives in the same minute or up to ``REORDER_WINDOW_MINUTES`` later.
- **reorder**: an event is held back for 1 to ``REORDER_WINDOW_MINUTES`` minutes, so later events of
  the same job overtake it (a ``Training`` event after the job's ``Completed``).
- **drop**: EventBridge loses a SageMaker state-change event entirely: no target is invoked. This is
  the platform's loss, not the service's: it is counted here and *not* in ``lost_events``; what must
  hold despite it is that no alarm is missing, no orphan alarm stays and no stall escapes: the
  reconciler's job. Each dropped event is listed (``dropped``: minute, job, status), so the report can
  say which decision it took away.
- **throttle**: an AWS API request is answered ``ThrottlingException`` (SageMaker, SSM), ``Throttling``
  (SNS, CloudWatch) in the service's own wire protocol, before it reaches moto or the SageMaker double.
  The handlers' botocore clients see a real throttling response, so botocore's retry logic (mode,
  attempts, retry quota) runs as configured; its back-off sleeps are virtual (no wall-clock wait).
- **crash**: the function dies after acting but before recording, as at a timeout or out of memory: at its
  first audit write (after the AWS side effects of the decision) the invocation ends with ``InjectedCrash``,
  which none of the function's own code catches (no claim released, no answer, no visibility changed).
  A queue-fed function's record (its whole batch) is received again after the queue's
  ``VisibilityTimeout``, up to ``maxReceiveCount``, then dead-lettered; an asynchronously invoked
  function is run again by Lambda's retry (``EventInvokeConfig.MaximumRetryAttempts``, the same request
  id), then the event goes to the on-failure destination.
- **lag**: DescribeTrainingJob lags a job's transition (eventual consistency): at a transition, the
  SageMaker double's DescribeTrainingJob goes on answering the job as it stood before (status, secondary
  status, transitions, end time, failure reason) for the rest of the transition's simulated minute, so
  the state-change event, delivered in that minute, is read against the previous state; from the next
  minute on (the service's quick retry comes 60 s later) it answers the current one. A read is counted
  each time a lagging answer is served. Only DescribeTrainingJob lags: the SageMaker API reference does not
  say which reads are eventually consistent, and this one is the read the service decides on after an
  event (``ListTrainingJobs``, the reconciler's listing, answers the current state).
- **sparse**: a SageMaker state-change event leaves out sections of the job that no AWS source promises it
  carries (``SPARSE_SECTIONS``): each of a random non-empty subset is absent or null (SageMaker writes an
  absent member as null: ``events/training-job-interrupted-spot-null-transitions.json``), and ``Tags`` may
  also come as an empty map (AWS's documented sample event carries ``"Tags": {}``). Every delivery of the
  event (a redelivery, a held-back copy) carries the same sparse detail. The service must read the job again
  for what it needs (``DescribeTrainingJob``, ``ListTags``) and decide as on a full event; with ``lag`` that
  read may answer the state before the event's (``DescriptionBehind``, retried).
- **late-logs**: a failing job's last log lines reach CloudWatch Logs after its ``Failed`` event. The hosts'
  lines go to CloudWatch Logs through a log agent that buffers and batches them, and ``PutLogEvents`` takes
  events up to 14 days old (botocore's CloudWatch Logs model: "Events older than 14 days ... are rejected"),
  so nothing AWS documents makes the lines a process wrote before it exited readable by the time SageMaker
  reports the job ``Failed``. With the fault's rate, at a job's ``Failed`` end the lines of every host's
  stream of its last ``LATE_LOG_TAIL_MINUTES`` (its failure tail, its peers' reports of the exit) that are not
  in CloudWatch Logs yet are held back until 1 to ``LATE_LOG_MAX_DELAY_MINUTES`` minutes later; a read before
  then sees the stream without them (``engine/logs.py``, ``Stream.held``). The bound is ours, not AWS's: a few
  minutes is what an agent's flush interval (seconds) and its backed-off retries of a throttled
  ``PutLogEvents`` (a per-account quota, per the same model) add up to on a host being torn down, and is
  shorter than the reconciler's period, so what the service could do about it (read again later) stays
  within its reach. ``injected`` counts the failed jobs struck, ``late_lines`` the lines put late.
- **batch**: an event source mapping hands its function several SQS records at once, as Lambda does (up to the
  mapping's ``BatchSize``: botocore's Lambda model, ``CreateEventSourceMapping``, "The maximum number of records
  in each batch that Lambda pulls from your stream or queue and sends to your function"), in any order (a
  standard queue's ordering is best effort). With the fault on, the records ready at the same simulated time
  are received together in batches (``engine/delivery.py``); the rate is the share of batches of more than
  one record whose order is shuffled (``injected``). A failed record comes back alone while its batch-mates
  are deleted (a partial batch response), or with them all (an exception or a death). Not the default: a
  batch is one invocation, so the default run's invocation and AWS call counts would change (its outcomes do
  not: with ``batch=1`` alone the default scenarios' costs, stops, invariants and expected outcomes are the
  default run's). The report's ``batch_sizes`` counts the batches of each size.

Each fault draws from its own seeded random stream, so a run is reproducible and enabling one fault
does not change where another one strikes.
Delivery faults (duplicate, reorder, drop) are applied where events are delivered
(``engine/delivery.py``); throttles and crashes strike inside the invocation; lags are drawn where the
double's jobs change state (``fake_sagemaker.py``).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders
from moto.core.botocore_stubber import MockRawResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from smgov.simulation.wire_answers import json_wire_value

FAULTS = ("duplicate", "reorder", "drop", "throttle", "crash", "lag", "sparse", "late-logs", "batch")
DEFAULT_RATES: dict[str, float] = {
    "duplicate": 0.2,
    "reorder": 0.2,
    "drop": 0.05,
    "throttle": 0.05,
    "crash": 0.05,
    "lag": 0.2,
    "sparse": 0.2,
    "late-logs": 0.5,
    "batch": 0.5,
}
# The sections of a state-change event's detail that the service reads and no AWS source promises: AWS documents
# no complete schema of the event (the service's EVENT_SECTIONS; `smgov doctor`'s `events` check counts them).
SPARSE_SECTIONS = (
    "EnableManagedSpotTraining",
    "ResourceConfig",
    "StoppingCondition",
    "AlgorithmSpecification",
    "Tags",
    "SecondaryStatusTransitions",
)
REORDER_WINDOW_MINUTES = 3
# late-logs: the lines a failing job's hosts wrote in its last LATE_LOG_TAIL_MINUTES (the failure tail among them)
# reach CloudWatch Logs 1 to LATE_LOG_MAX_DELAY_MINUTES after the Failed event (see the module docstring).
LATE_LOG_TAIL_MINUTES = 5
LATE_LOG_MAX_DELAY_MINUTES = 5
ANSWERED_URL = "https://answered.simulator.invalid/"  # a URL moto does not serve: the request is taken


class FaultSpec(BaseModel):
    """The faults of a run and the rate of each (probability per event, request, invocation attempt or, for
    lag, transition of a job)."""

    model_config = ConfigDict(frozen=True)

    rates: dict[str, float] = Field(default_factory=dict)

    @field_validator("rates")
    @classmethod
    def _known(cls, rates: dict[str, float]) -> dict[str, float]:
        for name, rate in rates.items():
            if name not in FAULTS:
                raise ValueError(f"unknown fault {name!r} (known: {', '.join(FAULTS)})")
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"fault {name}: rate {rate} is not between 0 and 1")
        return rates

    @classmethod
    def parse(cls, text: str) -> FaultSpec:
        """``duplicate,drop=0.05`` (bare names take ``DEFAULT_RATES``); ``all`` enables every fault."""
        rates: dict[str, float] = {}
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            name, sep, value = item.partition("=")
            name = name.strip()
            names = FAULTS if name == "all" else (name,)
            for one in names:
                if sep:
                    try:
                        rates[one] = float(value)
                    except ValueError:
                        raise ValueError(f"fault {one}: rate {value!r} is not a number") from None
                else:
                    rates[one] = DEFAULT_RATES.get(one, -1.0)
        return cls(rates=rates)

    def rate(self, name: str) -> float:
        return self.rates.get(name, 0.0)

    @property
    def enabled(self) -> bool:
        return any(rate > 0 for rate in self.rates.values())


@dataclass(frozen=True)
class DroppedEvent:
    """A SageMaker state-change event EventBridge never delivered (the drop fault)."""

    minute: int
    job: str
    status: str
    secondary_status: str


class InjectedCrash(BaseException):
    """The function died after acting, before recording (fault injection): a death (a timeout, out of memory),
    not an error it raised. A ``BaseException``, so that no handler of the function's (``except Exception``)
    answers for it, as none runs once Lambda ends the runtime: the delivery's ledger claim is not released
    (it stays held until its hold ends), the SQS partial batch answer is not given and no record's
    visibility is changed. Only the simulator's delivery engine catches it (``engine/delivery.py``).
    ``finally`` blocks still run, which a dead runtime's would not: the only one that calls AWS is the
    reconciler's release of a lost end event's claim (``service/efficiency.py``), which a real death leaves
    held for ``RECONCILER_HOLD_SECONDS``, then taken over by the next run."""


class FaultInjector:
    def __init__(self, spec: FaultSpec | None, seed: int) -> None:
        self.spec = spec or FaultSpec()
        self.injected: Counter[str] = Counter()
        self.dropped: list[DroppedEvent] = []
        self.late_lines = 0  # late-logs: lines put into CloudWatch Logs after their job's Failed event
        self._rngs = {name: random.Random(f"faults-{seed}-{name}") for name in FAULTS}

    def draw(self, name: str) -> bool:
        """Does fault ``name`` strike now? (Counted by the caller when it really happened.)"""
        rate = self.spec.rate(name)
        return rate > 0 and self._rngs[name].random() < rate

    def delay(self, name: str, low: int) -> int:
        return self._rngs[name].randint(low, REORDER_WINDOW_MINUTES)

    def coin(self, name: str) -> bool:
        return self._rngs[name].random() < 0.5

    def shuffle(self, name: str, items: list[Any]) -> None:
        """Reorder ``items`` in place by fault ``name``'s stream."""
        self._rngs[name].shuffle(items)

    def sparse(self, event: dict[str, Any]) -> dict[str, Any]:
        """``event`` as SageMaker may send it (the sparse fault): with the fault's rate, its detail without a
        random non-empty subset of ``SPARSE_SECTIONS`` (each absent or null; ``Tags`` absent, null or ``{}``)."""
        if not self.draw("sparse"):
            return event
        rng = self._rngs["sparse"]
        left_out = [name for name in SPARSE_SECTIONS if rng.random() < 0.5] or [rng.choice(SPARSE_SECTIONS)]
        detail = dict(event["detail"])
        for name in left_out:
            shape = rng.choice(("absent", "null", "empty") if name == "Tags" else ("absent", "null"))
            if shape == "absent":
                detail.pop(name, None)
            else:
                detail[name] = {} if shape == "empty" else None
        self.injected["sparse"] += 1
        return {**event, "detail": detail}

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rates": {name: self.spec.rate(name) for name in FAULTS if self.spec.rate(name) > 0},
            "injected": {name: self.injected[name] for name in FAULTS if self.spec.rate(name) > 0},
        }
        if self.spec.rate("drop") > 0:
            out["dropped"] = [asdict(event) for event in self.dropped]
        if self.spec.rate("late-logs") > 0:
            out["late_lines"] = self.late_lines
        return out


# ---- crash ---------------------------------------------------------------------------------------


class CrashingAuditSink:
    """Wraps the audit sink: an armed invocation raises ``InjectedCrash`` instead of its first write."""

    def __init__(self, inner: Any, injector: FaultInjector) -> None:
        self.inner = inner
        self.injector = injector
        self._armed = False

    @property
    def records(self) -> list[Any]:
        return list(self.inner.records)

    def arm(self) -> None:
        self._armed = self.injector.draw("crash")

    def disarm(self) -> None:
        self._armed = False

    def write(self, record: Any) -> None:
        if self._armed:
            self._armed = False
            self.injector.injected["crash"] += 1
            raise InjectedCrash("injected: the function died after acting, before recording its decision")
        self.inner.write(record)


# ---- lag -----------------------------------------------------------------------------------------


class LaggingReads:
    """The lag fault, plugged into the SageMaker double (its ``lag``): at a transition of a job, with the
    fault's rate, DescribeTrainingJob answers the job as it stood before until the transition's simulated
    minute is over. Events are delivered in the minute of their transition (unless held back by reorder or
    a late duplicate), and a retried record comes back a minute later at the earliest, so only the reads
    made for the event itself (and any other read in that minute: an alarm's, a reconciler run's) lag."""

    def __init__(self, injector: FaultInjector, minute: Callable[[], int], at: Callable[[int], datetime]) -> None:
        self.injector = injector
        self._minute = minute  # the simulation's minute now
        self._at = at  # the double's clock at the start of a minute

    def until(self, name: str) -> datetime | None:
        if not self.injector.draw("lag"):
            return None
        return self._at(self._minute() + 1)

    def served(self, name: str) -> None:
        self.injector.injected["lag"] += 1


# ---- late-logs -----------------------------------------------------------------------------------


class LateLogs:
    """The late-logs fault, plugged into the log streams (``LogStreams.late``): at a job's ``Failed`` end, with
    the fault's rate, the minute its last lines reach CloudWatch Logs."""

    def __init__(self, injector: FaultInjector) -> None:
        self.injector = injector

    def arrival(self, now: int) -> int | None:
        """When the lines of a job that failed at ``now`` arrive (None: on time)."""
        if not self.injector.draw("late-logs"):
            return None
        self.injector.injected["late-logs"] += 1
        return now + self.injector._rngs["late-logs"].randint(1, LATE_LOG_MAX_DELAY_MINUTES)

    def put(self, lines: int) -> None:
        """``lines`` held back were put into CloudWatch Logs."""
        self.injector.late_lines += lines


# ---- throttle ------------------------------------------------------------------------------------


def _cbor_text(value: str) -> bytes:
    data = value.encode()
    if len(data) < 24:
        return bytes([0x60 + len(data)]) + data
    return bytes([0x78, len(data)]) + data


def throttling_response(protocol: str, url: str) -> AWSResponse:
    """A throttling error exactly as the service's wire protocol carries it."""
    message = "Rate exceeded"
    headers = HTTPHeaders()
    headers["x-amzn-RequestId"] = "throttled"
    if protocol == "query":
        body = (
            '<ErrorResponse xmlns="http://webservices.amazon.com/"><Error><Type>Sender</Type>'
            f"<Code>Throttling</Code><Message>{message}</Message></Error>"
            "<RequestId>throttled</RequestId></ErrorResponse>"
        ).encode()
        headers["Content-Type"] = "text/xml"
    elif protocol == "smithy-rpc-v2-cbor":
        body = bytes([0xA2]) + _cbor_text("__type") + _cbor_text("Throttling")
        body += _cbor_text("message") + _cbor_text(message)
        headers["Content-Type"] = "application/cbor"
        headers["smithy-protocol"] = "rpc-v2-cbor"
        headers["x-amzn-query-error"] = "Throttling;Sender"
    else:  # json
        body = json.dumps({"__type": "ThrottlingException", "message": message}).encode()
        headers["Content-Type"] = "application/x-amz-json-1.1"
        headers["x-amzn-ErrorType"] = "ThrottlingException"
    return AWSResponse(url, 400, headers, MockRawResponse(body))


FIRST_ATTEMPT_THROTTLED = "smgov_first_attempt_throttled"  # request context: drawn before the send loop


class Throttler:
    """Answers a share of the handlers' AWS requests with a throttling error, inside botocore's send
    loop (``before-send``), so the clients' retry configuration is what copes with it."""

    def __init__(self, injector: FaultInjector) -> None:
        self.injector = injector
        self._fake: Any = None
        self._cloudwatch: Any = None

    def install(self, session_events: Any) -> None:
        """On the session the handlers' clients are made from (before they are made)."""
        session_events.register("before-call", self._mark)
        session_events.register_first("before-send", self._before_send)

    def _throttle(self, request: Any, model: Any) -> AWSResponse | None:
        # the first attempt of a request a double answers before the send loop is drawn there (``first_attempt``)
        drawn = getattr(request, "context", {}).pop(FIRST_ATTEMPT_THROTTLED, False)
        if not (drawn or self.injector.draw("throttle")):
            return None
        self.injector.injected["throttle"] += 1
        url = request.url
        request.url = ANSWERED_URL  # moto's stubber, called after us, must not execute a throttled request
        service = model.service_model
        return throttling_response(getattr(service, "resolved_protocol", service.protocol), url)

    def _before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        if request.url == ANSWERED_URL:
            return None
        model = getattr(request, "context", {}).get("smgov_operation")
        if model is None:
            return None
        return self._throttle(request, model)

    def throttled(self, request: Any) -> AWSResponse | None:
        """A double that answers in the send loop (``before-send.<service>.<operation>``, before this
        throttler's own ``before-send``) asks first whether the attempt is throttled."""
        return self._before_send(request)

    def _mark(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        """``before-call``: remember the operation on the request context (read back in ``before-send``)."""
        context["smgov_operation"] = model

    def route_cloudwatch(self, client: Any, fake: Any) -> None:
        """The CloudWatch double answers before the send loop (``before-call``, nothing serialized) when the
        request's first attempt is not throttled; a throttled one goes through the send loop and moto's wire,
        so botocore retries it like any other. The first attempt is drawn here rather than at ``before-send``:
        nothing runs in between, so the throttle faults are the same requests either way."""
        self._cloudwatch = fake
        client.meta.events.register("before-parameter-build.cloudwatch.*", fake._capture)
        client.meta.events.register("before-call.cloudwatch.*", self._cloudwatch_call)

    def _cloudwatch_call(self, model: Any, context: dict[str, Any], **kwargs: Any) -> Any:
        if not self.first_attempt(model, context):
            return None
        return self._cloudwatch._answer(model=model, context=context, **kwargs)

    def route_sagemaker(self, client: Any, fake: Any) -> None:
        """The SageMaker double answers before the send loop when the request's first attempt is not
        throttled (drawn there, as CloudWatch's); a throttled request, and one the double is set to refuse
        (``fail_next``: botocore may retry the refusal), go through the send loop, where the double answers in
        SageMaker's JSON protocol, so botocore retries them like any other."""
        self._fake = fake
        client.meta.events.register("before-parameter-build.sagemaker.*", fake._capture)
        client.meta.events.register("before-call.sagemaker.*", self._sagemaker_call)
        client.meta.events.register_first("before-send.sagemaker.*", self._sagemaker_send)

    def _sagemaker_call(self, model: Any, context: dict[str, Any], **kwargs: Any) -> Any:
        if model.name in self._fake.fail_next:
            return None  # the send loop draws and answers, as before
        if not self.first_attempt(model, context):
            return None
        return self._fake._answer(model=model, **kwargs)

    def first_attempt(self, model: Any, context: dict[str, Any]) -> bool:
        """``before-call`` of a double that answers there unless the first attempt is throttled: True when
        the double may answer now; False when the attempt is throttled (the send loop answers it with the
        throttling error without drawing again, and botocore retries it)."""
        self._mark(model, context)
        if self.injector.draw("throttle"):
            context[FIRST_ATTEMPT_THROTTLED] = True
            return False
        return True

    def _sagemaker_send(self, request: Any, **_: Any) -> AWSResponse | None:
        model = request.context.get("smgov_operation")
        throttled = self._throttle(request, model)
        if throttled is not None:
            return throttled
        url = request.url
        request.url = ANSWERED_URL
        http, parsed = self._fake._answer(model=model, params={})
        parsed = dict(parsed)
        parsed.pop("ResponseMetadata", None)
        if "Error" in parsed:
            error = parsed["Error"]
            parsed = {"__type": error["Code"], "message": error.get("Message", "")}
        headers = HTTPHeaders()
        headers["Content-Type"] = "application/x-amz-json-1.1"
        body = json.dumps(parsed, default=json_wire_value).encode()
        return AWSResponse(url, http.status_code, headers, MockRawResponse(body))
