"""The games table: finished game records and the columns they are listed by.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "games",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("game", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_ms", sa.BigInteger, nullable=False),
        sa.Column("ended_ms", sa.BigInteger, nullable=False),
        sa.Column("player0", sa.Text, nullable=True),
        sa.Column("player1", sa.Text, nullable=True),
        sa.Column("winner", sa.SmallInteger, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("record", sa.JSON, nullable=False),
    )
    op.create_index("games_by_end", "games", ["ended_ms", "id"])
    op.create_index("games_by_game", "games", ["game", "ended_ms", "id"])
    op.create_index("games_by_player0", "games", ["player0", "ended_ms", "id"])
    op.create_index("games_by_player1", "games", ["player1", "ended_ms", "id"])


def downgrade() -> None:
    op.drop_table("games")
