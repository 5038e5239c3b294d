"""One run's screen, live or finished: what the Race page shows for a race and the Runs page for a
reopened one, and what the live feed sends a viewer's browser. One file per part:

  store_reader   a run's events read from the store, only the new ones each refresh, as chart-ready
                 frames and the headline numbers so far (RunView)
  shared_board   one snapshot per followed run and refresh, shared by every viewer in the process
                 (LiveBoard, LiveSnapshot), and the sidebar's queue
  layout         the screen's plan: what it shows when (the sentence, the cards, which charts), one
                 plan for the Streamlit page and the feed
  cards          the result cards
  glance         a finished race at a glance: its one verdict line, the short line of each answer
  sentences      the words beside the charts
  why_per_step   why, per step: compile marks, the per-step anatomy, compiles and their phases
  feed           the live feed: the screen as one JSON document per snapshot for all viewers

The pages draw it in app_pages/run_screen/. Torch-free, Streamlit-free, like all of core.view.
"""
