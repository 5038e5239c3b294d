"""Cold vs warm Inductor caches and recompilation: the counts torch reports, not the timings."""

import json

import pytest
from support import CACHE_HITS, RECOMPILE_REASONS, torch_records

from core.engine.explain import DEMOS, caches, demo_problems
from core.runs import queue


def test_validate_names_the_field_and_what_is_allowed():
    assert caches.validate({}) == []
    problems = caches.validate({"model": "nope", "batch_size": 0, "shapes": [1], "colour": "red"})
    text = " ".join(problems)
    assert "unknown parameter 'colour'" in text and "model: 'nope'" in text
    assert "batch_size" in text and "shapes" in text


def test_a_demo_job_with_bad_parameters_is_refused_before_it_is_queued(tmp_path):
    from core.engine.spec import SpecError
    from core.runs.store import Store

    store = Store(str(tmp_path / "s.sqlite3"))
    assert demo_problems({"demo": "nope", "params": {}}) == [f"unknown demo 'nope'; allowed: {', '.join(DEMOS)}"]
    with pytest.raises(SpecError, match="batch_size"):
        queue.enqueue(store, {"demo": "caches", "params": {"batch_size": -1}}, "ann", kind="demo")
    assert store.list_runs() == []


@pytest.mark.slow
def test_cold_compile_misses_the_cache_warm_compile_hits_it_and_dynamic_shapes_avoid_recompiles(caches_result):
    result = caches_result  # caches.run(conftest.SMALL_CACHES), measured once for the session
    json.dumps(result)
    cold, warm = result["cold"], result["warm"]
    if torch_records(CACHE_HITS):
        assert cold["cache_hits"] == 0 and cold["cache_misses"] >= 1
        assert warm["cache_hits"] >= 1 and warm["cache_misses"] == 0
    else:  # this torch keeps no cache counters: "not available", never 0
        assert cold["cache_hits"] is None and warm["cache_hits"] is None
    assert cold["compile_s"] > 0 and warm["compile_s"] > 0 and result["warm_saves"] > 0
    # A fresh machine: an empty cache that loaded the artifacts the cold compile saved, and read from them.
    portable = result["portable"]
    assert cold["artifact_bytes"] > 0 and portable["load_s"] >= 0, portable
    if torch_records(CACHE_HITS):
        assert portable["cache_hits"] >= 1 and portable["cache_misses"] == 0
    by_setting = {row["dynamic"]: row for row in result["recompiles"]}
    assert by_setting["False"]["recompiles"] == 2 and by_setting["False"]["graphs"] == 3
    assert by_setting["None (automatic)"]["recompiles"] == 1  # the second shape marks the size dynamic
    assert by_setting["True"]["recompiles"] == 0 and by_setting["True"]["graphs"] == 1
    assert [row["cache"] for row in result["recompiles"]] == [caches.OWN_CACHE] * 3  # none reads another's
    if torch_records(RECOMPILE_REASONS):
        assert "size mismatch" in by_setting["False"]["recompile_reasons"][0]


def test_each_recompile_row_gets_an_empty_cache_of_its_own_under_the_data_dir(tmp_path, monkeypatch):
    import os

    from core.engine.warm_cache import cold_cache_root

    monkeypatch.setenv("COMPILE_LAB_DATA", str(tmp_path))
    seen = []
    for _ in range(2):
        with caches.own_cache() as kind:
            folder = os.environ["TORCHINDUCTOR_CACHE_DIR"]
            assert kind == caches.OWN_CACHE and folder.startswith(cold_cache_root()) and os.listdir(folder) == []
            seen.append(folder)
        assert not os.path.exists(folder)  # removed once the row is done
    assert seen[0] != seen[1]
