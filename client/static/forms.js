// Small forms in a modal dialog (a native <dialog>: it keeps the focus inside and closes
// on Escape): log in, sign up, change the password, report a player. A form is described
// by its fields; its submit runs an async function, and a ServerError it throws is shown
// inside the form in words (errors.js), the form staying open with what was typed. The
// callers give the words; the form's own ("Cancel") come from the catalogue.

import { el } from "./boards/common.js";
import { errorSentence } from "./errors.js";
import { t } from "./i18n.js";

let open = null; // the <dialog> on screen, or null

/** Close the open form, if any. */
export function closeForm() {
  if (open) open.close();
}

function fieldInput(field) {
  const id = `form-${field.name}`;
  const common = { id, name: field.name, testid: field.testid || id, required: field.required, autocomplete: field.autocomplete };
  if (field.type === "select") {
    return el(
      "select",
      common,
      field.options.map(([value, label]) => el("option", { value, selected: value === field.value }, [label])),
    );
  }
  if (field.type === "textarea") {
    return el("textarea", { ...common, maxlength: field.maxlength, rows: "3" }, [field.value || ""]);
  }
  if (field.type === "checkboxes") {
    return el(
      "span",
      { class: "checks", role: "group", "aria-label": field.label },
      field.options.map(([value, label, checked]) =>
        el("label", { class: "check-inline" }, [
          el("input", { type: "checkbox", name: field.name, value, checked, testid: `${common.testid}-${value}` }),
          ` ${label}`,
        ]),
      ),
    );
  }
  return el("input", {
    ...common,
    type: field.type || "text",
    minlength: field.minlength,
    maxlength: field.maxlength,
    pattern: field.pattern,
    value: field.value,
  });
}

/** The values of `form`: one string per field, a list for checkbox groups. */
function formValues(form, fields) {
  const data = new FormData(form);
  const values = {};
  for (const field of fields) {
    values[field.name] = field.type === "checkboxes" ? data.getAll(field.name) : String(data.get(field.name) ?? "");
  }
  return values;
}

/**
 * Show a form: `title`, `intro` (words above the fields, optional), `fields` ({name, label,
 * type, help, ...input attributes}), `submit` (the button's words) and `onSubmit(values)`
 * (async; what it returns resolves the promise and closes the form; a thrown error is
 * shown in the form). Resolves with null when cancelled.
 */
export function openForm({ title, intro = null, fields, submit, onSubmit, testid = "form", danger = false }) {
  closeForm();
  return new Promise((resolve) => {
    const error = el("p", { class: "form-error", role: "alert", testid: "form-error", hidden: true });
    const button = el("button", { class: ["btn", danger ? "danger" : "primary"], type: "submit", testid: "form-submit" }, [submit]);
    const cancel = el("button", { class: "btn ghost", type: "button", testid: "form-cancel", onclick: () => dialog.close() }, [t("account.form.cancel")]);
    const form = el("form", { class: "form-dialog-body", method: "dialog", novalidate: false }, [
      el("h2", { id: "form-title" }, [title]),
      intro ? el("p", { class: "muted form-intro" }, [intro]) : null,
      ...fields.map((field) =>
        el("label", { class: "field", for: field.type === "checkboxes" ? null : `form-${field.name}` }, [
          el("span", {}, [field.label]),
          fieldInput(field),
          field.help ? el("small", { class: "muted" }, [field.help]) : null,
        ]),
      ),
      error,
      el("div", { class: "btn-row form-buttons" }, [button, cancel]),
    ]);
    const dialog = el("dialog", { class: "form-dialog", testid, "aria-labelledby": "form-title" }, [form]);
    let result = null;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      button.disabled = true;
      error.hidden = true;
      try {
        result = await onSubmit(formValues(form, fields));
        dialog.close();
      } catch (err) {
        error.textContent = errorSentence(err);
        error.dataset.code = (err && err.code) || "";
        error.hidden = false;
      } finally {
        button.disabled = false;
      }
    });
    dialog.addEventListener("close", () => {
      if (open === dialog) open = null;
      dialog.remove();
      resolve(result);
    });
    document.body.append(dialog);
    open = dialog;
    dialog.showModal();
    const first = form.querySelector("input, select, textarea");
    if (first) first.focus();
  });
}
