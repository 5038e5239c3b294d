"""Published figures shown beside a user's run, derived with the same analysis as the user's own."""

import pytest

from core.view.answers import PYTORCH2_RELEASE, reference_rows, tutorial_runs


def tutorial(gpu_prefix):
    return next(run for run in tutorial_runs() if run.gpu.startswith(gpu_prefix))


def test_the_tutorial_has_an_a100_run_and_an_rtx_4080_run_in_that_order():
    runs = tutorial_runs()
    assert [run.gpu for run in runs] == ["NVIDIA A100-SXM4-40GB", "NVIDIA GeForce RTX 4080"]


def test_a100_pays_41_6_s_in_its_first_epoch_for_a_1_12x_steady_speedup():
    a100 = tutorial("NVIDIA A100")
    assert a100.first_epoch_overhead_s == pytest.approx(41.6, abs=0.05)
    assert a100.steady_speedup == pytest.approx(1.12, abs=0.005)


def test_a100_whole_run_is_slower_and_would_break_even_only_at_about_6_5_epochs():
    a100 = tutorial("NVIDIA A100")
    assert a100.whole_run_speedup < 1
    assert a100.break_even_observed is False
    assert a100.break_even_epochs == pytest.approx(6.5, abs=0.1)


def test_rtx_4080_breaks_even_at_2_1_epochs_and_the_whole_run_is_faster():
    rtx = tutorial("NVIDIA GeForce RTX 4080")
    assert rtx.break_even_observed is True
    assert rtx.break_even_epochs == pytest.approx(2.1, abs=0.01)
    assert rtx.whole_run_speedup > 1
    assert rtx.first_epoch_overhead_s == pytest.approx(13.1, abs=0.05)


def test_reference_table_has_the_release_average_then_the_two_tutorial_gpus():
    rows = reference_rows()
    assert len(rows) == 3
    assert [row["source"] for row in rows] == [
        "PyTorch 2.0 release, A100, 163 models",
        "tutorial ResNet50, NVIDIA A100-SXM4-40GB",
        "tutorial ResNet50, NVIDIA GeForce RTX 4080",
    ]
    assert all(set(row) == {"source", "steady speedup", "first-epoch overhead", "break-even"} for row in rows)


def test_release_row_quotes_1_43x_weighted_with_amp_and_fp32_figures():
    release = reference_rows()[0]
    assert release["steady speedup"] == "1.43x (AMP 1.51x, fp32 1.21x)"
    assert release["first-epoch overhead"] == "not published"
    assert release["break-even"] == "not published"
    assert PYTORCH2_RELEASE["models"] == 163


def test_a100_row_reads_as_a_user_would_say_it():
    a100 = reference_rows()[1]
    assert a100["steady speedup"] == "1.12x"
    assert a100["first-epoch overhead"] == "+41.6 s"
    assert a100["break-even"] == "about 6.5 epochs, beyond its 5"


def test_rtx_4080_row_says_it_broke_even_during_epoch_3():
    rtx = reference_rows()[2]
    assert rtx["first-epoch overhead"] == "+13.1 s"
    assert rtx["break-even"] == "at 2.1 epochs (during epoch 3)"
