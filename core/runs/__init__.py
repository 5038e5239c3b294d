"""Runs: what executes measurements and keeps them.

Owns the SQLite store (store), the job queue (queue) with one lane per device (devices), the
kinds of job in one table (job_kinds), the worker processes (processes) and the worker process
that runs one job (worker) with what each kind runs there (runners), model lookups (lookups,
model_catalog), a run's files (run_files), sweeps of races grouped under one id (sweeps), host limits
for a shared box (limits), run bundles (bundle), the GPU doctor that checks every CUDA path
through this machinery (doctor), who a visitor is to the queue (identity), recent results offered
instead of a new measurement (shared_results) and the host's admin actions (admin). The store is
the single source of truth: pages and the CLI only read it.

Imports core.engine (specs, analysis; torch only inside the worker's job runners), never
core.view, Streamlit, Altair or pandas: workers and the doctor run on a GPU box that has only
torch. Importing any of these but worker never imports torch.
"""
