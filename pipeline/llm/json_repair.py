"""Model output to validated pydantic objects: near-JSON repaired, then validated.

Why its own module: models answer JSON with slips (code fences, prose round it, trailing
commas, Python literals, single quotes); repairing them here costs nothing, where a re-ask
costs a call. Pure functions (no client, no I/O), so they are tested on strings alone.
"""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def _fix_outside_strings(text: str, single_quotes: bool) -> str:
    """Drop trailing commas, map Python literals, and (optionally) turn 'x' strings into "x"
    — all outside double-quoted strings, so string contents are never touched."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif ch == "'" and single_quotes:
            j, buf = i + 1, []
            while j < n and text[j] != "'":
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j : j + 2] if text[j + 1] != "'" else "'")
                    j += 2
                    continue
                buf.append('\\"' if text[j] == '"' else text[j])
                j += 1
            out.append('"' + "".join(buf) + '"')
            i = j + 1
        elif ch == ",":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j < n and text[j] in "}]":
                i += 1  # trailing comma
                continue
            out.append(ch)
            i += 1
        elif ch.isalpha():
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append({"True": "true", "False": "false", "None": "null"}.get(word, word))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_FENCE = re.compile(r"```[\w-]*\s*\n?(.*?)```", re.S)


def repair_json(text: str) -> str:
    """Best-effort near-JSON -> JSON text: strip code fences, keep the outermost {...}/[...],
    drop trailing commas, map True/False/None; single quotes are converted only when the text
    still does not parse (an apostrophe inside a "..." string is safe either way)."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    starts = [i for i in (body.find("{"), body.find("[")) if i >= 0]
    if starts:
        start = min(starts)
        end = body.rfind("}" if body[start] == "{" else "]")
        if end > start:
            body = body[start : end + 1]
    fixed = _fix_outside_strings(body, single_quotes=False)
    try:
        json.loads(fixed, strict=False)
        return fixed
    except ValueError:
        return _fix_outside_strings(body, single_quotes=True)


def parse_json(text: str, schema: type[M]) -> tuple[M | None, bool, str]:
    """(object or None, whether repair was needed, error text)."""
    try:
        return schema.model_validate_json(text), False, ""
    except ValidationError as exc:
        first_error = _short(exc)
    try:
        data = json.loads(repair_json(text), strict=False)
        return schema.model_validate(data), True, ""
    except ValueError as exc:  # JSONDecodeError and ValidationError are ValueErrors
        return None, True, _short(exc) if isinstance(exc, ValidationError) else first_error


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        errs = exc.errors()[:3]
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'root'}: {e['msg']}" for e in errs)
    return str(exc)[:200]
