"""Child process of the cold-start figure: run by the Lambda runtime's Python in a fresh interpreter.

Not imported by the bench itself (it runs on python3.12 with only the built artifacts on sys.path).
argv: ``handler <module>`` or ``baseline <service,service,...>``.
Prints one JSON line: when init ended (monotonic), init wall and CPU time, the process's CPU time
(interpreter start included), peak RSS.
"""

import time

_START = time.monotonic_ns()
_START_CPU = time.process_time()

import importlib  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402


def _handler(module: str) -> int:
    handler = importlib.import_module(module)
    root = importlib.import_module("sagemaker_governance.composition.root").current()
    # What the first invocation builds: the composition root from the environment, and the function's
    # service (``service``, imported by every handler module from its builder) with its clients.
    handler.service(root)
    return int(root.client_count)


def _baseline(services: str) -> int:
    # The least a function calling these services must do: import boto3 and create its clients
    # (with the same retry configuration as the composition root).
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=20)
    clients = [boto3.client(name, config=config) for name in services.split(",")]  # type: ignore[call-overload]
    return len(clients)


def main() -> None:
    clients = _handler(sys.argv[2]) if sys.argv[1] == "handler" else _baseline(sys.argv[2])
    end = time.monotonic_ns()
    cpu = time.process_time()
    print(
        json.dumps(
            {
                "ready_ns": end,
                "init_ms": (end - _START) / 1e6,
                "init_cpu_ms": (cpu - _START_CPU) * 1000,
                "process_cpu_ms": cpu * 1000,
                "clients": clients,
                "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "python": ".".join(map(str, sys.version_info[:3])),
            }
        )
    )


main()
