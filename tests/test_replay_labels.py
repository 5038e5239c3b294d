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


def test_a_stored_races_label_follows_its_headline_not_a_missing_verdict(store, sleepers):  # noqa: F811
    # Issue 43: "Run 4 here: resnet18, batch 16 (faster, but does not break even ...)" for a 0.75x run.
    from core.view.replay import stored_race_label

    record_probe(store)
    slow = {"steady_state_speedup": 0.75, "speedup_ci95": [0.70, 0.80], "compile_time_s": 46.0}
    params = {"model": "resnet18", "batch_size": 16}
    unjudged = store.create_run("race", params, "ann", "cpu", status="done", summary=slow)  # no verdict stored
    busy = store.create_run("race", params, "ann", "cpu", status="done", summary={**slow, "verdict": "machine busy"})
    label = stored_race_label(store.get_run(unjudged))
    assert label == f"Run {unjudged} here: resnet18, batch 16 (0.75x, compiled steps slower, compile never pays off)"
    assert stored_race_label(store.get_run(busy)).endswith("(0.75x, no verdict: the machine was busy)")
    at = app()
    options = at.selectbox(key="replay_pick").options
    assert label in options and not [o for o in options if "0.75x" in o and "faster" in o]
