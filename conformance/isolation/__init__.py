"""The parent's side of the worker processes: starting them, talking to them, the fork server's client."""
