"""The installed distribution's metadata, as pip recorded it (``maturin develop`` and ``pip
install ./python`` both install a wheel): name, version (the Cargo workspace's and the npm
package's), licence expression, the licence texts the licence asks to ship with every copy, and a description
(the README, which PyPI shows alone) that links to nothing outside it. ``scripts/test-python.sh`` checks the source distribution's contents the same way."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path
from typing import List

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


def _relative_links(markdown: str) -> List[str]:
    """The relative link targets of a Markdown text, outside code: inline links and images
    (``[text](target)``), reference definitions (``[label]: target``) and HTML ``href`` / ``src``
    attributes. Absolute URLs (``https:``, ``mailto:``...) and in-page anchors (``#section``) are
    left out."""
    prose = re.sub(r"^(```|~~~)[^\n]*\n.*?^\1[^\n]*$", "", markdown, flags=re.M | re.S)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    targets = re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+[^)]*)?\)", prose)
    targets += re.findall(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?", prose, flags=re.M)
    targets += re.findall(r"\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", prose, flags=re.I)
    return [t for t in targets if not re.match(r"([a-z][a-z0-9+.-]*:|//|#)", t, flags=re.I)]


def test_the_description_has_no_relative_links() -> None:
    # PyPI renders the description (the README) with no base to resolve a relative link against,
    # so any relative link on that page is broken, even one to a file in the wheel.
    distribution = importlib.metadata.distribution("ferroloop")
    metadata = distribution.read_text("METADATA")
    assert metadata is not None
    description = metadata.split("\n\n", 1)[1] if "\n\n" in metadata else ""
    assert "Python bindings of" in description, "the README is not the description"
    assert _relative_links(description) == []
    # The extractor itself: each kind of link is found, code and absolute URLs are not.
    sample = (
        '[a](../A.md#x) ![b](./b.png "t")\n[c]: ../C.md\n<a href="D.md">d</a>\n'
        "[e](https://example.invalid/e) [f](#f) `[g](G.md)`\n```\n[h](H.md)\n```\n"
    )
    assert _relative_links(sample) == ["../A.md#x", "./b.png", "../C.md", "D.md"]
