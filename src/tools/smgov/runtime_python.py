"""The Lambda runtime's interpreter on this machine (``python3.12`` for ``Runtime: python3.12``).

``sam build`` looks the runtime's interpreter up on ``PATH`` and the build byte-compiles with it. A
``python3.12`` on ``PATH`` is not enough: under pyenv it is a shim that fails whenever ``PYENV_VERSION``
(set in every process a pyenv Python starts) names other versions. So each candidate is *run* and
accepted only when it reports the runtime's version; the answer is the real executable behind it
(``sys.executable``), which works whatever ``PYENV_VERSION`` says. Candidates, in order: ``PATH``,
pyenv's installed versions (``$PYENV_ROOT`` or ``~/.pyenv``), then ``uv python find``.

``python -m smgov.runtime_python`` prints the interpreter (the Makefile's ``make build`` uses it);
:func:`build_env` is the environment for a ``sam build`` subprocess (the interpreter's directory first on
``PATH``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

_RUNTIME = re.compile(r"^python(\d+)\.(\d+)$")
_PROBE = "import sys; print(sys.version_info[0], sys.version_info[1], sys.executable)"


class RuntimePythonNotFound(RuntimeError):
    pass


def template_runtime() -> str:
    """The template's ``Globals.Function.Runtime`` (e.g. ``python3.12``)."""
    from smgov.cfn_template import load_template

    return str(load_template()["Globals"]["Function"]["Runtime"])


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.\-]", path.parents[1].name))


def _candidates(runtime: str, env: Mapping[str, str]) -> Iterator[str]:
    for directory in env.get("PATH", "").split(os.pathsep):
        if directory and (Path(directory) / runtime).is_file():
            yield str(Path(directory) / runtime)
    root = Path(env.get("PYENV_ROOT") or Path(env.get("HOME", str(Path.home()))) / ".pyenv")
    version = runtime.removeprefix("python")
    installed = sorted((root / "versions").glob(f"{version}*/bin/{runtime}"), key=_version_key, reverse=True)
    yield from (str(p) for p in installed)
    uv = shutil.which("uv", path=env.get("PATH")) or str(Path(sys.executable).with_name("uv"))
    if Path(uv).is_file():
        found = _run([uv, "python", "find", version], env)
        if found:
            yield found.strip()


def _run(argv: list[str], env: Mapping[str, str]) -> str | None:
    try:
        completed = subprocess.run(argv, capture_output=True, text=True, env=dict(env), check=False, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout if completed.returncode == 0 else None


def find_runtime_python(runtime: str | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The real executable of the runtime's Python, or :class:`RuntimePythonNotFound` saying where it looked."""
    runtime = runtime or template_runtime()
    match = _RUNTIME.match(runtime)
    if match is None:
        raise RuntimePythonNotFound(f"{runtime!r} is not a Python Lambda runtime")
    wanted = (int(match[1]), int(match[2]))
    env = dict(os.environ if env is None else env)
    tried: list[str] = []
    for candidate in _candidates(runtime, env):
        tried.append(candidate)
        out = _run([candidate, "-c", _PROBE], env)
        if not out:
            continue
        major, minor, executable = out.strip().split(" ", 2)
        if (int(major), int(minor)) == wanted:
            return Path(executable)
    raise RuntimePythonNotFound(
        f"no working {runtime} found (tried: {', '.join(tried) or 'nothing on PATH, in pyenv or uv'}); "
        f"install Python {wanted[0]}.{wanted[1]} (e.g. `pyenv install {wanted[0]}.{wanted[1]}`)"
    )


def build_env(base: Mapping[str, str] | None = None, runtime: str | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the runtime's interpreter first on ``PATH``."""
    env = dict(os.environ if base is None else base)
    python = find_runtime_python(runtime, env)
    env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
    return env


def main() -> int:
    try:
        print(find_runtime_python())
    except RuntimePythonNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
