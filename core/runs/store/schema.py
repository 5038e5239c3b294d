"""The store's schema, once, for both backends, with its version and each version's migration.

Written in the SQL both SQLite and PostgreSQL read; the few types they spell differently are
placeholders each backend fills ({id}: the row id, {real}: a double, {bigint}: a 64-bit integer).
A PostgreSQL store is new at FIRST_SERVER_VERSION, so the migrations to that version and below
(written for SQLite, which is all there was) never run on it; every later one runs on both.
"""

from __future__ import annotations

import re

SCHEMA_VERSION = 6
FIRST_SERVER_VERSION = 6  # the version PostgreSQL stores begin at

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id {id},
    kind TEXT NOT NULL,                 -- race | probe | ... (core.runs.job_kinds.JOB_KINDS)
    params TEXT NOT NULL,               -- JSON: the RunSpec for a race
    owner TEXT NOT NULL,
    device_key TEXT NOT NULL,           -- one running job per lane (host, device key): 'cpu', 'cuda:0', ...
    status TEXT NOT NULL,               -- queued | starting | running | done | failed | cancelled
    phase TEXT NOT NULL DEFAULT '',     -- what a person should read: 'compiled epoch 2/3'
    progress {real} NOT NULL DEFAULT 0, -- 0..1
    created_at {real} NOT NULL,
    started_at {real},
    finished_at {real},
    heartbeat_at {real},
    pid {bigint},
    host TEXT,                          -- the box whose lane runs it (an agent's name in a fleet)
    time_limit_s {real},
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    environment TEXT,                   -- JSON
    summary TEXT,                       -- JSON
    details TEXT,                       -- JSON: compile stats, per-variant memory, ...
    error TEXT,
    imported INTEGER NOT NULL DEFAULT 0,
    client TEXT,                        -- a visitor's address, kept only where host limits count by it
    sweep_id {bigint},                  -- the sweep this race is a point of (sweeps.id), or NULL
    race_number {bigint}                -- retired: races were once numbered apart from run ids; NULL now
);
CREATE INDEX IF NOT EXISTS runs_queue ON runs (status, device_key, id);
CREATE TABLE IF NOT EXISTS events (
    id {id},
    run_id {bigint} NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,                 -- step | epoch | compile
    variant TEXT NOT NULL,
    phase TEXT NOT NULL,                -- train | eval (epoch rows: train)
    epoch INTEGER NOT NULL,
    step INTEGER NOT NULL,              -- 1-based within variant and phase; 0 for epoch rows
    time_s {real} NOT NULL,             -- step time, or epoch train time
    eval_time_s {real},                 -- epoch rows only
    loss {real},
    samples {bigint},
    recorded_at {real} NOT NULL,
    note TEXT                           -- compile rows: what compiled ("recompile: <guard>")
);
CREATE INDEX IF NOT EXISTS events_by_run ON events (run_id, id);
CREATE TABLE IF NOT EXISTS sweeps (
    id {id},
    owner TEXT NOT NULL,
    params TEXT NOT NULL,               -- JSON: {{"base": RunSpec, "axes": [{{"name", "values"}}, ...]}}
    created_at {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS hosts (
    name TEXT PRIMARY KEY,              -- an agent's name (core.runs.agent): its runs' host
    state TEXT NOT NULL,                -- live | stopped
    pid {bigint},
    machine TEXT,                       -- the box it runs on (its hostname)
    torch TEXT,
    started_at {real} NOT NULL,
    heartbeat_at {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS lanes (
    host TEXT NOT NULL,                 -- hosts.name
    lane TEXT NOT NULL,                 -- cpu | cuda:0 | ...
    device_name TEXT NOT NULL,          -- 'NVIDIA H100 80GB HBM3', or the CPU's name
    memory_bytes {bigint},
    caps TEXT,                          -- JSON: the DeviceCaps the agent found
    PRIMARY KEY (host, lane)
)
"""

RUN_COLUMNS = (
    "id kind params owner device_key status phase progress created_at started_at finished_at heartbeat_at "
    "pid host time_limit_s cancel_requested environment summary details error imported client sweep_id race_number"
).split()
EVENT_COLUMNS = "id run_id kind variant phase epoch step time_s eval_time_s loss samples recorded_at note".split()
_HASH_OWNERS = "UPDATE {} SET owner = 'visitor:' || owner_hash(substr(owner, 9)) WHERE owner LIKE 'visitor:%'"
# Each version's change to a store written by the one before it (additive only, so a store keeps
# every run it holds).
MIGRATIONS = {
    2: ("ALTER TABLE events ADD COLUMN note TEXT",),
    3: ("ALTER TABLE runs ADD COLUMN client TEXT",),  # the address host limits count a visitor by, if asked
    4: ("ALTER TABLE runs ADD COLUMN sweep_id INTEGER",),  # the sweeps table itself: CREATE ... IF NOT EXISTS
    # Race numbers were a race's id less the other jobs' ids before it, so purging old probes and demos
    # renumbered the races after them: each race now keeps the number it had, and new races count on
    # from the last number given (meta's last_race_number), whatever was deleted since.
    5: (
        "ALTER TABLE runs ADD COLUMN race_number INTEGER",
        "UPDATE runs SET race_number = id - (SELECT COUNT(*) FROM runs AS o WHERE o.kind != 'race' AND o.id < runs.id)"
        " WHERE kind = 'race'",
        "INSERT OR REPLACE INTO meta (key, value) SELECT 'last_race_number', "
        "COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'runs'), 0) - (SELECT COUNT(*) FROM runs WHERE kind != 'race')",
    ),
    # Owners were browser tokens, readable by whatever reads this file: now their hashes (identity.owner_of).
    6: tuple(_HASH_OWNERS.format(table) for table in ("runs", "sweeps")),
}
# Indexes on columns a migration adds: created once every store has the column.
AFTER_MIGRATIONS = ("CREATE INDEX IF NOT EXISTS runs_by_sweep ON runs (sweep_id, id)",)


TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA))


def schema_statements(types: dict[str, str]) -> list[str]:
    """The schema's statements, with one backend's spelling of the types."""
    return [s.strip() for s in SCHEMA.format(**types).split(";\n") if s.strip()]
