"""The wire schema, one module per direction (docs/protocol.md documents it for clients).

- :mod:`.codec`: frames (JSON or msgpack), the frame limit, and :class:`ProtocolError`,
  which every refused message raises with a stable code.
- :mod:`.client_in`: client -> server, parsed at the edge into dataclasses; the rules
  of names, chat text, time controls and player keys.
- :mod:`.client_out`: server -> client, one class per message, writing today's bytes.
- :mod:`.node`: node -> node, the pub/sub payloads (room channels, node deaths, probes,
  seeks), parsed into types.
- :mod:`.jobs`: server -> worker (``Job``, ``AnalysisJob``) and back (``JobResult``).

Import from the module that names the direction; this package re-exports nothing.
"""
