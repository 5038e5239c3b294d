"""Owner tokens are secrets: the store keeps only their hashes, so code that reads the store's file
(a model file's build_model in a worker, say) cannot take over a visitor's runs; a store written
before schema 6 is migrated so each browser keeps its runs."""

from __future__ import annotations

import sqlite3

from core.runs import queue
from core.runs.limits import VISITOR_PREFIX, is_browser_token, owner_hash, owner_of
from core.runs.store import SCHEMA_VERSION, Store

TOKEN = "0123456789abcdef0123456789abcdef"


def test_an_owner_is_a_one_way_hash_of_the_token_that_no_browser_can_present_back():
    owner = owner_of(TOKEN)
    assert owner.startswith(VISITOR_PREFIX) and TOKEN not in owner
    assert owner == owner_of(TOKEN) != owner_of(TOKEN[::-1])  # one browser, one owner
    stolen = owner[len(VISITOR_PREFIX) :]
    assert is_browser_token(stolen)  # a hash looks like a token, but presented as one ...
    assert owner_of(stolen) != owner  # ... it is hashed again and owns nothing


def test_the_store_file_holds_no_token_after_a_visitor_queues_a_run(store):
    run_id = store.create_run("race", {}, owner_of(TOKEN), "cpu")
    store.close()
    assert TOKEN.encode() not in open(store.path, "rb").read()
    reopened = Store(store.path)
    assert reopened.get_run(run_id).owner == owner_of(TOKEN)


def test_a_version_5_store_hashes_its_visitor_owners_and_each_browser_keeps_its_runs(tmp_path):
    path = str(tmp_path / "old.sqlite3")
    Store(path).close()  # today's schema, then set back to 5 with raw tokens, as version 5 wrote them
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    for owner in (f"visitor:{TOKEN}", "cli:someone"):
        conn.execute(
            "INSERT INTO runs (kind, params, owner, device_key, status, created_at) "
            "VALUES ('race', '{}', ?, 'cpu', 'queued', 1)",
            (owner,),
        )
    conn.execute("INSERT INTO sweeps (owner, params, created_at) VALUES (?, '{}', 1)", (f"visitor:{TOKEN}",))
    conn.commit()
    conn.close()

    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 6
    mine, cli = store.list_runs(kind="race")[::-1]
    assert mine.owner == owner_of(TOKEN) == f"visitor:{owner_hash(TOKEN)}" and cli.owner == "cli:someone"
    assert [s.owner for s in store.list_sweeps()] == [owner_of(TOKEN)]
    assert store.list_runs(owner=owner_of(TOKEN))[0].id == mine.id  # the browser still finds its run
    queue.cancel(store, mine.id, owner_of(TOKEN))  # ... and may cancel it
    assert store.get_run(mine.id).status == "cancelled"
    store.close()
    assert TOKEN.encode() not in open(path, "rb").read()  # no old copy left in a page's free space
    assert Store(path).get_run(mine.id).owner == owner_of(TOKEN)  # opening again hashes nothing twice
