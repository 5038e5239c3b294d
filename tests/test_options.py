"""The race options table: every option reaches every surface its row names (RunSpec, validation,
the CLI's flags, the Race form, its link, the comparisons, the sweep axes and the Sweep form), and
nothing else holds a second copy of an option's facts."""

import dataclasses
import os
import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT

from core.cli.main import build_parser
from core.cli.races import spec_flags, spec_from_args
from core.cli.sweeps import sweep_from_args
from core.engine import spec as options
from core.engine.spec import (
    COMPILE,
    LENGTH,
    OPTIONS,
    RECORDED,
    STEP_TIME,
    DeviceCaps,
    Option,
    RunSpec,
    cli_word,
    in_link,
    on_form,
    sweep_axes,
    validate,
)
from core.runs import queue
from core.runs.store import Store
from core.runs.sweeps import AXES
from core.view.compare import SETTING_WORDS
from core.view.race_form import CHOICES, spec_from_query, spec_to_query
from core.view.sweep import base_options

APP = f"{ROOT}/streamlit_app.py"
ROWS = list(OPTIONS.values())
RACE_COMMANDS = ("race", "submit", "sweep")


def other_value(option: Option):
    """A value of the option that is not its default (and that the option allows)."""
    if option.name == "model":
        return "gpt"
    if option.type is bool and option.optional:
        return True
    if option.type is bool:
        return not option.default
    if option.offered:
        return next(c for c in reversed(option.offered) if c != option.default)
    if option.type is int:
        return int(option.max) if option.default != option.max else int(option.min)
    if option.type is float:
        return (option.min + option.max) / 4
    return "somewhere"


def test_every_runspec_field_is_a_row_of_the_table_in_its_order_with_its_default():
    fields = dataclasses.fields(RunSpec)
    assert [f.name for f in fields] == list(OPTIONS)
    assert {f.name: f.default for f in fields} == {o.name: o.default for o in ROWS}
    assert all(o.label and o.name == name for name, o in OPTIONS.items())


@pytest.mark.parametrize("option", ROWS, ids=lambda o: o.name)
def test_validation_reads_the_rows_choices_and_range(option):
    if option.allowed is not None:
        problems = validate(dataclasses.replace(RunSpec(), **{option.name: "no-such-value"}))
        assert any(p.field == option.name and "allowed:" in p.message for p in problems)
    elif option.min is not None and option.type is int:
        for outside in (int(option.min) - 1, int(option.max) + 1):
            spec = dataclasses.replace(RunSpec(model="timm:resnet18"), **{option.name: outside})
            assert [p.field for p in validate(spec)] == [option.name], outside
        spec = dataclasses.replace(RunSpec(model="timm:resnet18"), **{option.name: int(option.max)})
        assert option.name not in [p.field for p in validate(spec)]


@pytest.mark.parametrize("command", RACE_COMMANDS)
@pytest.mark.parametrize("option", ROWS, ids=lambda o: o.name)
def test_every_option_is_a_flag_with_the_rows_default_and_help(command, option):
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]
    action = next(a for a in sub._actions if option.flag in a.option_strings)
    assert action.default == (None if option.flag_unset else option.default)
    assert action.help == option.text(option.help)
    for choice in option.choices or ():  # the help names every choice, as it is typed
        assert cli_word(choice) in action.help
    value = other_value(option)
    if option.type is bool and not option.optional:
        argv = [option.flag]
    else:
        argv = [option.flag, cli_word(value)]
    if option.name == "model_file":
        value = os.path.abspath("somewhere")
    extra = ["--batch-sizes", "8,16"] if command == "sweep" else []
    spec = spec_from_args(parser.parse_args([command, *argv, *extra]))
    assert getattr(spec, option.name) == value


@pytest.mark.parametrize("command", RACE_COMMANDS)
def test_a_spec_written_back_as_flags_is_the_same_spec(command):
    extra = ["--batch-sizes", "8,16"] if command == "sweep" else []
    defaults = spec_from_args(build_parser().parse_args([command, *extra]))
    others = {o.name: other_value(o) for o in ROWS if o.name not in ("model", "model_file")}
    for spec in (defaults, dataclasses.replace(defaults, **others)):
        argv = spec_flags(spec)
        assert spec_from_args(build_parser().parse_args([command, *argv, *extra])) == spec


@pytest.mark.parametrize("option", [o for o in ROWS if o.link], ids=lambda o: o.name)
def test_every_link_option_survives_the_round_trip_through_a_link(option):
    spec = dataclasses.replace(RunSpec(model="mlp"), **{option.name: other_value(option)})
    query = spec_to_query(spec)
    assert option.name in query
    restored, notes = spec_from_query(query, RunSpec())
    assert notes == [] and getattr(restored, option.name) == getattr(spec, option.name)


def test_a_link_carries_the_link_options_and_nothing_else():
    spec = RunSpec(**{o.name: other_value(o) for o in ROWS if o.name not in ("model", "model_file")})
    assert set(spec_to_query(spec)) == set(in_link())


def test_the_sweep_axes_are_the_rows_with_a_sweep_column_each_with_its_flag():
    assert list(AXES) == [o.name for o in sweep_axes()]
    sweep_parser = build_parser()._subparsers._group_actions[0].choices["sweep"]
    for option in sweep_axes():
        assert AXES[option.name] == (option.label.lower(), option.choices)
        action = next(a for a in sweep_parser._actions if option.axis_flag in a.option_strings)
        assert action.help == option.text(option.sweep)
        values = [8, 16] if option.choices is None else list(option.choices[:2])
        args = build_parser().parse_args(["sweep", option.axis_flag, ",".join(map(str, values))])
        (axis,) = sweep_from_args(args).axes
        assert axis.name == option.name and list(axis.values) == values


def test_comparisons_and_the_forms_choices_come_from_the_rows():
    assert SETTING_WORDS == {o.name: o.compare for o in ROWS if o.compare is not None}
    assert list(CHOICES)[1:] == [o.name for o in on_form() if o.offered is not None]
    assert all(CHOICES[o.name] == o.offered for o in on_form() if o.offered is not None)
    assert [o.name for o in base_options()] == [o.name for o in on_form() if o.sweep_form]


@pytest.fixture
def store(tmp_path, monkeypatch):
    path = str(tmp_path / "store.sqlite3")
    monkeypatch.setenv("COMPILE_LAB_STORE", path)
    store = Store(path)
    env = {"device_type": "cpu", "device_name": "CPU", "cpu_name": "CPU", "cpu_count": 2, "torch": "2.x"}
    probe = store.create_run("probe", {}, "system", "probe", status="done", host=queue.HOST)
    store.update_run(probe, summary={"caps": DeviceCaps().to_dict(), "environment": env}, environment=env)
    return store


def widget_keys(at) -> set[str]:
    kinds = (at.selectbox, at.number_input, at.checkbox, at.radio, at.text_input, at.multiselect)
    return {w.key for kind in kinds for w in kind if w.key}


def test_the_race_form_and_the_sweep_form_show_every_option_their_rows_place_there(store, sleepers):
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    keys = widget_keys(at)
    assert "pick_source" in keys  # the model: the model picker
    assert {f"form_{o.name}" for o in on_form() if o.name != "model"} <= keys
    at.switch_page("app_pages/sweep.py").run()
    assert not at.exception
    swept = {at.session_state["sweep_axis1"]}
    assert {f"sweep_{o.name}" for o in base_options() if o.name not in swept} <= widget_keys(at)


def test_the_cli_loads_no_ui_library_and_no_torch_to_build_its_flags():
    code = (
        "import sys; from core.cli.main import build_parser; build_parser(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'streamlit', 'altair', 'pandas', 'torch'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# -- what an option changes: every "same race" question is derived from the rows -----------------


def test_every_option_says_what_it_changes_and_the_device_and_data_folder_change_nothing():
    effects = {STEP_TIME, COMPILE, LENGTH, RECORDED}
    for option in ROWS:
        assert set(option.changes) <= effects, option.name
    nothing = {o.name for o in ROWS if not o.changes}
    assert nothing == {"data_dir", "download", "device"}  # each question is asked of one device already


@pytest.mark.parametrize(
    "changed, step_time, compile_, shared",
    [
        ("batch_size", True, True, True),
        ("compile_scope", True, True, True),
        ("image_size", True, True, True),
        ("cache", False, True, True),  # a warm cache: the same steps, another compile
        ("schedule", True, False, True),
        ("epochs", False, False, True),  # a longer race: same steps and compile, more of them
        ("seed", False, False, True),
        ("data_dir", False, False, False),
    ],
)
def test_two_races_are_the_same_race_for_a_question_as_the_table_says(changed, step_time, compile_, shared):
    base = RunSpec(model="gpt")
    other = dataclasses.replace(base, **{changed: other_value(OPTIONS[changed])})
    assert (base.same_race(STEP_TIME) == other.same_race(STEP_TIME)) is not step_time
    assert (base.same_race(COMPILE) == other.same_race(COMPILE)) is not compile_
    everything = (STEP_TIME, COMPILE, LENGTH, RECORDED)
    assert (base.same_race(*everything) == other.same_race(*everything)) is not shared


def test_the_input_size_a_race_used_is_the_same_whether_named_or_left_to_the_model():
    named = RunSpec(model="gpt", image_size=RunSpec(model="gpt").input_size)
    assert named.same_race(STEP_TIME, COMPILE) == RunSpec(model="gpt").same_race(STEP_TIME, COMPILE)


def test_no_list_of_option_names_is_kept_beside_the_table():
    """The four "same race" questions read the table's `changes` column (core.engine.spec.same_race)."""
    for path in ("core/runs/device_history.py", "core/engine/race_estimates.py", "core/runs/device_history.py",
                 "core/view/run_screen/sentences.py"):  # fmt: skip
        with open(os.path.join(ROOT, path)) as fh:
            text = fh.read()
        assert "same_race(" in text and '"batch_size", "precision"' not in text and "NOT_TIMING" not in text


def test_each_option_is_a_field_of_runspec_declared_where_its_row_is():
    """RunSpec's own body declares every field with its annotation (an editor and a type checker see
    them), and each field's metadata is its option's row: the field and the row are one declaration."""
    annotations = RunSpec.__dict__["__annotations__"]
    assert list(annotations) == list(OPTIONS) == [f.name for f in dataclasses.fields(RunSpec)]
    for f in dataclasses.fields(RunSpec):
        row = OPTIONS[f.name]
        assert f.default == row.default and f.metadata["option"].label == row.label
        assert annotations[f.name] == (f"{row.type.__name__} | None" if row.optional else row.type.__name__)


def test_an_option_is_one_type_or_none():
    @dataclasses.dataclass
    class Maybe:
        size: int | None = options.option(default=None, label="Size")

    @dataclasses.dataclass
    class Two:
        size: int | str = options.option(default=1, label="Size")

    row = options.options_of(Maybe)["size"]
    assert (row.name, row.type, row.optional, row.label) == ("size", int, True, "Size")
    with pytest.raises(TypeError, match="size: an option is one type"):
        options.options_of(Two)
