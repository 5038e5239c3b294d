"""Out-of-range form values and links the page cannot take as they are: every value the page refuses,
changes or ignores is said where the visitor looks, and Launch stays disabled while a field is out of
range (before, 100000, 0 or -5 in Batch size turned the field red with no message, and the race
started at the last value the browser had accepted)."""

import pytest
from test_pages import app, record_probe


def launch(at):
    return next(b for b in at.button if b.label == "Launch")


@pytest.mark.parametrize("typed", [100000, 0, -5])
def test_an_out_of_range_batch_size_is_said_and_launch_is_disabled(store, sleepers, typed):
    record_probe(store)
    at = app(model="mlp")
    field = at.number_input(key="form_batch_size")
    # No bounds in the browser: it passes on whatever is typed, and the page says what is wrong with it.
    assert field.min is None and field.max is None and "1 to 65536" in field.help
    field.set_value(typed).run()
    assert not at.exception
    said = [e.value.replace("\\", "") for e in at.error]  # as markdown: its brackets escaped
    assert f"batch size: must be from 1 to 65536 (got {typed})" in said
    assert launch(at).disabled
    assert store.list_runs(kind="race") == []
    at.number_input(key="form_batch_size").set_value(64).run()
    assert not at.error and not launch(at).disabled


def test_a_host_limit_is_said_in_the_field_s_help(store, sleepers, monkeypatch):
    record_probe(store)
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "64")
    at = app(model="mlp")
    assert "1 to 64 (this host's limit)" in at.number_input(key="form_batch_size").help
    at.number_input(key="form_batch_size").set_value(128).run()
    assert at.error and launch(at).disabled


def test_link_values_this_device_cannot_run_are_noted_not_silently_replaced(store, sleepers):
    record_probe(store)  # a CPU
    at = app(model="mlp", mode="reduce-overhead", precision="amp-fp16")
    assert not at.exception
    assert at.selectbox(key="form_mode").value == "default" and at.selectbox(key="form_precision").value == "fp32"
    notes = " ".join(w.value for w in at.warning)
    assert "reduce\\-overhead" in notes and "amp\\-fp16" in notes and "CUDA" in notes
    at.number_input(key="form_steps_per_epoch").set_value(3).run()  # a rerun: the notes stay
    assert len([w for w in at.warning if "CUDA" in w.value]) == 2


def test_a_link_to_a_run_that_does_not_exist_says_so(store, sleepers):
    record_probe(store)
    at = app(run=999)
    assert not at.exception
    assert any("999" in w.value and "no run" in w.value for w in at.warning)
    at = app(run="abc")
    assert any("abc" in w.value and "ignored" in w.value for w in at.warning)
