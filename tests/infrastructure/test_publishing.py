"""The Serverless Application Repository metadata (``AWS::ServerlessRepo::Application``) is publishable:
the constraints the SAR API and the SAM metadata reference state for each field hold, the files it names
exist (``sam package`` uploads them) and its version and license agree with the Python package.

Field limits: AWS SAM developer guide, "AWS SAM template Metadata section properties"
(serverless-sam-template-publishing-applications-metadata-properties.html), and the
``CreateApplication`` request of the Serverless Application Repository API.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIVE_MB = 5 * 1024 * 1024
# Semantic Versioning 2.0.0 (semver.org), without build metadata.
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$")


@pytest.fixture(scope="module")
def app(template: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = template["Metadata"]["AWS::ServerlessRepo::Application"]
    return metadata


@pytest.fixture(scope="module")
def project() -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def test_required_fields_meet_the_sar_limits(app: dict[str, Any]) -> None:
    # Given the metadata, Then each field SAR requires is there and within its documented pattern and length.
    assert re.fullmatch(r"[a-zA-Z0-9\-]+", app["Name"]) and 1 <= len(app["Name"]) <= 140
    assert 1 <= len(app["Description"]) <= 256
    assert re.fullmatch(r"[a-z0-9](([a-z0-9]|-(?!-))*[a-z0-9])?", app["Author"]) and len(app["Author"]) <= 127
    assert 1 <= len(app["Labels"]) <= 10
    for label in app["Labels"]:
        assert re.fullmatch(r"[a-zA-Z0-9+\-_:/@]+", label) and len(label) <= 127


def test_no_intrinsic_functions(app: dict[str, Any]) -> None:
    # SAR reads the metadata literally: an intrinsic function would be published as its JSON.
    assert all(isinstance(v, (str, list)) for v in app.values())
    assert all(isinstance(label, str) for label in app["Labels"])


def test_version_and_license_agree_with_the_package(app: dict[str, Any], project: dict[str, Any]) -> None:
    # A public SAR application needs a SemanticVersion and a license: ours are the package's.
    assert SEMVER.match(app["SemanticVersion"])
    assert app["SemanticVersion"] == project["version"]
    assert app["SpdxLicenseId"] == project["license"]  # an SPDX expression (PEP 639)
    assert ROOT / app["LicenseUrl"] in {ROOT / f for f in project["license-files"]}


def test_license_and_readme_are_local_files_sam_package_uploads(app: dict[str, Any]) -> None:
    license_file = ROOT / app["LicenseUrl"]
    readme = ROOT / app["ReadmeUrl"]
    assert license_file.is_file() and readme.is_file()
    assert license_file.stat().st_size <= FIVE_MB and readme.stat().st_size <= FIVE_MB
    assert "Apache License" in license_file.read_text() and "Version 2.0" in license_file.read_text()


def test_urls_are_https(app: dict[str, Any]) -> None:
    for key in ("HomePageUrl", "SourceCodeUrl"):
        assert app[key].startswith("https://"), key
