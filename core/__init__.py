"""Compile Lab's code outside the pages, in three layers whose imports point one way only:

    view  ->  runs  ->  engine

- core.engine  measures: what a race is (spec, model zoo, data), how it is timed and trained,
               what the numbers mean (analysis), what torch says about its compile; the
               explainer demos. Imports neither runs nor view.
- core.runs    executes and keeps: the store, the job queue with one lane per device, worker
               processes, host limits, bundles. Imports the engine, never the view.
- core.view    what people see: following a run live, result cards, charts, the race form,
               terminal reports, published reference figures, the explainers' presentation.
               Never imports torch: the Streamlit process stays light and never touches a GPU.

`python -m core` is the command line; it sits above all three.
"""

import os

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
