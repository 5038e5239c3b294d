"""Compile Lab's server: `streamlit run app.py`. The app itself is streamlit_app.py; this adds the
live feed's routes beside Streamlit's (app_pages/run_screen/feed_routes.py), so that a talk's audience
following one run costs the server one document per refresh, not a script run per viewer. It is
imported once, as the server starts: it also keeps a flood of one error out of the server's log
(core/runs/server_log.py) and says in it where visitors are told apart by browser alone."""

import logging

import streamlit as st

from app_pages.run_screen.feed_routes import routes
from core.runs.identity import by_browser_alone
from core.runs.limits import ConfigError, load_host_limits
from core.runs.server_log import guard_repeated_errors

guard_repeated_errors()
try:
    _told_apart = by_browser_alone(load_host_limits())
except ConfigError:
    _told_apart = None  # every page says what is wrong with the configuration
if _told_apart:
    logging.getLogger("compile_lab").warning(_told_apart)

app = st.App("streamlit_app.py", routes=routes())
