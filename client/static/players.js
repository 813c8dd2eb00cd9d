// The leaderboards (?leaderboard=GAME&speed=S, bots' with &bots=1) and the profiles
// (?player=NAME): one screen, "players", drawn from the HTTP API (docs/accounts.md):
//   GET /api/leaderboard/{game}/{speed}   the ranked players (not provisional, active
//                                         lately); people, or bot accounts with ?bots=1
//   GET /api/players/{username}           a profile: ratings per game and speed, W/D/L,
//                                         recent games, games being played, member since
//   GET /api/players/{username}/rating.svg?game=G&speed=S   the rating graph, as an image
// Every text goes in as text (el()), never HTML; the words come from the catalogue
// (players.*; game names through gameTitle). It registers itself with the router.

import { currentAccount } from "./account.js";
import { el } from "./boards/common.js";
import { blockPlayer, reportPlayer } from "./civil.js";
import { reportError } from "./errors.js";
import { formatDate, has, t } from "./i18n.js";
import { navigate, registerScreen } from "./router.js";
import { store } from "./store.js";
import { $, botBadge, fetchJson, gameTitle, loadGames, playerLabel, profileHref, ratingText, speedsOf } from "./util.js";

const LEADERBOARD_DAYS = 30;
const LEADERBOARD_LIMIT = 50;

const view = { key: null }; // what is on screen, so a late answer for another is dropped

/** A speed in words ("blitz", "correspondence"), lower case: for sentences. */
function speedWord(speed) {
  const key = `players.speed.${speed}`;
  return has(key) ? t(key) : speed;
}

/** A speed in words with a capital: for menus and table cells. */
function speedTitle(speed) {
  const key = `players.speedTitle.${speed}`;
  return has(key) ? t(key) : speed;
}

async function showPlayers(what) {
  await loadGames();
  if (what.player) return showProfile(what.player);
  return showLeaderboard(what.leaderboard, what.speed, Boolean(what.bots));
}

registerScreen("players", { show: showPlayers });

// -- leaderboards -------------------------------------------------------------------------------

/**
 * The leaderboard of a game and speed: people's, or with `bots` the bot accounts' (ranked
 * apart, as lichess does: GET /api/leaderboard/...?bots=1).
 */
async function showLeaderboard(wantedGame, wantedSpeed, bots = false) {
  const games = store.games.map((g) => g.name);
  const game = games.includes(wantedGame) ? wantedGame : games[0] || "chess";
  const speeds = speedsOf(game);
  const speed = speeds.includes(wantedSpeed) ? wantedSpeed : speeds[0];
  const key = `leaderboard:${game}:${speed}:${bots}`;
  view.key = key;
  const words = { game: gameTitle(game), speed: speedWord(speed) };
  document.title = t(bots ? "players.leaderboard.botsDocTitle" : "players.leaderboard.docTitle", words);
  const pick = (nextGame, nextSpeed, nextBots = bots) => {
    navigate(`?leaderboard=${encodeURIComponent(nextGame)}&speed=${encodeURIComponent(nextSpeed)}${nextBots ? "&bots=1" : ""}`);
    showLeaderboard(nextGame, nextSpeed, nextBots);
  };
  const gameSelect = el(
    "select",
    { id: "lb-game", testid: "lb-game", onchange: (e) => pick(e.target.value, speedsOf(e.target.value)[0]) },
    store.games.map((g) => el("option", { value: g.name, selected: g.name === game }, [gameTitle(g.name)])),
  );
  const speedSelect = el(
    "select",
    { id: "lb-speed", testid: "lb-speed", onchange: (e) => pick(game, e.target.value) },
    speeds.map((s) => el("option", { value: s, selected: s === speed }, [speedTitle(s)])),
  );
  const poolSelect = el("select", { id: "lb-pool", testid: "lb-pool", onchange: (e) => pick(game, speed, e.target.value === "bots") }, [
    el("option", { value: "people", selected: !bots }, [t("players.pool.people")]),
    el("option", { value: "bots", selected: bots }, [t("players.pool.bots")]),
  ]);
  const table = el("div", { testid: "leaderboard", dataset: { state: "loading" } }, [el("p", { class: "muted" }, [t("players.loading")])]);
  $("players").replaceChildren(
    el("section", { class: "panel players-panel", "aria-labelledby": "lb-title" }, [
      el("div", { class: "page-head" }, [
        el("a", { class: "btn ghost small", href: "/", testid: "players-lobby" }, [t("players.lobby")]),
        el("h1", { id: "lb-title", testid: "lb-title" }, [t(bots ? "players.leaderboard.botsTitle" : "players.leaderboard.title", words)]),
      ]),
      el("div", { class: "field-row lb-choice" }, [
        el("label", { class: "field", for: "lb-game" }, [el("span", {}, [t("players.game")]), gameSelect]),
        el("label", { class: "field", for: "lb-speed" }, [el("span", {}, [t("players.speed")]), speedSelect]),
        el("label", { class: "field", for: "lb-pool" }, [el("span", {}, [t("players.pool")]), poolSelect]),
      ]),
      el("p", { class: "muted small" }, [t("players.leaderboard.who", { n: LEADERBOARD_DAYS })]),
      table,
    ]),
  );
  let answer;
  try {
    answer = await fetchJson(
      `/api/leaderboard/${encodeURIComponent(game)}/${encodeURIComponent(speed)}?days=${LEADERBOARD_DAYS}&limit=${LEADERBOARD_LIMIT}${bots ? "&bots=1" : ""}`,
    );
  } catch (err) {
    if (view.key !== key) return;
    table.replaceChildren(el("p", { class: "muted" }, [t("players.leaderboard.failed")]));
    table.dataset.state = "failed";
    reportError(err);
    return;
  }
  if (view.key !== key) return;
  table.replaceChildren(leaderboardTable(answer.players || []));
  table.dataset.state = "done";
}

function leaderboardTable(players) {
  if (!players.length) return el("p", { class: "muted", testid: "lb-empty" }, [t("players.leaderboard.empty")]);
  return el("table", { class: "data-table" }, [
    el("thead", {}, [
      el(
        "tr",
        {},
        ["#", t("players.col.player"), t("players.col.rating"), t("players.col.games")].map((h) => el("th", { scope: "col" }, [h])),
      ),
    ]),
    el(
      "tbody",
      {},
      players.map((p) =>
        el("tr", { testid: `lb-row-${p.username}` }, [
          el("td", {}, [String(p.rank)]),
          el("td", {}, [el("a", { href: profileHref(p.username), testid: `lb-player-${p.username}` }, [p.username]), botBadge(p.bot)]),
          el("td", { title: t("players.deviation", { n: Math.round(p.rd) }) }, [ratingText(p.rating)]),
          el("td", {}, [String(p.games)]),
        ]),
      ),
    ),
  ]);
}

// -- profiles -----------------------------------------------------------------------------------

async function showProfile(username) {
  const key = `player:${username}`;
  view.key = key;
  document.title = t("players.profile.docTitle", { name: username });
  const box = $("players");
  box.replaceChildren(el("section", { class: "panel players-panel" }, [el("p", { class: "muted" }, [t("players.profile.loading")])]));
  let profile;
  try {
    profile = await fetchJson(`/api/players/${encodeURIComponent(username)}`);
  } catch (err) {
    if (view.key !== key) return;
    box.replaceChildren(
      el("section", { class: "panel players-panel" }, [
        el("a", { class: "btn ghost small", href: "/" }, [t("players.lobby")]),
        el("h1", { testid: "profile-missing" }, [t("players.profile.missing")]),
      ]),
    );
    reportError(err);
    return;
  }
  if (view.key !== key) return;
  renderProfile(profile);
}

/** The (game, speed) pairs of a profile's ratings, the most played first. */
function ratingRows(profile) {
  const rows = [];
  for (const [game, speeds] of Object.entries(profile.ratings || {})) {
    for (const [speed, r] of Object.entries(speeds || {})) rows.push({ game, speed, ...r });
  }
  return rows.sort((a, b) => (b.games || 0) - (a.games || 0));
}

function renderProfile(profile) {
  const rows = ratingRows(profile);
  const graph = el("div", { class: "rating-graph", testid: "profile-graph-box" });
  const showGraph = (row) => {
    const src = `/api/players/${encodeURIComponent(profile.username)}/rating.svg?game=${encodeURIComponent(row.game)}&speed=${encodeURIComponent(row.speed)}`;
    graph.replaceChildren(
      el("h2", {}, [t("players.graph.title", { game: gameTitle(row.game), speed: speedWord(row.speed) })]),
      el("img", {
        src,
        alt: t("players.graph.alt", { name: profile.username, game: gameTitle(row.game), speed: speedWord(row.speed) }),
        class: "rating-graph-img",
        testid: "profile-graph",
        width: "640",
        height: "220",
      }),
    );
    for (const button of document.querySelectorAll("[data-graph]")) {
      button.setAttribute("aria-pressed", String(button.dataset.graph === `${row.game}:${row.speed}`));
    }
  };
  const ratingsTable = rows.length
    ? el("table", { class: "data-table", testid: "profile-ratings" }, [
        el("thead", {}, [
          el(
            "tr",
            {},
            [
              t("players.game"),
              t("players.speed"),
              t("players.col.rating"),
              t("players.col.games"),
              t("players.col.won"),
              t("players.col.drawn"),
              t("players.col.lost"),
              "",
            ].map((h) => el("th", { scope: "col" }, [h])),
          ),
        ]),
        el(
          "tbody",
          {},
          rows.map((row) =>
            el("tr", { testid: `profile-rating-${row.game}-${row.speed}` }, [
              el("td", {}, [gameTitle(row.game)]),
              el("td", {}, [speedTitle(row.speed)]),
              el("td", { title: row.provisional ? t("players.provisional") : t("players.deviation", { n: Math.round(row.rd) }) }, [
                ratingText(row.rating, row.provisional),
              ]),
              el("td", {}, [String(row.games ?? 0)]),
              el("td", {}, [String(row.wins ?? 0)]),
              el("td", {}, [String(row.draws ?? 0)]),
              el("td", {}, [String(row.losses ?? 0)]),
              el("td", {}, [
                el(
                  "button",
                  { type: "button", class: "btn small", dataset: { graph: `${row.game}:${row.speed}` }, "aria-pressed": "false", onclick: () => showGraph(row) },
                  [t("players.graph")],
                ),
              ]),
            ]),
          ),
        ),
      ])
    : el("p", { class: "muted", testid: "profile-no-ratings" }, [t("players.profile.noRatings")]);
  const since = profile.created_ms ? formatDate(profile.created_ms) : "?";
  $("players").replaceChildren(
    el("section", { class: "panel players-panel", "aria-labelledby": "profile-title" }, [
      el("div", { class: "page-head" }, [
        el("a", { class: "btn ghost small", href: "/", testid: "players-lobby" }, [t("players.lobby")]),
        el("h1", { id: "profile-title", testid: "profile-name" }, [profile.username, botBadge(profile.bot)]),
        profile.mark ? el("span", { class: "tag mark", testid: "profile-mark", title: t("players.profile.mark") }, [profile.mark]) : null,
      ]),
      el("p", { class: "muted", testid: "profile-since" }, [t("players.profile.since", { date: since })]),
      profileActions(profile),
      el("h2", {}, [t("players.profile.ratings")]),
      ratingsTable,
      graph,
    ]),
    el("aside", { class: "side-col" }, [
      el("section", { class: "panel", "aria-labelledby": "profile-playing-title" }, [
        el("h2", { id: "profile-playing-title" }, [t("players.profile.playing")]),
        listOr(
          (profile.playing || []).map((room) =>
            el("li", { class: "room-item" }, [
              el("a", { href: `?watch=${encodeURIComponent(roomId(room))}`, testid: `profile-playing-${roomId(room)}` }, [t("players.profile.watch", { room: roomId(room) })]),
            ]),
          ),
          t("players.profile.notPlaying"),
          "profile-playing",
        ),
      ]),
      el("section", { class: "panel", "aria-labelledby": "profile-recent-title" }, [
        el("h2", { id: "profile-recent-title" }, [t("players.profile.recent")]),
        listOr((profile.recent || []).map((game) => recentItem(game, profile)), t("players.profile.noRecent"), "profile-recent"),
      ]),
    ]),
  );
  if (rows.length) showGraph(rows[0]);
}

function roomId(room) {
  return typeof room === "string" ? room : room.room || room.id;
}

function listOr(items, emptyText, testid) {
  return el("ul", { class: "room-list", testid }, items.length ? items : [el("li", { class: "empty muted" }, [emptyText])]);
}

/** A recent game: its title, the opponent and the outcome, linking to its page. */
function recentItem(game, profile) {
  const players = Array.isArray(game.players) ? game.players : [];
  const name = profile.username.toLowerCase();
  let seat = Number.isInteger(game.seat) ? game.seat : -1;
  if (seat < 0) seat = players.findIndex((p) => p && typeof p.account === "string" && p.account.toLowerCase() === name);
  const opponent = seat >= 0 ? players.find((p) => p && p.seat === 1 - seat) || players[1 - seat] : null;
  const words = { win: t("players.outcome.win"), loss: t("players.outcome.loss"), draw: t("players.outcome.draw") };
  const outcome = Object.hasOwn(words, game.outcome) ? words[game.outcome] : "";
  const change = Array.isArray(game.ratings) && seat >= 0 && game.ratings[seat] ? game.ratings[seat].change : null;
  return el("li", { class: "room-item" }, [
    el("span", { class: `game-icon small icon-${game.game}`, "aria-hidden": "true" }),
    el("span", { class: "room-info" }, [
      el("a", { href: `?game=${encodeURIComponent(game.id)}`, testid: `profile-game-${game.id}` }, [gameTitle(game.game)]),
      el("span", { class: "muted small" }, [
        [
          opponent ? t("players.recent.vs", { name: playerLabel(opponent, game.game) }) : null,
          game.ended_ms ? formatDate(game.ended_ms) : null,
          game.rated ? t("players.recent.rated") : null,
        ]
          .filter(Boolean)
          .join(" · "),
      ]),
    ]),
    outcome ? el("span", { class: `badge result-${game.outcome}` }, [outcome]) : null,
    typeof change === "number" ? el("span", { class: "small muted" }, [`${change > 0 ? "+" : ""}${change}`]) : null,
  ]);
}

/** Block and Report, for a signed-in visitor on someone else's profile. */
function profileActions(profile) {
  const me = currentAccount();
  if (!me || me.username.toLowerCase() === profile.username.toLowerCase()) return null;
  return el("p", { class: "btn-row" }, [
    el("button", { type: "button", class: "btn small", testid: "profile-block", onclick: () => blockPlayer(profile.username) }, [t("players.block")]),
    el("button", { type: "button", class: "btn small danger", testid: "profile-report", onclick: () => reportPlayer(profile.username) }, [t("players.report")]),
  ]);
}
