"""The node's HTTP API, a module per area: ``games`` (records, exports, analyses, the list
of played games), ``rooms`` (live rooms and seeks; ``rooms_list`` pages them), ``status``
(``/healthz``, ``/api/status``), ``metrics`` and ``static`` (the browser client's files).
``query`` is the one parser of query parameters. Each module's ``register`` adds its
routes; the parts they use are read from the app (server/appkeys.py)."""
