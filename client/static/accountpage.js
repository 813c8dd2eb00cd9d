// The account page (?account=): who you are, your password and sessions, this browser's
// guest games, and your personal API tokens (for bots and scripts):
//   GET /api/tokens, POST /api/tokens {description, scopes}, DELETE /api/tokens/{id}.
// A new token's secret is shown once, with a copy button: the server keeps only its hash.
// It registers itself with the router as the screen "account".

import { accountKnown, claimGames, currentAccount, logoutEverywhere, openLogin, openPassword } from "./account.js";
import { el } from "./boards/common.js";
import { errorSentence, reportError, showNotice } from "./errors.js";
import { registerScreen } from "./router.js";
import { $, fetchJson, profileHref, sendJson } from "./util.js";

const SCOPES = [
  ["play", "Play: create, join and play games", true],
  ["read", "Read: your games and account", false],
  ["admin", "Admin: moderation (admins only)", false],
];

function showAccountPage() {
  document.title = "Account · kibitz";
  render();
}

registerScreen("account", { show: showAccountPage });

function render() {
  if ($("account-page").hidden) return;
  const account = currentAccount();
  if (!accountKnown()) {
    $("account-page").replaceChildren(el("section", { class: "panel players-panel" }, [el("p", { class: "muted" }, ["Loading…"])]));
    return;
  }
  if (!account) {
    $("account-page").replaceChildren(
      el("section", { class: "panel players-panel" }, [
        el("h1", {}, ["Your account"]),
        el("p", {}, ["You are not logged in."]),
        el("button", { type: "button", class: "btn primary", onclick: openLogin }, ["Log in"]),
      ]),
    );
    return;
  }
  const list = el("div", { testid: "tokens", dataset: { state: "loading" } }, [el("p", { class: "muted" }, ["Loading your tokens…"])]);
  const secret = el("div", { class: "token-secret", testid: "token-secret-box", role: "status", "aria-live": "polite", hidden: true });
  $("account-page").replaceChildren(
    el("section", { class: "panel players-panel", "aria-labelledby": "account-title" }, [
      el("div", { class: "page-head" }, [
        el("a", { class: "btn ghost small", href: "/" }, ["\u2190 Lobby"]),
        el("h1", { id: "account-title" }, [`Your account: ${account.username}`]),
      ]),
      el("p", { class: "btn-row" }, [
        el("a", { class: "btn small", href: profileHref(account.username) }, ["Your profile"]),
        el("button", { type: "button", class: "btn small", testid: "account-password", onclick: openPassword }, ["Change password"]),
        el("button", { type: "button", class: "btn small", testid: "account-claim", onclick: claimGames }, ["Claim this browser's games"]),
        el("button", { type: "button", class: "btn small danger", testid: "account-logout-all", onclick: logoutEverywhere }, ["Log out everywhere"]),
      ]),
      el("h2", { id: "tokens-title" }, ["API tokens"]),
      el("p", { class: "muted small" }, [
        "A token lets a bot or a script act for your account (send it as “Authorization: Bearer TOKEN”). Keep it secret; revoke it when it is not needed any more.",
      ]),
      list,
      secret,
      tokenForm(list, secret),
    ]),
  );
  loadTokens(list);
}

async function loadTokens(list) {
  let tokens;
  try {
    tokens = (await fetchJson("/api/tokens")).tokens || [];
  } catch (err) {
    list.replaceChildren(el("p", { class: "muted" }, [errorSentence(err)]));
    list.dataset.state = "failed";
    return;
  }
  list.dataset.state = "done";
  if (!tokens.length) {
    list.replaceChildren(el("p", { class: "muted", testid: "tokens-empty" }, ["No tokens yet."]));
    return;
  }
  const when = (ms) => (ms ? new Date(ms).toLocaleString() : "never");
  list.replaceChildren(
    el("table", { class: "data-table" }, [
      el("thead", {}, [el("tr", {}, ["Description", "Scopes", "Created", "Last used", ""].map((h) => el("th", { scope: "col" }, [h])))]),
      el(
        "tbody",
        {},
        tokens.map((token) =>
          el("tr", { testid: `token-${token.id}` }, [
            el("td", {}, [token.description || "(no description)"]),
            el("td", {}, [(token.scopes || []).join(", ")]),
            el("td", {}, [when(token.created_ms)]),
            el("td", {}, [when(token.used_ms)]),
            el("td", {}, [
              el(
                "button",
                { type: "button", class: "btn small danger", testid: `revoke-${token.id}`, onclick: () => revoke(token, list) },
                ["Revoke"],
              ),
            ]),
          ]),
        ),
      ),
    ]),
  );
}

async function revoke(token, list) {
  try {
    await sendJson("DELETE", `/api/tokens/${encodeURIComponent(token.id)}`);
    showNotice(`The token “${token.description || token.id}” is revoked.`);
    loadTokens(list);
  } catch (err) {
    reportError(err);
  }
}

function tokenForm(list, secret) {
  const error = el("p", { class: "form-error", role: "alert", testid: "token-error", hidden: true });
  const form = el("form", { class: "token-form", testid: "token-form" }, [
    el("label", { class: "field", for: "token-description" }, [
      el("span", {}, ["New token: what is it for?"]),
      el("input", { id: "token-description", name: "description", maxlength: "100", required: true, placeholder: "e.g. my chess bot", testid: "token-description" }),
    ]),
    el(
      "fieldset",
      { class: "checks" },
      [
        el("legend", {}, ["Scopes"]),
        ...SCOPES.map(([scope, label, checked]) =>
          el("label", { class: "check-inline" }, [
            el("input", { type: "checkbox", name: "scopes", value: scope, checked, testid: `token-scope-${scope}` }),
            ` ${label}`,
          ]),
        ),
      ],
    ),
    error,
    el("button", { type: "submit", class: "btn primary", testid: "token-create" }, ["Create token"]),
  ]);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    error.hidden = true;
    try {
      const made = await sendJson("POST", "/api/tokens", {
        description: String(data.get("description") || "").trim(),
        scopes: data.getAll("scopes"),
      });
      form.reset();
      showSecret(secret, made.token);
      loadTokens(list);
    } catch (err) {
      error.textContent = errorSentence(err);
      error.hidden = false;
    }
  });
  return form;
}

/** The new token's secret, once, with a copy button. */
function showSecret(box, token) {
  const input = el("input", { id: "token-secret", readonly: true, value: token, testid: "token-secret", "aria-label": "Your new token" });
  const copy = el("button", { type: "button", class: "btn small", testid: "token-copy" }, ["Copy"]);
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(token);
    } catch {
      input.select();
      document.execCommand("copy");
    }
    copy.textContent = "Copied";
  });
  box.replaceChildren(
    el("p", {}, [el("strong", {}, ["Your new token. Copy it now: it is shown only this once."])]),
    el("span", { class: "copy-row" }, [input, copy]),
  );
  box.hidden = false;
  input.select();
}

export function wireAccountPage() {
  window.addEventListener("kibitz:account", render);
}

wireAccountPage();
