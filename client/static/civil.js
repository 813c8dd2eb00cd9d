// Keeping play civil, from the player's side: block a player (no challenges between you,
// their chat hidden from you and yours from them), report a player or one chat line to
// the moderators. Used from the game screen (the opponent's name menu, the chat) and the
// profile page; it needs a signed-in account (the server answers auth/required otherwise).
// Words from the catalogue (players.civil.*).

import { showNotice, reportError } from "./errors.js";
import { openForm } from "./forms.js";
import { t } from "./i18n.js";
import { sendJson } from "./util.js";

/** The reasons a report may give (docs/accounts.md, "Moderation"), with their words. */
export function reportReasons() {
  return [
    ["abuse", t("players.civil.reason.abuse")],
    ["cheating", t("players.civil.reason.cheating")],
    ["spam", t("players.civil.reason.spam")],
    ["name", t("players.civil.reason.name")],
    ["abandoning", t("players.civil.reason.abandoning")],
    ["other", t("players.civil.reason.other")],
  ];
}

function playerPath(username) {
  return `/api/players/${encodeURIComponent(username)}`;
}

/** Block `username`; resolves true when done. */
export async function blockPlayer(username) {
  try {
    await sendJson("POST", `${playerPath(username)}/block`);
    showNotice(t("players.civil.blocked", { name: username }));
    return true;
  } catch (err) {
    reportError(err);
    return false;
  }
}

export async function unblockPlayer(username) {
  try {
    await sendJson("DELETE", `${playerPath(username)}/block`);
    showNotice(t("players.civil.unblocked", { name: username }));
    return true;
  } catch (err) {
    reportError(err);
    return false;
  }
}

/**
 * Report `username` to the moderators, with a reason and words; `room` and `line` (a chat
 * line's text) say where, when known. Resolves true once the report is filed.
 */
export async function reportPlayer(username, { room = null, line = null } = {}) {
  const filed = await openForm({
    title: line ? t("players.civil.report.line", { name: username }) : t("players.civil.report.player", { name: username }),
    intro: line ? t("players.civil.report.quote", { line }) : t("players.civil.report.intro"),
    testid: "report-form",
    fields: [
      { name: "reason", label: t("players.civil.report.reason"), type: "select", options: reportReasons(), value: line ? "abuse" : "other" },
      { name: "text", label: t("players.civil.report.text"), type: "textarea", maxlength: 1000 },
    ],
    submit: t("players.civil.report.send"),
    onSubmit: async ({ reason, text }) => {
      const body = { username, reason };
      if (text.trim()) body.text = text.trim();
      if (room) body.room = room;
      if (line) body.line = line;
      await sendJson("POST", "/api/reports", body);
      return true;
    },
  });
  if (filed) showNotice(t("players.civil.report.sent", { name: username }));
  return Boolean(filed);
}
