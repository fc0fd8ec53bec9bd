"""The session room: the registry of every live and stored session (persist,
then announce), what a live session carries (event log and journal,
attention, pending question, steering), the board rows and the board feed,
and retention in practice. The gates act on sessions only through the
registry's public methods."""
