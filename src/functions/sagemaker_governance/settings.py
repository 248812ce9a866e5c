"""The functions' environment as one model, read once. Nothing else touches ``os.environ``.

The template passes its Parameters in as environment variables; ``base_policy_document`` turns them
into the base layer of the governance policy (same schema as the SSM policy document).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from sagemaker_governance.domain.policy_document import BasePolicy

# The template Parameters each part of the base policy is built from (``base_policy_document``): what the
# functions name when a part fails validation and falls back to the defaults (``BasePolicy.fallbacks``). A
# test changes each Parameter of template.yaml and checks that exactly the parts listed for it change.
BASE_POLICY_PARAMETERS: Final[Mapping[str, tuple[str, ...]]] = {
    "mode": ("GovernanceMode",),
    "notify_in_audit_mode": ("NotifyInAuditMode",),
    "team_tag": ("TeamTagKey",),
    "owner_tag": ("OwnerTagKey",),
    "rules.required-tags": ("RequiredTags",),
    "rules.instance-types": ("AllowedInstanceTypes",),
    "rules.max-instances": ("MaxInstanceCount",),
    "rules.max-runtime": ("MaxRuntimeHours", "MaxSpotWaitHours"),
    "rules.spot-checkpoint": ("SpotCheckpointAction",),
    "resume": ("AutoResume", "ResumeMinTrainingHours", "ResumeMaxAttempts", "ResumeRequireCheckpoint"),
    "spot": (
        "SpotFallback",
        "SpotMaxInterruptions",
        "SpotFallbackOnMaxWait",
        "ResumeMaxAttempts",
        "ResumeRequireCheckpoint",
    ),
    "idle": (
        "IdleGuardEnabled",
        "IdleThresholdPercent",
        "IdlePeriodSeconds",
        "IdleEvaluationPeriods",
        "IdleDatapointsToAlarm",
        "IdleGraceMinutes",
    ),
    "progress": ("ProgressGuardEnabled", "ProgressWindowMinutes", "ProgressMetricNames"),
}


def _csv(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(item.strip() for item in value.split(",") if item.strip())
    return value


class Settings(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    mode: Literal["audit", "enforce"] = Field(default="audit", alias="GOVERNANCE_MODE")
    required_tags: tuple[str, ...] = Field(default=(), alias="REQUIRED_TAGS")
    allowed_instance_types: tuple[str, ...] = Field(default=(), alias="ALLOWED_INSTANCE_TYPES")
    max_instance_count: int = Field(default=16, ge=1, alias="MAX_INSTANCE_COUNT")
    max_runtime_hours: float = Field(default=72, gt=0, alias="MAX_RUNTIME_HOURS")
    max_spot_wait_hours: float = Field(default=96, gt=0, alias="MAX_SPOT_WAIT_HOURS")
    spot_checkpoint_action: Literal["notify", "stop"] = Field(default="notify", alias="SPOT_CHECKPOINT_ACTION")
    notify_in_audit_mode: bool = Field(default=False, alias="NOTIFY_IN_AUDIT_MODE")
    team_tag: str = Field(default="team", alias="TEAM_TAG_KEY")
    owner_tag: str = Field(default="owner", alias="OWNER_TAG_KEY")
    policy_parameter_name: str | None = Field(default=None, alias="POLICY_PARAMETER_NAME")
    policy_cache_seconds: int = Field(default=60, ge=0, alias="POLICY_CACHE_SECONDS")
    notifications_topic_arn: str | None = Field(default=None, alias="NOTIFICATIONS_TOPIC_ARN")
    stack_name: str = Field(default="sagemaker-governance", alias="STACK_NAME")
    # Auto-resume and Spot fallback (issue 4): the `resume` and `spot` sections of the base policy.
    auto_resume: Literal["enabled", "disabled"] = Field(default="enabled", alias="AUTO_RESUME")
    resume_min_training_hours: float = Field(default=1, ge=0, le=672, alias="RESUME_MIN_TRAINING_HOURS")
    resume_max_attempts: int = Field(default=2, ge=0, le=20, alias="RESUME_MAX_ATTEMPTS")
    resume_require_checkpoint: bool = Field(default=True, alias="RESUME_REQUIRE_CHECKPOINT")
    spot_fallback: Literal["enabled", "disabled"] = Field(default="enabled", alias="SPOT_FALLBACK")
    spot_max_interruptions: int = Field(default=8, ge=1, le=100, alias="SPOT_MAX_INTERRUPTIONS")
    spot_fallback_on_max_wait: bool = Field(default=True, alias="SPOT_FALLBACK_ON_MAX_WAIT")
    # The role-name glob governance may pass to SageMaker for clones (the template's iam:PassRole grant).
    clone_role_pattern: str = Field(default="*SageMaker*", min_length=1, alias="CLONE_PASS_ROLE_PATTERN")
    # The bucket-name glob auto-resume may list to check checkpoint progress (the template's s3:ListBucket
    # grant); empty: checkpoint progress is not checked.
    checkpoint_bucket_pattern: str = Field(default="", alias="CHECKPOINT_BUCKET_PATTERN")
    # ---- idle guard
    idle_enabled: bool = Field(default=True, alias="IDLE_GUARD_ENABLED")
    idle_threshold_percent: float = Field(default=1.0, gt=0, le=100, alias="IDLE_THRESHOLD_PERCENT")
    idle_period_seconds: int = Field(default=60, ge=60, alias="IDLE_PERIOD_SECONDS")
    idle_evaluation_periods: int = Field(default=30, ge=1, alias="IDLE_EVALUATION_PERIODS")
    # 0: the same as idle_evaluation_periods (idle for the whole window), as in a policy document that sets one
    idle_datapoints_to_alarm: int = Field(default=0, ge=0, alias="IDLE_DATAPOINTS_TO_ALARM")
    idle_grace_minutes: int = Field(default=20, ge=0, alias="IDLE_GRACE_MINUTES")
    alarm_prefix: str | None = Field(default=None, alias="IDLE_ALARM_PREFIX")
    # ---- progress guard (domain/guards/progress.py)
    progress_enabled: bool = Field(default=True, alias="PROGRESS_GUARD_ENABLED")
    progress_window_minutes: int = Field(default=120, ge=10, le=1440, alias="PROGRESS_WINDOW_MINUTES")
    progress_metric_names: tuple[str, ...] | None = Field(default=None, alias="PROGRESS_METRIC_NAMES")
    alarm_topic_arn: str | None = Field(default=None, alias="ALARM_TOPIC_ARN")
    # ---- idempotency (issue 6): the delivery ledger's table (adapters/idempotency.py); None = no deduplication
    idempotency_table: str | None = Field(default=None, alias="IDEMPOTENCY_TABLE_NAME")
    # ---- the fleet's Spot health ledger (issue 19); None: not recorded, not read
    spot_health_table: str | None = Field(default=None, alias="SPOT_HEALTH_TABLE_NAME")
    # The ledger items' life past their last write (adapters/idempotency.py::DEFAULT_TTL_SECONDS: why 4 h)
    idempotency_ttl_seconds: int = Field(default=14_400, ge=300, le=86_400, alias="IDEMPOTENCY_TTL_SECONDS")
    # ---- reconciler (issue 6): its schedule's rate, which orders its runs (domain/reconcile.py)
    reconcile_interval_minutes: int = Field(default=10, ge=1, le=1440, alias="RECONCILE_INTERVAL_MINUTES")
    # ---- one audit view (issue 21): this stack's audit bus (empty: records are not forwarded), the
    # dead-letter queue a failed PutEvents goes to, and the version the central view reports
    audit_bus_name: str | None = Field(default=None, alias="AUDIT_BUS_NAME")
    dead_letter_queue_url: str | None = Field(default=None, alias="DEAD_LETTER_QUEUE_URL")
    stack_version: str = Field(default="unknown", alias="STACK_VERSION")
    account_id: str = Field(default="123456789012", alias="ACCOUNT_ID")
    region: str = Field(default="us-east-1", alias="AWS_REGION")
    partition: str = Field(default="aws", alias="PARTITION")

    _lists = field_validator("required_tags", "allowed_instance_types", "progress_metric_names", mode="before")(
        _csv
    )

    @field_validator(
        "policy_parameter_name",
        "notifications_topic_arn",
        "alarm_topic_arn",
        "idempotency_table",
        "audit_bus_name",
        "dead_letter_queue_url",
        mode="before",
    )
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        return cls.model_validate(dict(os.environ if environ is None else environ))

    def base_policy_document(self) -> dict[str, Any]:
        """The template Parameters as a policy document: the layer the SSM document is merged onto."""
        rules: list[dict[str, Any]] = []
        if self.required_tags:
            rules.append(
                {"id": "required-tags", "type": "required-tags", "tags": {t: {} for t in self.required_tags}}
            )
        if self.allowed_instance_types:
            rules.append(
                {
                    "id": "instance-types",
                    "type": "allowed-instance-types",
                    "patterns": list(self.allowed_instance_types),
                }
            )
        rules.append({"id": "max-instances", "type": "max-instance-count", "max": self.max_instance_count})
        rules.append(
            {
                "id": "max-runtime",
                "type": "max-runtime",
                "max_hours": self.max_runtime_hours,
                "max_wait_hours": self.max_spot_wait_hours,
            }
        )
        rules.append(
            {"id": "spot-checkpoint", "type": "spot-checkpoint", "on_violation": self.spot_checkpoint_action}
        )
        return {
            "mode": self.mode,
            "notify_in_audit_mode": self.notify_in_audit_mode,
            "team_tag": self.team_tag,
            "owner_tag": self.owner_tag,
            "rules": rules,
            "resume": {
                "enabled": self.auto_resume == "enabled",
                "min_training_hours": self.resume_min_training_hours,
                "max_attempts": self.resume_max_attempts,
                "require_checkpoint": self.resume_require_checkpoint,
            },
            "spot": {
                "enabled": self.spot_fallback == "enabled",
                "max_interruptions": self.spot_max_interruptions,
                "fallback_on_max_wait": self.spot_fallback_on_max_wait,
                "max_attempts": self.resume_max_attempts,
                "require_checkpoint": self.resume_require_checkpoint,
            },
            "idle": {
                "enabled": self.idle_enabled,
                "threshold_percent": self.idle_threshold_percent,
                "period_seconds": self.idle_period_seconds,
                "evaluation_periods": self.idle_evaluation_periods,
                "datapoints_to_alarm": self.idle_datapoints_to_alarm or self.idle_evaluation_periods,
                "grace_minutes": self.idle_grace_minutes,
            },
            "progress": {
                "enabled": self.progress_enabled,
                "window_minutes": self.progress_window_minutes,
                **({"metric_names": list(self.progress_metric_names)} if self.progress_metric_names else {}),
            },
        }

    def base_policy(self) -> BasePolicy:
        """The base policy as the functions govern with it: ``base_policy_document`` validated, a part that fails
        replaced by the defaults and named with its template Parameters (``BASE_POLICY_PARAMETERS``)."""
        from sagemaker_governance.domain.policy_document import build_base_policy

        return build_base_policy(self.base_policy_document(), BASE_POLICY_PARAMETERS)

    @property
    def idle_alarm_prefix(self) -> str:
        """Every idle alarm's name starts with this (the IAM policy and the topic policy scope to it)."""
        return self.alarm_prefix or f"{self.stack_name}-idle-"

    def alarm_arn(self, name: str) -> str:
        return f"arn:{self.partition}:cloudwatch:{self.region}:{self.account_id}:alarm:{name}"
