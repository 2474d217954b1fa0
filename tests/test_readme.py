"""The README's two set-up commands are the ones CI and a newcomer actually run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _command_after(marker: str) -> str:
    match = re.search(rf"<!-- {marker} -->\s*```(?:sh|bash)?\n(.+?)\n```", README, re.DOTALL)
    assert match, f"README has no command block after <!-- {marker} -->"
    lines = match.group(1).strip().splitlines()
    assert len(lines) == 1, "each set-up is one command a person can paste"
    return lines[0]


def test_ci_runs_the_readme_test_command() -> None:
    command = _command_after("test-command")
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command in ci_lines
    assert "chromium" in command
    assert "pytest" in command


def test_run_command_installs_and_serves() -> None:
    command = _command_after("run-command")
    assert "pip install ." in command
    assert command.endswith("zero-bands")


def test_readme_shows_a_screenshot_that_exists() -> None:
    images = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", README)
    assert images
    for image in images:
        assert (ROOT / image).is_file(), image


def test_every_url_option_is_in_the_one_table() -> None:
    from app.web.inputs import CompareQuery, EmbedQuery

    options = (ROOT / "docs" / "url-options.md").read_text()
    section = options.split("## Every URL option", 1)[1].split("\n## ", 1)[0]
    # The view's options by hand, then the run's, generated from app/web/fields.py.
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert len([line for line in table if line.startswith("| option |")]) == 2, "two tables: the view's, the run's"
    documented = "\n".join(table)
    # Every parameter as it is written in an address (its alias, e.g. `from`), page, embed and compare.
    for query in (EmbedQuery, CompareQuery):
        for name, field in query.model_fields.items():
            written = field.alias or name
            assert f"`{written}`" in documented, written
    assert options.count("## Every URL option") == 1
    assert 'width="1200"' not in options


def test_the_readme_is_a_front_door_and_its_links_lead_somewhere() -> None:
    assert len(README.encode()) <= 10_000
    links = re.findall(r"\]\((docs/[^)#]+)\)", README)
    assert links
    for link in links:
        assert (ROOT / link).is_file(), link
    # Every page under docs/ is reachable from the front door.
    assert {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")} <= set(links)
