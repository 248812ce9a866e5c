"""`smgov preflight` and `smgov iam-policy` on the example requests and policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smgov.cli.main import main
from tests.stacks import deployed_stack

REPO = Path(__file__).resolve().parents[2]
POLICY = str(REPO / "examples" / "policy.yaml")
REQUESTS = REPO / "examples" / "requests"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---- preflight ----------------------------------------------------------------------------------


def test_compliant_request_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "preflight", str(REQUESTS / "compliant.json"), "--policy", POLICY)
    assert code == 0
    assert "passes governance preflight" in out


def test_non_compliant_request_exits_1_with_violations_and_fixes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "preflight", str(REQUESTS / "non-compliant.json"), "--policy", POLICY, "--user", "carol"
    )
    assert code == 1
    assert "refused by governance preflight: 4 violation(s)" in out
    assert out.count("fix: ") == 4


def test_json_report_carries_the_request_to_send(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    written = tmp_path / "request.json"
    code, out, _ = run(
        capsys,
        "preflight",
        str(REQUESTS / "spot-no-checkpoint-no-owner.json"),
        "--policy",
        POLICY,
        "--user",
        "dana",
        "--json",
        "--write-request",
        str(written),
    )
    report = json.loads(out)
    assert code == 0
    assert report["verdict"] == "warnings"
    assert [w["rule"] for w in report["warnings"]] == ["spot-checkpoint"]
    assert report["filled_tags"] == {"owner": "dana"}
    assert {"Key": "owner", "Value": "dana"} in report["request"]["Tags"]
    assert json.loads(written.read_text()) == report["request"]


def test_strict_turns_warnings_into_a_refusal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = ["preflight", str(REQUESTS / "spot-no-checkpoint-no-owner.json"), "--policy", POLICY, "--user", "dana"]
    filled = ["--write-request", str(tmp_path / "filled.json")]
    assert run(capsys, *args, *filled)[0] == 0
    assert run(capsys, *args, *filled, "--strict")[0] == 1
    assert run(capsys, *args, "--no-defaults")[0] == 1  # owner stays missing


def test_a_file_without_the_default_tags_is_judged_as_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Given a request without the owner tag, which the policy requires and would fill from the user name
    request = json.loads((REQUESTS / "compliant.json").read_text())
    request["Tags"] = [t for t in request["Tags"] if t["Key"] != "owner"]
    path = tmp_path / "no-owner.json"
    path.write_text(json.dumps(request))
    # When it is checked without --write-request (a pipeline that then sends the file as it is)
    code, out, _ = run(capsys, "preflight", str(path), "--policy", POLICY, "--user", "alice")
    # Then it is refused, as the service would stop it, and the output names the tag and how to get it in
    assert code == 1
    assert "missing or empty tag(s): owner" in out
    assert "owner='alice'" in out and "--write-request" in out
    code, out, _ = run(capsys, "preflight", str(path), "--policy", POLICY, "--user", "alice", "--json")
    report = json.loads(out)
    assert code == 1 and report["verdict"] == "refused"
    assert report["tag_defaults_not_written"] == {"owner": "alice"} and report["request"] == request
    # With --write-request the filled request is judged, written, and is the one to send
    written = tmp_path / "filled.json"
    code, out, _ = run(
        capsys, "preflight", str(path), "--policy", POLICY, "--user", "alice", "--write-request", str(written)
    )
    assert code == 0 and "filled tag owner='alice'" in out
    assert {"Key": "owner", "Value": "alice"} in json.loads(written.read_text())["Tags"]


def test_an_invalid_request_is_a_usage_error_named_by_botocore(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    request = json.loads((REQUESTS / "compliant.json").read_text())
    request["ResourceConfig"]["InstanceCount"] = "two"
    request["Tag"] = request.pop("Tags")  # a typo must not pass as "untagged"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(request))
    code, _, err = run(capsys, "preflight", str(path), "--policy", POLICY)
    assert code == 2
    assert "not a valid CreateTrainingJob request" in err
    assert 'Unknown parameter in input: "Tag"' in err
    assert "InstanceCount" in err


def test_unreadable_json_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("{nope")
    assert run(capsys, "preflight", str(path))[0] == 2


# ---- iam-policy ---------------------------------------------------------------------------------


def test_iam_policy_prints_a_document_and_reports_gaps_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "iam-policy", "--policy", POLICY)
    assert code == 0
    doc = json.loads(out)
    assert doc["Version"] == "2012-10-17"
    assert "DenyInstanceTypesTeamVision" in {s["Sid"] for s in doc["Statement"]}
    assert "Not expressible in IAM" in err
    assert "[max-instances] the instance count has no IAM condition key" in err
    assert "of 6144 characters" in err


def test_scp_is_minified_and_measured_against_its_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "iam-policy", "--policy", POLICY, "--scp")
    assert code == 0
    assert out.strip() == json.dumps(json.loads(out), separators=(",", ":"))
    assert "SCP:" in err and "of 5120 characters" in err


def test_team_document_and_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "iam-policy", "--policy", POLICY, "--team", "vision", "--json", "--account", "123456789012"
    )
    report = json.loads(out)
    assert code == 0
    assert report["limit"] == 6144 and report["size"] <= report["limit"]
    patterns = next(s for s in report["document"]["Statement"] if s["Sid"] == "DenyInstanceTypes")["Condition"]
    assert patterns["ForAnyValue:StringNotLike"] == {
        "sagemaker:InstanceTypes": ["ml.g5.*", "ml.p4d.24xlarge", "ml.p5.*"]
    }
    # --account: the statements apply in that account only
    assert all("123456789012" in json.dumps(s) for s in report["document"]["Statement"])
    assert patterns["StringLike"] == {"aws:PrincipalAccount": "123456789012"}


def test_nothing_to_express_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "audit.yaml"
    path.write_text("mode: audit\n")
    code, out, err = run(capsys, "iam-policy", "--policy", str(path))
    assert code == 1 and out == ""
    assert "no enforced rule can be expressed" in err


# ---- the base policy: the deployed stack's parameters, not the template's defaults --------------------


def test_iam_policy_is_derived_from_the_named_stacks_parameters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a document that leaves max-runtime and the required tags to the stack, and a stack deployed with
    # long LLM runs allowed (MaxRuntimeHours=336) and only the team tag required
    for variable in ("MAX_RUNTIME_HOURS", "REQUIRED_TAGS", "GOVERNANCE_MODE"):
        monkeypatch.delenv(variable, raising=False)
    document = tmp_path / "policy.yaml"
    document.write_text("mode: enforce\nrules:\n  - id: max-instances\n    max: 8\n")
    # When the statements are derived from that stack
    with deployed_stack({"MaxRuntimeHours": "336", "RequiredTags": "team", "GovernanceMode": "audit"}):
        code, out, err = run(capsys, "iam-policy", "--policy", str(document), "--scp", "--stack", "gov")
    # Then they deny what that stack's functions stop, not what the template's defaults would
    assert code == 0
    conditions = json.dumps(json.loads(out))
    assert '"1209600"' in conditions and "cost-center" not in conditions
    assert "no stack named" not in err


def test_iam_policy_without_a_stack_says_which_defaults_it_used(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MAX_RUNTIME_HOURS", raising=False)
    code, _, err = run(capsys, "iam-policy", "--policy", POLICY, "--scp")
    assert code == 0
    assert "no stack named" in err and "MaxRuntimeHours=72" in err and "--stack NAME" in err


def test_preflight_judges_with_the_named_stacks_parameters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a stack deployed with MaxRuntimeHours=24 and a 48-hour request the template's 72 h allow
    monkeypatch.delenv("MAX_RUNTIME_HOURS", raising=False)
    request = json.loads((REQUESTS / "compliant.json").read_text())
    request["StoppingCondition"] = {"MaxRuntimeInSeconds": 48 * 3600}
    path = tmp_path / "long.json"
    path.write_text(json.dumps(request))
    assert run(capsys, "preflight", str(path), "--policy", POLICY, "--user", "dana")[0] == 0
    # When judged with the stack, then it is refused, as the deployed service would stop it
    with deployed_stack({"MaxRuntimeHours": "24"}):
        code, out, _ = run(capsys, "preflight", str(path), "--policy", POLICY, "--user", "dana", "--stack", "gov")
    assert code == 1 and "[max-runtime]" in out


def test_an_scp_over_the_limit_is_split_across_scps(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # Given a policy whose SCP is over 5,120 characters (thirty teams with their own max-runtime)
    teams = "".join(
        f"  team{i:02d}:\n    rules:\n      - id: max-runtime\n        max_hours: {10 + i}\n" for i in range(30)
    )
    path = tmp_path / "policy.yaml"
    path.write_text("mode: enforce\nteams:\n" + teams)
    # When the SCP is asked for, then the advice is several SCPs on the same target, not one per team
    code, out, err = run(capsys, "iam-policy", "--policy", str(path), "--scp")
    assert code == 1 and out == ""
    assert "Split the statements across several SCPs" in err and "--team" not in err
    # and --split gives them, one minified document per line, each within the limit
    code, out, err = run(capsys, "iam-policy", "--policy", str(path), "--scp", "--split")
    documents = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and 1 < len(documents) <= 4
    assert all(len(line) <= 5120 for line in out.splitlines())
    assert err.count("SCP: ") == len(documents)
