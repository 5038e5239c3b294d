"""Command line: `python -m core models | race | sweep | sweeps | plan | submit | status | cancel | delete | runs
| export | import | doctor` (with `cancel-sweep` and `delete-sweep`), one module per group of
subcommands, gathered by core.cli.main; the race flags come from the options table
(core.cli.races).

Errors a user can cause end with one line on stderr and exit status 2; a run that fails part
way prints what it measured, then the reason, and exits 1.

The CLI sits above the three layers: it may import the engine, the runs and the view, and nothing
in them ever imports it. It never imports streamlit or altair, and loads only what a command needs
when it runs, so `race` and `doctor` work on a GPU box that has only torch and pandas.
"""
