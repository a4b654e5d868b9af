"""Backends: what turns a namespace into a running worker the gateway can reach.

`process` runs each namespace as a local worker process in its own virtualenv (`environments`); `docker`
finds and runs worker containers (`containers` holds the container naming and labels, `deploy` the
one-shot `tooldock deploy`); both supervise their workers with `supervisor` (restart, backoff, drain).
Each implements `tooldock.runtime.backend.Backend`. No module here imports a front end.
"""
