"""Size of what ``sam build`` produced (``.aws-sam/build``): each function and the layer, zipped the way
``sam deploy`` packages them (deflate), and unzipped against Lambda's 250 MB limit (function + layers)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

from smgov.cfn_template import REPO_ROOT, load_template

UNZIPPED_LIMIT_MB = 250  # function + all its layers, unzipped
DIRECT_UPLOAD_LIMIT_MB = 50  # a zip uploaded directly (sam deploy goes through S3)


def _measure(directory: Path) -> dict[str, Any]:
    files = [p for p in sorted(directory.rglob("*")) if p.is_file()]
    raw = sum(p.stat().st_size for p in files)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(directory))
    return {
        "files": len(files),
        "pyc_files": sum(1 for p in files if p.suffix == ".pyc"),
        "unzipped_mb": round(raw / 1e6, 2),
        "zipped_mb": round(buffer.tell() / 1e6, 2),
    }


def measure(build_dir: Path | None = None) -> dict[str, Any]:
    build = build_dir or REPO_ROOT / ".aws-sam" / "build"
    resources = load_template()["Resources"]
    functions = [k for k, v in resources.items() if v["Type"] == "AWS::Serverless::Function"]
    layers = [k for k, v in resources.items() if v["Type"] == "AWS::Serverless::LayerVersion"]
    missing = [name for name in [*functions, *layers] if not (build / name).is_dir()]
    if missing:
        raise FileNotFoundError(f"{build}: {missing} not built (run `make build`)")
    out: dict[str, Any] = {name: _measure(build / name) for name in [*functions, *layers]}
    layer_mb = sum(out[name]["unzipped_mb"] for name in layers)
    for name in functions:
        total = out[name]["unzipped_mb"] + layer_mb
        out[name]["with_layers_unzipped_mb"] = round(total, 2)
        out[name]["share_of_250mb_limit"] = round(total / UNZIPPED_LIMIT_MB, 3)
    return {
        "build_dir": str(build.relative_to(REPO_ROOT) if build.is_relative_to(REPO_ROOT) else build),
        "limit_unzipped_mb": UNZIPPED_LIMIT_MB,
        "artifacts": out,
    }
