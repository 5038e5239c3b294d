"""The walk-through's page points of issue 34, on the pages themselves (Streamlit's AppTest): a replay's
link names only the replay, and a finished race's answers (why, what to try next) are on its page."""

from test_pages import app, record_probe

from core.runs.bundle import import_bundle, load_bundle_file


def test_a_replay_link_carries_no_other_models_configuration(store, sleepers):  # noqa: F811
    record_probe(store)
    at = app(model="pointwise_mlp", batch_size=4096, replay="file:cpu-break-even-demo", speed="5x")
    assert not at.exception, at.exception
    link = dict(at.query_params)
    assert link.get("replay") == "file:cpu-break-even-demo" and "model" not in link and "batch_size" not in link
