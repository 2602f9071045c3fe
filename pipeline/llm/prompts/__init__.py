"""Prompt templates for LLM mode, kept as text files next to this module.

Why files: prompts are tuned by people who do not read Python, and each can be overridden by
a file path in config without a code change. A template holds messages introduced by marker
lines (`<<<system>>>`, `<<<user>>>`, `<<<assistant>>>`) and `{name}` placeholders. Only
`{identifier}` is a placeholder, so JSON examples (`{"title": ...}`) need no escaping, and
substitution is a single pass: a value that itself contains `{x}` is never expanded.

`Prompt.hash` is the sha256 of the template text; it is stored with every extracted row and
goes into the LLM cache key, so editing a prompt invalidates exactly what it produced.

Security: document text is data. `data_block` wraps it in a `<tag>` block and neutralises any
`<tag>`/`</tag>` inside it (and the fences the packaged prompts wrap blocks in, such as
`<context>`), so a document cannot close the block and speak as the prompt; each system message
says to ignore instructions inside such blocks. A fence is matched as a model would read it:
whitespace or invisible characters around `<` and `/`, any case, and the NFKC/look-alike forms
of the brackets and letters (full-width `＜／ｄｏｃｕｍｅｎｔ＞`, small `﹤`, angle quotes `‹`), and
the escaped forms a model decodes as it reads: JSON's `<\\/document>` (backslashes before the
slash) and its unicode escapes `\\u003c` and `\\u002f`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

from pipeline.ids import sha256_hex

__all__ = [
    "NEREL_ENTITY_TYPES",
    "NEREL_RELATION_TYPES",
    "PROMPT_DIR",
    "PROMPT_NAMES",
    "Prompt",
    "data_block",
    "load_prompt",
    "neutralise",
    "prompt_fences",
]

PROMPT_DIR = Path(__file__).resolve().parent
PROMPT_NAMES = (
    "extract_graph",
    "extract_gleaning",
    "summarize_descriptions",
    "community_report",
    "local_search",
    "global_map",
    "global_reduce",
    "query_analysis",
    "flow_answer",
    "focus_answer",
)

# NEREL's 29 entity classes; CONCEPT is docgraph's class for keyphrases and anything else.
NEREL_ENTITY_TYPES = (  # noqa: SIM905 - word lists diff and read better
    "AGE AWARD CITY COUNTRY CRIME DATE DISEASE DISTRICT EVENT FACILITY FAMILY IDEOLOGY "
    "LANGUAGE LAW LOCATION MONEY NATIONALITY NUMBER ORDINAL ORGANIZATION PENALTY PERCENT "
    "PERSON PRODUCT PROFESSION RELIGION STATE_OR_PROVINCE TIME WORK_OF_ART"
).split()
# NEREL's 49 relation classes; RELATED_TO (not NEREL) is the untyped fallback.
NEREL_RELATION_TYPES = (  # noqa: SIM905
    "ABBREVIATION AGE_DIED_AT AGE_IS AGENT ALTERNATIVE_NAME AWARDED_WITH CAUSE_OF_DEATH "
    "CONVICTED_OF DATE_DEFUNCT_IN DATE_FOUNDED_IN DATE_OF_BIRTH DATE_OF_CREATION DATE_OF_DEATH "
    "END_TIME EXPENDITURE FOUNDED_BY HAS_CAUSE HEADQUARTERED_IN IDEOLOGY_OF INANIMATE_INVOLVED "
    "INCOME KNOWS LOCATED_IN MEDICAL_CONDITION MEMBER_OF ORGANIZES ORIGINS_FROM OWNER_OF "
    "PARENT_OF PART_OF PARTICIPANT_IN PENALIZED_AS PLACE_OF_BIRTH PLACE_OF_DEATH "
    "PLACE_RESIDES_IN POINT_IN_TIME PRICE_OF PRODUCES RELATIVE RELIGION_OF SCHOOLS_ATTENDED "
    "SIBLING SPOUSE START_TIME SUBEVENT_OF SUBORDINATE_OF TAKES_PLACE_IN WORKPLACE WORKS_AS"
).split()

_ROLE_RE = re.compile(r"^<<<(system|user|assistant)>>>[ \t]*\r?\n", re.MULTILINE)
_VAR_RE = re.compile(r"\{([a-z][a-z0-9_]*)\}")


@dataclass(frozen=True)
class Prompt:
    """A parsed template: `render(**vars)` gives chat messages, `hash` identifies the text."""

    name: str
    template: str
    source: str = ""
    messages: tuple[tuple[str, str], ...] = field(init=False)

    def __post_init__(self) -> None:
        parts = _ROLE_RE.split(self.template)
        if parts[0].strip() or len(parts) < 3:
            raise ValueError(
                f"prompt {self.name!r} ({self.source}): text must start with a "
                "<<<system>>>/<<<user>>>/<<<assistant>>> marker line"
            )
        msgs = tuple(
            (role, body.strip("\n")) for role, body in zip(parts[1::2], parts[2::2], strict=True)
        )
        object.__setattr__(self, "messages", msgs)

    @cached_property
    def hash(self) -> str:
        return sha256_hex(self.template.encode("utf-8"))

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(_VAR_RE.findall(self.template))

    def render(self, **values: object) -> list[dict[str, str]]:
        """Messages with every `{name}` replaced; a missing value raises KeyError, extra values
        are ignored (callers may pass one shared context to several prompts)."""
        missing = self.variables - values.keys()
        if missing:
            raise KeyError(f"prompt {self.name!r} needs {sorted(missing)}")

        def sub(m: re.Match[str]) -> str:
            return str(values[m.group(1)])

        return [{"role": role, "content": _VAR_RE.sub(sub, body)} for role, body in self.messages]


def load_prompt(name: str, override_path: str | Path | None = None) -> Prompt:
    """The packaged prompt `name`, or an override: a file path is used as is; a directory
    overrides with its `<name>.txt` when present (else the packaged one is used)."""
    path = PROMPT_DIR / f"{name}.txt"
    if override_path:
        o = Path(override_path).expanduser()
        if o.is_dir():
            path = o / f"{name}.txt" if (o / f"{name}.txt").is_file() else path
        elif o.is_file():
            path = o
        else:
            raise FileNotFoundError(f"prompt override {o} does not exist")
    if not path.is_file():
        raise FileNotFoundError(f"no prompt named {name!r} ({path})")
    return Prompt(name, path.read_text(encoding="utf-8"), str(path))


# What a model may read as "<" or "/": ASCII, the NFKC-equivalent full-width and small forms,
# and look-alikes (angle quotes and brackets); invisible characters a fence may hide behind.
_OPENERS = "<\uff1c\ufe64\u2039\u3008\u2329\u27e8\u276e\u02c2\u1438"
_SLASHES = "/\uff0f\u2044\u2215\u29f8"
_INVISIBLE = "\u00ad\u180e\u200b\u200c\u200d\u2060\ufeff"
_GAP = rf"[\s{_INVISIBLE}]*"
# Escaped forms a model decodes as it reads (JSON's `\/` and `\u003c`/`\u002f`, text quoted
# once or twice): a backslash (ASCII, full-width, small) may precede the slash, and the JSON
# unicode escapes stand for "<" and "/".
_BACKSLASHES = re.escape("\\") + "\uff3c\ufe68"  # in a character class
_OPENER = rf"(?:[{_OPENERS}]|\\u003[cC])"
_SLASH = rf"(?:[{_BACKSLASHES}]{_GAP})*(?:[{_SLASHES}]|\\u002[fF])"
_FENCE_MENTION = re.compile(r"</([A-Za-z][\w-]*)>|<([A-Za-z][\w-]*)> blocks?\b")


def _letter(ch: str) -> str:
    """A character class for one tag character: both cases and their full-width forms."""
    forms = {ch.lower(), ch.upper()}
    forms |= {chr(ord(c) + 0xFEE0) for c in list(forms) if "!" <= c <= "~"}
    return "[" + "".join(re.escape(c) for c in sorted(forms)) + "]"


@cache
def prompt_fences() -> frozenset[str]:
    """Tags the packaged prompts fence data with (a closing `</context>` in a template, or a
    `<document> block` it names): data inside any block is neutralised for all of them, since
    blocks sit inside one another (a community block inside the report prompt's context)."""
    tags: set[str] = set()
    for name in (*PROMPT_NAMES, "summarize_descriptions_batch"):
        for closing, named in _FENCE_MENTION.findall(
            (PROMPT_DIR / f"{name}.txt").read_text("utf-8")
        ):
            tags.add((closing or named).lower())
    return frozenset(tags)


@cache
def _fence_re(tags: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(f"[{_INVISIBLE}]*".join(_letter(c) for c in t) for t in tags)
    return re.compile(rf"{_OPENER}(?={_GAP}(?:{_SLASH}{_GAP})?(?:{names}))")


def neutralise(text: str, *tags: str) -> str:
    """`text` with every fence-like `<tag`/`</tag` (for `tags` and the packaged prompts'
    fences, in any of the forms in the module docstring) turned into `&lt;tag`: put inside a
    block of a prompt, it cannot end the block and speak as the prompt."""
    names = tuple(sorted({t.lower() for t in tags} | prompt_fences(), key=lambda t: (-len(t), t)))
    return _fence_re(names).sub("&lt;", text)


def _attr(value: object, tags: tuple[str, ...]) -> str:
    """An attribute value: one line, no quote, neutralised (a name can carry a fence too)."""
    return neutralise(" ".join(str(value).split()).replace('"', ""), *tags)


def data_block(text: str, tag: str = "document", **attrs: object) -> str:
    """`text` inside `<tag attr="v">...</tag>`, text and attribute values neutralised (see
    `neutralise`)."""
    safe = neutralise(text, tag)
    head = "".join(f' {k}="{_attr(v, (tag,))}"' for k, v in attrs.items())
    return f"<{tag}{head}>\n{safe}\n</{tag}>"
