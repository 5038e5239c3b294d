"""A finished race at a glance, in a real browser (issue 43; test_e2e's served app and Chromium): at
1280x720 its verdict line, the four lead cards and the race chart are whole above the fold, with
few words there; presenter mode at 1920x1080 fills the screen in type a room can read; on a phone
the verdict and the cards come before the chart. Saves race-done-1280.png, presenter-1920.png and
race-phone.png to test-artifacts/ (docs/screenshots/ holds a reviewed copy)."""

import os

import pytest
from test_e2e import ARTIFACTS, PHONE, browser, wait_until  # noqa: F401 - fixtures
from test_e2e_answers import imported

from core.runs.bundle import AlreadyImported

pytestmark = pytest.mark.e2e
FOLD_PX = 720
# The words a reader meets above the fold: visible text on the page, not the charts' tick labels
# and legends (drawn as SVG, checked whole by their boxes) nor an icon's ligature name.
WORDS_ABOVE = """(fold) => {
  const out = [];
  const walk = document.createTreeWalker(document.querySelector('[data-testid="stMain"]'), NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    const node = walk.currentNode, el = node.parentElement, text = node.textContent.trim();
    if (!text || el.closest('svg') || el.closest('[data-testid="stIconMaterial"]') || !el.checkVisibility()) continue;
    const range = document.createRange(); range.selectNodeContents(node);
    const box = range.getBoundingClientRect();
    if (box.height > 0 && box.bottom > 0 && box.top < fold) out.push(text);
  }
  return out.join(' ');
}"""
# Every piece of text on the screen with its font size in px, the charts' SVG text included.
TEXT_SIZES = """() => {
  const out = [];
  const walk = document.createTreeWalker(document.querySelector('[data-testid="stMain"]'), NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    const node = walk.currentNode, el = node.parentElement, text = node.textContent.trim();
    if (!text || el.closest('[data-testid="stIconMaterial"]') || !el.checkVisibility()) continue;
    const range = document.createRange(); range.selectNodeContents(node);
    const box = range.getBoundingClientRect();
    if (box.height === 0 || box.top >= innerHeight || box.bottom <= 0) continue;
    const svg = el.closest('svg') && el.getAttribute('font-size');
    out.push([text.slice(0, 40), parseFloat(svg || getComputedStyle(el).fontSize)]);
  }
  return out;
}"""
# The lowest edge of anything drawn on the screen (the page's own blocks, not its scroll container).
CONTENT_BOTTOM = """() => Math.max(...[...document.querySelectorAll(
  '[data-testid="stMainBlockContainer"] [data-testid="stElementContainer"]')].filter(e => e.checkVisibility() &&
  e.getBoundingClientRect().height > 0).map(e => e.getBoundingClientRect().bottom))"""


def recorded(e2e_data, name: str) -> int:  # noqa: F811
    """The shipped recording `name` as a finished run of the served app's store (imported once)."""
    try:
        return imported(e2e_data, name)
    except AlreadyImported as already:
        return already.run_id


def boxes(page, selector: str) -> list[dict]:
    return page.eval_on_selector_all(
        selector, "els => els.filter(e => e.checkVisibility()).map(e => e.getBoundingClientRect().toJSON())"
    )


def open_finished(page, app_url, run_id, query: str = ""):  # noqa: F811
    page.goto(f"{app_url}/?run={run_id}{query}")
    verdict = page.locator(".st-key-verdict")
    wait_until(lambda: verdict.count() and page.locator("[data-testid='stVegaLiteChart'] svg").count(), timeout=90)
    wait_until(lambda: page.locator("[data-testid='stMetric']").count() >= 4, timeout=30)
    page.mouse.move(2, 2)
    page.wait_for_timeout(1500)  # the charts' final size (width and height "container")
    return verdict


@pytest.mark.parametrize("name", ["cpu-recompiles-varying-shapes", "cpu-compile-never-pays-off"])
def test_at_1280x720_the_verdict_the_four_cards_and_the_race_chart_are_above_the_fold(app_url, e2e_data, browser, name):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": FOLD_PX})
    verdict = open_finished(page, app_url, recorded(e2e_data, name))
    said = verdict.inner_text()
    assert said.count("\n") == 0 and len(said) < 110, said  # one line
    lead = page.locator(".st-key-result_cards [data-testid='stMetric']")
    assert lead.count() == 4
    labels = [lead.nth(i).locator("[data-testid='stMetricLabel']").inner_text() for i in range(4)]
    assert labels == ["Compile time", "First-epoch overhead", "Steady-state speedup", "Break-even"]
    race = page.locator("[aria-label^='The race: cumulative training time']").first
    shown = [verdict.bounding_box(), *[lead.nth(i).bounding_box() for i in range(4)], race.bounding_box()]
    assert all(b["y"] >= 0 and b["y"] + b["height"] <= FOLD_PX for b in shown), shown
    assert shown[0]["y"] < shown[1]["y"] and shown[4]["y"] + shown[4]["height"] <= shown[5]["y"] + 1  # in that order
    text = page.evaluate(WORDS_ABOVE, FOLD_PX)
    words = text.split()
    numbers = [w for w in words if any(ch.isdigit() for ch in w)]
    print(f"{name}: {len(words)} words, {len(numbers)} numbers above the fold: {text}")
    assert len(words) < 80 and len(numbers) < 25, text
    assert "The interval allows for" not in text and "drop_last" not in text  # the reading in full is a click away
    os.makedirs(ARTIFACTS, exist_ok=True)
    if name == "cpu-recompiles-varying-shapes":
        page.screenshot(path=os.path.join(ARTIFACTS, "race-done-1280.png"))
    # The answers, one short line each under the chart; the whole reading one click away.
    why = page.get_by_text("Why:", exact=False).first
    why.scroll_into_view_if_needed()
    assert why.evaluate("e => e.getBoundingClientRect().height") < 30  # one line
    details = page.get_by_text("The whole reading", exact=False).first
    assert page.get_by_text("The interval allows for", exact=False).count() == 0 or not (
        page.get_by_text("The interval allows for", exact=False).first.is_visible()
    )
    details.click()
    wait_until(lambda: page.get_by_text("The interval allows for", exact=False).first.is_visible(), timeout=15)


def test_presenter_mode_at_1920x1080_fills_the_screen_in_type_a_room_can_read(app_url, e2e_data, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1920, "height": 1080})
    verdict = open_finished(page, app_url, recorded(e2e_data, "cpu-recompiles-varying-shapes"), "&present=1")
    wait_until(lambda: not page.locator("[data-testid='stSidebar']").is_visible(), timeout=10)
    headline = verdict.locator("p").first.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    labels = page.eval_on_selector_all(
        "[data-testid='stMetricLabel'] p", "els => els.map(e => parseFloat(getComputedStyle(e).fontSize))"
    )
    print(f"presenter: headline {headline} px, card labels {labels} px")
    assert headline >= 36 and len(labels) == 4 and min(labels) >= 28, (headline, labels)
    small = [(text, size) for text, size in page.evaluate(TEXT_SIZES) if size < 24]
    assert small == [], small  # every word on the screen, the charts' axes and legends included
    charts = boxes(page, ".st-key-present_charts [data-testid='stVegaLiteChart']")
    assert len(charts) == 2 and abs(charts[0]["y"] - charts[1]["y"]) < 2, charts  # side by side
    assert min(c["height"] for c in charts) >= 500, charts  # they take the height the screen leaves
    bottom = page.evaluate(CONTENT_BOTTOM)
    print(f"presenter: content ends at {bottom} px of 1080")
    assert 1080 - 80 <= bottom <= 1080, bottom  # the screen filled, nothing below it
    os.makedirs(ARTIFACTS, exist_ok=True)
    page.screenshot(path=os.path.join(ARTIFACTS, "presenter-1920.png"))
    # The same screen on a 1280x720 projector: everything still on it.
    page.set_viewport_size({"width": 1280, "height": 720})
    page.wait_for_timeout(1500)
    assert page.evaluate(CONTENT_BOTTOM) <= 720
    assert all(b["y"] + b["height"] <= 720 for b in boxes(page, "[data-testid='stMetric']"))


def test_on_a_phone_the_verdict_and_the_cards_come_before_the_chart(app_url, e2e_data, browser):  # noqa: F811
    page = browser.new_page(viewport=PHONE)
    verdict = open_finished(page, app_url, recorded(e2e_data, "cpu-break-even-demo"))
    said = verdict.bounding_box()
    lead = boxes(page, ".st-key-result_cards [data-testid='stMetric']")
    race = page.locator("[aria-label^='The race: cumulative training time']").first.bounding_box()
    assert len(lead) == 4 and all(said["y"] + said["height"] <= card["y"] for card in lead), (said, lead)
    assert max(card["y"] + card["height"] for card in lead) <= race["y"], (lead, race)
    assert max(card["y"] + card["height"] for card in lead) <= PHONE["height"], lead  # on the first screen
    assert {round(card["x"]) for card in lead} == {round(lead[0]["x"]), round(lead[1]["x"])}  # two a row
    os.makedirs(ARTIFACTS, exist_ok=True)
    page.screenshot(path=os.path.join(ARTIFACTS, "race-phone.png"))
