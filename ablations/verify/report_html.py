"""REPORT.html as `ablate verify` checks it: it parses, and every inline figure is a PNG.

The page must stand alone, so an `<img>` may only carry a `data:image/png;base64,` URI: a
relative or remote source would be a broken image once the file is mailed or moved.
"""

from __future__ import annotations

import base64
import binascii
import io
from html.parser import HTMLParser

DATA_PNG = "data:image/png;base64,"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class _Images(HTMLParser):
    """Collects every `<img>`'s `src` and notes tags left open at the end."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sources: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.sources.append(dict(attrs).get("src") or "")
        elif tag in ("html", "body", "table", "details", "script", "style"):
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            self.open.reverse()
            self.open.remove(tag)  # the innermost one of that name
            self.open.reverse()


def html_problem(text: str) -> str | None:
    """Why the page is broken (unclosed structure, a figure that is not an inline PNG), or
    None when it parses and every figure decodes."""
    parser = _Images()
    parser.feed(text)
    parser.close()
    if parser.open:
        return f"does not parse as HTML: <{parser.open[-1]}> is never closed"
    if not parser.sources:
        return None
    from PIL import Image

    for number, src in enumerate(parser.sources, start=1):
        if not src.startswith(DATA_PNG):
            return f"figure {number} is not an inline PNG (src {src[:40]!r})"
        try:
            data = base64.b64decode(src[len(DATA_PNG) :], validate=True)
        except (binascii.Error, ValueError) as exc:
            return f"figure {number} is not valid base64: {exc}"
        if not data.startswith(PNG_SIGNATURE):
            return f"figure {number} does not decode as a PNG (bad signature)"
        try:
            with Image.open(io.BytesIO(data)) as image:
                image.verify()
        except Exception as exc:  # PIL raises many types for a damaged image
            return f"figure {number} does not decode as a PNG: {type(exc).__name__}: {exc}"
    return None
