"""How much of KernelBench (levels 1-3) the offline proposer covers (issues 12, 40).

One line per task: matched (family and pattern) or not (the matcher's reason), then per-level
counts. With ``--check`` the baseline candidate of each matched task runs on the CPU at a
shrunken size (module-level int constants: batch sizes -> 2, every other int above 16 -> 16, so a
KernelBench file runs in seconds; Triton under the interpreter) against the reference, same
seeds, compared by the evaluator's own comparison (htam.evaluate.judge.compare), and the line says
correct / incorrect. A task whose shrunken form no longer builds (sizes tied by a literal, e.g.
a LayerNorm shape equal to a width) says "not checked", and so does one whose float32 reference
differs from its float64 form where the candidate differs (rounding decides the comparison: deep
batch-normed networks over 1x1 maps, a mean of normalized values). Group and head counts shrink
to 4. ``--evaluator`` runs each candidate through htam's Evaluator
instead (isolated processes, timing included: minutes per task on a busy 2-core machine).

    python3 scripts/device/offline_coverage.py [--root KernelBench] [--levels 1,2] [--pattern GLOB[,GLOB]]
                                        [--check [--evaluator]] [--language triton|cpp|both]
                                        [--cap 16] [--max-cap 256] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path

DEFAULT_ROOT = Path(__file__).resolve().parents[3] / "shared" / "kernelbench" / "KernelBench"
# a helper's worktree (/work/wt/NAME) sits one level deeper than the main tree
DEFAULT_ROOT = DEFAULT_ROOT if DEFAULT_ROOT.is_dir() else Path("/work/shared/kernelbench/KernelBench")
BATCH, CAP, GROUPS, FACTORS, CHANNELS = 2, 16, 4, 12, 16


class _Shrink(ast.NodeTransformer):
    """Module-level int constants (and ints in module-level tuples) made small."""

    def __init__(self, name: str, cap: int | None, factors: bool = False):
        self.factors = factors
        self.batch = "batch" in name.lower()
        # a norm's group count (or attention's heads) at the cap would leave one channel a
        # group: its statistics are then round-off, which no two summation orders agree on
        self.groups = any(w in name.lower() for w in ("group", "head"))
        # the convolution templates take another path from 16 channels a group on: a cap
        # below that leaves channel counts at 16 so the check runs the path the task takes
        self.cap = max(cap, CHANNELS) if cap and "channels" in name.lower() else cap

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) is int and node.value > 0:
            v = min(node.value, BATCH) if self.batch else node.value
            v = min(v, GROUPS) if self.groups and self.cap else v
            if self.cap and v > self.cap:
                # keeping small factors keeps sizes that divide each other divisible (240
                # channels in 3 groups, a quarter of 480 for a bottleneck: 12, 12 and 3)
                step = math.gcd(v, FACTORS) if self.factors else 1
                v = max(step * (self.cap // step), step) if step <= self.cap else self.cap
            return ast.copy_location(ast.Constant(v), node)
        return node


def _arithmetic(node: ast.AST) -> bool:
    """Integer arithmetic on literals only (safe to evaluate)."""
    ok = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)
    return isinstance(node, ast.BinOp | ast.UnaryOp) and all(
        isinstance(n, ok) and (not isinstance(n, ast.Constant) or type(n.value) is int)
        for n in ast.walk(node)
    )


def shrink(source: str, cap: int | None = CAP, factors: bool = False) -> str:
    """The task with batch sizes at most 2 and (unless ``cap`` is None) other ints at most cap;
    with ``factors``, each shrunk int a multiple of its greatest common divisor with 12."""
    tree = ast.parse(source)
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and _arithmetic(stmt.value):  # N = 2048 * 2
            value = eval(compile(ast.Expression(stmt.value), "<size>", "eval"))  # noqa: S307
            stmt.value = ast.Constant(value)
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant | ast.Tuple):
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            stmt.value = _Shrink(" ".join(names), cap, factors).visit(stmt.value)
    return ast.unparse(tree)


def task_paths(root: Path, levels: list[int], pattern: str | None) -> list[tuple[int, Path]]:
    out = []
    for level in levels:
        files = sorted(
            (root / f"level{level}").glob("*.py"), key=lambda p: int(p.name.split("_")[0])
        )
        globs = pattern.split(",") if pattern else []
        out += [
            (level, p) for p in files if not globs or any(fnmatch.fnmatch(p.stem, g) for g in globs)
        ]
    return out


def segments(match) -> str:
    """What of the task runs in kernels of our own: for a whole model, the primitives its
    forward called in the dry run; otherwise the family's kernel (after the library prefix)."""
    if match.family == "model":
        calls = match.ir.calls
        return ", ".join(f"{k} x{v}" for k, v in sorted(calls.items()))
    return f"{match.family} kernel" + (f" after torch's [{match.library}]" if match.library else "")


# ill-conditioned batch norms over tiny maps are retried up to this size only (a deep network
# at 128 px is an hour in the interpreter)
ILL_CAP = 64


def _retry(message: str, size: int) -> bool:
    """Whether a larger size may make the check meaningful: a reference failing at this size
    or a shrunk task that does not build (pooling to size 0), or one ill-conditioned at it."""
    from htam.offline.check import ILL_CONDITIONED, REFERENCE_FAILS

    if ILL_CONDITIONED in message:
        return size < ILL_CAP
    return REFERENCE_FAILS in message or "does not build" in message


def check_task(task, languages: list[str], cap: int, max_cap: int, evaluator) -> tuple:
    """(one verdict text per language, {language: (Verdict, cap)}): each language's baseline
    run against the reference at the shrunk size, the cap doubled while the result says that
    size cannot decide (up to ``max_cap``)."""
    from htam.evaluate.host.static import check_source
    from htam.offline.check import UNCHECKED, Verdict, check
    from htam.offline.pipeline import NoMatch, analyze, baseline, generate
    from htam.tasks.task import Task

    texts, results = [], {}
    for lang in languages:
        size, factors = cap, False
        while True:
            small = Task(id=task.id + f"-small{size}", name=task.name,
                         source=shrink(task.source, size, factors))  # fmt: skip
            try:
                ms = analyze(small)
            except NoMatch as err:  # sizes tied by a literal (full size is hours)
                verdict = Verdict(f"{UNCHECKED}, the shrunk task does not build: {str(err)[:120]}")
                if not factors:  # the same size again, sizes kept divisible by each other
                    factors = True
                    continue
            else:
                code = generate(ms, lang, baseline(ms), [])
                verdict = _verdict(small, code, lang, evaluator, check, check_source, Verdict)
            if not _retry(verdict.message, size) or size * 2 > max_cap:
                break
            size *= 2
        results[lang] = (verdict, size)
        err = "" if verdict.max_error is None else f" max err {verdict.max_error:.2e}"
        texts.append(f"{lang}@{size}: {verdict.message[:200]}{err}")
    return texts, results


def _verdict(small, code: str, lang: str, evaluator, check, check_source, Verdict):
    if evaluator is not None:
        res = evaluator.evaluate(small, code, lang)
        ok = res.status == "ok"
        return Verdict("correct" if ok else f"{res.status} " + " ".join(res.messages)[:160])
    refused = check_source(code, lang)
    if refused:
        return Verdict("refused: " + "; ".join(str(v) for v in refused)[:160])
    return check(small.source, code)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    ap.add_argument("--levels", default="1,2")
    ap.add_argument(
        "--pattern", default=None, help="fnmatch globs on the task file's stem, comma-separated"
    )
    ap.add_argument("--start", type=int, default=0, help="skip tasks numbered below this")
    ap.add_argument("--check", action="store_true", help="evaluate each baseline on the CPU")
    ap.add_argument("--evaluator", action="store_true", help="--check through htam's Evaluator")
    ap.add_argument("--language", default="triton", choices=("triton", "cpp", "both"))
    # deep networks' training-mode batch norms over a 1x1 map of 2 images are ill-conditioned
    # (L3 ResNet18 at 16: both kernels and any reordering differ; at 64, batch 4, correct)
    ap.add_argument("--cap", type=int, default=CAP, help="--check: ints above it shrink to it")
    # pooling that reaches size 0 at the cap (DenseNet, SqueezeNet, MobileNet's AvgPool2d(7)),
    # or batch norms ill-conditioned over small maps: the check doubles the cap up to this
    ap.add_argument("--max-cap", type=int, default=256, help="--check: the largest retried cap")
    ap.add_argument("--json", type=Path, default=None, help="write per-task results here")
    args = ap.parse_args()
    os.environ.setdefault("TRITON_INTERPRET", "1")

    from htam.offline.pipeline import NoMatch, analyze
    from htam.tasks.task import Task

    languages = ["triton", "cpp"] if args.language == "both" else [args.language]
    evaluator = None
    if args.check and args.evaluator:
        from htam.evaluate.host.evaluator import Evaluator

        evaluator = Evaluator(target="cpu")
    matched, total, correct, unchecked = Counter(), Counter(), Counter(), Counter()
    families, records = Counter(), []
    t0 = time.time()
    for level, path in task_paths(
        args.root, [int(x) for x in args.levels.split(",")], args.pattern
    ):
        if int(path.name.split("_")[0]) < args.start:
            continue
        total[level] += 1
        task = Task(id=f"kernelbench/level{level}/{path.stem}", name=path.stem,
                    source=path.read_text())  # fmt: skip
        record = {"task": f"level{level}/{path.stem}"}
        try:
            m = analyze(task)
        except NoMatch as err:
            print(f"L{level} {path.stem[:58]:58s} no-match  {str(err)[:240]}", flush=True)
            records.append({**record, "status": "no-match", "message": str(err)[:300]})
            continue
        matched[level] += 1
        kind = f"library+{m.family}" if m.library else m.family
        families[kind] += 1
        record.update(match=kind, segments=segments(m))
        line = f"L{level} {path.stem[:58]:58s} match     {kind:18s} {m.summary[:150]}"
        if args.check:
            verdicts, results = check_task(task, languages, args.cap, args.max_cap, evaluator)
            for lang, (verdict, cap) in results.items():
                correct[(level, lang)] += verdict.message == "correct"
                record[lang] = {"status": verdict.status, "max_error": verdict.max_error,
                                "cap": cap, "message": verdict.message[:300]}  # fmt: skip
            first = results.get(languages[0])
            if first is None or first[0].status == "unchecked":
                unchecked[level] += 1
            line += "  [" + "; ".join(verdicts) + "]"
        records.append(record)
        print(line, flush=True)
        if args.json:  # after every task: a long run stopped early keeps what it found
            command = "python3 scripts/device/offline_coverage.py " + " ".join(sys.argv[1:])
            text = json.dumps({"command": command, "tasks": records}, indent=1)
            args.json.write_text(text + "\n")
    if evaluator is not None:
        evaluator.close()
    for level in sorted(total):
        print(f"level {level}: {matched[level]} of {total[level]} matched")
    print(f"total: {sum(matched.values())} of {sum(total.values())} matched; by kind: "
          + ", ".join(f"{k} {v}" for k, v in sorted(families.items())))  # fmt: skip
    for level, lang in [(lv, lg) for lv in sorted(total) for lg in languages] if args.check else []:
        n = correct[(level, lang)]
        print(
            f"level {level} {lang}: {n} of {matched[level]} baselines correct on the CPU "
            f"({unchecked[level]} not checked: their shrunk form does not build or run, or is ill-conditioned)"
        )
    print(f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
