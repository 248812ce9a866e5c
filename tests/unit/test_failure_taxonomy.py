"""The failure taxonomy (data) and the classification of a failure's evidence (pure)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from sagemaker_governance.domain.clone import TAG_ATTEMPT, TAG_FAILURE, TAG_REASON, TAG_ROOT, TAG_STRIKES
from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.failure_evidence import (
    CheckpointProgress,
    FailureEvidence,
    HostLog,
    LogLine,
    host_of_stream,
)
from sagemaker_governance.domain.failure_signatures import Signature, Verdict
from sagemaker_governance.domain.failures import REQUIRED_CLASSES, Taxonomy, builtin_taxonomy, classify
from sagemaker_governance.domain.recovery_policy import ResumePolicy
from sagemaker_governance.domain.resume import CloneDecision, ResumeCode
from tests.resume_builders import T0, TAGS, failed_description, resume_of

ALGORITHM_ERROR = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nCommand "/opt/conda/bin/torchrun train.py"'
AT = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=44)  # within late_after_hours of each failure here (resume.skip.too-late)


def host(name: str, *lines: str | tuple[str, datetime]) -> HostLog:
    parsed = tuple(LogLine(line) if isinstance(line, str) else LogLine(line[0], line[1]) for line in lines)
    return HostLog(host=name, stream=f"job/{name}-1700000000", lines=parsed)


def evidence(*hosts: HostLog) -> FailureEvidence:
    return FailureEvidence(hosts=hosts, logs_read=True, hosts_total=len(hosts))


def diagnose(reason: str | None, *hosts: HostLog, taxonomy: Taxonomy | None = None):  # type: ignore[no-untyped-def]
    return classify(reason, evidence(*hosts), taxonomy or builtin_taxonomy())


# ---- the data ----------------------------------------------------------------------------------------


def test_the_builtin_taxonomy_is_valid_and_every_signature_cites_its_source() -> None:
    taxonomy = builtin_taxonomy()
    assert set(taxonomy.classes) >= REQUIRED_CLASSES
    assert all(signature.source and len(signature.source) > 20 for signature in taxonomy.signatures)
    assert taxonomy.verdict("unknown") is Verdict.SKIP and taxonomy.verdict("user-code") is Verdict.SKIP
    assert taxonomy.verdict("hardware") is Verdict.RESUME and taxonomy.verdict("interconnect") is Verdict.RESUME
    # every class but unknown has a signature of its own
    assert {s.failure_class for s in taxonomy.signatures} >= REQUIRED_CLASSES - {"unknown"}


def test_a_taxonomy_without_a_required_class_or_with_a_dangling_signature_is_refused() -> None:
    document = builtin_taxonomy().model_dump(mode="json")
    broken = {**document, "classes": {k: v for k, v in document["classes"].items() if k != "unknown"}}
    with pytest.raises(ValidationError, match="classes missing"):
        Taxonomy.model_validate(broken)
    dangling = {
        **document,
        "signatures": [*document["signatures"], {"id": "x", "class": "gremlins", "pattern": "x"}],
    }
    with pytest.raises(ValidationError, match="unknown class"):
        Taxonomy.model_validate(dangling)


@pytest.mark.parametrize(
    ("line", "failure_class", "signature"),
    [
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "hardware", "cuda-ecc-uncorrectable"),
        (
            "NVRM: Xid (PCI:0000:53:00): 79, pid=1234, GPU has fallen off the bus.",
            "hardware",
            "gpu-fallen-off-bus",
        ),
        ("NVRM: Xid (PCI:0000:a8:00): 48, pid=991, An uncorrectable double bit error", "hardware", "xid-fatal"),
        ("RuntimeError: CUDA error: unspecified launch failure", "hardware", "cuda-unspecified-launch-failure"),
        (
            "NET/OFI Request 0x7f completed with error. RC: 21. Error: 4 (Interrupted system call)",
            "interconnect",
            "efa-transport-error",
        ),
        (
            "NET/IB : Got completion from peer 10.0.1.2<41234> with error 12, opcode 0, len 0, vendor err 129",
            "interconnect",
            "ib-completion-error",
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "user-code",
            "cuda-out-of-memory",
        ),
        (
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x512 and 256x10)",
            "user-code",
            "tensor-shape-mismatch",
        ),
        ("RuntimeError: expected scalar type Float but found Half", "user-code", "dtype-mismatch"),
        (
            "FileNotFoundError: [Errno 2] No such file or directory: '/opt/ml/input/data/train/x.bin'",
            "user-code",
            "missing-data",
        ),
        ("PermissionError: [Errno 13] Permission denied: '/opt/ml/model/x'", "user-code", "permission-denied"),
        ("OSError: [Errno 28] No space left on device", "user-code", "disk-full"),
        ("ValueError: too many values to unpack (expected 2)", "user-code", "python-exception"),
    ],
)
def test_each_class_is_recognised_in_a_hosts_log(line: str, failure_class: str, signature: str) -> None:
    diagnosis = diagnose(ALGORITHM_ERROR, host("algo-1", "step 100 loss 2.1", line))
    assert (diagnosis.failure_class, diagnosis.signature) == (failure_class, signature)
    assert diagnosis.host == "algo-1" and diagnosis.basis == "logs"
    assert diagnosis.lines[0].host == "algo-1"


@pytest.mark.parametrize(
    ("line", "fatal"),
    [
        ("NVRM: Xid (PCI:0000:3b:00): 94, pid=1, Contained: SM", True),
        ("Xid 48", True),
        ("Xid: 119", True),
        ("Xid  ( PCI:1 ) :  154 recovery", True),
        ("Xid (PCI:0000:3b:00) 74", True),
        ("NVRM: Xid (PCI:0000:3b:00): 31, pid=1, MMU Fault", False),  # left out: application bugs raise it
        ("Xid 13", False),
        ("Xid79", False),
        ("Xid: 640", False),
        ("Xid" + " " * 1990 + "x", False),
    ],
)
def test_the_fatal_xid_signature_reads_the_drivers_spellings(line: str, fatal: bool) -> None:
    # Given the driver's line with the PCI address, the colon and the spaces present or not, then the fatal Xids
    # are recognised and the others are not (the last line, one run of spaces cut at the line limit, is read in
    # one pass by the signature's single repeat over it)
    (xid,) = [s for s in builtin_taxonomy().signatures if s.id == "xid-fatal"]
    assert bool(re.search(xid.pattern, line)) is fatal


@pytest.mark.parametrize(
    ("signature_id", "line", "matched"),
    [
        ("efa-transport-error", "libfabric:123:efa:efa_rdm_txe_handle_error():45<warn> err: 5 Input/output", True),
        ("efa-transport-error", "LIBFABRIC: provider EFA <warn> ep 3 error", True),
        ("efa-transport-error", "libfabric: efa <warn> efa <warn> retrying", False),
        ("efa-transport-error", "libfabric: refa <warn> err", False),
        ("efa-transport-error", "libfabric: <warn> efa err", False),
        ("efa-transport-error", "NET/OFI Request 0x1 completed with error", True),
        ("efa-transport-error", ("libfabric:efa<warn>" * 110)[:2000], False),
        (
            "dtype-mismatch",
            "Input type (torch.cuda.HalfTensor) and weight type (torch.FloatTensor) should be the same",
            True,
        ),
        ("dtype-mismatch", "Input type (a) and weight type (b) and weight type (c) should be the same", True),
        ("dtype-mismatch", "Input type (a) should be the same and weight type (b)", False),
        ("dtype-mismatch", ("Input type (" + ") and weight type (" * 110)[:2000], False),
        ("python-exception", "[1,mpirank:0,algo-1]<stderr>:ValueError: bad shape", True),
        ("python-exception", '[1,0]<stdout>: [x] ErrorMessage "torch.OutOfMemoryError: CUDA', True),
        ("python-exception", "[1,0]<stderr>:ChildFailedError: rank 3", False),
        ("python-exception", "[1,0] [2,0] <stderr>: ValueError: x", False),
        ("python-exception", "[1,mpirank:0]<stderr>:" + "a" * 1977, False),
    ],
)
def test_signatures_written_for_one_pass_match_what_they_matched(
    signature_id: str, line: str, matched: bool
) -> None:
    # Given a built-in signature whose pattern was rewritten so that it reads a line in one pass (an atomic
    # group around a part to find first, a possessive prefix of bracketed fields), then it matches the lines
    # it matched before, the last of each a run of what it looks for without the end, cut at the line limit
    (signature,) = [s for s in builtin_taxonomy().signatures if s.id == signature_id]
    assert bool(signature.regex.search(line)) is matched


def test_a_user_code_line_that_merely_mentions_nccl_is_not_a_hardware_fault() -> None:
    # Given a code bug whose error text names NCCL
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host(
            "algo-1",
            "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5",
        ),
    )
    # Then it is the user's code
    assert diagnosis.failure_class == "user-code" and diagnosis.verdict is Verdict.SKIP
    assert diagnosis.signature == "nccl-invalid-usage"


def test_oom_on_one_host_wins_over_the_watchdog_timeouts_it_causes_elsewhere() -> None:
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host("algo-1", ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", AT)),
        host(
            "algo-2",
            (
                "[Rank 8] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9) ran for 600000 milliseconds before timing out.",
                AT + timedelta(minutes=10),
            ),
        ),
    )
    assert diagnosis.failure_class == "user-code" and diagnosis.host == "algo-1"


def test_a_watchdog_timeout_after_a_peer_fell_silent_is_interconnect() -> None:
    # Given algo-2 stopped writing 20 minutes before algo-1's watchdog fired (a GPU lost without a word)
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host(
            "algo-1",
            ("step 900 loss 1.9", AT),
            (
                "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE) ran for 1200000 milliseconds before timing out.",
                AT + timedelta(minutes=20),
            ),
        ),
        host("algo-2", ("step 900 loss 1.9", AT)),
    )
    assert diagnosis.failure_class == "interconnect" and diagnosis.verdict is Verdict.RESUME
    assert diagnosis.signature == "nccl-watchdog-timeout"
    assert any("algo-2 fell silent" in note for note in diagnosis.notes)


def test_a_watchdog_timeout_after_a_peer_fell_silent_names_the_silent_peer_for_the_lemon_rule() -> None:
    # Given algo-3 fell silent first (its GPU lost), algo-4 a little later, and algo-1 and algo-2 then
    # report the collective timeout
    watchdog = (
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77) ran for 1200000 milliseconds"
    )
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host("algo-1", ("step 900 loss 1.9", AT), (watchdog, AT + timedelta(minutes=20))),
        host("algo-2", ("step 900 loss 1.9", AT), (watchdog, AT + timedelta(minutes=21))),
        host("algo-4", ("step 901 loss 1.9", AT + timedelta(minutes=2))),
        host("algo-3", ("step 900 loss 1.9", AT)),
    )
    # Then the fault is keyed on the peer that fell silent first, not on the host that reported it
    assert diagnosis.failure_class == "interconnect"
    assert diagnosis.host == "algo-3"
    assert diagnosis.lemon_key == "interconnect@algo-3"
    assert diagnosis.lines[0].host == "algo-1"  # the evidence still shows who reported it


def test_a_watchdog_timeout_with_no_peer_failure_is_unknown() -> None:
    # Every host wrote until the end: ranks that disagree on a collective (a deadlock in the code) look the same
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host(
            "algo-1",
            ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5) ran for 600000 milliseconds", AT),
        ),
        host(
            "algo-2",
            ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5) ran for 600000 milliseconds", AT),
        ),
    )
    assert diagnosis.failure_class == "unknown" and diagnosis.verdict is Verdict.SKIP


NCCL_REMOTE = (
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."
)
GLOO_RESET = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error [10.0.1.2]:41234: "
    "Connection reset by peer"
)
KEY_ERROR = "KeyError: 'label'"


@pytest.mark.parametrize(
    ("peer_line", "signature"), [(NCCL_REMOTE, "nccl-remote-error"), (GLOO_RESET, "peer-connection-lost")]
)
def test_a_code_bug_on_one_host_is_not_the_interconnect_fault_its_peers_report(
    peer_line: str, signature: str
) -> None:
    # Given algo-1's code raised a KeyError and algo-2, seconds later, reports that its peer went away
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host(
            "algo-1",
            ("step 900 loss 1.9", AT),
            ("Traceback (most recent call last):", AT + timedelta(seconds=1)),
            (KEY_ERROR, AT + timedelta(seconds=1)),
        ),
        host("algo-2", ("step 900 loss 1.9", AT), (peer_line, AT + timedelta(seconds=3))),
    )
    # Then the exception explains the peer's message: user code on algo-1, never resumed
    assert (diagnosis.failure_class, diagnosis.signature, diagnosis.host) == (
        "user-code",
        "python-exception",
        "algo-1",
    )
    assert diagnosis.verdict is Verdict.SKIP
    assert any(signature in note and "follows a user-code exception" in note for note in diagnosis.notes)


@pytest.mark.parametrize("peer_line", [NCCL_REMOTE, GLOO_RESET])
def test_a_peer_that_went_away_with_no_peer_failure_to_explain_it_is_unknown(peer_line: str) -> None:
    # Given algo-2 reports its peer gone while algo-1 wrote until the end (a process that exited: whose fault?)
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host("algo-1", ("step 900 loss 1.9", AT), ("step 901 loss 1.9", AT + timedelta(seconds=50))),
        host("algo-2", ("step 900 loss 1.9", AT), (peer_line, AT + timedelta(minutes=1))),
    )
    assert diagnosis.failure_class == "unknown" and diagnosis.verdict is Verdict.SKIP


@pytest.mark.parametrize(
    "peer_line", [NCCL_REMOTE, "NET/Socket : Connection closed by remote peer 10.0.1.3<51234>"]
)
def test_a_peer_that_went_away_after_the_peer_fell_silent_is_interconnect(peer_line: str) -> None:
    # Given algo-2 fell silent 10 minutes before algo-1 reported its peer gone
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host("algo-1", ("step 900 loss 1.9", AT), (peer_line, AT + timedelta(minutes=10))),
        host("algo-2", ("step 900 loss 1.9", AT)),
    )
    # Then it is interconnect, keyed on the silent peer
    assert diagnosis.failure_class == "interconnect" and diagnosis.verdict is Verdict.RESUME
    assert diagnosis.host == "algo-2" and diagnosis.lemon_key == "interconnect@algo-2"


# PyTorch built against NCCL < 2.12 (before ncclRemoteError) reports a peer's exit as ncclSystemError
# (torch/csrc/distributed/c10d/NCCLUtils.cpp: "Before ncclRemoteError was created, unexpected remote
# disconnect was categorized as ncclSystemError ... It can be also caused by unexpected exit of a remote peer").
NCCL_210_WRAPPER = (
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, "
    "unhandled system error, NCCL version 2.10.3"
)
NCCL_210_SYSTEM = (
    "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. "
    "It can be also caused by unexpected exit of a remote peer, you can check NCCL warnings for failure reason "
    "and see if there is connection closure by a peer."
)
IB_COMPLETION = (
    "algo-2:77:99 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.1.2<41234> "
    "with error 12, opcode 0, len 0, vendor err 129"
)
EFA_COMPLETION = (
    "algo-2:288:390 [1] NCCL WARN NET/OFI Request 0x7f3a2c01e0c0 completed with error. RC: 21. "
    "Error: 4 (Interrupted system call). Completed length: 0"
)


@pytest.mark.parametrize(
    "peer_lines",
    [(NCCL_210_WRAPPER, NCCL_210_SYSTEM), (IB_COMPLETION,), (EFA_COMPLETION,)],
    ids=["nccl-2.10-system-error", "ib-completion", "efa-completion"],
)
def test_a_code_bug_on_one_host_is_not_the_interconnect_error_the_surviving_host_prints(
    peer_lines: tuple[str, ...],
) -> None:
    # Given algo-1's code raised a KeyError and algo-2, seconds later, prints an NCCL system error (the
    # older NCCL's wording of a peer's exit) or its transport's completion error
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host(
            "algo-1",
            ("step 900 loss 1.9", AT),
            ("Traceback (most recent call last):", AT + timedelta(seconds=1)),
            (KEY_ERROR, AT + timedelta(seconds=1)),
        ),
        host("algo-2", ("step 900 loss 1.9", AT), *((line, AT + timedelta(seconds=3)) for line in peer_lines)),
    )
    # Then the exception explains it: user code on algo-1, never resumed
    assert (diagnosis.failure_class, diagnosis.signature, diagnosis.host) == (
        "user-code",
        "python-exception",
        "algo-1",
    )
    assert diagnosis.verdict is Verdict.SKIP


@pytest.mark.parametrize("line", [IB_COMPLETION, EFA_COMPLETION])
def test_a_transport_error_with_no_user_exception_anywhere_is_still_interconnect(line: str) -> None:
    # Given algo-2's transport failed while every host trained, and no host raised anything of its own
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host("algo-1", ("step 900 loss 1.9", AT), ("step 901 loss 1.9", AT + timedelta(seconds=50))),
        host("algo-2", ("step 900 loss 1.9", AT), (line, AT + timedelta(seconds=30))),
    )
    # Then it is resumed as interconnect, on the host that reported it
    assert diagnosis.failure_class == "interconnect" and diagnosis.verdict is Verdict.RESUME
    assert diagnosis.host == "algo-2"


@pytest.mark.parametrize("line", [IB_COMPLETION, EFA_COMPLETION])
def test_sagemaker_s_own_internal_error_does_not_explain_a_transport_error_as_user_code(line: str) -> None:
    # Given a job SageMaker reports with its own InternalServerError, whose algo-2 transport failed, every other
    # host trained on
    diagnosis = diagnose(
        "InternalServerError: We encountered an internal error. Please try again.",
        host("algo-1", ("step 900 loss 1.9", AT), ("step 901 loss 1.9", AT + timedelta(seconds=50))),
        host("algo-2", ("step 900 loss 1.9", AT), (line, AT + timedelta(seconds=30))),
    )
    # Then SageMaker's error is no Python exception that explains the transport's: both are resumable, and the
    # fault on algo-2 is resumed as interconnect (its host kept for the lemon rule)
    assert diagnosis.failure_class == "interconnect" and diagnosis.verdict is Verdict.RESUME
    assert diagnosis.host == "algo-2"


def test_a_library_s_internal_server_error_is_still_a_python_exception() -> None:
    # Given the user's script died of an HTTP client's 500, as its traceback names it (module and class)
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host("algo-1", ("step 900 loss 1.9", AT), ("openai.InternalServerError: Error code: 500", AT)),
    )
    # Then it is the user's code, as any exception the script raised
    assert (diagnosis.failure_class, diagnosis.signature) == ("user-code", "python-exception")


def test_the_script_s_own_internal_server_error_still_explains_a_transport_error() -> None:
    # Given the training script defines its own InternalServerError (Python names a class of __main__ bare), which
    # algo-2 raised before algo-1's transport reported the exit
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host("algo-1", ("step 900 loss 1.9", AT), (EFA_COMPLETION, AT + timedelta(seconds=30))),
        host("algo-2", ("step 900 loss 1.9", AT), ("InternalServerError: reward model returned 500", AT)),
    )
    # Then it is the user's code on algo-2: only SageMaker's own words are not the script's exception
    assert (diagnosis.failure_class, diagnosis.host) == ("user-code", "algo-2")


def test_an_exception_after_a_transport_error_on_another_host_does_not_explain_it() -> None:
    # Given algo-2's IB transport failed first, and algo-1 raised only afterwards (the error's aftermath)
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host("algo-1", ("step 900 loss 1.9", AT), ("RuntimeError: step failed", AT + timedelta(seconds=40))),
        host("algo-2", ("step 900 loss 1.9", AT), (IB_COMPLETION, AT + timedelta(seconds=30))),
    )
    assert diagnosis.failure_class == "interconnect" and diagnosis.host == "algo-2"


def test_an_nccl_system_error_after_a_peer_fell_silent_is_interconnect() -> None:
    # Given algo-2 fell silent 10 minutes before algo-1 printed the older NCCL's system error
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host(
            "algo-1",
            ("step 900 loss 1.9", AT),
            (NCCL_210_WRAPPER, AT + timedelta(minutes=10)),
            (NCCL_210_SYSTEM, AT + timedelta(minutes=10)),
        ),
        host("algo-2", ("step 900 loss 1.9", AT)),
    )
    # Then the silent peer corroborates it: interconnect, keyed on algo-2
    assert diagnosis.failure_class == "interconnect" and diagnosis.verdict is Verdict.RESUME
    assert diagnosis.signature == "nccl-system-error" and diagnosis.lemon_key == "interconnect@algo-2"


def test_an_nccl_system_error_with_no_peer_failure_is_unknown() -> None:
    # Given every host wrote until algo-2's NCCL system error (a peer's exit, or a socket misconfiguration
    # such as a wrong NCCL_SOCKET_IFNAME: a clone repeats either)
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host("algo-1", ("step 900 loss 1.9", AT), ("step 901 loss 1.9", AT + timedelta(seconds=50))),
        host("algo-2", ("step 900 loss 1.9", AT), (NCCL_210_SYSTEM, AT + timedelta(seconds=55))),
    )
    assert diagnosis.failure_class == "unknown" and diagnosis.verdict is Verdict.SKIP


WATCHDOG = (
    "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4100, OpType=ALLREDUCE, "
    "Timeout(ms)=600000) ran for 600044 milliseconds before timing out."
)
# PyTorch releases before DistBackendError raise the survivor's NCCL failure as a RuntimeError whose
# first line carries NCCL's error string and whose next line is the consequence's own text.
NCCL_212_WRAPPER = (
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, "
    "remote process exited or there was a network error, NCCL version 2.14.3"
)


def silent_peer_and(*survivor: str) -> tuple[HostLog, HostLog]:
    """algo-1 fell silent 11 minutes before algo-2 (the survivor) wrote ``survivor``."""
    return (
        host("algo-2", ("step 4100 loss 1.83", AT - timedelta(minutes=11)), *((line, AT) for line in survivor)),
        host("algo-1", ("step 4100 loss 1.83", AT - timedelta(minutes=11))),
    )


@pytest.mark.parametrize(
    ("reason", "survivor"),
    [
        (
            'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "RuntimeError: NCCL communicator '
            "was aborted on rank 1. Original reason for failure was: " + WATCHDOG + '"',
            (WATCHDOG,),
        ),
        (ALGORITHM_ERROR, (NCCL_212_WRAPPER, NCCL_REMOTE)),
        (
            'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "'
            + NCCL_212_WRAPPER
            + "\n"
            + NCCL_REMOTE
            + '"',
            (NCCL_REMOTE,),
        ),
        (
            'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "RuntimeError: the training '
            'step did not complete"',
            ("RuntimeError: the training step did not complete", WATCHDOG),
        ),
        ('AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "' + NCCL_212_WRAPPER, (NCCL_REMOTE,)),
    ],
    ids=[
        "reason-quotes-the-watchdog",
        "log-wrapper",
        "reason-quotes-the-wrapper",
        "reason-copies-the-survivor",
        "reason-quotes-the-wrapper-alone",
    ],
)
def test_the_survivors_own_exception_does_not_explain_its_consequence(
    reason: str, survivor: tuple[str, ...]
) -> None:
    # Given algo-1 fell silent without a word and algo-2 then reported the collective's failure, with the
    # exception line its own report is raised as (in its log, or as SageMaker's FailureReason quotes it)
    diagnosis = diagnose(reason, *silent_peer_and(*survivor))
    # Then the silent peer corroborates the consequence: interconnect on algo-1, resumed
    assert (diagnosis.failure_class, diagnosis.verdict) == ("interconnect", Verdict.RESUME)
    assert diagnosis.lemon_key == "interconnect@algo-1"


def test_the_wrapper_line_right_before_a_consequence_in_the_failure_reason_does_not_explain_it() -> None:
    # Given a team's transport plugin (a consequence) whose failure PyTorch raises as an NCCL error, the
    # FailureReason quoting both lines, and algo-1 silent before algo-2 reported it
    plugin = Signature.model_validate(
        {
            "id": "plugin-peer-lost",
            "class": "interconnect",
            "role": "consequence",
            "pattern": r"MYPLUGIN: transport to rank \d+ lost",
            "where": "any",
        }
    )
    wrapper = (
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, internal error - please report this issue to "
        "the NCCL developers, NCCL version 2.21.5"
    )
    reason = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "' + wrapper
    reason += '\nMYPLUGIN: transport to rank 12 lost"'
    diagnosis = diagnose(
        reason,
        *silent_peer_and("MYPLUGIN: transport to rank 12 lost"),
        taxonomy=builtin_taxonomy().with_team([plugin], {}),
    )
    # Then the wrapper is the report's own line: the silent peer decides
    assert diagnosis.failure_class == "interconnect" and diagnosis.lemon_key == "interconnect@algo-1"


def test_an_exception_on_the_reporting_host_does_not_explain_its_consequence() -> None:
    # Given algo-2 raised before it reported its peer gone, and algo-1 had fallen silent well before both
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host(
            "algo-2",
            ("step 4100 loss 1.83", AT - timedelta(minutes=11)),
            ("RuntimeError: allreduce did not complete", AT - timedelta(seconds=1)),
            (NCCL_REMOTE, AT),
        ),
        host("algo-1", ("step 4100 loss 1.83", AT - timedelta(minutes=11))),
    )
    assert diagnosis.failure_class == "interconnect" and diagnosis.lemon_key == "interconnect@algo-1"


def test_a_quoted_exception_no_log_holds_still_explains_the_consequence() -> None:
    # Given SageMaker quotes a KeyError that no log tail read holds (another host's, beyond the tail), and a
    # silent peer would otherwise corroborate algo-2's report
    reason = "AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"KeyError: 'label'\""
    diagnosis = diagnose(reason, *silent_peer_and(NCCL_REMOTE))
    # Then it cannot be shown to be the reporter's own: user code, not resumed
    assert diagnosis.failure_class == "user-code" and diagnosis.verdict is Verdict.SKIP


def test_a_user_exception_before_a_watchdog_timeout_explains_it_even_after_a_silence() -> None:
    # Given algo-1 raised a KeyError and fell silent, and algo-2's watchdog fired 20 minutes later
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host("algo-1", ("step 900 loss 1.9", AT), (KEY_ERROR, AT + timedelta(seconds=1))),
        host(
            "algo-2",
            ("step 900 loss 1.9", AT),
            (
                "[Rank 8] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9) ran for 1200000 milliseconds",
                AT + timedelta(minutes=20),
            ),
        ),
    )
    # Then algo-1 fell silent after its own exception, not without a word: user code, not interconnect
    assert diagnosis.failure_class == "user-code" and diagnosis.host == "algo-1"


def test_an_exception_written_after_the_peer_went_away_does_not_explain_it() -> None:
    # Given algo-2 fell silent, then algo-1 reported its peer gone and only then raised (the consequence's
    # own aftermath)
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host(
            "algo-1",
            ("step 900 loss 1.9", AT),
            (NCCL_REMOTE, AT + timedelta(minutes=10)),
            ("RuntimeError: the training step did not complete", AT + timedelta(minutes=10, seconds=1)),
        ),
        host("algo-2", ("step 900 loss 1.9", AT)),
    )
    assert diagnosis.failure_class == "interconnect" and diagnosis.host == "algo-2"


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        (
            'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "torch.distributed.DistBackendError: '
            "NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL "
            "version 2.21.5\n" + NCCL_REMOTE + '"',
            ResumeCode.UNKNOWN,
        ),
        (
            "AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"KeyError: 'label'\"\n"
            + NCCL_REMOTE,
            ResumeCode.USER_CODE,
        ),
        (
            'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "'
            + NCCL_210_WRAPPER
            + "\n"
            + NCCL_210_SYSTEM
            + '"',
            ResumeCode.UNKNOWN,
        ),
    ],
)
def test_a_peer_gone_in_the_failure_reason_alone_is_never_resumed(reason: str, code: ResumeCode) -> None:
    # Given the logs could not be read and SageMaker's FailureReason quotes a rank's ncclRemoteError
    (decision,) = decide(
        failed_description(reason=reason), FailureEvidence.unread("GetLogEvents failed (ThrottlingException)")
    ).decisions
    # Then nothing corroborates it (no time, no peer), and a quoted exception explains it: not resumed
    assert decision.action is Action.NONE and decision.code == code
    assert decision.evidence["diagnosis"]["basis"] == "failure-reason"


@pytest.mark.parametrize(("total", "code"), [(12, ResumeCode.INSUFFICIENT_EVIDENCE), (2, ResumeCode.UNKNOWN)])
def test_a_peer_gone_with_hosts_left_unread_is_insufficient_evidence_not_unknown(
    total: int, code: ResumeCode
) -> None:
    # Given two hosts' logs read, both reporting a peer's exit (ncclRemoteError) that no peer read explains, of a
    # job of ``total`` hosts
    read = (host("algo-1", (NCCL_REMOTE, AT)), host("algo-2", (NCCL_REMOTE, AT)))
    failure = FailureEvidence(hosts=read, logs_read=True, hosts_total=total)
    # When auto-resume decides
    (decision,) = decide(failed_description(reason=ALGORITHM_ERROR), failure).decisions
    # Then with hosts left unread the failing peer may be among them: insufficient evidence, not a verdict
    # of "unknown"; with every host read it is unknown. Neither is resumed
    assert decision.action is Action.NONE and decision.code == code
    assert decision.evidence["diagnosis"].get("hosts_unread", 0) == total - 2


def test_the_earliest_cause_wins_when_lines_are_timed() -> None:
    # Given a GPU fault on algo-3 and, later, a data loader error on algo-1 that it provoked
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host(
            "algo-1",
            (
                "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/shm/batch'",
                AT + timedelta(seconds=30),
            ),
        ),
        host("algo-3", ("RuntimeError: CUDA error: uncorrectable ECC error encountered", AT)),
    )
    assert diagnosis.failure_class == "hardware" and diagnosis.host == "algo-3"
    assert diagnosis.conflicts == ("user-code",)


def test_without_timestamps_precedence_puts_user_code_first() -> None:
    diagnosis = diagnose(
        ALGORITHM_ERROR,
        host("algo-1", "FileNotFoundError: [Errno 2] No such file or directory: 'x'"),
        host("algo-3", "RuntimeError: CUDA error: uncorrectable ECC error encountered"),
    )
    assert diagnosis.failure_class == "user-code" and diagnosis.conflicts == ("hardware",)


def test_unreadable_logs_leave_the_failure_reason_alone_and_say_so() -> None:
    diagnosis = classify(
        "InternalServerError: We encountered an internal error.",
        FailureEvidence.unread("GetLogEvents failed (ThrottlingException)"),
        builtin_taxonomy(),
    )
    assert diagnosis.failure_class == "sagemaker-internal" and diagnosis.basis == "failure-reason"
    assert any("ThrottlingException" in note for note in diagnosis.notes)
    assert any("FailureReason alone" in note for note in diagnosis.notes)


def test_nothing_recognised_is_unknown_and_never_resumes() -> None:
    diagnosis = diagnose(ALGORITHM_ERROR, host("algo-1", "step 1 loss 9.0", "Killed by an unforeseen event"))
    assert diagnosis.failure_class == "unknown" and diagnosis.verdict is Verdict.SKIP


def test_a_team_signature_and_verdict_change_the_outcome_but_not_the_defaults() -> None:
    mine = Signature.model_validate(
        {
            "id": "plugin-transport",
            "class": "interconnect",
            "pattern": r"MYPLUGIN: transport to rank \d+ lost",
            "where": "log",
        }
    )
    taxonomy = builtin_taxonomy().with_team([mine], {"unknown": Verdict.RESUME})
    assert (
        diagnose(
            ALGORITHM_ERROR, host("algo-4", "MYPLUGIN: transport to rank 12 lost"), taxonomy=taxonomy
        ).failure_class
        == "interconnect"
    )
    assert diagnose(ALGORITHM_ERROR, host("algo-1", "hm"), taxonomy=taxonomy).verdict is Verdict.RESUME
    oom = diagnose(
        ALGORITHM_ERROR, host("algo-1", "torch.OutOfMemoryError: CUDA out of memory."), taxonomy=taxonomy
    )
    assert oom.failure_class == "user-code" and oom.verdict is Verdict.SKIP


def test_exit_codes_and_hosts_read_are_part_of_the_evidence() -> None:
    diagnosis = diagnose(ALGORITHM_ERROR, host("algo-1", "x"), host("algo-2", "y"))
    shown = diagnosis.evidence()
    assert shown["exit_codes"] == [1] and shown["hosts_read"] == ["algo-1", "algo-2"]


@pytest.mark.parametrize(
    ("stream", "expected"),
    [("job/algo-2-1700000000", "algo-2"), ("job/algo-12-1700000000", "algo-12"), ("job/algo-1", "algo-1")],
)
def test_the_host_position_is_the_stream_name_without_its_start_time(stream: str, expected: str) -> None:
    assert host_of_stream(stream, "job") == expected


# ---- the decision on the diagnosis -------------------------------------------------------------------


def decide(
    description: dict[str, Any],
    failure: FailureEvidence | None,
    *,
    tags: dict[str, str] | None = None,
    checkpoint: CheckpointProgress | None = None,
    policy: ResumePolicy | None = None,
    now: datetime = NOW,
) -> CloneDecision:
    return resume_of(description, now, tags=tags, policy=policy, failure=failure, checkpoint=checkpoint)


ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"


def test_a_gpu_fault_reported_as_algorithm_error_is_resumed_with_its_evidence() -> None:
    # Given a job SageMaker reports as AlgorithmError whose algo-2 log shows an ECC error
    description = failed_description(reason=ALGORITHM_ERROR)
    # When auto-resume decides with the hosts' tails
    (decision,) = decide(
        description, evidence(host("algo-2", "step 10", ECC), host("algo-1", "step 10"))
    ).decisions
    # Then it is resumed, and the evidence names the class, the host and the line
    assert decision.action is Action.CLONE and decision.code == ResumeCode.CLONE
    shown = decision.evidence["diagnosis"]
    assert (shown["class"], shown["host"], shown["signature"]) == ("hardware", "algo-2", "cuda-ecc-uncorrectable")
    assert shown["lines"][0] == {"host": "algo-2", "line": ECC}
    assert decision.request is not None
    tags = {tag["Key"]: tag["Value"] for tag in decision.request["Tags"]}
    assert tags[TAG_FAILURE] == "hardware@algo-2"  # what the next generation compares with


def test_a_code_bug_is_never_resumed_even_when_the_reason_looks_transient_to_a_legacy_pattern() -> None:
    policy = ResumePolicy.model_validate({"transient_patterns": {"algorithm-error": "^AlgorithmError"}})
    description = failed_description(reason=ALGORITHM_ERROR)
    oom = evidence(host("algo-1", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"))
    (decision,) = decide(description, oom, policy=policy).decisions
    assert decision.code == ResumeCode.USER_CODE


def lineage(attempt: int, failure: str | None = None, strikes: int = 0) -> dict[str, str]:
    """The tags of a clone auto-resume made (attempt ``attempt``)."""
    tags = {**TAGS, TAG_ROOT: "llm-sft-1", TAG_ATTEMPT: str(attempt), TAG_REASON: "failed-transient"}
    if failure:
        tags[TAG_FAILURE] = failure
    if strikes:
        tags[TAG_STRIKES] = str(strikes)
    return tags


def test_a_lemon_counts_double_against_the_budget() -> None:
    # Given the first clone failed with the same GPU fault on the same host position as its source
    description = failed_description("llm-sft-1-r1", reason=ALGORITHM_ERROR)
    same = evidence(host("algo-2", ECC))
    result = decide(description, same, tags=lineage(1, "hardware@algo-2"), policy=ResumePolicy(max_attempts=3))
    # Then it is resumed (2 of 3 + 1 strike = 3), and the clone carries the strike
    (decision,) = result.decisions
    assert decision.code == ResumeCode.CLONE and decision.evidence["repeated_fault"] == "hardware@algo-2"
    tags = {tag["Key"]: tag["Value"] for tag in decision.request["Tags"]}  # type: ignore[index]
    assert tags[TAG_STRIKES] == "1"
    # And when it recurs once more on the same host, the budget is spent one attempt early
    again = failed_description("llm-sft-1-r2", reason=ALGORITHM_ERROR)
    (spent,) = decide(
        again, same, tags=lineage(2, "hardware@algo-2", strikes=1), policy=ResumePolicy(max_attempts=3)
    ).decisions
    assert spent.code == ResumeCode.BUDGET_SPENT and spent.evidence["repeat_faults"] == 2


def test_the_same_fault_on_another_host_is_not_a_lemon() -> None:
    description = failed_description("llm-sft-1-r1", reason=ALGORITHM_ERROR)
    (decision,) = decide(description, evidence(host("algo-5", ECC)), tags=lineage(1, "hardware@algo-2")).decisions
    assert decision.code == ResumeCode.CLONE and "repeated_fault" not in decision.evidence


HARDWARE = evidence(host("algo-2", ECC))


def test_no_checkpoint_written_during_the_failed_attempt_skips_by_default() -> None:
    progress = CheckpointProgress(checked=True, written=0, total=4)
    (decision,) = decide(failed_description(reason=ALGORITHM_ERROR), HARDWARE, checkpoint=progress).decisions
    assert decision.code == ResumeCode.NO_CHECKPOINT_PROGRESS
    assert decision.evidence["checkpoint_progress"] == "none" and decision.evidence["checkpoint_objects"] == 4


def test_without_progress_the_policy_may_resume_anyway_and_says_from_what() -> None:
    policy = ResumePolicy(require_checkpoint_progress=False)
    older = CheckpointProgress(checked=True, written=0, total=4)
    (decision,) = decide(
        failed_description(reason=ALGORITHM_ERROR), HARDWARE, checkpoint=older, policy=policy
    ).decisions
    assert decision.code == ResumeCode.CLONE_WITHOUT_PROGRESS and "older checkpoint" in decision.reason
    empty = CheckpointProgress(checked=True, written=0, total=0)
    (scratch,) = decide(
        failed_description(reason=ALGORITHM_ERROR), HARDWARE, checkpoint=empty, policy=policy
    ).decisions
    assert scratch.code == ResumeCode.CLONE_WITHOUT_PROGRESS and "from scratch" in scratch.reason


def test_an_attempt_that_never_trained_is_not_expected_to_have_written_a_checkpoint() -> None:
    # Given a clone that failed on capacity while Starting (its lineage qualifies it)
    description = failed_description("llm-sft-1-r1", trained=timedelta(0), reason="CapacityError: no capacity")
    nothing = CheckpointProgress(checked=True, written=0, total=5)
    (decision,) = decide(description, FailureEvidence(), tags=lineage(1), checkpoint=nothing).decisions
    assert decision.code == ResumeCode.CLONE and decision.evidence["checkpoint_progress"] == "not expected"


def test_progress_written_during_the_attempt_resumes() -> None:
    progress = CheckpointProgress(checked=True, written=2, total=6, latest=AT)
    (decision,) = decide(failed_description(reason=ALGORITHM_ERROR), HARDWARE, checkpoint=progress).decisions
    assert decision.code == ResumeCode.CLONE and decision.evidence["checkpoint_objects_written"] == 2


def test_an_unreadable_checkpoint_listing_never_clones_by_default() -> None:
    unreadable = CheckpointProgress.unknown("ListObjectsV2 on bucket failed (AccessDenied)")
    (decision,) = decide(failed_description(reason=ALGORITHM_ERROR), HARDWARE, checkpoint=unreadable).decisions
    assert decision.action is Action.NONE and decision.code == ResumeCode.CHECKPOINT_UNREADABLE
    assert decision.evidence["checkpoint_progress"] == "unreadable"
    policy = ResumePolicy(require_checkpoint_progress=False)
    (anyway,) = decide(
        failed_description(reason=ALGORITHM_ERROR), HARDWARE, checkpoint=unreadable, policy=policy
    ).decisions
    assert anyway.code == ResumeCode.CLONE_UNCHECKED


def test_a_location_the_deployment_does_not_check_resumes_on_its_checkpoint_config() -> None:
    off = CheckpointProgress.out_of_scope("this deployment names no checkpoint bucket")
    (decision,) = decide(failed_description(reason=ALGORITHM_ERROR), HARDWARE, checkpoint=off).decisions
    assert decision.code == ResumeCode.CLONE and decision.evidence["checkpoint_progress"] == "not checked"
