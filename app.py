"""Compile Lab's server: `streamlit run app.py`. The app itself is streamlit_app.py; this adds the
live feed's routes beside Streamlit's (app_pages/run_screen/feed_routes.py), so that a talk's audience
following one run costs the server one document per refresh, not a script run per viewer."""

import streamlit as st

from app_pages.run_screen.feed_routes import routes

app = st.App("streamlit_app.py", routes=routes())
