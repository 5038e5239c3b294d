"""Bounded imports: a bundle is refused by its size before it is parsed (in the app as in the CLI),
by an event count its own race could not have recorded, and past the host's per-visitor count."""

import copy
import glob
import io
import json
import os
import tomllib

import pytest
from support import ROOT

from core.engine.spec import RunSpec
from core.runs.bundle import MAX_BUNDLE_BYTES, BundleError, events_allowed, import_bundle, read_bundle
from core.runs.limits import load_host_limits

RECORDINGS = sorted(glob.glob(os.path.join(ROOT, "assets", "recordings", "*.json")))


BOTH_BACKENDS = True  # each test using `store` runs on SQLite and on PostgreSQL (tests/conftest.py)


def recording() -> dict:
    with open(RECORDINGS[0]) as fh:
        return json.load(fh)


class CountingStream(io.RawIOBase):
    """A stream of `size` bytes that are not JSON, counting what was read of it."""

    def __init__(self, size: int):
        self.left, self.read_bytes = size, 0

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        self.read_bytes += n
        return b"x" * n


def test_an_oversized_upload_is_refused_by_its_size_before_parsing():
    stream = CountingStream(MAX_BUNDLE_BYTES + 10_000_000)
    with pytest.raises(BundleError, match="larger than 64 MiB"):
        read_bundle(stream)
    assert stream.read_bytes == MAX_BUNDLE_BYTES + 1  # never the whole thing


def test_a_bundle_at_the_cap_is_read():
    with pytest.raises(BundleError, match="not a JSON bundle"):  # read, then parsed: not refused for size
        read_bundle(CountingStream(MAX_BUNDLE_BYTES))


def test_streamlit_refuses_uploads_past_the_same_cap():
    with open(os.path.join(ROOT, ".streamlit", "config.toml"), "rb") as fh:
        assert tomllib.load(fh)["server"]["maxUploadSize"] * 2**20 == MAX_BUNDLE_BYTES


@pytest.mark.parametrize("path", RECORDINGS, ids=os.path.basename)
def test_every_shipped_recording_is_within_what_its_race_can_record(path, store):
    with open(path) as fh:
        data = json.load(fh)
    assert len(data["events"]) <= events_allowed(RunSpec.from_dict(data["run"]["params"]))
    assert import_bundle(store, data, "visitor:a")


def test_more_events_than_the_race_could_record_are_refused_and_nothing_is_written(store):
    data = recording()
    spec = RunSpec.from_dict(data["run"]["params"])
    padded = copy.deepcopy(data)
    padded["events"] = (data["events"] * (events_allowed(spec) // len(data["events"]) + 2))[: events_allowed(spec) + 1]
    with pytest.raises(BundleError, match=f"records at most {events_allowed(spec)}"):
        import_bundle(store, padded, "visitor:a")
    assert store.list_runs() == []


def another(data, i):
    """The bundle of another race (one bundle imported twice is one run: core.runs.bundle.AlreadyImported)."""
    return {**data, "run": {**data["run"], "created_at": data["run"]["created_at"] + i}}


def test_a_visitor_keeps_at_most_the_hosts_number_of_imports(store):
    data = recording()
    first, second = (import_bundle(store, another(data, i), "visitor:a", max_imports=2) for i in range(2))
    with pytest.raises(BundleError, match="at most 2 imported runs per visitor"):
        import_bundle(store, another(data, 2), "visitor:a", max_imports=2)
    assert {r.id for r in store.list_runs()} == {first, second}
    assert import_bundle(store, data, "visitor:b", max_imports=2)  # another visitor is not affected
    store.delete_run(first)
    assert import_bundle(store, another(data, 3), "visitor:a", max_imports=2)  # deleting one makes room again


def test_fresh_identities_at_one_address_share_one_import_allowance(store):
    data, here = recording(), "address:8.8.4.4"
    kept = [import_bundle(store, data, f"visitor:fresh{i}", max_imports=2, address=here) for i in range(2)]
    with pytest.raises(BundleError, match=r"at most 2 imported runs per visitor \(counting every browser at your"):
        import_bundle(store, data, "visitor:fresh3", max_imports=2, address=here)  # a cleared cookie
    assert {r.id for r in store.list_runs()} == set(kept)
    assert import_bundle(store, data, "visitor:fresh3", max_imports=2, address="address:8.8.8.8")
    assert store.get_run(kept[0]).client == here


def test_the_import_limit_is_a_host_setting():
    assert load_host_limits({"COMPILE_LAB_MAX_IMPORTS_PER_OWNER": "3"}).max_imports_per_owner == 3
    assert load_host_limits({}).max_imports_per_owner is None
    deploy = os.path.join(ROOT, "deploy", "host-limits.toml")
    assert load_host_limits({"COMPILE_LAB_CONFIG": deploy}).max_imports_per_owner == 10


def test_imports_at_once_keep_no_more_than_the_allowance(store, monkeypatch):
    """Eight tabs import at once against an allowance of 2: each counts what is kept in the
    import's own transaction, so two are kept and six are refused."""
    import threading

    from core.runs import bundle
    from core.runs.store import Store

    data, tabs = recording(), 8
    everyone_checked = threading.Barrier(tabs, timeout=60)
    validate = bundle.validate_bundle

    def slow_validate(bundle_data):  # every tab has looked for room before any of them writes
        everyone_checked.wait()
        return validate(bundle_data)

    monkeypatch.setattr(bundle, "validate_bundle", slow_validate)
    kept, refused = [], []

    def tab(i):
        try:
            kept.append(import_bundle(Store(store.path), data, f"visitor:tab{i}", max_imports=2, address="address:a"))
        except BundleError as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=tab, args=(i,)) for i in range(tabs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(kept) == 2 and len(refused) == tabs - 2, refused
    assert all("at most 2 imported runs per visitor" in r for r in refused)
    assert {r.id for r in store.list_runs()} == set(kept)


def test_one_bundle_imported_in_tabs_at_once_is_one_run(store, monkeypatch):
    """Four tabs of one visitor import the same bundle at once: whether it was imported before is
    asked in the import's own transaction, so one run is kept and the others name it."""
    import threading

    from core.runs import bundle
    from core.runs.store import Store

    data, tabs = recording(), 4
    everyone_marked = threading.Barrier(tabs, timeout=60)
    mark = bundle.fingerprint

    def slow_mark(bundle_data):  # every tab has its fingerprint before any of them writes
        found = mark(bundle_data)
        everyone_marked.wait()
        return found

    monkeypatch.setattr(bundle, "fingerprint", slow_mark)
    kept, named = [], []

    def tab():
        try:
            kept.append(import_bundle(Store(store.path), data, "visitor:one"))
        except bundle.AlreadyImported as exc:
            named.append(exc.run_id)

    threads = [threading.Thread(target=tab) for _ in range(tabs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(kept) == 1 and named == [kept[0]] * (tabs - 1), (kept, named)
    assert [r.id for r in store.list_runs()] == kept
