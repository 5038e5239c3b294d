"""After Launch the link names the launched run (?run=N), even when the next rerun the browser asks
for was sent before it heard of the new link (issue 26: the address bar lost ?run= after Launch, and
a reload showed another run). Every same-page rerun starts from the query string the browser sends,
so such a rerun used to write the link back without the run; the page now keeps the launched run in
the link until a rerun arrives with it (app_pages/race.py, settle_link)."""

from test_pages import app, record_probe


def launched(store, **link) -> tuple:
    """The Race page opened at `link`, a quick race launched; (the page, the link before Launch, the run's id)."""
    record_probe(store)
    at = app(**link)
    at.number_input(key="form_steps_per_epoch").set_value(3).run()
    before = dict(at.query_params)  # the link as the browser had it when it sent the click
    at.button(key="launch").click().run()
    assert not at.exception
    run_id = str(store.list_runs(kind="race")[0].id)
    assert at.query_params["run"] == run_id
    return at, before, run_id


def test_a_rerun_sent_with_the_link_from_before_launch_keeps_the_launched_run_in_the_link(store, sleepers):
    at, before, run_id = launched(store)
    assert "run" not in before
    at.query_params = dict(before)  # a rerun the browser asked for before it heard of ?run=N
    at.run()
    assert not at.exception and at.query_params["run"] == run_id  # the page wrote it back
    assert any(p.proto.text.startswith(f"Run {run_id}: ") for p in at.get("progress"))  # and shows that run
    at.run()  # the browser's link has the run now: from here on the link is the browser's own
    assert at.query_params["run"] == run_id and "link_pending" not in at.session_state
    at.query_params.pop("run")  # Back to the link from before Launch: the page does not put the run back
    at.run()
    assert "run" not in at.query_params


def test_a_stale_rerun_naming_an_older_run_does_not_take_the_page_back_to_it(store, sleepers):
    at, _, older = launched(store)
    at.number_input(key="form_steps_per_epoch").set_value(4).run()
    before = dict(at.query_params)  # a link that names the older run
    assert before["run"] == older
    at.button(key="launch").click().run()
    newer = str(store.list_runs(kind="race")[0].id)
    assert newer != older and at.query_params["run"] == newer
    at.query_params = dict(before)  # stale: it still names the older run
    at.run()
    assert at.query_params["run"] == newer and at.session_state["followed"] == int(newer)
    assert any(p.proto.text.startswith(f"Run {newer}: ") for p in at.get("progress"))  # the page shows it


def test_a_run_link_sets_the_form_to_that_runs_configuration_so_launch_races_it_again(store, sleepers):
    """Issue 43, item 14: /?run=6 showed run 6 (small_cnn, max-autotune) while the form, and the link
    it writes, became the device's default race: Launch raced something else."""
    import dataclasses
    import time

    from support import quick_spec

    from core.engine import analysis
    from core.runs import fleet

    record_probe(store)
    spec = quick_spec(model="small_cnn", batch_size=8, mode="max-autotune-no-cudagraphs", backend="inductor")
    spec = dataclasses.replace(spec, epochs=1, steps_per_epoch=3)
    run_id = store.create_run(
        "race", spec.to_dict(), "someone", "cpu", status="running", started_at=time.time(), host=fleet.HOST
    )
    times = [0.02, 0.02, 0.02]
    store.finish_run(run_id, "done", summary=analysis.summarize(times, [0.5, 0.01, 0.01], [0.06], [0.52], 8))
    at = app(run=run_id)
    assert not at.exception
    assert at.query_params["run"] == str(run_id)  # the link keeps the run it names
    assert not at.warning  # nothing of it moved
    assert (
        at.session_state["form_model"] == "small_cnn" and at.session_state["form_mode"] == "max-autotune-no-cudagraphs"
    )
    assert at.query_params["model"] == "small_cnn" and at.query_params["mode"] == "max-autotune-no-cudagraphs"
    assert at.query_params["batch_size"] == "8" and at.query_params["steps_per_epoch"] == "3"
    at.session_state["race_form"] = True  # unfold the form (a run's link opens it folded), then Launch
    at.run()
    at.button(key="launch").click().run()
    assert not at.exception
    launched = store.list_runs(kind="race")[0]
    assert launched.id != run_id
    fields = ("model", "batch_size", "mode", "epochs", "steps_per_epoch", "backend", "device")
    assert {k: launched.params[k] for k in fields} == {k: spec.to_dict()[k] for k in fields}


def test_launch_waits_while_the_lanes_warm_server_is_still_starting(store, sleepers, monkeypatch):
    """A freshly started app's warm server imports torch for some seconds: Launch says so and waits
    for it (a race launched then would wait for it in the queue), then races as quickly as later."""
    from core.runs import processes

    record_probe(store)
    monkeypatch.setattr(processes, "warming", lambda lanes: {"cpu"} & set(lanes))
    at = app()
    assert not at.exception and at.button(key="launch").disabled
    assert any("Getting the race process ready" in info.value for info in at.info)
    monkeypatch.setattr(processes, "warming", lambda lanes: set())  # the server serves now
    at.run()
    assert not at.button(key="launch").disabled
    assert not any("Getting the race process ready" in info.value for info in at.info)
