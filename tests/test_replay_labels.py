"""The replay picker's labels read as written: a select box shows its options as plain text, so they
carry no markdown escapes ("Recorded\\: small\\_cnn" was what the screen said), and no control
characters from a bundle either."""

from test_pages import app, record_probe, record_race


def test_the_replay_picker_labels_carry_no_markdown_escapes(store, sleepers):  # noqa: F811
    record_probe(store)
    run_id = record_race(store, "done")
    store.update_run(run_id, params={**store.get_run(run_id).params, "model": "small_cnn\x1b[2J"})
    at = app()
    options = at.selectbox(key="replay_pick").options
    assert options and not [o for o in options if "\\" in o or "\x1b" in o]
    assert any(o.startswith("Recorded: ") for o in options)
    assert any("here: small_cnn[2J" in o for o in options)
