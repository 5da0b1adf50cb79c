"""The main-branch history and the trend alarm (DESIGN §9).

- :mod:`gate.history.entries` — the history file: entries read, checked and appended, a run directory as an entry.
- :mod:`gate.history.trend` — the trend alarm: a run against the mean of the previous comparable entries.
- :mod:`gate.history.calibrate` — a metric's run-to-run noise and the thresholds it suggests.

Pure: no git, no GitHub, no click. Storing the file on a branch is ``gate.pr.history_store``; rendering is in
``gate.outputs.trend``; the result types are in :mod:`gate.trends`.
"""
