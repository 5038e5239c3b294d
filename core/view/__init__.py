"""The view: what pages and the command line render from the store.

Owns following a run live and its result cards (live), Altair chart builders (charts), the
Race form's defaults and URL round trip (race_form), a sweep's table, readings and plan (sweep),
its charts (sweep_charts) and form (sweep_form), terminal rendering (report), published reference
figures (reference) and the explainers' charts and tables (explain).

Reads core.runs and core.engine's torch-free modules; must never import torch (a test imports
every page and view module in a fresh interpreter and checks), nor Streamlit: pages are the
only Streamlit code, so everything here is testable without a browser.
"""
