"""Text from a user or a bundle, made inert for where it is shown.

Streamlit renders most strings as markdown (st.error, st.progress text, captions, metric labels and
tooltips): an imported run whose error is `![x](http://host/pixel.png)` would make every visitor's
browser fetch that image, and `[click me](http://host/phish)` would be a live link. A terminal
obeys escape sequences: a device name holding `ESC[2J` would clear the screen of whoever runs
`python -m core runs`. So anything that did not come from this app's own code passes through one
of these on its way out: `markdown_text` for a page, `terminal_text` for the command line.
"""

from __future__ import annotations

import re

# CommonMark lets a backslash escape any ASCII punctuation, which then renders as itself. Escaping
# all of it (not a hand-picked few) also covers what Streamlit adds: :color[..] directives,
# :material/..: icons and $math$.
_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# C0 and C1 controls and DEL (ESC starts every terminal escape sequence), and the Unicode
# bidirectional overrides that make text read differently from what it is.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile(r"[\r\n\t]+")
# Streamlit's markdown also turns bare URLs and e-mail addresses into links after parsing, escapes
# or not (GFM's autolink literals, matched on the finished text). An invisible word joiner after
# each ':' and '@' and inside 'www.' breaks those patterns without changing what a person reads.
WORD_JOINER = "\u2060"
_AUTOLINK_MARKERS = re.compile(r"[:@]|(?i:www)(?=\.)")


def markdown_text(value: object) -> str:
    """`value` as markdown that renders as exactly its text: no links, images, formatting, HTML."""
    text = _CONTROLS.sub("", _LINE_BREAKS.sub(" ", str(value)))
    text = _AUTOLINK_MARKERS.sub(lambda m: m.group(0) + WORD_JOINER, text)
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


def terminal_text(value: object, one_line: bool = True) -> str:
    """`value` with control characters removed, so a terminal prints it and obeys none of it.
    `one_line` also turns line breaks and tabs into spaces (a table cell, a status line)."""
    text = str(value)
    if one_line:
        text = _LINE_BREAKS.sub(" ", text)
    else:
        text = text.replace("\r\n", "\n").replace("\t", "    ")
        return "\n".join(_CONTROLS.sub("", line) for line in text.split("\n"))
    return _CONTROLS.sub("", text)


# A spreadsheet runs a cell that begins with one of these as a formula (=HYPERLINK(...) exfiltrates,
# a DDE call can run a program), and a tab or carriage return can hide one behind a cell break.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A table cell as a spreadsheet should read it: text that would start a formula gets a leading
    apostrophe (OWASP's advice), so it shows as text; numbers stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(frame) -> str:
    """A pandas DataFrame as CSV with every text cell passed through `csv_cell`."""
    return frame.map(csv_cell).to_csv(index=False)
