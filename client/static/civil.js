// Keeping play civil, from the player's side: block a player (no challenges between you,
// their chat hidden from you and yours from them), report a player or one chat line to
// the moderators. Used from the game screen (the opponent's name menu, the chat) and the
// profile page; it needs a signed-in account (the server answers auth/required otherwise).

import { showNotice, reportError } from "./errors.js";
import { openForm } from "./forms.js";
import { sendJson } from "./util.js";

/** The reasons a report may give (docs/accounts.md, "Moderation"), with their words. */
export const REPORT_REASONS = [
  ["abuse", "Insults or harassment"],
  ["cheating", "Cheating (engine help)"],
  ["spam", "Spam or advertising"],
  ["name", "An offensive username"],
  ["abandoning", "Leaving games without finishing them"],
  ["other", "Something else"],
];

function playerPath(username) {
  return `/api/players/${encodeURIComponent(username)}`;
}

/** Block `username`; resolves true when done. */
export async function blockPlayer(username) {
  try {
    await sendJson("POST", `${playerPath(username)}/block`);
    showNotice(`You blocked ${username}: no challenges between you, and neither sees the other's chat.`);
    return true;
  } catch (err) {
    reportError(err);
    return false;
  }
}

export async function unblockPlayer(username) {
  try {
    await sendJson("DELETE", `${playerPath(username)}/block`);
    showNotice(`You unblocked ${username}.`);
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
    title: line ? `Report this line by ${username}` : `Report ${username}`,
    intro: line ? `“${line}”` : "A moderator reads every report. The player is not told who reported them.",
    testid: "report-form",
    fields: [
      { name: "reason", label: "Reason", type: "select", options: REPORT_REASONS, value: line ? "abuse" : "other" },
      { name: "text", label: "What happened (optional)", type: "textarea", maxlength: 1000 },
    ],
    submit: "Send the report",
    onSubmit: async ({ reason, text }) => {
      const body = { username, reason };
      if (text.trim()) body.text = text.trim();
      if (room) body.room = room;
      if (line) body.line = line;
      await sendJson("POST", "/api/reports", body);
      return true;
    },
  });
  if (filed) showNotice(`Thank you: your report on ${username} went to the moderators.`);
  return Boolean(filed);
}
