"""How many solutions of a corpus the static rules refuse before they run, now and at an earlier
revision of htam/evaluate/static.py (or host/static.py).

    python3 scripts/experiments/corpus_static.py                       # tests/evaluate/corpus (manifest.toml)
    python3 scripts/experiments/corpus_static.py DIR --language cuda   # every *.py under DIR
    python3 scripts/experiments/corpus_static.py --before 8e3e656      # and the rules at that commit
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter
from pathlib import Path

from htam.evaluate.host.static import check_source

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "evaluate" / "corpus"


def _rules_at(commit: str):
    for path in ("htam/evaluate/host/static.py", "htam/evaluate/static.py"):
        shown = subprocess.run(
            ["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True
        )
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"no static.py at {commit}")
    file = Path(tempfile.mkdtemp()) / "static_before.py"
    file.write_text(shown.stdout)
    spec = importlib.util.spec_from_file_location("static_before", file)
    module = importlib.util.module_from_spec(spec)
    sys.modules["static_before"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.check_source


def _solutions(folder: Path | None, language: str) -> list[tuple[str, str, bool]]:
    """(file, language, legitimate) of every solution."""
    if folder is None:
        entries = tomllib.loads((CORPUS / "manifest.toml").read_text())["solution"]
        return [(e["file"], e["language"], e["status"] == "ok") for e in entries]
    return [(str(p.relative_to(folder)), language, True) for p in sorted(folder.rglob("*.py"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path)
    parser.add_argument("--language", default="cuda")
    parser.add_argument("--before", help="a commit whose static rules to count as well")
    args = parser.parse_args()
    base = args.folder or CORPUS
    rules = {"now": check_source}
    if args.before:
        rules[args.before] = _rules_at(args.before)
    solutions = _solutions(args.folder, args.language)
    legit = sum(ok for _, _, ok in solutions)
    for name, check in rules.items():
        refused, causes = [], Counter()
        for file, language, ok in solutions:
            found = check((base / file).read_text(), language)
            if found:
                refused.append((file, ok))
                causes.update({v.rule for v in found})
        wrongly = [f for f, ok in refused if ok]
        print(
            f"{name}: {len(refused)} of {len(solutions)} refused statically; "
            f"{len(wrongly)} of {legit} legitimate ({100 * len(wrongly) / max(legit, 1):.1f}%); "
            f"rules: {dict(causes)}"
        )
        for file in wrongly:
            print(f"    {file}")


if __name__ == "__main__":
    main()
