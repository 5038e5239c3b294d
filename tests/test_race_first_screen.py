"""The Race page's first screen (issue 26, point 13), in AppTest: the story line, the CPU
break-even demo as the primary button, the few choices that decide a race beside Launch, the rest
under More settings, and help on every control. The fold and cut labels are measured in a browser
(test_e2e_first_screen.py)."""

from test_pages import app, record_probe

from core.engine.spec import on_form
from core.view.race_form import CPU_BREAK_EVEN_LABEL, MORE_SETTINGS, STORY, first_screen, form_help, more_settings


def widget_keys(block) -> set[str]:
    found = set()
    for kind in ("selectbox", "number_input", "checkbox", "radio", "text_input"):
        found |= {w.key for w in getattr(block, kind) if w.key}
    return found


def test_the_layout_puts_the_deciding_choices_first_and_the_rest_under_more_settings():
    assert [o.name for o in first_screen()] == ["model", "batch_size", "mode", "precision"]
    assert {o.name for o in first_screen()} | {o.name for o in more_settings()} == {o.name for o in on_form()}
    assert all(form_help(o) and form_help(o)[0].isupper() for o in on_form())  # every control says what it is


def test_the_first_screen_leads_with_the_story_and_the_demo(store, sleepers):
    record_probe(store)
    at = app()
    assert not at.exception
    assert STORY in [m.value for m in at.markdown]
    labels = [b.label for b in at.button]
    assert labels.index(CPU_BREAK_EVEN_LABEL) < labels.index("Launch")  # the demo first on a CPU
    assert at.button(key="demo").proto.type == "primary" and at.button(key="launch").proto.type == "secondary"
    more = next(e for e in at.expander if e.label == MORE_SETTINGS)
    inside = widget_keys(more)
    assert inside == {f"form_{o.name}" for o in more_settings()}
    outside = widget_keys(next(e for e in at.expander if e.label == "Configure a race")) - inside
    assert {"form_batch_size", "form_mode", "form_precision", "pick_source", "pick_zoo"} <= outside


def test_every_control_of_the_form_has_help(store, sleepers):
    record_probe(store)
    at = app()
    form = next(e for e in at.expander if e.label == "Configure a race")
    controls = [w for kind in ("selectbox", "number_input", "checkbox", "radio") for w in getattr(form, kind)]
    assert len(controls) == len(on_form()) + 1  # the model is two: where from, and which
    missing = [w.label for w in controls if not (w.help or "").strip()]
    assert missing == []


def test_why_image_data_is_not_offered_for_a_vector_model_is_said_plainly_beside_it(store, sleepers):
    record_probe(store)
    at = app()  # pointwise_mlp on a CPU: the data choice offers synthetic only, and says why
    more = next(e for e in at.expander if e.label == MORE_SETTINGS)
    notes = [c.value for c in more.caption]
    assert any("pointwise_mlp takes vectors, not images: choose synthetic data" in n for n in notes), notes
    assert at.selectbox(key="form_data").options == ["synthetic"]
