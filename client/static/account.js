// The account menu in the top bar: log in, sign up, log out (here or everywhere), change
// the password, claim this browser's guest games, and links to the profile, the account
// page (API tokens) and the leaderboards.
//
// Who is signed in comes from GET /api/auth/me (the HttpOnly session cookie is the
// server's; this page never sees it) and is kept in the store (setAccount). When it
// changes, the WebSocket is opened again, since the server reads the account when the
// socket opens, and a "kibitz:account" event on window lets the screens redraw (the rated
// choice, the seat menus). Every text goes in as text (el()), never HTML; the words come
// from the catalogue (account.*).

import { el } from "./boards/common.js";
import { reportError, showNotice } from "./errors.js";
import { closeForm, openForm } from "./forms.js";
import { t } from "./i18n.js";
import { player } from "./storage.js";
import { setAccount, store } from "./store.js";
import { $, botBadge, fetchJson, profileHref, sendJson } from "./util.js";

/** The rule of usernames, in words. */
export function usernameHelp() {
  return t("account.username.help");
}

const passwordHelp = () => t("account.password.help");

/** The signed-in account, or null for a guest (also while not known yet). */
export function currentAccount() {
  return store.account || null;
}

/** Whether the page knows who is signed in (GET /api/auth/me answered). */
export function accountKnown() {
  return store.account !== undefined;
}

/** Take `account` (or null) as who this browser is; a change reopens the socket. */
function changeAccount(account, reconnect = true) {
  const before = store.account ? store.account.username : null;
  setAccount(account || null);
  renderAccountMenu();
  const after = account ? account.username : null;
  if (reconnect && before !== after) store.conn.dropSocket("the account changed");
  window.dispatchEvent(new CustomEvent("kibitz:account", { detail: { account: account || null } }));
}

/** Read who is signed in; a failure leaves the page working as a guest. */
export async function loadAccount() {
  try {
    const reply = await fetchJson("/api/auth/me");
    changeAccount(reply.account || null, false);
  } catch {
    changeAccount(null, false); // a server without accounts: guests only
  }
}

// -- the menu ---------------------------------------------------------------------------------

function menuItem(label, testid, action) {
  return el("li", { role: "none" }, [
    typeof action === "string"
      ? el("a", { href: action, role: "menuitem", testid }, [label])
      : el("button", { type: "button", class: "menu-item", role: "menuitem", testid, onclick: action }, [label]),
  ]);
}

export function renderAccountMenu() {
  const box = $("account-menu");
  if (!box) return;
  const account = currentAccount();
  const leaderboard = el("a", { class: "btn ghost small", href: "?leaderboard=", testid: "leaderboard-link" }, [t("account.menu.leaderboards")]);
  if (!account) {
    box.replaceChildren(
      leaderboard,
      el("button", { class: "btn small", type: "button", testid: "login-open", onclick: openLogin }, [t("account.login")]),
      el("button", { class: "btn small primary", type: "button", testid: "signup-open", onclick: openSignup }, [t("account.signup")]),
    );
    box.dataset.account = "";
    return;
  }
  const menu = el("details", { class: "menu", testid: "account-details" }, [
    el("summary", { class: "btn small", testid: "account-name", "aria-label": t("account.menu.label", { name: account.username }) }, [
      account.username,
      botBadge(account.bot),
    ]),
    el("ul", { class: "menu-list", role: "menu" }, [
      menuItem(t("account.menu.profile"), "menu-profile", profileHref(account.username)),
      menuItem(t("account.menu.account"), "menu-account", "?account="),
      menuItem(t("account.claim"), "menu-claim", claimGames),
      menuItem(t("account.password.change"), "menu-password", openPassword),
      menuItem(t("account.logout"), "menu-logout", logout),
      menuItem(t("account.logoutAll"), "menu-logout-all", logoutEverywhere),
    ]),
  ]);
  // A choice closes the menu.
  menu.addEventListener("click", (event) => {
    if (event.target.closest("[role=menuitem]")) menu.open = false;
  });
  box.replaceChildren(leaderboard, menu);
  box.dataset.account = account.username;
}

// -- the forms --------------------------------------------------------------------------------

export function openLogin() {
  return openForm({
    title: t("account.login"),
    testid: "login-form",
    fields: [
      { name: "username", label: t("account.username"), autocomplete: "username", required: true, maxlength: 20 },
      { name: "password", label: t("account.password"), type: "password", autocomplete: "current-password", required: true, maxlength: 1024 },
    ],
    submit: t("account.login"),
    onSubmit: async ({ username, password }) => {
      const reply = await sendJson("POST", "/api/auth/login", { username: username.trim(), password });
      changeAccount(reply.account);
      showNotice(t("account.notice.loggedIn", { name: reply.account.username }));
      return reply.account;
    },
  });
}

export function openSignup() {
  return openForm({
    title: t("account.signup"),
    intro: t("account.signup.intro"),
    testid: "signup-form",
    fields: [
      { name: "username", label: t("account.username"), autocomplete: "username", required: true, minlength: 2, maxlength: 20, help: usernameHelp() },
      { name: "password", label: t("account.password"), type: "password", autocomplete: "new-password", required: true, minlength: 8, maxlength: 1024, help: passwordHelp() },
    ],
    submit: t("account.signup"),
    onSubmit: async ({ username, password }) => {
      // This browser's guest games come along (the stored player key is claimed at once).
      const reply = await sendJson("POST", "/api/auth/signup", { username: username.trim(), password, player_key: player.key() });
      changeAccount(reply.account);
      showNotice(t("account.notice.welcome", { name: reply.account.username }));
      return reply.account;
    },
  });
}

export function openPassword() {
  return openForm({
    title: t("account.password.change"),
    intro: t("account.password.intro"),
    testid: "password-form",
    fields: [
      { name: "password", label: t("account.password.current"), type: "password", autocomplete: "current-password", required: true, maxlength: 1024 },
      { name: "new_password", label: t("account.password.new"), type: "password", autocomplete: "new-password", required: true, minlength: 8, maxlength: 1024, help: passwordHelp() },
    ],
    submit: t("account.password.change"),
    onSubmit: async (values) => {
      await sendJson("POST", "/api/auth/password", values);
      showNotice(t("account.notice.password"));
      return true;
    },
  });
}

export async function logout() {
  try {
    await sendJson("POST", "/api/auth/logout");
    closeForm();
    changeAccount(null);
    showNotice(t("account.notice.loggedOut"));
  } catch (err) {
    reportError(err);
  }
}

export async function logoutEverywhere() {
  try {
    await sendJson("POST", "/api/auth/logout-all");
    changeAccount(null);
    showNotice(t("account.notice.loggedOutAll"));
  } catch (err) {
    reportError(err);
  }
}

/** Bring this browser's guest games (its stored player key) into the account. */
export async function claimGames() {
  try {
    await sendJson("POST", "/api/auth/claim", { player_key: player.key() });
    showNotice(t("account.notice.claimed"));
  } catch (err) {
    reportError(err);
  }
}

export function wireAccount() {
  renderAccountMenu();
  // Close the menu on a click elsewhere or on Escape.
  document.addEventListener("click", (event) => {
    const menu = document.querySelector("#account-menu details[open]");
    if (menu && !menu.contains(event.target)) menu.open = false;
  });
  document.addEventListener("keydown", (event) => {
    const menu = document.querySelector("#account-menu details[open]");
    if (event.key === "Escape" && menu) {
      menu.open = false;
      menu.querySelector("summary").focus();
    }
  });
}
