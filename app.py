"""Compile Lab's server: `streamlit run app.py`. The app itself is streamlit_app.py; this adds the
live feed's routes beside Streamlit's (app_pages/run_screen/feed.py), so that a talk's audience
following one run costs the server one document per refresh, not a script run per viewer. It is
imported once, as the server starts: it also keeps a flood of one error out of the server's log
(core/runs/server_log.py), says in it where visitors are told apart by browser alone, and readies
what a race needs (its lanes' warm servers, the device probe) in background processes."""

from core.runs.queue import ready_at_start

ready_at_start()  # first: the lanes' warm servers and the device probe, before anything else is imported

import logging  # noqa: E402

import streamlit as st  # noqa: E402

from app_pages.run_screen.feed import routes  # noqa: E402
from core.runs.limits import (  # noqa: E402
    ConfigError,
    by_browser_alone,  # noqa: E402
    load_host_limits,
)
from core.runs.server_log import guard_repeated_errors  # noqa: E402

guard_repeated_errors()
try:
    _told_apart = by_browser_alone(load_host_limits())
except ConfigError:
    _told_apart = None  # every page says what is wrong with the configuration
if _told_apart:
    logging.getLogger("compile_lab").warning(_told_apart)

app = st.App("streamlit_app.py", routes=routes())
