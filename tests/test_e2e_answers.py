"""Issue 34's page points in a real browser at 1280x720 (test_e2e's served app and Chromium): a link
naming a model gets its batch size, the Sweep form's empty target reads as the Race form's, no cut
tab label or form value, a finished race shows why and what to try next (with a link that fills the
form) under a full-width progress bar, and the Runs comparison in words."""

import os

import pytest
from test_e2e import browser, page, wait_until  # noqa: F401 - fixtures
from test_e2e_first_screen import CUT_SHORT

from core import PROJECT_ROOT
from core.runs.bundle import import_bundle, load_bundle_file
from core.runs.store import Store

pytestmark = pytest.mark.e2e
# The same check as the Race form's, on the Sweep form's expander.
SWEEP_CUT_SHORT = CUT_SHORT.replace("'Configure a race'", "'Configure a sweep'")


def imported(e2e_data, name: str) -> int:  # noqa: F811
    store = Store(str(e2e_data / "store.sqlite3"))
    try:
        path = os.path.join(PROJECT_ROOT, "assets", "recordings", f"{name}.json")
        return import_bundle(store, load_bundle_file(path), "e2e-answers")
    finally:
        store.close()


def test_a_link_naming_a_model_fills_that_models_batch_size(app_url, page):  # noqa: F811
    page.goto(f"{app_url}/?model=resnet18")
    batch = page.get_by_role("spinbutton", name="Batch size")
    wait_until(lambda: batch.count() and batch.input_value() != "", timeout=90)
    assert batch.input_value() == "64"


def test_the_sweep_form_names_its_empty_target_and_cuts_nothing(app_url, page):  # noqa: F811
    page.goto(f"{app_url}/sweep")
    box = page.locator("[data-testid='stSelectbox']").filter(has_text="Run until the speedup is known")
    wait_until(lambda: box.count() > 0, timeout=90)
    # What the box shows, its text and its input's placeholder (an empty choice is shown as one).
    shown = box.first.evaluate(
        "e => e.innerText + ' | ' + [...e.querySelectorAll('input')].map(i => i.placeholder + ' ' + i.value).join(' ')"
    )
    assert "no: the steps asked for" in shown and "Choose an option" not in shown, shown
    assert page.evaluate(SWEEP_CUT_SHORT) == []


def test_under_the_hood_tab_labels_are_whole(app_url, page):  # noqa: F811
    page.goto(f"{app_url}/under_the_hood")
    tabs = page.get_by_role("tab")
    wait_until(lambda: tabs.count() >= 5, timeout=90)
    width = page.viewport_size["width"]
    for i in range(tabs.count()):
        box = tabs.nth(i).bounding_box()
        assert box["x"] + box["width"] <= width, (tabs.nth(i).inner_text(), box)
        assert tabs.nth(i).evaluate("e => e.scrollWidth <= e.clientWidth + 1"), tabs.nth(i).inner_text()


def test_a_finished_race_says_why_and_what_to_try_next(app_url, e2e_data, page):  # noqa: F811
    run_id = imported(e2e_data, "cpu-recompiles-varying-shapes")
    page.goto(f"{app_url}/?run={run_id}")
    why = page.get_by_text("Why:", exact=False).first
    wait_until(lambda: why.count() and why.is_visible(), timeout=90)
    page.get_by_text("The whole reading", exact=False).first.click()  # the answers in full, one click away
    guard = page.get_by_text("size mismatch at index 0. expected 48, actual 24", exact=False).first
    wait_until(lambda: guard.is_visible(), timeout=15)  # whole, wrapped
    link = page.get_by_role("link", name="dynamic shapes").first  # the short Next line (and again in the details)
    assert "dynamic=true" in link.get_attribute("href") and "model=small_cnn" in link.get_attribute("href")
    bar = page.locator("[data-testid='stProgress']").first.bounding_box()
    main = page.locator("[data-testid='stMainBlockContainer']").first.evaluate(
        "e => { const s = getComputedStyle(e); return e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); }"
    )
    assert bar["width"] >= 0.97 * main, (bar, main)  # finished: the whole width, no room kept for Cancel
    page.screenshot(path=os.path.join(PROJECT_ROOT, "test-artifacts", "race-answers.png"))


def test_the_longest_compile_mode_is_not_cut_on_the_race_form(app_url, page):  # noqa: F811
    page.goto(app_url)
    launch = page.get_by_role("button", name="Launch", exact=True)
    wait_until(lambda: launch.count() and launch.is_enabled(), timeout=90)
    page.get_by_role("combobox", name="Compile mode").click()
    page.get_by_role("option", name="max-autotune-no-cudagraphs").click()
    wait_until(lambda: page.get_by_text("max-autotune-no-cudagraphs").count() > 0, timeout=30)
    assert page.evaluate(CUT_SHORT) == []
