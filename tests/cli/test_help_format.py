"""Help as plain text at 80 columns: whole words, whole names, whole first sentences."""

from typer.testing import CliRunner

from htam.cli import app
from htam.vocab import METHOD_NAMES


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "80", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    return result.output


def test_option_help_is_plain_and_never_cuts_a_word_or_a_name():
    text = _help("optimize")
    assert "…" not in text and "│" not in text  # rich's boxes squeezed help into "compatib…"
    assert "any OpenAI-compatible endpoint" in " ".join(text.split())
    assert max(len(line) for line in text.splitlines()) <= 80
    # a hyphenated method never ends a line at its hyphen
    assert not any(line.rstrip().endswith(" no-") for line in text.splitlines())
    words = set(" ".join(text.split()).replace(",", " ").split())
    assert set(METHOD_NAMES) <= words


def test_group_help_lists_each_commands_first_sentence_whole():
    text = " ".join(_help("memory").split())
    assert "statistics add, evidence and step ledgers union without duplicates." in text
    assert "..." not in text.split("Commands:")[1]
    text = " ".join(_help().split())
    assert "Evaluate SOLUTION_FILE against TASK: correctness, timing, speed of light." in text


def _commands(group, prefix=()):
    """Every leaf command of the click group ``group``, as the words that call it."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, (*prefix, name))
        else:
            yield (*prefix, name)


def test_every_argument_is_named_in_capitals_as_the_usage_line_names_it():
    """Seen: `Usage: htam optimize [OPTIONS] TASK` over `task <str>` under Arguments, and
    "Missing argument 'task'." for it."""
    import typer.main

    group = typer.main.get_command(app)
    checked = 0
    for words in _commands(group):
        text = _help(*words)
        if "Arguments:" not in text:
            continue
        section = text.split("Arguments:")[1].split("Options:")[0]
        names = [line.split()[0] for line in section.splitlines() if line.startswith("  ") and
                 not line.startswith("   ")]  # fmt: skip
        usage = text.splitlines()[0]
        for name in names:
            assert name.isupper() and name.rstrip(".") in usage, (words, name, usage)
        checked += 1
    assert checked >= 10
    missing = CliRunner().invoke(app, ["optimize"])
    assert "Missing argument 'TASK'" in missing.output
