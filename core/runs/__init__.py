"""Runs: what executes measurements and keeps them.

Owns the SQLite store (store), the job queue with one lane per device (jobs), the worker
process that runs one job (worker), sweeps of races grouped under one id (sweeps), host limits
for a shared box (limits), run bundles (bundle), the GPU doctor that checks every CUDA path
through this machinery (doctor), who a visitor is to the queue (identity), recent results offered
instead of a new measurement (shared_results) and the host's admin actions (admin). The store is
the single source of truth: pages and the CLI only read it.

Imports core.engine (specs, analysis; torch only inside the worker's job runners), never
core.view, Streamlit, Altair or pandas: workers and the doctor run on a GPU box that has only
torch. Importing any of these but worker never imports torch.
"""
