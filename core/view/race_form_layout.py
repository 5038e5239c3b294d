"""How the Race form is laid out for someone who has never seen it: the story in one line, the demo
as the first thing to press (on a CPU), the few choices that decide a race (the first row of the
options table's form places) with Launch, all above the fold at 1280x720; every other option under
"More settings". Every control carries help from its row in core/engine/options.py.

Pure: the page (app_pages/race.py) draws what this says.
"""

from __future__ import annotations

from core.engine.options import Option
from core.engine.spec import on_form

# The one line a first-time visitor reads before anything else.
STORY = "torch.compile compiles up front so every step runs faster. A race shows when that has paid off."
DEMO_LEAD = "New here? Watch compile pay for itself on this CPU, or race your own model below:"
MORE_SETTINGS = "More settings"
FIRST_ROW = 1  # the options table's form row that is on the first screen; the rest are More settings
# Column widths per row: the model picker needs room for its source and its facts line, the compile
# mode for its longest choice ("max-autotune-no-cudagraphs" was cut at 1280x720), batch size and
# precision little (a number, "amp-bf16"). More settings' rows have three places each, so a choice's
# words fit its box at 1280x720.
ROW_WIDTHS = {FIRST_ROW: [3, 1.7, 3.2, 1.7]}
MORE_SETTINGS_COLUMNS = 3


def first_screen() -> list[Option]:
    """The options on the first screen, left to right: the few that decide a race."""
    return [o for o in on_form() if o.form[0] == FIRST_ROW]


def more_settings() -> list[Option]:
    """Every other form option, row by row, under More settings."""
    return [o for o in on_form() if o.form[0] != FIRST_ROW]


def rows(options: list[Option]) -> dict[int, list[Option]]:
    """The options grouped by their form row, in column order."""
    out: dict[int, list[Option]] = {}
    for option in options:
        out.setdefault(option.form[0], []).append(option)
    return out


def row_widths(row: int, options: list[Option]) -> list[float]:
    """The columns of one form row: as wide as ROW_WIDTHS says, else one per place, evenly."""
    return ROW_WIDTHS.get(row) or [1] * max(MORE_SETTINGS_COLUMNS, max(o.form[1] for o in options) + 1)


def split_unavailable(blocked: dict[str, dict]) -> tuple[dict[str, dict], dict[str, dict]]:
    """What this device cannot run, split into the first screen's options and More settings', so
    each reason is said beside the controls it is about."""
    first = {o.name for o in first_screen()}
    return ({k: v for k, v in blocked.items() if k in first}, {k: v for k, v in blocked.items() if k not in first})


def form_help(option: Option) -> str:
    """A control's help: its row's words for the form, else its command-line help made a sentence."""
    text = option.form_help or option.text(option.help) or option.label
    return text[0].upper() + text[1:] if text else text
