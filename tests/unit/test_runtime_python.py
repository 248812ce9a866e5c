"""Finding the Lambda runtime's interpreter for `sam build` whatever PYENV_VERSION says (issue 16 item 9)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from smgov.runtime_python import RuntimePythonNotFound, build_env, find_runtime_python, template_runtime

# A pyenv shim with PYENV_VERSION naming other versions: prints pyenv's error and exits 127.
BROKEN_SHIM = "#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\nexit 127\n"


def fake_python(path: Path, version: tuple[int, int]) -> Path:
    """An executable that answers the finder's probe like a real interpreter of ``version`` would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {version[0]} {version[1]} {path}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def shim_dir(tmp_path: Path) -> Path:
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "python3.12").write_text(BROKEN_SHIM)
    (shims / "python3.12").chmod(0o755)
    return shims


def test_a_failing_shim_on_path_is_skipped_for_pyenvs_installed_version(tmp_path: Path) -> None:
    # Given PATH holding only a pyenv shim that fails (PYENV_VERSION=3.11.7 in the environment) and
    # pyenv's root holding 3.12.1 and 3.12.9,
    root = tmp_path / "pyenv"
    fake_python(root / "versions" / "3.12.1" / "bin" / "python3.12", (3, 12))
    newest = fake_python(root / "versions" / "3.12.9" / "bin" / "python3.12", (3, 12))
    env = {"PATH": str(shim_dir(tmp_path)), "PYENV_ROOT": str(root), "PYENV_VERSION": "3.11.7"}

    # When the finder looks for python3.12, then it returns the newest installed 3.12, not the shim.
    assert find_runtime_python("python3.12", env) == newest


def test_an_interpreter_of_another_version_under_the_name_is_refused(tmp_path: Path) -> None:
    # Given a `python3.12` on PATH that is really 3.11 and no pyenv (uv absent from PATH too),
    fake_python(tmp_path / "bin" / "python3.12", (3, 11))
    env = {"PATH": str(tmp_path / "bin"), "PYENV_ROOT": str(tmp_path / "none"), "HOME": str(tmp_path)}

    # (uv, the last fallback, finds nothing either: no managed install, no download)
    env |= {"UV_PYTHON_INSTALL_DIR": str(tmp_path / "uv"), "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"}

    # When the finder looks for python3.12, then it refuses, naming what it tried.
    with pytest.raises(RuntimePythonNotFound, match=r"tried: .*bin/python3\.12"):
        find_runtime_python("python3.12", env)


def test_build_env_puts_the_real_interpreter_first_on_path(tmp_path: Path) -> None:
    # Given a broken shim first on PATH and a working install in pyenv's root,
    root = tmp_path / "pyenv"
    real = fake_python(root / "versions" / "3.12.1" / "bin" / "python3.12", (3, 12))
    env = {"PATH": str(shim_dir(tmp_path)), "PYENV_ROOT": str(root), "PYENV_VERSION": "3.11.7"}

    # When the environment for `sam build` is made, then `python3.12` resolves to the working one.
    built = build_env(env, "python3.12")
    assert built["PATH"].split(os.pathsep)[0] == str(real.parent)
    assert built["PYENV_VERSION"] == "3.11.7"  # left alone: the real executable ignores it


def test_this_machines_runtime_python_is_found_with_a_foreign_pyenv_version() -> None:
    # Given the environment of a process started by a pyenv Python of another version,
    env = {**os.environ, "PYENV_VERSION": f"{sys.version_info[0]}.{sys.version_info[1]}.0-not-installed"}

    # When `python -m smgov.runtime_python` runs (what `make build` calls), then it prints an
    # interpreter that really is the template's runtime version.
    out = subprocess.run(
        [sys.executable, "-m", "smgov.runtime_python"], env=env, capture_output=True, text=True, check=True
    )
    python = out.stdout.strip()
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info[:2])"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == str(runtime_version())


def runtime_version() -> tuple[int, int]:
    major, minor = template_runtime().removeprefix("python").split(".")
    return int(major), int(minor)
