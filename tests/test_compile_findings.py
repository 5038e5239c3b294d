"""A model the compiler cannot handle is a finding: every view reads a failed compile the same way
("compile failed on this model: <reason>; eager ran"), shows no compiled figure as a result, and a
bundle carries it. Graph breaks are part of the reading."""

import errno
import os
import time

import pytest
from support import quick_spec

from core.engine import analysis, reading
from core.runs.bundle import export_bundle, import_bundle
from core.runs.doctor import FAILED, Check, judge
from core.runs.store import Store
from core.runs.worker import phase_text
from core.view.host_tables import describe
from core.view.report import run_row, summary_table
from core.view.run_screen.layout import result_cards

REASON = "fullgraph=True but the model has a graph break (Unsupported: graph_break): turn fullgraph off to allow breaks"


def failed_compile_summary() -> dict:
    eager = [0.02, 0.01, 0.01, 0.01]
    summary = analysis.summarize(eager, [], [0.05], [], 8)
    summary.update(compile_failed=REASON, compile_skipped=None, graphs=0, graph_breaks=0)
    return summary


def stored_run(tmp_path) -> tuple[Store, int]:
    store = Store(str(tmp_path / "store.sqlite3"))
    run_id = store.create_run("race", quick_spec(fullgraph=True).to_dict(), "ann", "cpu", status="running")
    rows = [
        {"kind": "step", "variant": "eager", "phase": "train", "epoch": 1, "step": i + 1, "time_s": t, "loss": 2.0}
        for i, t in enumerate([0.02, 0.01, 0.01, 0.01])
    ]
    rows.append({"kind": "epoch", "variant": "eager", "phase": "train", "epoch": 1, "step": 0, "time_s": 0.05})
    store.append_events(run_id, rows)
    details = {"compile": {"graphs": 0, "graph_breaks": 0}, "variants": {"compiled": {"error": REASON}}}
    store.finish_run(run_id, "done", summary=failed_compile_summary(), details=details, started_at=time.time())
    return store, run_id


def test_the_reading_says_compile_failed_and_that_eager_ran():
    assert reading.reading(failed_compile_summary()) == f"Compile failed on this model: {REASON}; eager ran."


def test_graph_breaks_add_a_sentence_to_any_reading():
    summary = analysis.summarize([0.02] * 10, [0.5] + [0.01] * 9, [0.2], [0.59], 8)
    plain = reading.reading(summary)
    summary.update(graphs=3, graph_breaks=2)
    assert reading.reading(summary) == plain + " torch.compile split this model into 3 graphs at 2 graph breaks."
    summary.update(graphs=1, graph_breaks=1)
    assert reading.reading(summary).endswith(" torch.compile split this model at 1 graph break.")


def test_cards_show_no_compiled_figure_as_a_result_when_compile_failed():
    cards = {c.label: c for c in result_cards(failed_compile_summary())}
    for label in ("Compile time", "Steady-state speedup", "Break-even"):
        assert cards[label].value == "failed" and cards[label].delta == "compile failed"
        assert cards[label].help == f"Compile failed on this model: {REASON}; eager ran."
    assert cards["First-epoch overhead"].value == "-"


def test_status_table_and_runs_list_say_it_too(tmp_path):
    store, run_id = stored_run(tmp_path)
    run = store.get_run(run_id)
    assert describe(store, run) == f"done (compile failed on this model: {REASON}; eager ran)"
    assert run_row(run)["steady_state_speedup"] is None
    table = summary_table(
        {"summary": run.summary, "variants": {"eager": {"final_loss": 2.0}, "compiled": {"final_loss": None}}}
    )
    assert f"none: compile failed on this model ({REASON}); eager ran" in table
    assert table.rstrip().endswith(f"Compile failed on this model: {REASON}; eager ran.")


def test_the_live_status_line_says_it():
    from core.engine.events import StatusEvent

    assert (
        phase_text(StatusEvent("compiled", "compile_failed", 0, 3, REASON))
        == f"compile failed on this model: {REASON}; eager ran"
    )


def test_a_bundle_carries_the_finding(tmp_path):
    store, run_id = stored_run(tmp_path)
    imported = store.get_run(import_bundle(store, export_bundle(store, run_id), "bob"))
    assert imported.summary["compile_failed"] == REASON
    assert reading.reading(imported.summary) == f"Compile failed on this model: {REASON}; eager ran."


def test_the_doctor_counts_a_failed_compile_as_a_failed_check(tmp_path):
    store, run_id = stored_run(tmp_path)
    outcome = judge(Check("race", "race", {}), store.get_run(run_id))
    assert outcome.outcome == FAILED and outcome.figure == f"compile failed: {REASON}"


def test_only_the_compilers_own_errors_count_as_compile_failures():
    import torch
    import torch._dynamo.exc

    from core.engine.failures import compile_failure
    from core.engine.spec import RunSpec

    spec, cpu = RunSpec(backend="inductor"), torch.device("cpu")
    unsupported = compile_failure(torch._dynamo.exc.Unsupported("data-dependent branching"), spec, cpu)
    assert unsupported == (
        "torch.compile failed (Unsupported: data-dependent branching); try backend aot_eager to isolate Inductor"
    )
    aot = compile_failure(torch._dynamo.exc.Unsupported("x"), RunSpec(backend="aot_eager"), cpu)
    assert aot == "torch.compile failed (Unsupported: x)"  # no advice to use the backend already in use
    assert compile_failure(RuntimeError("CUDA error: an illegal memory access"), spec, cpu) is None
    assert compile_failure(torch.OutOfMemoryError("CUDA out of memory"), spec, cpu) is None
    assert compile_failure(KeyboardInterrupt(), spec, cpu) is None


@pytest.mark.parametrize(
    ("number", "says"),
    [
        (errno.ENOSPC, "ran out of disk space"),
        (errno.EMFILE, "ran out of open files"),
        (errno.EDQUOT, "passed its disk quota"),
    ],
)
def test_a_failure_of_the_machine_inside_the_compiler_is_no_compile_failure(number, says):
    """torch wraps Inductor's OSError in its own error: the cause is followed, and the reason names
    the machine (the race fails; it found nothing about the model)."""
    import torch
    import torch._inductor.exc

    from core.engine.failures import compile_failure, explain_failure
    from core.engine.spec import RunSpec

    spec, cpu = RunSpec(backend="inductor"), torch.device("cpu")
    try:
        try:
            raise OSError(number, os.strerror(number))
        except OSError as cause:
            raise torch._inductor.exc.InductorError(cause, None) from cause
    except torch._inductor.exc.InductorError as wrapped:
        error = wrapped
    assert compile_failure(error, spec, cpu) is None
    reason = explain_failure(error, spec, cpu)
    assert reason.startswith("this machine ") and f"[Errno {number}]" in reason and "not a finding" in reason
    assert says in reason
