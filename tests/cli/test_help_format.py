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
