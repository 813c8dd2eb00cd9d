// The account page (?account=): who you are, your password and sessions, this browser's
// guest games, and your personal API tokens (for bots and scripts):
//   GET /api/tokens, POST /api/tokens {description, scopes}, DELETE /api/tokens/{id}.
// A new token's secret is shown once, with a copy button: the server keeps only its hash.
// It registers itself with the router as the screen "account". Words from the catalogue
// (account.page.*).

import { accountKnown, claimGames, currentAccount, logoutEverywhere, openLogin, openPassword } from "./account.js";
import { el } from "./boards/common.js";
import { errorSentence, reportError, showNotice } from "./errors.js";
import { formatDate, has, t } from "./i18n.js";
import { registerScreen } from "./router.js";
import { $, fetchJson, profileHref, sendJson } from "./util.js";

/** The scopes a token may have, with their words and whether a new token has them. */
const scopes = () => [
  ["play", t("account.page.scope.play"), true],
  ["read", t("account.page.scope.read"), false],
  ["admin", t("account.page.scope.admin"), false],
];

/** A scope's name in the page's language ("play", "jouer"); an unknown one as it is. */
function scopeName(scope) {
  const key = `account.page.scopeName.${scope}`;
  return has(key) ? t(key) : scope;
}

function showAccountPage() {
  document.title = t("account.page.docTitle");
  render();
}

registerScreen("account", { show: showAccountPage });

function render() {
  if ($("account-page").hidden) return;
  const account = currentAccount();
  if (!accountKnown()) {
    $("account-page").replaceChildren(el("section", { class: "panel players-panel" }, [el("p", { class: "muted" }, [t("account.page.loading")])]));
    return;
  }
  if (!account) {
    $("account-page").replaceChildren(
      el("section", { class: "panel players-panel" }, [
        el("h1", {}, [t("account.page.title")]),
        el("p", {}, [t("account.page.guest")]),
        el("button", { type: "button", class: "btn primary", onclick: openLogin }, [t("account.login")]),
      ]),
    );
    return;
  }
  const list = el("div", { testid: "tokens", dataset: { state: "loading" } }, [el("p", { class: "muted" }, [t("account.page.tokens.loading")])]);
  const secret = el("div", { class: "token-secret", testid: "token-secret-box", role: "status", "aria-live": "polite", hidden: true });
  $("account-page").replaceChildren(
    el("section", { class: "panel players-panel", "aria-labelledby": "account-title" }, [
      el("div", { class: "page-head" }, [
        el("a", { class: "btn ghost small", href: "/" }, [t("account.page.lobby")]),
        el("h1", { id: "account-title" }, [t("account.page.titleNamed", { name: account.username })]),
      ]),
      el("p", { class: "btn-row" }, [
        el("a", { class: "btn small", href: profileHref(account.username) }, [t("account.page.profile")]),
        el("button", { type: "button", class: "btn small", testid: "account-password", onclick: openPassword }, [t("account.password.change")]),
        el("button", { type: "button", class: "btn small", testid: "account-claim", onclick: claimGames }, [t("account.claim")]),
        el("button", { type: "button", class: "btn small danger", testid: "account-logout-all", onclick: logoutEverywhere }, [t("account.logoutAll")]),
      ]),
      el("h2", { id: "tokens-title" }, [t("account.page.tokens")]),
      el("p", { class: "muted small" }, [t("account.page.tokens.intro", { header: `Authorization: Bearer ${t("account.page.tokenWord")}` })]),
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
    list.replaceChildren(el("p", { class: "muted", testid: "tokens-empty" }, [t("account.page.tokens.none")]));
    return;
  }
  const when = (ms) => (ms ? formatDate(ms, true) : t("account.page.never"));
  list.replaceChildren(
    el("table", { class: "data-table" }, [
      el("thead", {}, [el("tr", {}, [
                t("account.page.col.description"),
                t("account.page.col.scopes"),
                t("account.page.col.created"),
                t("account.page.col.used"),
                "",
              ].map((h) => el("th", { scope: "col" }, [h])))]),
      el(
        "tbody",
        {},
        tokens.map((token) =>
          el("tr", { testid: `token-${token.id}` }, [
            el("td", {}, [token.description || t("account.page.noDescription")]),
            el("td", {}, [(token.scopes || []).map(scopeName).join(", ")]),
            el("td", {}, [when(token.created_ms)]),
            el("td", {}, [when(token.used_ms)]),
            el("td", {}, [
              el(
                "button",
                { type: "button", class: "btn small danger", testid: `revoke-${token.id}`, onclick: () => revoke(token, list) },
                [t("account.page.revoke")],
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
    showNotice(t("account.page.revoked", { name: token.description || token.id }));
    loadTokens(list);
  } catch (err) {
    reportError(err);
  }
}

function tokenForm(list, secret) {
  const error = el("p", { class: "form-error", role: "alert", testid: "token-error", hidden: true });
  const form = el("form", { class: "token-form", testid: "token-form" }, [
    el("label", { class: "field", for: "token-description" }, [
      el("span", {}, [t("account.page.new.label")]),
      el("input", {
        id: "token-description",
        name: "description",
        maxlength: "100",
        required: true,
        placeholder: t("account.page.new.placeholder"),
        testid: "token-description",
      }),
    ]),
    el(
      "fieldset",
      { class: "checks" },
      [
        el("legend", {}, [t("account.page.col.scopes")]),
        ...scopes().map(([scope, label, checked]) =>
          el("label", { class: "check-inline" }, [
            el("input", { type: "checkbox", name: "scopes", value: scope, checked, testid: `token-scope-${scope}` }),
            ` ${label}`,
          ]),
        ),
      ],
    ),
    error,
    el("button", { type: "submit", class: "btn primary", testid: "token-create" }, [t("account.page.new.create")]),
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
  const input = el("input", { id: "token-secret", readonly: true, value: token, testid: "token-secret", "aria-label": t("account.page.secret.label") });
  const copy = el("button", { type: "button", class: "btn small", testid: "token-copy" }, [t("account.page.copy")]);
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(token);
    } catch {
      input.select();
      document.execCommand("copy");
    }
    copy.textContent = t("common.copied");
  });
  box.replaceChildren(
    el("p", {}, [el("strong", {}, [t("account.page.secret.once")])]),
    el("span", { class: "copy-row" }, [input, copy]),
  );
  box.hidden = false;
  input.select();
}

export function wireAccountPage() {
  window.addEventListener("kibitz:account", render);
}

wireAccountPage();
