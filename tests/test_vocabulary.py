"""One vocabulary: targets, languages, methods, sizes, roofline bounds, statuses, run outcomes,
direction sentinels and strategy ids are each defined once. These tests read the package's source
and fail on a second definition: a literal list of names that the vocabulary already holds, an
enumeration of them, or another name for a direction sentinel."""

from __future__ import annotations

import ast
from pathlib import Path

import htam
from htam import status, vocab
from htam.agent import run_summary
from htam.memory.seed import load_seed

ROOT = Path(htam.__file__).resolve().parent

# Each set of names, and the one module that defines it.
VOCABULARY: dict[str, tuple[set[str], str]] = {
    "targets": ({str(t) for t in vocab.Target}, "htam/vocab.py"),
    "languages": ({str(lang) for lang in vocab.Language}, "htam/vocab.py"),
    "methods": (set(vocab.METHOD_NAMES), "htam/vocab.py"),
    "sizes": (set(vocab.SIZES), "htam/vocab.py"),
    "bounds": (set(vocab.BOUND_KINDS), "htam/vocab.py"),
    "statuses": ({str(s) for s in status.Status}, "htam/status.py"),
    "outcomes": (set(run_summary.OUTCOMES), "htam/agent/run_summary.py"),
}
SENTINELS = {str(d) for d in vocab.Direction}


def _sources() -> list[tuple[str, ast.AST]]:
    return [
        (p.relative_to(ROOT.parent).as_posix(), ast.parse(p.read_text()))
        for p in sorted(ROOT.rglob("*.py"))
        if "tasks/builtin" not in p.as_posix()  # reference programs, not the package's code
    ]


def name_lists(tree: ast.AST) -> list[tuple[int, set[str]]]:
    """(line, names) of every literal tuple, list or set of two or more strings, a ``Literal[...]``
    of strings among them, and the member values of every enumeration class."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            elts = node.elts
        elif isinstance(node, ast.ClassDef) and any(
            isinstance(b, ast.Name) and b.id.endswith("Enum") for b in node.bases
        ):
            elts = [s.value for s in node.body if isinstance(s, ast.Assign)]
        else:
            continue
        names = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(names) >= 2 and len(names) == len(elts):
            found.append((node.lineno, set(names)))
    return found


def second_definitions(sources: list[tuple[str, ast.AST]]) -> list[str]:
    found = []
    for path, tree in sources:
        for line, names in name_lists(tree):
            for kind, (known, home) in VOCABULARY.items():
                if path != home and names <= known:
                    found.append(f"{path}:{line} lists {kind} {sorted(names)} (see {home})")
    return found


def sentinel_aliases(sources: list[tuple[str, ast.AST]]) -> list[str]:
    """Module-level names bound to a direction sentinel outside htam/vocab.py (``Direction.ANY``
    is the one name of "*")."""
    found = []
    for path, tree in sources:
        if path == "htam/vocab.py":
            continue
        for node in getattr(tree, "body", []):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            value = node.value
            if isinstance(value, ast.Attribute) and value.attr == "value":
                value = value.value
            named = isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
            if (named and value.value.id == "Direction") or (
                isinstance(value, ast.Constant) and value.value in SENTINELS - {"none"}
            ):
                found.append(f"{path}:{node.lineno} names a direction sentinel again")
    return found


def test_no_second_definition_of_a_vocabulary():
    assert second_definitions(_sources()) == []
    assert sentinel_aliases(_sources()) == []


def test_the_checks_see_a_second_definition():
    planted = ast.parse(
        "LANGUAGES = {'cuda': ('cuda', 'triton')}\n"
        "class Size(StrEnum):\n    SMALL = 'small'\n    LARGE = 'large'\n"
        "FLAT = Direction.ANY.value\n"
        "ok: Literal['ok', 'incorrect']\n"
    )
    found = second_definitions([("htam/x.py", planted)])
    assert [f.split(" lists ")[1].split()[0] for f in found] == ["sizes", "languages", "statuses"]
    assert sentinel_aliases([("htam/x.py", planted)]) == ["htam/x.py:5 names a direction sentinel again"]
    # the defining module itself is allowed its list
    assert second_definitions([("htam/vocab.py", ast.parse("X = ('small', 'large')\n"))]) == []


def test_strategy_ids_are_the_seeds():
    """The seed (htam/memory/seed.json) defines the strategy ids; the offline proposer's order and
    rule tables name only those, and every id literal in the package is one of them."""
    from htam.offline.strategies import RULES, STRATEGIES

    seeded = {node["id"] for node in load_seed()["locals"]}
    directions = {node["id"] for node in load_seed()["globals"]}
    assert set(STRATEGIES) == {s for table in RULES.values() for s in table} <= seeded
    literals = {
        (path, node.value)
        for path, tree in _sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.count(".") == 1
        and node.value.split(".")[0] in directions
        and node.value.split(".")[1].isidentifier()
    }
    assert {(p, s) for p, s in literals if s not in seeded} == set()
