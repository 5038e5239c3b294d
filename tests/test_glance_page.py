"""A finished race at a glance, on the Race page itself (Streamlit's AppTest, issue 43): the page
leads with one verdict line, then the four lead cards, then the race chart; the answers follow as
one short line each, and the reading and every answer in full are in one expander under them.
Where it lands on a screen is tests/test_e2e_glance.py."""

from test_answers_pages import page_text, recording
from test_pages import app, record_probe

from core.engine.reading import reading
from core.runs.bundle import import_bundle
from core.view.run_screen.layout import DETAILS_LABEL, LEAD_CARDS, SHORT_WORDS, verdict_line


def in_order(block, inside: str | None = None):
    """The page's elements top to bottom as (type, text, the expander they are in)."""
    for node in block.children.values():
        kind = type(node).__name__
        if kind == "Expander":
            yield "expander", node.label, inside
            yield from in_order(node, node.label)
        elif hasattr(node, "children") and node.children and kind not in ("Metric",):
            yield from in_order(node, inside)
        else:
            value = getattr(node, "label", None) if kind == "Metric" else getattr(node, "value", None)
            yield kind.lower(), value if isinstance(value, str) else "", inside


def finished_page(store, name: str):
    record_probe(store)
    run_id = import_bundle(store, recording(name), "someone")
    at = app(run=run_id)
    assert not at.exception, at.exception
    return at, store.get_run(run_id)


def test_a_finished_race_leads_with_its_verdict_then_the_four_cards_then_the_race_chart(store, sleepers):  # noqa: F811
    at, run = finished_page(store, "cpu-recompiles-varying-shapes")
    shown = [(kind, text) for kind, text, inside in in_order(at.main) if inside is None]
    verdict = f"**{verdict_line(run.summary)}**"
    kinds = [kind for kind, _ in shown]
    at_verdict = next(i for i, (kind, text) in enumerate(shown) if text.replace("\\", "") == verdict.replace("\\", ""))
    # Right after the verdict: the four lead cards, in their order, then the race chart.
    after = [(k, t) for k, t in shown[at_verdict + 1 :] if k in ("metric", "unknownelement")]  # a chart is "unknown"
    assert after[:4] == [("metric", label) for label in LEAD_CARDS], after[:6]
    assert after[4] == ("unknownelement", ""), after[:6]  # the race chart, before the throughput and memory cards
    assert kinds.index("metric") > at_verdict
    # The long reading is not on the first screen: the bold sentence over the cards is the verdict line alone.
    bold = [t for k, t in shown if k == "markdown" and t.startswith("**") and t.endswith("**")]
    assert bold[0].replace("\\", "") == verdict.replace("\\", "")
    assert not any(reading(run.summary)[:60] in t.replace("\\", "") for k, t in shown)


def test_the_answers_are_one_short_line_each_with_the_whole_reading_one_click_away(store, sleepers):  # noqa: F811
    at, run = finished_page(store, "cpu-recompiles-varying-shapes")
    elements = list(in_order(at.main))
    outside = [text.replace("\\", "").replace("\u2060", "") for kind, text, inside in elements if inside is None]
    details = [
        text.replace("\\", "").replace("\u2060", "") for kind, text, inside in elements if inside == DETAILS_LABEL
    ]
    heads = {}
    for text in outside:
        for head in ("Why", "Recompiles", "Cache", "Next"):
            if text.startswith(f"**{head}:** "):
                heads[head] = text
    assert set(heads) == {"Why", "Recompiles", "Next"}, outside
    for text in heads.values():
        prose = text.split("[")[0]  # Next: the links' labels only
        assert len(prose.split()) <= SHORT_WORDS + 3, text  # one short line each
    assert heads["Why"] == "**Why:** Compiled is faster in its kernels: 14.9 ms a step against eager's 23.9 ms."
    assert heads["Recompiles"].startswith("**Recompiles:** Compiled recompiled once, at step 15: tensor 'x' size")
    assert "drop_last" not in heads["Recompiles"]  # the remedy in full is in the details
    assert "[dynamic shapes](/?" in heads["Next"] and "dynamic=true" in heads["Next"]
    # One click away: the expander holds the reading in full and every answer in full.
    assert ("expander", DETAILS_LABEL, None) in elements
    whole = "\n".join(details)
    assert reading(run.summary).split(";")[0].replace("\u2060", "") in whole
    assert "The interval allows for" in whole  # the reading's caveats, off the first screen
    assert "A new batch size failed the guard" in whole and "drop_last=True" in whole
    assert "Compiled is faster here because its kernels take 8.99 ms less" in whole
    assert "**Next:** Try [dynamic shapes](/?" in whole
    assert "size mismatch at index 0. expected 48, actual 24" in page_text(at)  # the guard whole, in the details
