"""Players: accounts, sessions, API tokens, claimed guest ids, Glicko-2 ratings and their
history, applied rating changes, blocks, reports, bans, the audit log and abandonments.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("username", sa.String(20), nullable=False),
        sa.Column("username_key", sa.String(20), nullable=False, unique=True),
        sa.Column("password_hash", sa.Text, nullable=True),
        sa.Column("player_id", sa.String(32), nullable=False, unique=True),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("seen_ms", sa.BigInteger, nullable=True),
        sa.Column("roles", sa.String(64), nullable=False, server_default=""),
        sa.Column("bot", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("mark", sa.String(32), nullable=True),
        sa.Column("muted_until_ms", sa.BigInteger, nullable=True),
        sa.Column("disabled_ms", sa.BigInteger, nullable=True),
    )
    op.create_table(
        "account_players",
        sa.Column("player_id", sa.String(32), primary_key=True),
        sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("claimed_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("account_players_by_account", "account_players", ["account_id"])
    op.create_table(
        "sessions",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("expires_ms", sa.BigInteger, nullable=False),
        sa.Column("seen_ms", sa.BigInteger, nullable=False),
        sa.Column("address", sa.Text, nullable=True),
    )
    op.create_index("sessions_by_account", "sessions", ["account_id"])
    op.create_index("sessions_by_expiry", "sessions", ["expires_ms"])
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("description", sa.String(100), nullable=False, server_default=""),
        sa.Column("scopes", sa.String(64), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("used_ms", sa.BigInteger, nullable=True),
        sa.Column("revoked_ms", sa.BigInteger, nullable=True),
    )
    op.create_index("tokens_by_account", "tokens", ["account_id"])
    op.create_table(
        "ratings",
        sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), primary_key=True),
        sa.Column("game", sa.String(32), primary_key=True),
        sa.Column("speed", sa.String(16), primary_key=True),
        sa.Column("rating", sa.Float, nullable=False),
        sa.Column("rd", sa.Float, nullable=False),
        sa.Column("volatility", sa.Float, nullable=False),
        sa.Column("games", sa.Integer, nullable=False, server_default="0"),
        sa.Column("wins", sa.Integer, nullable=False, server_default="0"),
        sa.Column("draws", sa.Integer, nullable=False, server_default="0"),
        sa.Column("losses", sa.Integer, nullable=False, server_default="0"),
        sa.Column("period_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("ratings_by_board", "ratings", ["game", "speed", "rating"])
    op.create_table(
        "rating_history",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("game", sa.String(32), nullable=False),
        sa.Column("speed", sa.String(16), nullable=False),
        sa.Column("game_id", sa.String(32), nullable=False),
        sa.Column("ended_ms", sa.BigInteger, nullable=False),
        sa.Column("rating", sa.Float, nullable=False),
        sa.Column("rd", sa.Float, nullable=False),
        sa.Column("change", sa.Float, nullable=False),
    )
    op.create_index(
        "rating_history_by_account", "rating_history", ["account_id", "game", "speed", "ended_ms"]
    )
    op.create_table(
        "rated_games",
        sa.Column("game_id", sa.String(32), primary_key=True),
        sa.Column("applied_ms", sa.BigInteger, nullable=False),
        sa.Column("changes", sa.JSON, nullable=False),
    )
    op.create_table(
        "blocks",
        sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), primary_key=True),
        sa.Column("blocked_id", sa.Integer, sa.ForeignKey("accounts.id"), primary_key=True),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("blocks_by_blocked", "blocks", ["blocked_id"])
    op.create_table(
        "reports",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("reporter_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=True),
        sa.Column("target_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("room", sa.String(32), nullable=True),
        sa.Column("line", sa.Text, nullable=True),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("text", sa.Text, nullable=False, server_default=""),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("closed_ms", sa.BigInteger, nullable=True),
        sa.Column("closed_by", sa.Integer, sa.ForeignKey("accounts.id"), nullable=True),
        sa.Column("resolution", sa.Text, nullable=True),
    )
    op.create_index("reports_open", "reports", ["closed_ms", "created_ms"])
    op.create_table(
        "bans",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("expires_ms", sa.BigInteger, nullable=True),
        sa.Column("lifted_ms", sa.BigInteger, nullable=True),
        sa.Column("by_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=True),
    )
    op.create_index("bans_by_target", "bans", ["kind", "target"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at_ms", sa.BigInteger, nullable=False),
        sa.Column("actor_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=True),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("target", sa.String(64), nullable=False, server_default=""),
        sa.Column("detail", sa.JSON, nullable=False),
    )
    op.create_index("audit_by_time", "audit_log", ["at_ms"])
    op.create_table(
        "abandonments",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("game_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("at_ms", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("account_id", "game_id", name="abandonments_once"),
    )
    op.create_index("abandonments_by_account", "abandonments", ["account_id", "at_ms"])


def downgrade() -> None:
    op.drop_table("abandonments")
    op.drop_table("audit_log")
    op.drop_table("bans")
    op.drop_table("reports")
    op.drop_table("blocks")
    op.drop_table("rated_games")
    op.drop_table("rating_history")
    op.drop_table("ratings")
    op.drop_table("tokens")
    op.drop_table("sessions")
    op.drop_table("account_players")
    op.drop_table("accounts")
