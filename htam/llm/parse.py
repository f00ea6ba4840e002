"""Reading model replies: reasoning sections, the ModelNew code block, JSON answers."""

from __future__ import annotations

import ast
import json
import re

from htam.llm.split_code import with_definitions

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(
    r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE
)
_OPEN_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n", re.MULTILINE)
_MODEL_NEW = re.compile(r"^class[ \t]+ModelNew\b", re.MULTILINE)
_CODE_START = re.compile(r"^(import |from |class |def |@|#)", re.MULTILINE)
PYTHON_TAGS = {"", "python", "py", "python3"}


def split_think(text: str) -> tuple[str | None, str]:
    """Split ``<think>...</think>`` sections off a reply: (reasoning or None, the rest).

    Some servers strip the opening tag (it is part of the chat template), so a lone ``</think>``
    also ends a reasoning section; an unclosed ``<think>`` (a reply cut at max_tokens) is all
    reasoning.
    """
    text = text.replace("\r\n", "\n")
    parts = [m.strip() for m in _THINK.findall(text)]
    rest = _THINK.sub("", text)
    lower = rest.lower()
    if "</think>" in lower:
        cut = lower.index("</think>")
        parts.insert(0, rest[:cut].strip())
        rest = rest[cut + len("</think>") :]
    elif "<think>" in lower:
        cut = lower.index("<think>")
        parts.append(rest[cut + len("<think>") :].strip())
        rest = rest[:cut]
    reasoning = "\n\n".join(p for p in parts if p)
    return (reasoning or None), rest.strip()


def defines_model_new(code: str) -> bool:
    return bool(_MODEL_NEW.search(code))


def extract_code(reply: str) -> str | None:
    """The last Python code block of ``reply`` that defines ``class ModelNew``, or None.

    Accepts ```python, ```py and untagged fences, CRLF line ends, prose around the block, a
    final fence left open (the code must then parse), and a reply that is only code. Earlier
    blocks that define what the ModelNew block uses come with it (a kernel and its module
    given in two blocks: htam.llm.split_code). Failing those, the Python module in a fence
    tagged for another language (```cpp around it), or in a JSON answer's string (an endpoint
    in JSON mode). A lone surrogate (a JSON escape of half a pair, which no file can hold)
    becomes "?".
    """
    reply = reply.encode("utf-8", "replace").decode("utf-8")
    _, text = split_think(reply)
    fences = _FENCE.findall(text)
    blocks = [body for tag, body in fences if tag.lower() in PYTHON_TAGS]
    for i in reversed(range(len(blocks))):
        if defines_model_new(blocks[i]):
            return with_definitions(blocks[i].strip("\n") + "\n", blocks[:i])
    unclosed = _unclosed_block(text)
    if unclosed is not None:
        return with_definitions(unclosed, blocks)
    for tag, body in reversed(fences):
        if tag.lower() not in PYTHON_TAGS and (code := _parsable_model_new(body)) is not None:
            return code
    if (code := _json_code(text)) is not None:
        return code
    if not blocks and "```" not in text:
        return _bare_code(text)
    return None


def _json_code(text: str) -> str | None:
    """The code in a JSON answer's strings (``{"code": "..."}``), the last that has any."""
    try:
        strings = [s for s in _strings(extract_json(text)) if "ModelNew" in s and s != text]
    except (ValueError, RecursionError):  # no JSON; JSON nested past the interpreter's limit
        return None
    for string in reversed(strings):
        if (code := extract_code(string)) is not None:
            return code
    return None


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _unclosed_block(text: str) -> str | None:
    """Code after a last opening fence that was never closed, if it is complete Python."""
    opens = list(_OPEN_FENCE.finditer(text))
    if not opens or text.count("```") % 2 == 0:
        return None
    last = opens[-1]
    if last.group(1).lower() not in PYTHON_TAGS:
        return None
    return _parsable_model_new(text[last.end() :])


def _bare_code(text: str) -> str | None:
    """A reply without fences: the code from its first code-like line, if it parses."""
    start = _CODE_START.search(text)
    return None if start is None else _parsable_model_new(text[start.start() :])


def _parsable_model_new(code: str) -> str | None:
    if not defines_model_new(code):
        return None
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):  # nested past the parser's limit too
        return None
    return code.strip("\n") + "\n"


def extract_json(reply: str) -> object:
    """The JSON value in a reply: the whole text, else the last fenced block, else the last
    balanced ``{...}``. Raises ``ValueError`` naming what was wrong."""
    _, text = split_think(reply)
    candidates = [text] + [body for _, body in reversed(_FENCE.findall(text))]
    candidates += _brace_spans(text)
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise ValueError("the reply contains no valid JSON object")


def _brace_spans(text: str) -> list[str]:
    """Balanced top-level ``{...}`` substrings, last first (braces in strings are rare here)."""
    spans, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans[::-1]
