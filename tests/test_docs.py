"""The README and docs/ stay true: every relative link resolves, every `acker` verb and option
and every `./dev` command they name exists, and every block of commands is either run by a named
test (`tested-by:<test>` in its info string) or marked `illustrative`. The README's tour is run
here, command by command, and must print what the README shows.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import unicodedata
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from benchmarks.targets import TARGETS
from pipelines.cli import _parser, main
from pipelines.ingest import ACK_EVENTS_SCHEMA
from pipelines.session import LOCAL_DEFAULTS, SESSION_DEFAULTS
from pipelines.workload import WorkloadSpec, generate_workload

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND_LANGUAGES = {"sh", "shell", "bash", "console", "python"}
FENCE = re.compile(r"^( *)```(\S*)([^\n]*)\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
ACKER_COMMAND = re.compile(r"(?:^[ \t]*|\$ |\./dev )acker ([a-z]+)([^\n]*)", re.MULTILINE)
TOUR_TEST = "test_the_readme_tour_prints_what_it_shows"
# What the tour's output shows in place of the folder it ran in.
TOUR_FOLDER = "/path/to/batch-acker"
EXAMPLE_SPEC = WorkloadSpec(trees=100, batches=1, seed=2026)


def fenced_blocks(doc: Path) -> list[tuple[str, list[str], str]]:
    """Each fenced code block of ``doc``: its language, the rest of its info string, its text."""
    blocks = []
    for match in FENCE.finditer(doc.read_text()):
        indent = len(match.group(1))
        text = "".join(line[indent:] for line in match.group(4).splitlines(keepends=True))
        blocks.append((match.group(2), match.group(3).split(), text))
    return blocks


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = unicodedata.normalize("NFKD", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", doc.read_text(), re.MULTILINE)}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def dev_commands() -> set[str]:
    script = (ROOT / "dev").read_text()
    cases = script.split('case "${1:-help}" in', 1)[1]
    return {
        name
        for m in re.finditer(r"^ {4}([a-z|-]+)\)", cases, re.MULTILINE)
        for name in m.group(1).split("|")
    }


@pytest.mark.fast
def test_the_readme_layout_names_every_module() -> None:
    layout = (ROOT / "README.md").read_text().split("## Layout", 1)[1]
    modules = {path.name for path in (ROOT / "pipelines").glob("*.py")} - {"__init__.py"}
    assert sorted(name for name in modules if name not in layout) == []


@pytest.mark.fast
def test_the_performance_page_states_the_benchmarks_targets() -> None:
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in (ROOT / "docs" / "performance.md").read_text().splitlines()
        if line.startswith("| ")
    ]
    stated = {}
    for key, target in TARGETS.items():
        row = next((row for row in rows if row[0].startswith(target.figure)), None)
        stated[key] = row is not None and target.stated() in row
    assert [key for key, found in stated.items() if not found] == []


@pytest.mark.fast
@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert not broken, broken


@pytest.mark.fast
@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_acker_verb_option_and_dev_command_named_exists(doc: Path) -> None:
    verbs = subcommands()
    text = doc.read_text()
    prose = FENCE.sub("", text)
    code = [block for _, _, block in fenced_blocks(doc)] + re.findall(r"`([^`\n]+)`", prose)
    unknown = []
    for verb, rest in (found for snippet in code for found in ACKER_COMMAND.findall(snippet)):
        if verb not in verbs:
            unknown.append(f"acker {verb}")
            continue
        for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest):
            if option not in verbs[verb]._option_string_actions:
                unknown.append(f"acker {verb} {option}")
    commands = dev_commands()
    unknown += [
        f"./dev {name}" for name in re.findall(r"\./dev ([a-z]+)", text) if name not in commands
    ]
    assert not unknown, unknown


@pytest.mark.fast
@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_block_of_commands_is_run_by_a_test_or_marked_illustrative(doc: Path) -> None:
    tests = "\n".join(path.read_text() for path in (ROOT / "tests").glob("test_*.py"))
    unaccounted = []
    for language, tags, text in fenced_blocks(doc):
        if language not in COMMAND_LANGUAGES or "illustrative" in tags:
            continue
        lines = [line for line in text.splitlines() if line.strip()]
        if lines and all(line.startswith("./dev ") for line in lines):
            continue  # checked against the dev script above; CI runs ./dev test
        named = [tag.split(":", 1)[1] for tag in tags if tag.startswith("tested-by:")]
        if not named or not all(
            re.search(rf"^def {name}\(", tests, re.MULTILINE) for name in named
        ):
            unaccounted.append(text.splitlines()[0])
    assert not unaccounted, unaccounted


@pytest.mark.fast
def test_the_example_events_are_the_simulated_workload() -> None:
    written = (ROOT / "examples" / "events.jsonl").read_text().splitlines()
    columns = ACK_EVENTS_SCHEMA.fieldNames()
    expected = []
    for event in generate_workload(EXAMPLE_SPEC):
        row = dict(zip(columns, event.row(), strict=True))
        row["event_time"] = event.event_time.isoformat(timespec="milliseconds")  # type: ignore[union-attr]
        expected.append(json.dumps({k: v for k, v in row.items() if v is not None}))
    assert written == expected


def tour() -> list[tuple[str, str]]:
    """The README tour's commands, each with the output the README shows for it."""
    block = next(
        text
        for _, tags, text in fenced_blocks(ROOT / "README.md")
        if f"tested-by:{TOUR_TEST}" in tags
    )
    steps: list[tuple[str, str]] = []
    command: list[str] = []
    for line in block.splitlines(keepends=True):
        if line.startswith("$ ") or command:
            command.append(line.removeprefix("$ "))
            try:
                shlex.split("".join(command))
            except ValueError:
                continue  # a quoted argument goes on over the next line
            steps.append(("".join(command).strip(), ""))
            command = []
        else:
            steps[-1] = (steps[-1][0], steps[-1][1] + line)
    assert len(steps) >= 5, f"the README's tour has {len(steps)} commands"
    return steps


def test_the_readme_tour_prints_what_it_shows(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    # The tour runs on the embedded default; keep this worker's session as the suite set it.
    settings = {key: spark.conf.get(key, None) for key in {**SESSION_DEFAULTS, **LOCAL_DEFAULTS}}
    try:
        for command, shown in tour():
            argv = shlex.split(command)
            assert argv[0] == "acker", command
            code = main(argv[1:])
            out, err = capsys.readouterr()
            assert code == 0, f"{command}: {err}"
            assert out.replace(str(tmp_path), TOUR_FOLDER) == shown, command
    finally:
        for key, value in settings.items():
            if value is not None and spark.conf.isModifiable(key):
                spark.conf.set(key, value)
