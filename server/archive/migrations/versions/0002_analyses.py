"""The analyses table: a finished game's analysis by the worker pool, one row per game.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "analyses",
        sa.Column("game_id", sa.String(32), primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("finished_ms", sa.BigInteger, nullable=False),
        sa.Column("analysis", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("analyses")
