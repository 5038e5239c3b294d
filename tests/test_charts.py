"""Chart builders: the data they plot, the shared colours, the aria description, empty input, downsampling."""

import math

import altair as alt
import numpy as np
import pandas as pd
import pytest

from core.view import race_charts
from core.view.race_charts import (
    MAX_OVERLAY_POINTS,
    MAX_POINTS_PER_VARIANT,
    VARIANT_COLORS,
    cumulative_chart,
    downsample_keep_max,
    downsample_stride,
    epoch_chart,
    loss_chart,
    overlay_cumulative_chart,
    overlay_step_chart,
    step_time_chart,
)

STEP_BUILDERS = [step_time_chart, cumulative_chart, loss_chart, overlay_step_chart, overlay_cumulative_chart]
VARIANT_BUILDERS = [step_time_chart, cumulative_chart, loss_chart, epoch_chart]


def make_steps(
    n_eager: int,
    n_compiled: int,
    run: str = "#12 resnet18",
    steps_per_epoch: int = 10,
    eval_steps: int = 0,
    spike_s: float = 2.5,
) -> pd.DataFrame:
    """A race as the store would give it: train steps (compiled step 1 slow) and optional eval steps."""
    parts = []
    for variant, n, steady_s in (("eager", n_eager, 0.010), ("compiled", n_compiled, 0.008)):
        time_s = np.full(n, steady_s)
        if variant == "compiled" and n:
            time_s[0] = spike_s
        step = np.arange(1, n + 1)
        parts.append(
            pd.DataFrame(
                {
                    "run": run,
                    "variant": variant,
                    "phase": "train",
                    "epoch": (step - 1) // steps_per_epoch + 1,
                    "step": step,
                    "time_s": time_s,
                    "loss": np.linspace(2.3, 0.5, n),
                    "cumulative_s": np.cumsum(time_s),
                }
            )
        )
        if eval_steps and n:
            parts.append(
                pd.DataFrame(
                    {
                        "run": run,
                        "variant": variant,
                        "phase": "eval",
                        "epoch": 1,
                        "step": np.arange(1, eval_steps + 1),
                        "time_s": 0.003,
                        "loss": np.nan,
                        "cumulative_s": np.nan,
                    }
                )
            )
    return pd.concat(parts, ignore_index=True)


def make_epochs(n_eager: int, n_compiled: int) -> pd.DataFrame:
    rows = [("eager", e, 10.0 + e, 1.0) for e in range(1, n_eager + 1)]
    rows += [("compiled", e, 50.0 if e == 1 else 8.0, math.nan) for e in range(1, n_compiled + 1)]
    frame = pd.DataFrame(rows, columns=["variant", "epoch", "train_time_s", "eval_time_s"])
    return frame.assign(run="#12 resnet18")


def spec_of(chart) -> dict:
    return chart.to_dict()


def main_view(spec: dict) -> dict:
    """The view that draws the series: the chart itself, or a layered chart's first layer."""
    return spec["layer"][0] if "layer" in spec else spec


def rows_of(spec: dict, view: dict | None = None) -> list[dict]:
    """The rows a view draws (layers sharing the chart's data have it hoisted to the top)."""
    view = view if view is not None else main_view(spec)
    data = view.get("data") or spec["data"]
    return spec["datasets"][data["name"]]


def mark_of(view: dict) -> str:
    return view["mark"]["type"] if isinstance(view["mark"], dict) else view["mark"]


def variant_of(view: dict) -> str | None:
    """The variant a layer is filtered to ("(datum.variant === 'eager')"), if any."""
    for t in view.get("transform", []):
        if "filter" in t and "datum.variant" in str(t["filter"]):
            return "compiled" if "'compiled'" in str(t["filter"]) else "eager"
    return None


def build(builder, frame):
    return builder(frame) if builder is not epoch_chart else builder(make_epochs(3, 3))


@pytest.mark.parametrize("builder", STEP_BUILDERS + [epoch_chart], ids=lambda b: b.__name__)
def test_every_builder_gives_a_valid_vega_lite_spec_with_title_height_fonts_and_no_fixed_width(builder):
    spec = spec_of(build(builder, make_steps(40, 12)))
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    assert spec["title"] and "waiting" not in spec["title"]
    # Overlays add a legend line per run; the race chart is a little shorter, under a finished race's cards.
    assert spec["height"] >= (race_charts.RACE_HEIGHT if builder is cumulative_chart else 320)
    assert "width" not in spec and all("width" not in layer for layer in spec.get("layer", []))
    assert spec["config"]["axis"]["labelFontSize"] >= 13
    assert spec["config"]["title"]["fontSize"] >= 15


def test_step_time_chart_plots_train_steps_in_ms_with_a_rolling_median_and_only_the_columns_it_needs():
    spec = spec_of(step_time_chart(make_steps(40, 12, eval_steps=5)))
    rows = rows_of(spec)
    assert len(rows) == 52
    assert set(rows[0]) == {"variant", "epoch", "step", "time_ms", "median_ms"}
    compiled_first = next(r for r in rows if r["variant"] == "compiled" and r["step"] == 1)
    assert compiled_first["time_ms"] == pytest.approx(2500.0)
    assert compiled_first["median_ms"] == pytest.approx(8.0)  # the median ignores the compile step
    points = [v for v in spec["layer"] if mark_of(v) == "point" and variant_of(v)]
    lines = [v for v in spec["layer"] if mark_of(v) == "line"]
    assert [v["encoding"]["y"]["field"] for v in points] == ["time_ms", "time_ms"]
    assert [(variant_of(v), v["encoding"]["y"]["field"]) for v in lines] == [
        ("eager", "median_ms"),
        ("compiled", "median_ms"),
    ]
    tooltip = {t["field"]: t for t in points[0]["encoding"]["tooltip"]}
    assert set(tooltip) == {"variant", "epoch", "step", "time_ms", "median_ms"}
    assert tooltip["time_ms"]["format"] == ".2f"


def test_y_scale_is_log_only_when_asked():
    log = spec_of(step_time_chart(make_steps(40, 12), log_scale=True))
    assert all(v["encoding"]["y"]["scale"]["type"] == "log" for v in log["layer"] if "y" in v["encoding"])
    linear = main_view(spec_of(step_time_chart(make_steps(40, 12))))["encoding"]["y"]
    assert linear.get("scale", {}).get("type") != "log"
    assert spec_of(overlay_step_chart(make_steps(40, 12), log_scale=True))["encoding"]["y"]["scale"]["type"] == "log"
    assert spec_of(overlay_step_chart(make_steps(40, 12)))["encoding"]["y"]["scale"].get("type") != "log"


def test_step_time_axis_is_cut_above_the_steady_steps_and_names_the_compile_step_outside_the_plot():
    spec = spec_of(step_time_chart(make_steps(40, 12, spike_s=11.3)))
    y = main_view(spec)["encoding"]["y"]
    top = y["scale"]["domain"][1]
    assert y["scale"]["domain"][0] == 0 and y["scale"]["clamp"] is True
    assert 10.0 < top < 20.0  # steady steps are 8 and 10 ms; the 11.3 s compile step is off the scale
    assert y["title"] == "step time (ms)"  # short: it fits beside a phone's plot (no "cut above the ste")
    assert y["axis"]["tickCount"] == race_charts.STEP_TIME_TICKS >= 4  # the steady range in several ticks
    # The compile step is named in the subtitle, above the plot, and only marked on it (a triangle at
    # the top edge): no words drawn over the steps.
    assert spec["title"] == {
        "text": race_charts.STEP_TIME_TITLE,
        "subtitle": "\u25b2 compile step 11.3 s, above the axis (cut at 14 ms)",
    }
    assert not [v for v in spec["layer"] if mark_of(v) == "text"]
    marker = [v for v in spec["layer"] if mark_of(v) == "point" and v["mark"].get("shape") == "triangle-up"]
    assert [r["label"] for r in rows_of(spec, marker[0])] == ["compile step 11.3 s"]
    assert rows_of(spec, marker[0])[0]["time_ms"] == pytest.approx(top)  # at the top edge
    # Room for the plot: the chart is taller than the others, which have one legend and no subtitle.
    assert spec["height"] == race_charts.STEP_TIME_HEIGHT > race_charts.CHART_HEIGHT


def test_compile_marks_legend_sits_beside_the_variants_and_names_only_what_is_drawn():
    steps = make_steps(40, 12, spike_s=11.3)
    marks = pd.DataFrame({"variant": ["compiled"], "step": [1], "kind": ["compile"], "note": ["first compile"]})
    spec = spec_of(step_time_chart(steps, marks=marks))
    rule = [v for v in spec["layer"] if mark_of(v) == "rule"][0]
    legend = rule["encoding"]["strokeDash"]["legend"]
    assert legend["orient"] == "top" and legend["values"] == ["compile"]  # no "recompile" where none happened


def test_presenter_mode_sizes_every_chart_text_for_the_back_of_a_room():
    from core.view.race_charts import PRESENTER_FONTS, for_projector
    from core.view.run_screen.layout import PRESENT_CHART_HEIGHT

    be = {"step": 30, "wall_s": 0.4}
    for chart in (step_time_chart(make_steps(40, 12, spike_s=11.3)), cumulative_chart(make_steps(40, 40), be)):
        spec = spec_of(for_projector(chart, PRESENT_CHART_HEIGHT))
        assert spec["height"] == "container"  # as tall as the box the page gives it: it fills the screen
        assert spec["config"]["axis"] == PRESENTER_FONTS["axis"] and min(PRESENTER_FONTS["axis"].values()) >= 24
        assert spec["config"]["axis"]["titleFontSize"] >= 28 and spec["config"]["legend"]["labelFontSize"] >= 24
        assert spec["config"]["title"]["fontSize"] >= 28 and spec["config"]["title"]["subtitleFontSize"] >= 24
        assert spec["config"]["text"]["fontSize"] >= 24  # the break-even note
        texts = [v for v in spec.get("layer", []) if mark_of(v) == "text"]
        assert all("fontSize" not in v["mark"] for v in texts)  # a mark's own size would beat the config's
    assert spec_of(step_time_chart(make_steps(40, 12)))["config"]["text"]["fontSize"] == race_charts.TEXT_FONT


def test_step_time_axis_is_not_cut_when_nothing_stands_out_or_when_log_scale_shows_everything():
    flat = make_steps(40, 40, spike_s=0.008)
    spec = spec_of(step_time_chart(flat))
    assert "domain" not in main_view(spec)["encoding"]["y"].get("scale", {})
    assert not [v for v in spec["layer"] if mark_of(v) == "text"]
    log = spec_of(step_time_chart(make_steps(40, 12), log_scale=True))
    assert "domain" not in main_view(log)["encoding"]["y"]["scale"]
    assert not [v for v in log["layer"] if mark_of(v) == "text"]


@pytest.mark.parametrize("builder", [step_time_chart, cumulative_chart, loss_chart], ids=lambda b: b.__name__)
def test_compiled_is_drawn_after_eager_so_it_stays_on_top(builder):
    layers = spec_of(builder(make_steps(40, 40)))["layer"]
    order = [variant_of(v) for v in layers if variant_of(v)]
    assert order and order.index("compiled") > max(i for i, v in enumerate(order) if v == "eager")


def test_every_variant_chart_uses_the_same_eager_and_compiled_colours_with_no_legend_title():
    expected = {"domain": ["eager", "compiled"], "range": [VARIANT_COLORS["eager"], VARIANT_COLORS["compiled"]]}
    assert VARIANT_COLORS == {"eager": "#4C78A8", "compiled": "#EE4C2C"}
    assert race_charts.variant_color_scale().to_dict() == expected
    for builder in VARIANT_BUILDERS:
        color = main_view(spec_of(build(builder, make_steps(40, 12))))["encoding"]["color"]
        assert color["field"] == "variant"
        assert color["scale"] == expected, builder.__name__
        assert color["title"] is None, builder.__name__  # no "variant" jargon above the legend
    # One variant present: the domain still holds both, so eager stays blue before compiled starts.
    color = main_view(spec_of(step_time_chart(make_steps(40, 0))))["encoding"]["color"]
    assert color["scale"] == expected


@pytest.mark.parametrize(
    "builder, title",
    [
        (step_time_chart, race_charts.STEP_TIME_TITLE),
        (cumulative_chart, race_charts.CUMULATIVE_TITLE),
        (loss_chart, race_charts.LOSS_TITLE),
        (overlay_step_chart, race_charts.OVERLAY_STEP_TITLE),
        (overlay_cumulative_chart, race_charts.OVERLAY_CUMULATIVE_TITLE),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_description_states_the_exact_step_counts_per_variant(builder, title):
    assert spec_of(builder(make_steps(40, 12, eval_steps=7)))["description"] == (
        f"{title}: 40 eager steps, 12 compiled steps"
    )
    assert spec_of(builder(make_steps(41, 13)))["description"] == f"{title}: 41 eager steps, 13 compiled steps"


def test_description_counts_every_step_even_when_the_plot_is_downsampled():
    spec = spec_of(step_time_chart(make_steps(5000, 4999)))
    assert spec["description"] == "Step time per step: 5000 eager steps, 4999 compiled steps"
    assert len(rows_of(spec)) <= 2 * MAX_POINTS_PER_VARIANT


def test_epoch_chart_is_grouped_bars_with_epoch_counts_in_its_description():
    spec = spec_of(epoch_chart(make_epochs(3, 2)))
    assert spec["description"] == "Training time per epoch: 3 eager epochs, 2 compiled epochs"
    assert spec["mark"]["type"] == "bar"
    assert spec["encoding"]["x"]["field"] == "epoch"
    assert spec["encoding"]["xOffset"]["field"] == "variant"
    rows = rows_of(spec)
    assert len(rows) == 5 and "run" not in rows[0]
    compiled_first = next(r for r in rows if r["variant"] == "compiled" and r["epoch"] == 1)
    assert compiled_first["train_time_s"] == 50.0 and compiled_first["eval_time_s"] is None
    formats = {t["field"]: t.get("format") for t in spec["encoding"]["tooltip"]}
    assert formats["train_time_s"] == ".2f" and formats["eval_time_s"] == ".2f"


def test_epoch_tooltip_leaves_out_eval_time_when_no_epoch_has_one():
    epochs = make_epochs(3, 3).assign(eval_time_s=np.nan)
    spec = spec_of(epoch_chart(epochs))
    assert [t["field"] for t in spec["encoding"]["tooltip"]] == ["variant", "epoch", "train_time_s"]
    assert "eval_time_s" not in rows_of(spec)[0]  # no "eval (s) null" anywhere


def test_cumulative_chart_has_no_break_even_marker_when_none_is_given():
    spec = spec_of(cumulative_chart(make_steps(40, 40)))
    assert {mark_of(v) for v in spec["layer"]} == {"line"}
    assert "break-even" not in str(spec)
    assert main_view(spec)["encoding"]["y"]["field"] == "cumulative_s"
    assert len(rows_of(spec)) == 80


def projection_of(eager_s: float, compiled_s: float, position: float, wall_s: float) -> dict:
    return {"position": position, "wall_s": wall_s, "eager_step_s": eager_s, "compiled_step_s": compiled_s}


def test_cumulative_chart_projects_both_lines_dashed_to_the_projected_crossing():
    steps = make_steps(400, 400, spike_s=11.0)  # eager 10 ms, compiled 8 ms after an 11 s compile
    spec = spec_of(cumulative_chart(steps, projection=projection_of(0.010, 0.008, 947.3, 80.4)))
    dashed = [v for v in spec["layer"] if mark_of(v) == "line" and v["mark"].get("strokeDash")]
    assert len(dashed) == 1
    rows = pd.DataFrame(rows_of(spec, dashed[0]))
    end = race_charts.projection_end(947.3)
    assert end > 947.3
    for variant, last in (("eager", 4.0), ("compiled", 11.0 + 399 * 0.008)):
        line = rows[rows["variant"] == variant].sort_values("step")
        assert line["step"].tolist() == [400, end]  # from the last measured step, past the crossing
        assert line["cumulative_s"].iloc[0] == pytest.approx(last)
        slope = (line["cumulative_s"].iloc[1] - line["cumulative_s"].iloc[0]) / (end - 400)
        assert slope == pytest.approx(0.010 if variant == "eager" else 0.008)
    labels = [r["label"] for v in spec["layer"] if mark_of(v) == "text" for r in rows_of(spec, v)]
    assert labels == ["≈ step 948 (projected, ~80 s)"]
    assert any(mark_of(v) == "point" for v in spec["layer"])  # the crossing, ringed


def test_a_crossing_far_beyond_the_run_is_named_at_the_charts_edge_not_drawn_to():
    steps = make_steps(240, 240, spike_s=11.0)
    spec = spec_of(cumulative_chart(steps, projection=projection_of(0.010, 0.0099, 6700.0, 3861.0)))
    dashed = next(v for v in spec["layer"] if mark_of(v) == "line" and v["mark"].get("strokeDash"))
    assert max(r["step"] for r in rows_of(spec, dashed)) == 720  # three times what was measured, no further
    labels = [r["label"] for v in spec["layer"] if mark_of(v) == "text" for r in rows_of(spec, v)]
    assert labels == ["≈ step 6,701 (projected, ~64 min) →"]
    assert not any(mark_of(v) == "point" for v in spec["layer"])
    lead = spec_of(race_charts.lead_chart(steps, projection=projection_of(0.010, 0.0099, 6700.0, 3861.0)))
    assert not any(mark_of(v) == "point" for v in lead["layer"])


def test_cumulative_chart_draws_no_projection_once_break_even_is_reached():
    projection = projection_of(0.010, 0.008, 947.3, 7.58)
    spec = spec_of(cumulative_chart(make_steps(900, 900), {"step": 826, "wall_s": 39.71}, projection=projection))
    assert not [v for v in spec["layer"] if mark_of(v) == "line" and v["mark"].get("strokeDash")]
    assert "projected" not in str(spec)


def test_lead_chart_is_eager_minus_compiled_and_crosses_zero_at_break_even():
    steps = make_steps(2000, 2000, spike_s=2.5)  # compiled gains 2 ms a step: ahead after ~1,250 steps
    spec = spec_of(race_charts.lead_chart(steps, break_even={"step": 1247, "wall_s": 12.5}))
    assert spec["description"] == f"{race_charts.LEAD_TITLE}: 2000 eager steps, 2000 compiled steps"
    assert spec["height"] == race_charts.LEAD_HEIGHT
    measured = next(v for v in spec["layer"] if mark_of(v) == "line")
    rows = pd.DataFrame(rows_of(spec, measured))
    assert rows["lead_s"].iloc[0] == pytest.approx(0.010 - 2.5)
    assert rows["lead_s"].iloc[-1] > 0 and rows["lead_s"].min() < 0
    zero = next(v for v in spec["layer"] if mark_of(v) == "rule")
    assert rows_of(spec, zero) == [{"lead_s": 0.0}]
    ring = next(v for v in spec["layer"] if mark_of(v) == "point")
    assert rows_of(spec, ring) == [{"step": 1247.0, "lead_s": 0.0}]


def test_lead_chart_continues_dashed_to_zero_at_the_projected_break_even():
    steps = make_steps(300, 300, spike_s=11.0)
    spec = spec_of(race_charts.lead_chart(steps, projection=projection_of(0.010, 0.008, 947.3, 7.58)))
    dashed = next(v for v in spec["layer"] if mark_of(v) == "line" and v["mark"].get("strokeDash"))
    (start, end) = rows_of(spec, dashed)
    assert start["step"] == 300 and start["lead_s"] < 0
    at_crossing = start["lead_s"] + (end["lead_s"] - start["lead_s"]) * (947.3 - 300) / (end["step"] - 300)
    assert at_crossing == pytest.approx(0.0, abs=1e-9)


def test_cumulative_chart_marks_break_even_with_a_rule_a_point_and_a_label():
    spec = spec_of(cumulative_chart(make_steps(900, 900), {"step": 826, "wall_s": 39.71}))
    marks = [mark_of(layer) for layer in spec["layer"]]
    assert marks[:2] == ["line", "line"] and {"rule", "point", "text"} <= set(marks[2:])
    rule = spec["layer"][marks.index("rule")]
    assert rows_of(spec, rule) == [{"step": 826, "cumulative_s": 39.71, "label": "break-even: step 826\n(39.7 s)"}]
    assert rule["encoding"]["x"]["field"] == "step"
    text = spec["layer"][marks.index("text")]
    assert text["encoding"]["text"]["field"] == "label"
    assert spec["description"] == "The race: cumulative training time: 900 eager steps, 900 compiled steps"


def test_break_even_without_a_wall_time_still_labels_the_step():
    spec = spec_of(cumulative_chart(make_steps(50, 50), {"step": 30, "wall_s": None}))
    labels = {r["label"] for view in spec["layer"] if "label" in str(view) for r in rows_of(spec, view)}
    assert labels == {"break-even: step 30"}


@pytest.mark.parametrize("builder", STEP_BUILDERS + [epoch_chart], ids=lambda b: b.__name__)
@pytest.mark.parametrize("empty", [None, "no_columns", "no_rows"])
def test_empty_input_gives_a_valid_chart_that_says_it_is_waiting(builder, empty):
    columns = race_charts.EPOCH_COLUMNS if builder is epoch_chart else race_charts.STEP_COLUMNS
    frame = {None: None, "no_columns": pd.DataFrame(), "no_rows": pd.DataFrame(columns=list(columns))}[empty]
    spec = spec_of(builder(frame))
    assert spec["title"].endswith("(waiting for data)")
    unit = "epochs" if builder is epoch_chart else "steps"
    assert spec["description"].endswith(f": 0 eager {unit}, 0 compiled {unit}")
    assert rows_of(spec) == []


@pytest.mark.parametrize("builder", STEP_BUILDERS, ids=lambda b: b.__name__)
def test_only_eager_so_far_charts_the_eager_steps(builder):
    spec = spec_of(builder(make_steps(25, 0)))
    assert spec["description"].endswith(": 25 eager steps, 0 compiled steps")
    assert "waiting" not in spec["title"]
    rows = rows_of(spec)
    assert len(rows) == 25 and {r["variant"] for r in rows} == {"eager"}


def test_epoch_chart_with_only_eager_epochs():
    spec = spec_of(epoch_chart(make_epochs(2, 0)))
    assert spec["description"] == "Training time per epoch: 2 eager epochs, 0 compiled epochs"
    assert len(rows_of(spec)) == 2


def test_step_time_downsampling_keeps_a_mid_run_spike_and_caps_the_points():
    steps = make_steps(10_000, 10_000, spike_s=0.5)
    spike_at = (steps["variant"] == "eager") & (steps["step"] == 5_003)
    steps.loc[spike_at, "time_s"] = 7.25  # one slow eager step (a recompile, say) in the middle
    spec = spec_of(step_time_chart(steps))
    rows = pd.DataFrame(rows_of(spec))
    per_variant = rows["variant"].value_counts()
    assert per_variant.max() <= MAX_POINTS_PER_VARIANT and per_variant.min() >= MAX_POINTS_PER_VARIANT // 2
    eager = rows[rows["variant"] == "eager"]
    assert eager["time_ms"].max() == pytest.approx(7250.0)
    assert int(eager.loc[eager["time_ms"].idxmax(), "step"]) == 5_003
    compiled = rows[rows["variant"] == "compiled"]
    assert compiled.loc[compiled["step"] == 1, "time_ms"].item() == pytest.approx(500.0)  # compile spike kept
    assert rows.groupby("variant")["step"].is_monotonic_increasing.all()


def test_downsample_keep_max_leaves_short_series_alone_and_keeps_each_bucket_maximum():
    short = pd.DataFrame({"variant": "eager", "step": range(1, 11), "time_s": np.arange(10.0)})
    assert downsample_keep_max(short, "time_s", ["variant"], 10).equals(short)
    values = np.array([1.0, 9.0, 2.0, 3.0, 8.0, 4.0])
    frame = pd.DataFrame({"variant": "eager", "step": range(1, 7), "time_s": values})
    kept = downsample_keep_max(frame, "time_s", ["variant"], 3)
    assert kept["time_s"].tolist() == [9.0, 3.0, 8.0]
    assert kept["step"].tolist() == [2, 4, 5]


def test_downsample_stride_caps_points_and_keeps_first_and_last():
    frame = pd.DataFrame({"variant": ["eager"] * 10_000 + ["compiled"] * 3, "step": [*range(1, 10_001), 1, 2, 3]})
    kept = downsample_stride(frame, ["variant"], 2000)
    eager = kept[kept["variant"] == "eager"]["step"]
    assert len(eager) <= 2000 and eager.iloc[0] == 1 and eager.iloc[-1] == 10_000
    assert kept[kept["variant"] == "compiled"]["step"].tolist() == [1, 2, 3]


def test_cumulative_chart_downsamples_long_runs_but_keeps_where_each_curve_ends():
    steps = make_steps(5_000, 4_321)
    rows = pd.DataFrame(rows_of(spec_of(cumulative_chart(steps))))
    for variant, n in (("eager", 5_000), ("compiled", 4_321)):
        series = rows[rows["variant"] == variant]
        assert len(series) <= MAX_POINTS_PER_VARIANT
        assert series["step"].iloc[-1] == n
        expected_end = steps[(steps["variant"] == variant)]["cumulative_s"].iloc[-1]
        assert series["cumulative_s"].iloc[-1] == pytest.approx(expected_end)


def test_loss_chart_drops_nan_losses_and_eval_steps():
    steps = make_steps(20, 20, eval_steps=4)
    steps.loc[(steps["variant"] == "compiled") & (steps["step"] <= 5) & (steps["phase"] == "train"), "loss"] = np.nan
    spec = spec_of(loss_chart(steps))
    rows = rows_of(spec)
    assert len(rows) == 35
    assert all(r["loss"] is not None and math.isfinite(r["loss"]) for r in rows)
    assert min(r["step"] for r in rows if r["variant"] == "compiled") == 6
    assert spec["description"] == "Training loss per step: 20 eager steps, 15 compiled steps"
    assert main_view(spec)["encoding"]["y"]["field"] == "loss"


def test_loss_chart_draws_eager_wide_and_pale_under_a_dashed_compiled_line_with_line_legend_marks():
    spec = spec_of(loss_chart(make_steps(20, 20)))
    eager, compiled = spec["layer"]
    assert (variant_of(eager), variant_of(compiled)) == ("eager", "compiled")
    assert eager["mark"]["strokeWidth"] > compiled["mark"]["strokeWidth"] and eager["mark"]["opacity"] < 1
    assert compiled["encoding"]["strokeDash"]["legend"]["symbolType"] == "stroke"  # a line, not a blob


def test_loss_chart_of_a_long_run_stays_under_altairs_row_limit():
    spec = spec_of(loss_chart(make_steps(5_000, 5_000)))
    assert len(rows_of(spec)) <= 2 * MAX_POINTS_PER_VARIANT


@pytest.mark.parametrize("builder", [overlay_step_chart, overlay_cumulative_chart], ids=lambda b: b.__name__)
def test_overlay_colours_by_run_dashes_by_variant_and_names_the_run_in_tooltips(builder):
    steps = pd.concat([make_steps(30, 30, run="#12 resnet18"), make_steps(20, 10, run="#9 mlp")], ignore_index=True)
    spec = spec_of(builder(steps))
    enc = spec["encoding"]
    assert enc["color"]["field"] == "run"
    assert enc["color"]["sort"] == ["#12 resnet18", "#9 mlp"]
    # Two runs in two distinct colours, neither of them eager's blue or compiled's orange.
    run_colours = enc["color"]["scale"]["range"]
    assert len(set(run_colours)) == 2 and not set(run_colours) & set(VARIANT_COLORS.values())
    assert enc["color"]["legend"]["labelLimit"] == 0  # the whole label: the setting that differs
    assert spec["height"] == race_charts.CHART_HEIGHT + 80 + 2 * 22  # the plot keeps its room as runs are added
    assert enc["strokeDash"]["field"] == "variant"
    assert enc["strokeDash"]["scale"]["domain"] == ["eager", "compiled"]
    assert "run" in {t["field"] for t in enc["tooltip"]}
    rows = rows_of(spec)
    assert len(rows) == 90
    assert {(r["run"], r["variant"]) for r in rows} == {
        ("#12 resnet18", "eager"),
        ("#12 resnet18", "compiled"),
        ("#9 mlp", "eager"),
        ("#9 mlp", "compiled"),
    }
    assert spec["description"].endswith(": 50 eager steps, 40 compiled steps")


@pytest.mark.parametrize("builder", [overlay_step_chart, overlay_cumulative_chart], ids=lambda b: b.__name__)
def test_overlay_of_many_long_runs_shares_a_point_budget_and_keeps_compile_spikes(builder):
    steps = pd.concat([make_steps(5_000, 5_000, run=f"#{i} mlp") for i in range(5)], ignore_index=True)
    rows = pd.DataFrame(rows_of(spec_of(builder(steps))))
    assert len(rows) <= MAX_OVERLAY_POINTS
    assert rows.groupby(["run", "variant"]).size().min() >= 100
    if builder is overlay_step_chart:
        spikes = rows[(rows["variant"] == "compiled") & (rows["step"] == 1)]
        assert spikes["time_ms"].tolist() == pytest.approx([2500.0] * 5)


def test_layering_without_deep_copies_gives_the_same_spec_as_altair_layering(monkeypatch):
    """chart_style.layer skips alt.layer's deep copies of each layer; every builder must still give the
    spec alt.layer gives, with every kind of layer there is (projection, break-even, compile marks
    and the off-scale compile note), and must leave the layers it was given as they were."""
    steps = make_steps(900, 900)
    marks = pd.DataFrame(
        [{"variant": "compiled", "step": 1, "kind": "compile", "note": "forward graph compiled"}],
        columns=["variant", "step", "kind", "note"],
    )
    builds = [
        lambda: cumulative_chart(steps, projection=projection_of(0.010, 0.008, 947.3, 80.4)),
        lambda: cumulative_chart(steps, {"step": 826, "wall_s": 39.71}),
        lambda: race_charts.lead_chart(steps, projection=projection_of(0.010, 0.008, 947.3, 7.58)),
        lambda: race_charts.lead_chart(steps, break_even={"step": 826, "wall_s": 12.5}),
        lambda: race_charts.step_time_chart(steps, marks=marks),
        lambda: race_charts.step_time_chart(steps, log_scale=True, marks=marks),
        lambda: race_charts.loss_chart(steps),
    ]
    fast = [spec_of(build()) for build in builds]
    monkeypatch.setattr(race_charts, "layer", lambda *layers: alt.layer(*layers))
    assert fast == [spec_of(build()) for build in builds]

    layers = [alt.Chart(steps).mark_line().encode(x="step:Q", y="time_s:Q"), alt.Chart(steps).mark_point()]
    before = [layer.to_dict() for layer in layers]
    monkeypatch.undo()
    race_charts.layer(*layers).to_dict()
    assert [layer.to_dict() for layer in layers] == before
