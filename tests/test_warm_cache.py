"""Warm means warm: cold races fill the warm Inductor cache as they end, a warm race records what it
found (and who filled it) before compiling, and its reading says whether it found a cache and used
it (core.engine.warm_cache)."""

import os

import pytest
import torch
from support import CPU

from core.engine import device_state, warm_cache
from core.engine.spec import RunSpec
from core.engine.trainer import run_race


def write(path, name, text="x" * 10):
    os.makedirs(os.path.dirname(os.path.join(path, name)), exist_ok=True)
    with open(os.path.join(path, name), "w") as fh:
        fh.write(text)


def test_a_cold_race_leaves_its_cache_to_the_warm_folder_and_a_warm_race_finds_it():
    device = torch.device("cpu")
    cold_notes, warm_notes = {}, {}
    with device_state.inductor_cache(RunSpec(cache="cold"), device, cold_notes, {"run": 3}) as cold:
        write(cold, "fxgraph/ab/entry")
        write(cold, "triton/kernel.so", "y" * 30)
    assert not os.path.exists(cold)
    assert cold_notes["kept_for_warm"] == {"kept": True, "files": 2, "bytes": 40}
    with device_state.inductor_cache(RunSpec(cache="warm"), device, warm_notes, {"run": 4}) as warm:
        assert os.path.isfile(os.path.join(warm, "fxgraph/ab/entry"))
    found = warm_notes["warm_cache"]
    assert found["files"] == 2 and found["bytes"] == 40
    assert [e["run"] for e in found["filled_by"]] == [3] and found["filled_by"][0]["cache"] == "cold"
    assert [e["run"] for e in warm_cache.filled_by(warm)] == [3, 4]  # the warm race is listed once it ends


def test_a_first_warm_race_says_it_found_the_cache_empty():
    notes = {}
    with device_state.inductor_cache(RunSpec(cache="warm"), torch.device("cpu"), notes):
        pass
    words = warm_cache.cache_words({"inductor_cache": "warm", **notes}, {"cache_hits": 0, "cache_misses": 2})
    assert "found the warm cache empty" in words and "compile was cold" in words


def test_a_warm_race_says_who_filled_the_cache_and_how_much_it_read():
    env = {
        "inductor_cache": "warm",
        "warm_cache": {"files": 12, "bytes": 3 * 2**20, "filled_by": [{"run": 3}, {"run": 5}, {"run": None}]},
    }
    words = warm_cache.cache_words(env, {"cache_hits": 2, "cache_misses": 0})
    assert "found 12 files (3.0 MiB) that runs 3 and 5 and 1 race outside the store compiled" in words
    assert "2 of its 2 graphs were read from there" in words
    assert "none of its graphs" in warm_cache.cache_words(env, {"cache_hits": 0, "cache_misses": 2})


def test_a_cold_race_says_its_cache_was_kept_or_why_not():
    kept = warm_cache.cache_words({"inductor_cache": "cold", "kept_for_warm": {"kept": True, "files": 3}})
    assert "fills the warm cache" in kept
    big = {"kept": False, "why": "its cache (3,000 MiB) is larger than the warm folder keeps"}
    assert "not kept for warm races: its cache (3,000 MiB)" in warm_cache.cache_words(
        {"inductor_cache": "cold", "kept_for_warm": big}
    )
    assert warm_cache.cache_words({}) is None  # an older race recorded neither


def test_a_cold_cache_over_the_limit_is_not_copied(tmp_path, monkeypatch):
    monkeypatch.setattr(warm_cache, "MAX_KEPT_BYTES", 5)
    write(str(tmp_path / "cold"), "a", "x" * 10)
    kept = warm_cache.keep_for_warm(str(tmp_path / "cold"), str(tmp_path / "warm"), {"run": 1})
    assert kept["kept"] is False and not os.path.exists(tmp_path / "warm" / "a")


@pytest.mark.slow
def test_a_warm_race_after_a_cold_one_reads_its_graphs():
    spec = RunSpec(model="mlp", batch_size=16, epochs=1, steps_per_epoch=3, device="cpu", profile_steps=0)
    cold = run_race(spec, caps=CPU, run_id=1)
    assert cold.status == "done", cold.error
    assert cold.environment["kept_for_warm"]["kept"] is True
    warm = run_race(RunSpec(**{**spec.to_dict(), "cache": "warm"}), caps=CPU, run_id=2)
    assert warm.status == "done", warm.error
    found = warm.environment["warm_cache"]
    assert found["files"] > 0 and [e["run"] for e in found["filled_by"]] == [1]
    assert warm.compile_stats.cache_hits and warm.compile_stats.cache_hits > 0
    words = warm_cache.cache_words(warm.environment, warm.compile_stats.to_dict())
    assert "that run 1 compiled" in words and "read from there instead of compiled" in words


def test_a_full_warm_cache_takes_no_more(tmp_path, monkeypatch):
    monkeypatch.setattr(warm_cache, "MAX_WARM_BYTES", 15)
    write(str(tmp_path / "warm"), "old", "x" * 10)
    write(str(tmp_path / "cold"), "new", "y" * 10)
    kept = warm_cache.keep_for_warm(str(tmp_path / "cold"), str(tmp_path / "warm"), {"run": 2})
    assert kept == {"kept": False, "why": "the warm cache already holds 10 B, its limit"}
    assert not os.path.exists(tmp_path / "warm" / "new")
