"""Images in a document's text: what of an image is text (its alt text and title) and what is
not (its address, and above all a `data:` URI's payload).

Why: an image written inline as a data URI (`![a](data:image/png;base64,…)`, `<img
src="data:…">`) is hundreds of kilobytes of base64 in the page's source; read as text, one
of 800 KB became 2,053 junk text units and 2,056 entity rows (issue 45). A page shows the
picture, and its alt text to a reader who cannot see it: so an image reads as its alt text
(and its title), where it stands; an http(s) or relative address is a link of kind `image`
(the document links table), never text to embed; and a data URI is neither. Where a data URI
is left in any text (a plain-text file, a code block, a link to one) it reads as a short
placeholder (`[image]`), so its payload reaches no text unit, entity or vector.
"""

from __future__ import annotations

import html
import re

# A data URI (RFC 2397): `data:` + a media type + parameters + `,` + the payload, up to a
# space, quote, bracket or backslash (what ends a URL in Markdown, HTML or JSON).
DATA_URI = re.compile(
    r"(?<![\w.+-])data:(?P<type>[\w.+-]+)/[\w.+-]+"
    r"(?:;[\w.+-]+(?:=[^\s;,\"'()<>\\]*)?)*"
    r",[^\s\"'()<>\[\]`\\]*",
    re.I,
)
# `<img ...>` with its attributes (a quoted value may hold `>`: an SVG data URI)
HTML_IMG = re.compile(r"<img\b(?:[^>\"']|\"[^\"]*\"|'[^']*')*>", re.I)
# one attribute of a tag, its value taken whole (so a value's text is never read as attributes)
_HTML_ATTR = re.compile(r"""([\w:-]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?""")


def is_data_uri(href: str) -> bool:
    return href.lstrip()[:5].lower() == "data:"


def _placeholder(m: re.Match[str]) -> str:
    return "[image]" if m.group("type").lower() == "image" else "[data]"


def without_data(text: str) -> str:
    """`text` with every data URI as a placeholder: `[image]` (an image's), else `[data]`."""
    return DATA_URI.sub(_placeholder, text) if "ata:" in text or "ATA:" in text else text


def image_words(alt: str, title: str = "") -> str:
    """What an image reads as: its alt text, and its title in parentheses when that says
    more (`Chart (Sales by year)`); nothing for a decorative image (no alt, no title)."""
    alt, title = " ".join(alt.split()), " ".join(title.split())
    if not title or title.lower() in alt.lower():
        return alt
    return f"{alt} ({title})" if alt else title


def image_link(src: str, alt: str) -> list[dict[str, str]]:
    """The link record of an image at `src` (none for a data URI or no address)."""
    src = src.strip()
    if not src or is_data_uri(src):
        return []
    return [{"href": src, "text": " ".join(alt.split()), "kind": "image"}]


def html_images(text: str) -> tuple[str, list[dict[str, str]]]:
    """(`text` with each `<img>` tag as its words, the links of those images)."""
    if "<img" not in text.lower():
        return text, []
    links: list[dict[str, str]] = []

    def words(m: re.Match[str]) -> str:
        attrs: dict[str, str] = {}
        for name, a, b, c in _HTML_ATTR.findall(m.group(0), 4):  # after `<img`
            attrs.setdefault(name.lower(), html.unescape(a or b or c))  # the first one counts
        links.extend(image_link(attrs.get("src", ""), attrs.get("alt", "")))
        return image_words(attrs.get("alt", ""), attrs.get("title", ""))

    return HTML_IMG.sub(words, text), links
