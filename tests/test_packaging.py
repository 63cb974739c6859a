"""The version is written once (kvplan/__init__.py) and the licence pyproject declares is the file shipped."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import kvplan
from tests.conftest import run_kvplan

ROOT = Path(__file__).resolve().parent.parent
# sha256 of the Apache License 2.0 text as apache.org publishes it (https://www.apache.org/licenses/LICENSE-2.0.txt;
# the same bytes ship as LICENSE in huggingface_hub 2.4.0 and prometheus_client 0.26.0).
APACHE_2_0_SHA256 = "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4"


@pytest.mark.filterwarnings("ignore::UserWarning")  # setuptools: `[tool.setuptools]` support is "beta"
def test_pyproject_reads_the_version_from_the_package() -> None:
    from setuptools.config.pyprojecttoml import read_configuration

    config = read_configuration(ROOT / "pyproject.toml")
    assert config["project"]["version"] == kvplan.__version__  # expanded from attr = "kvplan.__version__"
    text = (ROOT / "pyproject.toml").read_text()
    assert 'version = { attr = "kvplan.__version__" }' in text and '\nversion = "' not in text


def test_cli_version_is_the_package_version() -> None:
    proc = run_kvplan(["--version"])
    assert proc.returncode == 0 and proc.stdout == f"kvplan {kvplan.__version__}\n"


def test_license_file_is_the_apache_2_0_text_pyproject_declares() -> None:
    assert 'license = { text = "Apache-2.0" }' in (ROOT / "pyproject.toml").read_text()
    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_0_SHA256
