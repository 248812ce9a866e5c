"""Ordered Spot alternatives (issue 19 item 3): a job leaving Spot on its own type tries the team's other
types on Spot first, in order, only when the job opted in, never onto a type the policy does not allow,
a type in a storm or one whose cost to finish does not beat On-Demand; the evidence lists each one."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from sagemaker_governance.domain.clone import TAG_REASON
from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.recovery_policy import SpotPolicy, StormPolicy
from sagemaker_governance.domain.resume import CloneDecision, SpotCode, decide_spot
from sagemaker_governance.domain.rules.instance_types import AllowedInstanceTypes
from sagemaker_governance.domain.spot_economics import Unknown
from sagemaker_governance.domain.spot_health import FleetHealth, SignalKind, SpotSignal
from tests.resume_builders import TAGS, as_job, context
from tests.spot_builders import TYPE, listed, lived

CALM = "ml.g6.12xlarge"
PRICES = {TYPE: 7.09, CALM: 5.752, "ml.p4d.24xlarge": 37.688, "ml.g5.48xlarge": 20.36}
OPTED = {**TAGS, "spot-fallbacks": "allow"}


def health(instance_type: str, *, storm: bool = False, rate: float | None = None) -> FleetHealth:
    jobs = 3 if storm else 0
    return FleetHealth(instance_type, 1.0, jobs, jobs, 0, 0, None, rate, storm=storm)


def losing_job() -> tuple[dict[str, Any], tuple[datetime, ...], datetime]:
    """Half of each hour lost at each interruption: at a Spot price of 60%, On-Demand is cheaper."""
    return lived([58, 58], every=30, download=10, max_runtime_hours=12, max_wait_hours=400)


def decide(
    fallbacks: list[dict[str, Any]],
    *,
    tags: dict[str, str] = OPTED,
    fleet: dict[str, FleetHealth | Unknown] | None = None,
    rules: tuple[AllowedInstanceTypes, ...] = (),
    doc: dict[str, Any] | None = None,
    **policy: Any,
) -> CloneDecision:
    source, writes, now = losing_job()
    doc = doc or source
    return decide_spot(
        as_job(doc),
        doc,
        tags,
        spot=SpotPolicy.model_validate({"price_factor": 0.6, "fallbacks": fallbacks, **policy}),
        default_mode=Mode.ENFORCE,
        ctx=context(now),
        checkpoint=listed(writes),
        prices=PRICES,
        fleet=health(TYPE),
        alternatives_health={CALM: health(CALM)} if fleet is None else fleet,
        allowed_types=rules,
    )


def test_an_opted_in_job_leaving_spot_resumes_on_spot_on_a_calm_cheaper_type() -> None:
    # Given a job for which On-Demand beats Spot on its own type, and a calm, cheaper alternative
    result = decide([{"instance_type": CALM}])
    # Then it is cloned on Spot on the alternative (instance count intact) and the Spot job stopped
    clone, stop = result.decisions
    assert (clone.code, stop.code) == (SpotCode.CLONE_ALTERNATIVE, SpotCode.STOP_ALTERNATIVE)
    assert stop.action is Action.STOP and result.stop_source
    request = clone.request or {}
    assert request["ResourceConfig"]["InstanceType"] == CALM
    assert request["ResourceConfig"]["InstanceCount"] == 2
    assert request["EnableManagedSpotTraining"] is True
    assert request["StoppingCondition"]["MaxWaitTimeInSeconds"] == 400 * 3600
    assert {t["Key"]: t["Value"] for t in request["Tags"]}[TAG_REASON] == "spot-alternative"
    # and the evidence says why it left and what the alternative costs against On-Demand
    assert clone.evidence["moved_because"] == SpotCode.CLONE_ON_DEMAND_CHEAPER
    (considered,) = clone.evidence["alternatives"]
    assert considered["verdict"] == "chosen"
    assert considered["spot_cost_usd"] < considered["on_demand_cost_usd"]


def test_each_alternative_is_considered_in_order_and_each_refusal_is_said() -> None:
    # Given five alternatives, only the last of which passes every check
    rules = (AllowedInstanceTypes(id="types", type="allowed-instance-types", patterns=("ml.g*",)),)
    fleet: dict[str, FleetHealth | Unknown] = {
        "ml.g5.48xlarge": health("ml.g5.48xlarge", storm=True),
        "ml.g4dn.12xlarge": Unknown("the ledger could not be read"),
        "ml.g6e.12xlarge": health("ml.g6e.12xlarge"),
        CALM: health(CALM, rate=0.1),
    }
    types = ["ml.p4d.24xlarge", "ml.g5.48xlarge", "ml.g4dn.12xlarge", "ml.g6e.12xlarge", CALM]
    result = decide([{"instance_type": t} for t in types], fleet=fleet, rules=rules)
    # Then the verdicts come in the team's order and the last is chosen
    verdicts = [(c["instance_type"], c["verdict"]) for c in result.decisions[0].evidence["alternatives"]]
    assert verdicts == [
        ("ml.p4d.24xlarge", "not-allowed"),
        ("ml.g5.48xlarge", "storm"),
        ("ml.g4dn.12xlarge", "health-unknown"),
        ("ml.g6e.12xlarge", "unpriced"),
        (CALM, "chosen"),
    ]


def test_without_an_alternative_that_beats_on_demand_the_job_goes_on_demand_and_says_why() -> None:
    # Given an alternative whose Spot price is above the job's own On-Demand price
    fleet: dict[str, FleetHealth | Unknown] = {"ml.g5.48xlarge": health("ml.g5.48xlarge")}
    result = decide([{"instance_type": TYPE}, {"instance_type": "ml.g5.48xlarge"}], fleet=fleet)
    # Then it falls back to On-Demand as before, with the alternative's figures in the evidence
    clone, stop = result.decisions
    assert (clone.code, stop.code) == (SpotCode.CLONE_ON_DEMAND_CHEAPER, SpotCode.STOP_ON_DEMAND_CHEAPER)
    assert (clone.request or {})["EnableManagedSpotTraining"] is False
    same, considered = clone.evidence["alternatives"]
    assert same["verdict"] == "same-type" and considered["verdict"] == "on-demand-cheaper"
    assert considered["spot_cost_usd"] >= considered["on_demand_cost_usd"]


def test_a_slower_alternative_needs_more_hours_and_can_lose_to_on_demand() -> None:
    # Given the calm, cheaper type on which the job runs at a third of its pace
    result = decide([{"instance_type": CALM, "relative_speed": 0.33}])
    assert result.decisions[0].code == SpotCode.CLONE_ON_DEMAND_CHEAPER
    assert result.decisions[0].evidence["alternatives"][0]["verdict"] == "on-demand-cheaper"


def test_a_job_that_did_not_opt_in_goes_on_demand_unless_the_team_needs_no_tag() -> None:
    result = decide([{"instance_type": CALM}], tags=TAGS)
    assert result.decisions[0].code == SpotCode.CLONE_ON_DEMAND_CHEAPER
    assert "spot-fallbacks=allow" in result.decisions[0].evidence["alternatives_not_tried"]
    untagged = decide([{"instance_type": CALM}], tags=TAGS, fallback_job_tag=None)
    assert untagged.decisions[0].code == SpotCode.CLONE_ALTERNATIVE


def test_a_heterogeneous_cluster_is_never_remapped() -> None:
    doc, _, _ = losing_job()
    doc["ResourceConfig"] = {
        "InstanceGroups": [
            {"InstanceGroupName": "gpu", "InstanceType": TYPE, "InstanceCount": 2},
            {"InstanceGroupName": "cpu", "InstanceType": "ml.c5.2xlarge", "InstanceCount": 1},
        ],
        "VolumeSizeInGB": 50,
    }
    result = decide([{"instance_type": CALM}], doc=doc)
    assert result.decisions[0].code != SpotCode.CLONE_ALTERNATIVE
    assert "heterogeneous" in result.decisions[0].evidence["alternatives_not_tried"]


def test_the_hard_cap_goes_on_demand_without_trying_alternatives() -> None:
    result = decide([{"instance_type": CALM}], max_interruptions=2)
    assert result.decisions[0].code == SpotCode.CLONE_INTERRUPTED
    assert "alternatives" not in result.decisions[0].evidence


def test_the_policy_bounds_the_list_and_names_real_types() -> None:
    with pytest.raises(ValidationError):
        SpotPolicy.model_validate({"fallbacks": [{"instance_type": f"ml.g5.{n}xlarge"} for n in range(1, 7)]})
    with pytest.raises(ValidationError):
        SpotPolicy.model_validate({"fallbacks": [{"instance_type": "g5.2xlarge"}]})
    with pytest.raises(ValidationError):
        SpotPolicy.model_validate({"fallbacks": [{"instance_type": CALM, "relative_speed": 0}]})


KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
EBS_OWN, EBS_ALTERNATIVE = "ml.p2.16xlarge", "ml.p2.8xlarge"  # EBS-only: a VolumeKmsKeyId is accepted


def keyed(alternatives: list[str]) -> CloneDecision:
    """A job on an EBS-only type whose volume is encrypted with the owner's key, leaving Spot."""
    source, writes, now = lived(
        [58, 58], every=30, download=10, max_runtime_hours=12, max_wait_hours=400, instance_type=EBS_OWN
    )
    source["ResourceConfig"]["VolumeKmsKeyId"] = KEY
    return decide_spot(
        as_job(source),
        source,
        OPTED,
        spot=SpotPolicy.model_validate(
            {"price_factor": 0.6, "fallbacks": [{"instance_type": t} for t in alternatives]}
        ),
        default_mode=Mode.ENFORCE,
        ctx=context(now),
        checkpoint=listed(writes),
        prices={EBS_OWN: 14.4, EBS_ALTERNATIVE: 7.2, CALM: 5.752},
        fleet=health(EBS_OWN),
        alternatives_health={t: health(t) for t in alternatives},
    )


def test_a_job_with_a_volume_key_skips_an_alternative_with_local_storage() -> None:
    # Given a calm, cheaper alternative with local storage (SageMaker refuses the key there), then an
    # EBS-only one
    result = keyed([CALM, EBS_ALTERNATIVE])
    # Then the first is refused for the key, and the job moves to the second with its key
    clone, stop = result.decisions
    assert (clone.code, stop.code) == (SpotCode.CLONE_ALTERNATIVE, SpotCode.STOP_ALTERNATIVE)
    verdicts = [(c["instance_type"], c["verdict"]) for c in clone.evidence["alternatives"]]
    assert verdicts == [(CALM, "local-storage"), (EBS_ALTERNATIVE, "chosen")]
    resources = (clone.request or {})["ResourceConfig"]
    assert (resources["InstanceType"], resources["VolumeKmsKeyId"]) == (EBS_ALTERNATIVE, KEY)


def test_a_job_with_a_volume_key_and_only_local_storage_alternatives_goes_on_demand_on_its_own_type() -> None:
    result = keyed([CALM])
    clone, stop = result.decisions
    assert (clone.code, stop.code) == (SpotCode.CLONE_ON_DEMAND_CHEAPER, SpotCode.STOP_ON_DEMAND_CHEAPER)
    assert clone.evidence["alternatives"][0]["verdict"] == "local-storage"
    resources = (clone.request or {})["ResourceConfig"]
    assert (resources["InstanceType"], resources["VolumeKmsKeyId"]) == (EBS_OWN, KEY)


def test_an_alternative_whose_jobs_were_all_interrupted_minutes_in_is_not_taken_for_calm() -> None:
    # Given the calm-priced alternative's window: two other jobs, each interrupted 15 minutes into its run
    # (not a storm at 3 jobs; neither ran an hour, so the fleet has no rate of the type)
    _, _, now = losing_job()
    signals = [
        SpotSignal(CALM, SignalKind.INTERRUPTION, now - timedelta(minutes=m), job, 4.0,
                   interruptions=1, running_hours=0.25)
        for m, job in ((20, "a"), (40, "b"))
    ]  # fmt: skip
    early = FleetHealth.of(CALM, signals, now, StormPolicy(), exclude_job="bert-spot-1")
    assert early.fleet_rate_per_hour is None and not early.storm
    result = decide([{"instance_type": CALM}], fleet={CALM: early})
    # Then its health is unknown (not a rate of 0, on the old code: chosen), and the job goes On-Demand
    clone, stop = result.decisions
    assert (clone.code, stop.code) == (SpotCode.CLONE_ON_DEMAND_CHEAPER, SpotCode.STOP_ON_DEMAND_CHEAPER)
    (considered,) = clone.evidence["alternatives"]
    assert considered["verdict"] == "health-unknown"
