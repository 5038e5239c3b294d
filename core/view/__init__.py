"""The view: what pages and the command line render from the store.

Owns one run's screen, live or finished (run_screen: reading its events, the board every viewer
shares, what it shows when, its cards, words and live feed), the Altair charts of a race
(race_charts), of several runs overlaid (overlay_charts) and what they share (chart_style), the
Race form's defaults and URL round trip (race_form), a sweep's table, readings and plan (sweep),
its charts (sweep_charts) and form (sweep_form), terminal rendering (report), text from bundles
and visitors made inert (safe_text), published reference figures (reference), the explainers'
charts and tables (explain) and the admin page's tables (admin_tables).

Reads core.runs and core.engine's torch-free modules; must never import torch (a test imports
every page and view module in a fresh interpreter and checks), nor Streamlit: pages are the
only Streamlit code, so everything here is testable without a browser.
"""
