"""A small evaluator of the deny statements `smgov iam-policy` generates, with IAM's documented rules, so
the tests can tell a statement that denies a job the service would let run.

What it models (IAM User Guide, "IAM JSON policy elements: Condition", "Condition operators" and
"Single-valued vs. multivalued condition keys"):

- condition key *names* are not case-sensitive, the tag key of ``aws:RequestTag/<key>`` included: it
  "matches a resource tag key named either TagKey1 or tagkey1, but not both". Which one IAM reads when a
  request carries both is not documented: every reading is evaluated (``readings``);
- values compare as the operator says: ``String*`` case-sensitively, ``*IgnoreCase`` not; ``*Like`` with
  the ``*`` and ``?`` wildcards only;
- a negated operator (``StringNotEquals``, ``StringNotLike``, ...) is true when the key is absent;
  ``ForAnyValue`` is false and ``ForAllValues`` true when a multivalued key is absent or empty; ``Null``
  tests presence. A set operator on a single-valued key, or a plain one on a multivalued key, is an error
  here (IAM's results are surprising there; the generator must not rely on them);
- ``Action`` names are not case-sensitive; ``Resource`` / ``NotResource`` ARNs are matched
  case-sensitively, and a deny applies when it matches any resource the request is authorized against.

What it cannot know is left open: whether the training job's ARN that IAM authorizes carries the name
as written or lower-cased (AWS documents neither; its managed policy AWSBatchServiceRolePolicyForSageMaker
grants ``training-job/AWSBatch*``, mixed case): both are evaluated. A request with
``ResourceConfig.TrainingPlanArn`` is also authorized against the plan and its reserved capacity (the
authorization reference's resource types of ``CreateTrainingJob``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

ACCOUNT = "123456789012"
REGION = "us-east-1"
PARTITION = "aws"


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@cache
def _glob(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    """An IAM glob (``*``: any run, ``?``: one character) as a regular expression."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body, re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def like(pattern: str, text: str, *, ignore_case: bool = False) -> bool:
    return _glob(pattern, ignore_case).fullmatch(text) is not None


@dataclass(frozen=True)
class Call:
    """One reading of one request as IAM authorizes it."""

    action: str
    resources: tuple[str, ...]
    context: Mapping[str, Any] = field(default_factory=dict)  # lower-cased key names


# ---- operators ------------------------------------------------------------------------------------


def _string_equals(value: Any, wanted: list[str]) -> bool:
    return value in wanted


def _string_equals_ignore_case(value: Any, wanted: list[str]) -> bool:
    return str(value).lower() in {w.lower() for w in wanted}


def _string_like(value: Any, wanted: list[str]) -> bool:
    return any(like(p, str(value)) for p in wanted)


def _numeric_greater_than(value: Any, wanted: list[str]) -> bool:
    return any(float(value) > float(w) for w in wanted)


# operator -> (test of one value against the policy's values, negated)
OPERATORS: dict[str, tuple[Any, bool]] = {
    "StringEquals": (_string_equals, False),
    "StringNotEquals": (_string_equals, True),
    "StringEqualsIgnoreCase": (_string_equals_ignore_case, False),
    "StringNotEqualsIgnoreCase": (_string_equals_ignore_case, True),
    "StringLike": (_string_like, False),
    "StringNotLike": (_string_like, True),
    "NumericGreaterThan": (_numeric_greater_than, False),
}


class UnknownKey(Exception):
    """A statement reads a condition key whose value for this request AWS does not document."""


UNKNOWN = object()


def condition_holds(operator: str, key: str, values: Any, context: Mapping[str, Any]) -> bool:
    qualifier, _, base = operator.rpartition(":")
    found = context.get(key.lower(), ABSENT)
    if found is UNKNOWN:
        raise UnknownKey(f"{key} is not documented for this request: a statement must not depend on it")
    wanted = [str(v) for v in as_list(values)]
    if base == "Null":
        absent = found is ABSENT or found == []
        return absent == (wanted == ["true"])
    test, negated = OPERATORS[base]

    def one(value: Any) -> bool:
        return not test(value, wanted) if negated else bool(test(value, wanted))

    if qualifier:
        if found is not ABSENT and not isinstance(found, list):
            raise AssertionError(f"{qualifier} on the single-valued key {key}")
        if not isinstance(found, list) or not found:
            return qualifier == "ForAllValues"
        results = [one(v) for v in found]
        return any(results) if qualifier == "ForAnyValue" else all(results)
    if isinstance(found, list):
        raise AssertionError(f"{operator} on the multivalued key {key} (needs ForAnyValue/ForAllValues)")
    if found is ABSENT:
        return negated
    return one(found)


def statement_denies(statement: Mapping[str, Any], call: Call) -> bool:
    if statement.get("Effect") != "Deny":
        return False
    if not any(like(a, call.action, ignore_case=True) for a in as_list(statement["Action"])):
        return False
    if "Resource" in statement:
        patterns = as_list(statement["Resource"])
        if not any(like(p, arn) for arn in call.resources for p in patterns):
            return False
    else:
        patterns = as_list(statement["NotResource"])
        if not any(not any(like(p, arn) for p in patterns) for arn in call.resources):
            return False
    return all(
        condition_holds(operator, key, values, call.context)
        for operator, keys in statement.get("Condition", {}).items()
        for key, values in keys.items()
    )


def denying(document: Mapping[str, Any], call: Call) -> list[str]:
    return [s["Sid"] for s in document["Statement"] if statement_denies(s, call)]


# ---- requests as IAM sees them ---------------------------------------------------------------------


def tag_readings(tags: list[Mapping[str, str]]) -> Iterator[dict[str, Any]]:
    """The request's tag context keys, once per way IAM may read keys that differ only in case."""
    by_name: dict[str, list[str]] = {}
    for tag in tags:
        by_name.setdefault(f"aws:requesttag/{tag['Key'].lower()}", []).append(tag.get("Value", ""))
    names = list(by_name)
    for values in itertools.product(*(by_name[n] for n in names)):
        reading: dict[str, Any] = dict(zip(names, values, strict=True))
        if tags:
            reading["aws:tagkeys"] = [tag["Key"] for tag in tags]
        yield reading


def _common(account: str, region: str) -> dict[str, Any]:
    return {"aws:requestedregion": region, "aws:principalaccount": account}


def _types(resource: Mapping[str, Any]) -> list[str]:
    types = [resource["InstanceType"]] if resource.get("InstanceType") else []
    return types + [g["InstanceType"] for g in resource.get("InstanceGroups") or []]


def training_calls(request: Mapping[str, Any], *, account: str = ACCOUNT, region: str = REGION) -> list[Call]:
    """Every reading of a ``CreateTrainingJob`` request."""
    resource = request.get("ResourceConfig") or {}
    types = _types(resource)
    context: dict[str, Any] = {
        **_common(account, region),
        "sagemaker:instancetypes": types or ABSENT,
        "sagemaker:maxruntimeinseconds": (request.get("StoppingCondition") or {}).get(
            "MaxRuntimeInSeconds", ABSENT
        ),
    }
    if resource.get("InstancePreferences"):
        context["sagemaker:instancetypes"] = UNKNOWN
    context = {k: v for k, v in context.items() if v is not ABSENT}
    name = request["TrainingJobName"]
    plan = resource.get("TrainingPlanArn")
    others = (
        [plan, f"arn:{PARTITION}:sagemaker:{region}:{account}:reserved-capacity/rc-0123456789abcdef"]
        if plan
        else []
    )
    calls = []
    for job_name in dict.fromkeys([name, name.lower()]):
        arns = [f"arn:{PARTITION}:sagemaker:{region}:{account}:training-job/{job_name}", *others]
        for reading in tag_readings(list(request.get("Tags") or [])):
            calls.append(Call("sagemaker:CreateTrainingJob", tuple(arns), {**context, **reading}))
    return calls


def may_deny(document: Mapping[str, Any], calls: list[Call]) -> list[str]:
    """The Sids that deny the request in some reading, in document order."""
    found = {sid for call in calls for sid in denying(document, call)}
    return [s["Sid"] for s in document["Statement"] if s["Sid"] in found]


def surely_denies(document: Mapping[str, Any], calls: list[Call]) -> bool:
    """Every reading of the request is denied."""
    return all(denying(document, call) for call in calls)


def tuning_definitions(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [d for d in [request.get("TrainingJobDefinition"), *(request.get("TrainingJobDefinitions") or [])] if d]


def tuning_calls(request: Mapping[str, Any], *, account: str = ACCOUNT, region: str = REGION) -> list[Call]:
    """Every reading of a ``CreateHyperParameterTuningJob`` request. ``sagemaker:InstanceTypes``: every
    instance type the request names ("the list of all instance types associated with the resource in the
    request": the authorization reference), whichever definition or instance config each is in.
    ``sagemaker:MaxRuntimeInSeconds``: not documented for it (the request holds a runtime per definition and
    the tuning job's own): a statement that reads it is an error here."""
    types: list[str] = []
    for definition in tuning_definitions(request):
        types += _types(definition.get("ResourceConfig") or {})
        alternatives = definition.get("HyperParameterTuningResourceConfig") or {}
        types += _types({"InstanceType": alternatives.get("InstanceType")})
        types += [c["InstanceType"] for c in alternatives.get("InstanceConfigs") or []]
    context: dict[str, Any] = {**_common(account, region), "sagemaker:maxruntimeinseconds": UNKNOWN}
    if types:
        context["sagemaker:instancetypes"] = list(dict.fromkeys(types))
    name = request["HyperParameterTuningJobName"]
    return [
        Call(
            "sagemaker:CreateHyperParameterTuningJob",
            (f"arn:{PARTITION}:sagemaker:{region}:{account}:hyper-parameter-tuning-job/{job_name}",),
            {**context, **reading},
        )
        for job_name in dict.fromkeys([name, name.lower()])
        for reading in tag_readings(list(request.get("Tags") or []))
    ]
