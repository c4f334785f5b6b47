"""The markdown REPORT.md is written in, as HTML: headings, paragraphs, lists, pipe tables,
images, `<details>` lines, **bold** and `code`. Only that subset: REPORT.md is ours, so
REPORT.html says exactly what it says without a markdown library.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator

IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)\)$")
HEADING = re.compile(r"^(?P<level>#{1,4}) (?P<text>.+)$")
RAW = ("<details", "</details")
"""Lines REPORT.md writes as HTML itself; passed through as they are."""


def inline(text: str) -> str:
    """Escape, then `code` and **bold**; a cell's escaped pipe is a pipe again."""
    parts = re.split(r"(`[^`]*`)", text.replace("\\|", "|"))
    out = []
    for part in parts:
        if len(part) > 1 and part.startswith("`") and part.endswith("`"):
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
        else:
            escaped = html.escape(part)
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped))
    return "".join(out)


def plain(text: str) -> str:
    """Inline markdown as plain text: **bold** and `code` without their marks, a cell's `\\|`
    a pipe. For what is read where markdown is not rendered (a notification, a state
    message): `Adopt depth=1`, not `Adopt **depth=1**`."""
    text = re.sub(r"\*\*(.+?)\*\*", r"\1", text.replace("\\|", "|"))
    return re.sub(r"`([^`]*)`", r"\1", text)


def slug(text: str) -> str:
    """A heading's anchor: lowercase words joined by dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _cells(line: str) -> list[str]:
    """A pipe-table row's cells; `\\|` inside a cell is not a separator."""
    body = line.strip().removeprefix("|").removesuffix("|")
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def table_html(header: list[str], rows: list[list[str]]) -> str:
    """A table in a horizontally scrolling box, so wide tables are never clipped."""
    head = "".join(f"<th>{inline(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in row) + "</tr>" for row in rows)
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="wide">{table}</div>'


def _blocks(lines: list[str]) -> Iterator[tuple[str, list[str]]]:
    """(kind, lines) runs: table, list, raw, image, heading, paragraph."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        kind = (
            "table"
            if line.startswith("|")
            else "list"
            if line.startswith("- ")
            else "raw"
            if line.startswith(RAW)
            else "image"
            if IMAGE.match(line)
            else "heading"
            if HEADING.match(line)
            else "paragraph"
        )
        j = i + 1
        if kind in ("table", "list", "paragraph"):
            while j < len(lines) and lines[j].strip():
                follows = lines[j]
                if kind == "table" and not follows.startswith("|"):
                    break
                if kind == "list" and not follows.startswith("- "):
                    break
                if kind == "paragraph" and (
                    follows.startswith(("|", "- ", *RAW)) or HEADING.match(follows)
                ):
                    break
                j += 1
        yield kind, lines[i:j]
        i = j


def markdown_to_html(markdown: str, image: Callable[[str], str | None]) -> str:
    """The HTML of `markdown`; `image(src)` gives an image's URL, or None to drop it."""
    out = []
    for kind, lines in _blocks(markdown.splitlines()):
        if kind == "heading":
            found = HEADING.match(lines[0])
            assert found is not None  # _blocks matched it
            level, text = len(found["level"]), found["text"]
            out.append(f'<h{level} id="{slug(text)}">{inline(text)}</h{level}>')
        elif kind == "table":
            header, *rest = (_cells(line) for line in lines)
            out.append(
                table_html(header, [r for r in rest if not all(set(c) <= {"-", ":"} for c in r)])
            )
        elif kind == "list":
            items = "".join(f"<li>{inline(line[2:])}</li>" for line in lines)
            out.append(f"<ul>{items}</ul>")
        elif kind == "raw":
            out.append(lines[0])
        elif kind == "image":
            found = IMAGE.match(lines[0])
            assert found is not None
            url = image(found["src"])
            if url is not None:
                alt = html.escape(found["alt"], quote=True)
                out.append(
                    f'<figure><img src="{url}" alt="{alt}"><figcaption>{alt}</figcaption></figure>'
                )
        else:
            out.append(f"<p>{inline(' '.join(line.strip() for line in lines))}</p>")
    return "\n".join(out)
