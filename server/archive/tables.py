"""Every table of the database, as the newest migration (migrations/versions) leaves it.

Finished games and their analyses (migrations 0001, 0002); players (0003): accounts,
their sessions and API tokens, the guest player ids claimed into them, ratings and their
history, the games whose rating change is applied, blocks, reports, bans, the audit log
and abandonments. Times are milliseconds since the epoch (``*_ms``), as in game records.

An account is referred to by its ``accounts.id`` everywhere below; its name is shown as
typed at sign-up (``username``) and is unique case-insensitively (``username_key``, the
name in lower case). Secrets are never stored: sessions and tokens by their SHA-256,
passwords by their argon2id hash.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

#: Finished games: the record as JSON plus the columns they are looked up by.
games = sa.Table(
    "games",
    metadata,
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
    sa.Index("games_by_end", "ended_ms", "id"),
    sa.Index("games_by_game", "game", "ended_ms", "id"),
    sa.Index("games_by_player0", "player0", "ended_ms", "id"),
    sa.Index("games_by_player1", "player1", "ended_ms", "id"),
)

#: A finished game's analysis: the evaluations of its positions, its moves judged and the
#: players' accuracy, as JSON, keyed by the game's id.
analyses = sa.Table(
    "analyses",
    metadata,
    sa.Column("game_id", sa.String(32), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("finished_ms", sa.BigInteger, nullable=False),
    sa.Column("analysis", sa.JSON, nullable=False),
)

#: Accounts. ``player_id`` is the public player id the account plays under (the seats'
#: ``player``); ``roles`` a comma-separated set of "admin", "moderator"; ``bot`` marks a
#: bot account; ``mark`` a moderator's public mark (e.g. "engine"); ``muted_until_ms``
#: a chat mute; ``disabled_ms`` set when the account is banned (see ``bans``).
accounts = sa.Table(
    "accounts",
    metadata,
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

#: Player ids that belong to an account: its own, and guest player keys claimed into it
#: (their finished games are then the account's).
account_players = sa.Table(
    "account_players",
    metadata,
    sa.Column("player_id", sa.String(32), primary_key=True),
    sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("claimed_ms", sa.BigInteger, nullable=False),
    sa.Index("account_players_by_account", "account_id"),
)

#: Log-in sessions, by the SHA-256 (hex) of the cookie's random id.
sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("expires_ms", sa.BigInteger, nullable=False),
    sa.Column("seen_ms", sa.BigInteger, nullable=False),
    sa.Column("address", sa.Text, nullable=True),
    sa.Index("sessions_by_account", "account_id"),
    sa.Index("sessions_by_expiry", "expires_ms"),
)

#: Personal API tokens, by the SHA-256 (hex) of the token; ``scopes`` comma-separated
#: ("play", "read", "admin").
tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("description", sa.String(100), nullable=False, server_default=""),
    sa.Column("scopes", sa.String(64), nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("used_ms", sa.BigInteger, nullable=True),
    sa.Column("revoked_ms", sa.BigInteger, nullable=True),
    sa.Index("tokens_by_account", "account_id"),
)

#: Glicko-2 ratings per account, game and speed ("bullet", "blitz", "rapid", "classical",
#: "correspondence"; "timed" for the games without chess speeds). ``period_ms``: the time
#: of the rating's last update, from which its RD grows with inactivity.
ratings = sa.Table(
    "ratings",
    metadata,
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
    sa.Index("ratings_by_board", "game", "speed", "rating"),
)

#: Each rated game's effect on each account's rating.
rating_history = sa.Table(
    "rating_history",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("game", sa.String(32), nullable=False),
    sa.Column("speed", sa.String(16), nullable=False),
    sa.Column("game_id", sa.String(32), nullable=False),
    sa.Column("ended_ms", sa.BigInteger, nullable=False),
    sa.Column("rating", sa.Float, nullable=False),
    sa.Column("rd", sa.Float, nullable=False),
    sa.Column("change", sa.Float, nullable=False),
    sa.Index("rating_history_by_account", "account_id", "game", "speed", "ended_ms"),
)

#: The games whose rating change is applied: one row each, written in the transaction that
#: archives the game, so a change is applied exactly once. ``changes``: per seat
#: {"before", "after", "change", "rd"} (null for an unrated seat, such as the AI's).
rated_games = sa.Table(
    "rated_games",
    metadata,
    sa.Column("game_id", sa.String(32), primary_key=True),
    sa.Column("applied_ms", sa.BigInteger, nullable=False),
    sa.Column("changes", sa.JSON, nullable=False),
)

#: A blocks B: no challenges between them, each other's chat hidden.
blocks = sa.Table(
    "blocks",
    metadata,
    sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), primary_key=True),
    sa.Column("blocked_id", sa.Integer, sa.ForeignKey("accounts.id"), primary_key=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Index("blocks_by_blocked", "blocked_id"),
)

#: Reports of a player (and optionally one chat line of theirs) to the moderators.
reports = sa.Table(
    "reports",
    metadata,
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
    sa.Index("reports_open", "closed_ms", "created_ms"),
)

#: Bans of an account (``kind`` "account", ``target`` its id as text) or of an address
#: (``kind`` "address"); lifted by setting ``lifted_ms``; ``expires_ms`` null: for good.
bans = sa.Table(
    "bans",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("target", sa.String(64), nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("expires_ms", sa.BigInteger, nullable=True),
    sa.Column("lifted_ms", sa.BigInteger, nullable=True),
    sa.Column("by_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=True),
    sa.Index("bans_by_target", "kind", "target"),
)

#: What moderators and admins did (``actor_id`` null: the operator, through ``kibitz
#: admin``): one row per action, never changed.
audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at_ms", sa.BigInteger, nullable=False),
    sa.Column("actor_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=True),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("target", sa.String(64), nullable=False, server_default=""),
    sa.Column("detail", sa.JSON, nullable=False),
    sa.Index("audit_by_time", "at_ms"),
)

#: Rated games an account abandoned (``kind`` "timeout": lost on time after leaving;
#: "abort": aborted by them), from which the wait before seeking again is computed.
abandonments = sa.Table(
    "abandonments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("game_id", sa.String(32), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("at_ms", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("account_id", "game_id", name="abandonments_once"),
    sa.Index("abandonments_by_account", "account_id", "at_ms"),
)

PLAYER_TABLES = (
    accounts,
    account_players,
    sessions,
    tokens,
    ratings,
    rating_history,
    rated_games,
    blocks,
    reports,
    bans,
    audit_log,
    abandonments,
)
