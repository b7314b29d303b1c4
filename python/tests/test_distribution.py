"""The installed distribution's metadata, as pip recorded it (``maturin develop`` and ``pip
install ./python`` both install a wheel): name, version (the Cargo workspace's and the npm
package's), licence expression and the licence texts the licence asks to ship with every copy.
``scripts/test-python.sh`` checks the source distribution's contents the same way."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LICENCES = ["LICENSE-APACHE", "LICENSE-MIT"]


def _workspace_version() -> str:
    cargo = (REPO / "Cargo.toml").read_text(encoding="utf-8")
    found = re.search(r'\[workspace\.package\][^\[]*?\nversion = "([^"]+)"', cargo)
    assert found, "no version in [workspace.package] of Cargo.toml"
    return found.group(1)


def test_metadata_names_the_package_its_version_and_licence() -> None:
    metadata = importlib.metadata.metadata("ferroloop")
    assert metadata["Name"] == "ferroloop"
    assert metadata["Version"] == _workspace_version()
    node = json.loads((REPO / "node" / "package.json").read_text(encoding="utf-8"))
    assert metadata["Version"] == node["version"]
    assert metadata["License"] == "MIT OR Apache-2.0"
    assert metadata["Requires-Python"] == ">=3.9"
    assert "Typing :: Typed" in (metadata.get_all("Classifier") or [])


def test_the_licence_texts_are_installed_with_the_package() -> None:
    distribution = importlib.metadata.distribution("ferroloop")
    assert sorted(distribution.metadata.get_all("License-File") or []) == LICENCES
    for name in LICENCES:
        # A wheel holds them under .dist-info/licenses/ (PEP 639), as the metadata says.
        text = distribution.read_text(f"licenses/{name}")
        assert text is not None, f"{name} is not in the installed .dist-info/licenses/"
        assert text == (REPO / name).read_text(encoding="utf-8")
