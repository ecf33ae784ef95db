"""The link check of the project's Markdown pages (``scripts/check_links.py``, run by ``.ci/run``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = next(parent for parent in Path(__file__).resolve().parents if (parent / "pyproject.toml").is_file())
SCRIPT = ROOT / "scripts" / "check_links.py"


@pytest.fixture(scope="module")
def links() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_links", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_links"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_link_of_the_project_pages_resolves(links: ModuleType) -> None:
    pages = links.default_pages(ROOT)
    names = {str(page.relative_to(ROOT)) for page in pages}
    assert {"README.md", "docs/how-it-works.md", "docs/options.md", "examples/mcqa/README.md"} <= names
    report = links.check(pages, ROOT)
    assert report.broken == []
    assert report.checked > 50  # the README alone links every docs page


def test_the_command_line_passes_on_the_project_and_counts_external_links() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert " 0 broken; " in done.stdout and " external links not fetched (" in done.stdout


def test_the_readme_links_every_docs_page(links: ModuleType) -> None:
    tokens = links._parser().parse((ROOT / "README.md").read_text(encoding="utf-8"))
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    linked = {target.split("#")[0] for _, target in links.links(tokens, lines)}
    pages = {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")}
    assert pages - linked == set()


def write_pages(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text(
        "# Guide\n\n## The `gym_session` fixture\n\n## Keeping Gym warm, and resuming a run\n\n## Twice\n\n## Twice\n",
        encoding="utf-8",
    )
    (tmp_path / "examples").mkdir()
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Title\n\n## Read on\n\n"
        "- [guide](docs/guide.md), [fixture](docs/guide.md#the-gym_session-fixture)\n"
        "- [warm](docs/guide.md#keeping-gym-warm-and-resuming-a-run), [second](docs/guide.md#twice-1)\n"
        "- [here](#read-on), [folder](examples/), [index](https://pypi.org/x) <https://example.com/y>\n"
        "\n```\n[not a link](missing.md)\n```\n\nand `[nor this](missing.md)`\n",
        encoding="utf-8",
    )
    return readme


def test_good_links_pass_and_code_is_not_a_link(links: ModuleType, tmp_path: Path) -> None:
    readme = write_pages(tmp_path)
    report = links.check([readme], tmp_path)
    assert report.broken == []
    assert report.checked == 6
    assert dict(report.external) == {"pypi.org": 1, "example.com": 1}


def test_a_broken_link_is_caught_with_its_line(links: ModuleType, tmp_path: Path) -> None:
    readme = write_pages(tmp_path)
    readme.write_text(readme.read_text(encoding="utf-8") + "\nSee [options](docs/options.md).\n", encoding="utf-8")
    report = links.check([readme], tmp_path)
    assert report.broken == ["README.md:15: docs/options.md: no such file or folder"]


def test_a_broken_anchor_is_caught(links: ModuleType, tmp_path: Path) -> None:
    readme = write_pages(tmp_path)
    text = readme.read_text(encoding="utf-8") + "\n[a](docs/guide.md#twice-2) and [b](#read-off)\n"
    readme.write_text(text, encoding="utf-8")
    report = links.check([readme], tmp_path)
    assert report.broken == [
        "README.md:15: docs/guide.md#twice-2: no heading with the anchor #twice-2 in docs/guide.md",
        "README.md:15: #read-off: no heading with the anchor #read-off in README.md",
    ]


def test_the_command_line_fails_naming_the_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n[gone](nowhere.md)\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(SCRIPT), str(page)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "page.md:3: nowhere.md: no such file or folder" in done.stderr


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("The `gym_session` fixture", "the-gym_session-fixture"),
        ("Keeping Gym warm, and resuming a run", "keeping-gym-warm-and-resuming-a-run"),
        ("What Gym is handed: whole tasks or pairs", "what-gym-is-handed-whole-tasks-or-pairs"),
        ("pytest-xdist, sharding and scale", "pytest-xdist-sharding-and-scale"),
        ("Gates — and *more*", "gates--and-more"),
    ],
)
def test_github_anchor_slugs(links: ModuleType, heading: str, anchor: str) -> None:
    tokens = links._parser().parse(f"## {heading}\n")
    assert links.anchors(tokens) == {anchor}
