"""`--target-interval 0.03` reaches the race the same from every door: the terminal's `race`, `submit`,
`sweep`, the Race form, a link and the Sweep form (tests/test_sweep_page.py launches one at ±3%). What a
race does with it (replicates until known or the most asked) is tests/test_replicates.py's."""

import os
import subprocess
import sys

from support import ROOT
from test_pages import app, record_probe

from core.cli.main import build_parser
from core.cli.races import spec_from_args
from core.cli.sweeps import sweep_from_args
from core.engine.spec import RunSpec
from core.view.race_form import spec_from_query, spec_to_query

TINY = ["--model", "mlp", "--batch-size", "8", "--epochs", "2", "--steps-per-epoch", "4", "--device", "cpu"]


def test_the_terminal_s_race_reads_the_target_from_its_flag():
    args = build_parser().parse_args(["race", *TINY, "--target-interval", "0.03"])
    assert spec_from_args(args).target_interval == 0.03
    assert spec_from_args(build_parser().parse_args(["race", *TINY])).target_interval is None  # off unless asked


def test_submit_and_sweep_queue_races_with_the_target(store, sleepers):
    record_probe(store)
    path = os.environ["COMPILE_LAB_STORE"]  # the store fixture's

    def cli(*args):
        done = subprocess.run(
            [sys.executable, "-m", "core", *args, "--store", path, "--target-interval", "0.03", *TINY],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ),  # the sleepers' launcher: nothing is trained
        )
        assert done.returncode == 0, done.stderr

    cli("submit")
    cli("sweep", "--detach", "--batch-sizes", "8,16")
    runs = store.list_runs(kind="race")
    assert len(runs) == 3 and [r.params["target_interval"] for r in runs] == [0.03, 0.03, 0.03]
    args = build_parser().parse_args(["sweep", "--batch-sizes", "8,16", "--target-interval", "0.03", *TINY])
    assert [p.target_interval for p in sweep_from_args(args).points()] == [0.03, 0.03]


def test_a_link_carries_the_target_both_ways():
    query = spec_to_query(RunSpec(target_interval=0.03))
    assert query["target_interval"] == "0.03"
    spec, notes = spec_from_query(query, RunSpec())
    assert spec.target_interval == 0.03 and not notes


def test_the_form_and_a_link_launch_races_with_the_target(store, sleepers):
    record_probe(store)
    at = app(model="mlp")
    box = at.selectbox(key="form_target_interval")
    assert box.value is None and "to ±3%" in box.options
    box.set_value(0.03).run()
    next(b for b in at.button if b.label == "Launch").click().run()
    assert not at.exception
    assert store.list_runs(kind="race")[0].params["target_interval"] == 0.03
    linked = app(model="mlp", target_interval="0.03")
    assert linked.selectbox(key="form_target_interval").value == 0.03
    next(b for b in linked.button if b.label == "Launch").click().run()
    assert not linked.exception
    assert [r.params["target_interval"] for r in store.list_runs(kind="race")] == [0.03, 0.03]
