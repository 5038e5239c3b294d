"""The backend ladder: aot_eager_decomp_partition is a backend, backends are a sweep axis (the CLI's
--backends, the Sweep form's axis), and the ladder's reading says at which rung the compile's cost,
the step's change or an error comes in."""

from support import CPU, quick_spec
from test_sweep_page import record_probe, sweep_page, texts

from core.cli.main import build_parser
from core.cli.sweeps import sweep_from_args
from core.engine.ladder import LADDER, Rung, ladder_reading
from core.engine.spec import validate
from core.engine.summary import FASTER, NO_CLEAR_DIFFERENCE, SLOWER, Summary
from core.runs import fleet
from core.runs.store import Run
from core.runs.sweeps import AXES, Axis, SweepSpec
from core.view.safe_text import markdown_text
from core.view.sweep import (
    axis_choices,
    default_sweep,
    form_sweep,
    ladder_readings,
    reset_axis_values,
    sweep_frame,
    sweep_report,
    sweep_to_state,
    tidy_axes,
)

DECOMP = "aot_eager_decomp_partition"


def rung(backend: str, compile_s: float | None, x: float | None, ci=None, verdict=None, **fields) -> Rung:
    ci = ci or ((x - 0.03, x + 0.03) if x is not None else None)
    verdict = verdict or (None if x is None else FASTER if ci[0] > 1 else SLOWER if ci[1] < 1 else NO_CLEAR_DIFFERENCE)
    s = Summary(compile_time_s=compile_s, steady_state_speedup=x, speedup_ci95=ci, verdict=verdict, **fields)
    return Rung(backend, s)


# -- the backend ---------------------------------------------------------------------------------


def test_aot_eager_decomp_partition_is_a_backend_and_refuses_inductors_modes():
    assert validate(quick_spec(backend=DECOMP), CPU) == []
    problems = validate(quick_spec(backend=DECOMP, mode="max-autotune-no-cudagraphs"), CPU)
    assert [str(p) for p in problems] == [
        f"mode: 'max-autotune-no-cudagraphs' is an Inductor mode; with backend '{DECOMP}' use mode 'default'"
    ]
    assert [str(p) for p in validate(quick_spec(backend="tvm"), CPU)] == [
        f"backend: 'tvm' is not allowed; allowed: inductor, aot_eager, {DECOMP}, eager"
    ]


def test_a_race_at_aot_eager_decomp_partition_compiles_and_measures():
    from core.engine.trainer import run_race

    result = run_race(quick_spec(backend=DECOMP, epochs=1, steps_per_epoch=6, profile_steps=0), caps=CPU)
    assert result.error is None and result.summary.compile_failed is None and result.summary.compile_skipped is None
    assert result.compile_stats.graphs >= 1 and result.summary.steady_state_speedup > 0


# -- the sweep axis ------------------------------------------------------------------------------


def test_the_cli_sweeps_the_backend_ladder_one_point_per_backend():
    assert AXES["backend"] == ("backend", ("inductor", "aot_eager", DECOMP, "eager"))
    args = build_parser().parse_args(["sweep", "--model", "small_cnn", "--backends", ",".join(LADDER)])
    sweep = sweep_from_args(args)
    assert sweep.axes == (Axis("backend", LADDER),)
    assert [(p.model, p.backend) for p in sweep.points()] == [("small_cnn", b) for b in LADDER]


def test_the_sweep_form_offers_backend_as_an_axis_with_every_backend():
    state = sweep_to_state(default_sweep(CPU))
    assert "backend" in axis_choices()
    state["sweep_axis1"] = "backend"
    reset_axis_values(state, 1, CPU)
    assert set(state["sweep_values1"]) == set(LADDER)
    tidy_axes(state, CPU)
    sweep = form_sweep(state)
    assert sorted(p.backend for p in sweep.points()) == sorted(LADDER)


def test_the_sweep_page_offers_the_backend_axis_and_reads_a_finished_ladder(store, sleepers):
    record_probe(store)
    at = sweep_page()
    at.selectbox(key="sweep_axis1").set_value("backend").run()
    assert not at.exception
    assert set(at.multiselect(key="sweep_values1").options) == set(LADDER)
    sweep_id = record_ladder(store)
    at = sweep_page(sweep=sweep_id)
    assert not at.exception
    assert "**Backend ladder:**" in texts(at)
    assert markdown_text("the bug is in decompositions/partitioning, not Inductor") in texts(at)


def record_ladder(store) -> int:
    """A finished ladder: eager and aot_eager ran, aot_eager_decomp_partition failed to compile."""
    sweep = SweepSpec(quick_spec(), (Axis("backend", ("eager", "aot_eager", DECOMP)),))
    with store.transaction() as c:
        sweep_id = store.insert_sweep(c, "someone", sweep.to_dict())
    summaries = [rung("eager", 0.5, 1.0).summary, rung("aot_eager", 1.2, 1.0).summary, FAILED]
    for point, summary in zip(sweep.points(), summaries):
        fields = {"status": "done", "phase": "done", "sweep_id": sweep_id, "host": fleet.HOST}
        store.create_run("race", point.to_dict(), "someone", "cpu", summary=summary.to_dict(), **fields)
    return sweep_id


FAILED = Summary(
    compile_failed="torch.compile failed (BackendCompilerFailed: backend='aot_eager_decomp_partition' raised: "
    "RuntimeError: no decomposition for aten.frobnicate)\nmore lines"
)


# -- the reading ---------------------------------------------------------------------------------


def test_the_cost_and_the_step_change_come_in_at_inductor():
    reading = ladder_reading(
        [
            rung("inductor", 7.3, 1.3, (1.2, 1.4)),  # any order: read from the bottom rung up
            rung("eager", 0.8, 1.0),
            rung("aot_eager", 1.2, 1.01),
            rung(DECOMP, 1.25, 0.99),
        ]
    )
    assert (reading.cost_rung, reading.step_rung, reading.failed_rung) == ("inductor", "inductor", None)
    assert reading.text.startswith("The compile's cost comes in at inductor, and so does the step's change: ")
    assert "capture alone (eager) costs 800 ms and changes nothing per step" in reading.text
    assert "AOT autograd's tracing (aot_eager) adds 400 ms (1.2 s in all) and changes nothing per step" in reading.text
    assert f"decompositions and partitioning ({DECOMP}) adds no compile time measurable here" in reading.text
    assert "Inductor's code generation (inductor) adds 6.05 s (7.3 s in all) and gives the 1.30x (1.20-1.40x)" in (
        reading.text
    )


def test_the_cost_can_come_in_below_inductor_and_the_step_change_above_it():
    reading = ladder_reading([rung("aot_eager", 6.0, 1.0), rung("inductor", 7.0, 1.25, (1.15, 1.35))])
    assert (reading.cost_rung, reading.step_rung) == ("aot_eager", "inductor")
    assert reading.text.startswith("The compile's cost comes in at aot_eager, the step's change at inductor: ")
    assert "tracing alone (aot_eager) costs 6 s and changes nothing per step" in reading.text


def test_a_speedup_whose_interval_spans_one_changes_nothing():
    reading = ladder_reading([rung("aot_eager", 1.0, 1.0), rung("inductor", 8.0, 1.1, (0.95, 1.25))])
    assert reading.step_rung is None and "no rung changes the step" in reading.text
    assert reading.text.endswith(
        "Inductor's code generation (inductor) adds 7 s (8 s in all) and changes nothing per step."
    )


def test_a_failing_rung_names_itself_as_a_bug_report_would():
    reading = ladder_reading([rung("eager", 0.5, 1.0), rung("aot_eager", 1.2, 1.0), Rung(DECOMP, FAILED)])
    assert reading.failed_rung == DECOMP
    assert reading.text.endswith(
        f"; fails at {DECOMP}: torch.compile failed (BackendCompilerFailed: backend='{DECOMP}' raised: "
        "RuntimeError: no decomposition for aten.frobnicate): the bug is in decompositions/partitioning, not Inductor."
    )
    alone = ladder_reading([Rung(DECOMP, FAILED), rung("inductor", 5.0, 1.0)])  # nothing below it ran
    assert "the rungs below it would say where" in alone.text


def test_one_rung_is_no_ladder_and_a_failed_race_is_no_finding():
    assert ladder_reading([rung("inductor", 5.0, 1.2)]) is None
    reading = ladder_reading(
        [Rung("aot_eager", None, "failed", "out of memory at batch size 8 on cpu"), rung("inductor", 5.0, 1.0)]
    )
    assert reading.failed_rung is None
    assert (
        "at aot_eager the race itself failed (out of memory at batch size 8 on cpu): no reading there" in reading.text
    )


# -- the sweep's surfaces ------------------------------------------------------------------------


def done_run(run_id: int, params: dict, summary: Summary) -> Run:
    return Run(
        id=run_id, kind="race", params=params, owner="o", device_key="cpu", status="done", phase="done", progress=1.0,
        created_at=0.0, started_at=0.0, finished_at=1.0, heartbeat_at=None, pid=None, host=None, time_limit_s=None,
        cancel_requested=0, environment=None, summary=summary.to_dict(), details=None, error=None, imported=0,
    )  # fmt: skip


def test_the_sweep_report_and_json_read_the_ladder_per_value_of_the_other_axis():
    sweep = SweepSpec(quick_spec(), (Axis("batch_size", (8, 16)), Axis("backend", ("aot_eager", "inductor"))))
    runs = []
    for i, point in enumerate(sweep.points(), start=1):
        s = rung(
            point.backend,
            1.0 if point.backend == "aot_eager" else 6.0,
            1.3 if (point.batch_size, point.backend) == (16, "inductor") else 1.0,
        )
        runs.append(done_run(i, point.to_dict(), s.summary))
    readings = ladder_readings(sweep, runs)
    assert [r.split(":")[0] for r in readings] == ["batch size 8", "batch size 16"]
    assert "no rung changes the step" in readings[0] and "and so does the step's change" in readings[1]
    report = sweep_report(sweep, sweep_frame(sweep, runs), "finished: 4 done", runs=runs)
    assert "backend ladder (where the compile's cost, the step's change or an error comes in):" in report
    assert f"  {readings[1]}" in report.splitlines()
    plain = SweepSpec(quick_spec(), (Axis("batch_size", (8, 16)),))
    assert ladder_readings(plain, runs[:2]) == []


def test_a_backends_failure_is_quoted_with_the_error_it_wraps():
    import torch
    import torch._dynamo.exc

    from core.engine.failures import compile_failure

    def aot_eager_decomp_partition(gm, example_inputs):
        raise RuntimeError("no decomposition for aten.frobnicate")

    raised = torch._dynamo.exc.BackendCompilerFailed(
        aot_eager_decomp_partition, RuntimeError("no decomposition for aten.frobnicate"), None
    )
    reason = compile_failure(raised, quick_spec(backend=DECOMP), torch.device("cpu"))
    assert reason == (
        f"torch.compile failed (BackendCompilerFailed: backend='{DECOMP}' raised: "
        "RuntimeError: no decomposition for aten.frobnicate)"
    )


def test_a_busy_machine_tells_no_step_change_and_claims_none():
    busy = "machine busy"
    reading = ladder_reading([rung("aot_eager", 1.5, 0.98, verdict=busy), rung("inductor", 30.8, 1.23, verdict=busy)])
    assert reading.step_rung is None and reading.cost_rung == "inductor"
    assert reading.text.startswith(
        "The compile's cost comes in at inductor, where the step changes cannot be told here"
    )
    assert (
        "changes nothing" not in reading.text
        and "its step cannot be told (the machine was busy: it read 1.23x (1.20-1.26x))" in reading.text
    )


def test_a_rung_that_slows_the_step_is_where_the_step_change_comes_in():
    reading = ladder_reading(
        [
            rung("aot_eager", 2.0, 1.0),
            rung(DECOMP, 11.1, 0.30, (0.29, 0.31)),
            rung("inductor", 26.1, 1.22, (1.18, 1.26)),
        ]
    )
    assert (reading.cost_rung, reading.step_rung) == ("inductor", DECOMP)
    assert f"decompositions and partitioning ({DECOMP}) adds 9.1 s (11.1 s in all) and makes the step slower: " in (
        reading.text
    )
    assert reading.text.endswith("adds 15 s (26.1 s in all) and gives the 1.22x (1.18-1.26x).")
