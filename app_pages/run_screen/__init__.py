"""One run's screen in the app (what it shows, and when, is core.view.run_screen's):

  show          the run drawn by Streamlit: for its owner, for a viewer where the feed is not served,
                and for a run reopened on the Runs page
  feed_view     the run drawn by a viewer's browser from the live feed (feed_view.js), and the
                sidebar's slower refresh while a tab follows it that way
  feed_routes   the HTTP routes beside Streamlit's (mounted by app.py) that serve the feed and the
                chart library the browser draws it with

Helpers of the Race and Runs pages, not pages: st.navigation lists the pages in streamlit_app.py.
"""
