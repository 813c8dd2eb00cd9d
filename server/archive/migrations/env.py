"""Alembic's entry point for the archive's migrations.

The archive runs them itself (``Archive.migrate``) on a connection it hands over in
``config.attributes["connection"]``; there is no alembic.ini. To write a new revision,
add a file to ``versions/`` by hand, following ``0001_games.py``.
"""

from __future__ import annotations

from alembic import context

from kibitz.server.archive.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run the archive's migrations through kibitz (Archive.open)")
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
