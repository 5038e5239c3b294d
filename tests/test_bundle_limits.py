"""Bounded imports: a bundle is refused by its size before it is parsed (in the app as in the CLI),
by an event count its own race could not have recorded, and past the host's per-visitor count."""

import copy
import glob
import io
import json
import os
import tomllib

import pytest
from conftest import ROOT

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
