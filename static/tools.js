// The widget's tools: full screen (page and embed), the "Embed this" panel's copy button and
// controls choice, and the Weights field that makes the model "Another model" when typed in.
// Delegated from the document, so they keep working after htmx swaps the widget.
"use strict";

(function () {
  // The main element holds the widget and outlives its swaps, so full screen survives a click.
  function stage() { return document.querySelector("main"); }

  function fullscreenAllowed() {
    const main = stage();
    return Boolean(document.fullscreenEnabled && main && typeof main.requestFullscreen === "function");
  }

  // The button is rendered hidden: it needs this script, and a host page may forbid full screen
  // (an iframe without allow="fullscreen"), in which case a short note says so instead.
  function prepareFullscreen() {
    const button = document.getElementById("fullscreen");
    const note = document.getElementById("fullscreen-note");
    if (!button) { return; }
    const allowed = fullscreenAllowed();
    button.hidden = !allowed;
    if (note) { note.hidden = allowed; }
    const on = Boolean(document.fullscreenElement);
    button.setAttribute("aria-pressed", String(on));
    button.textContent = on ? "Leave full screen" : "Full screen";
  }

  // What the person chose in the "Embed this" panel, kept across swaps of the widget.
  let embedOpen = false;
  let controls = null;
  let calculator = null;

  // The snippet for the controls chosen, with the calculator or without: each option carries both.
  function choose(select) {
    const option = select.selectedOptions[0];
    const snippet = document.getElementById("embed-snippet");
    const url = document.getElementById("embed-url");
    const box = document.getElementById("embed-calculator");
    if (!option || !snippet) { return; }
    const full = box instanceof HTMLInputElement && box.checked;
    const html = full ? option.dataset.snippetCalculator : option.dataset.snippet;
    const address = full ? option.dataset.urlCalculator : option.dataset.url;
    snippet.value = html || snippet.value;
    if (url && address) { url.href = address; url.textContent = address; }
    const status = document.getElementById("embed-copy-status");
    if (status) { status.textContent = ""; }
  }

  function prepareEmbedPanel() {
    const panel = document.getElementById("embed-this");
    const copy = document.getElementById("embed-copy");
    if (copy) { copy.hidden = false; }
    // The drop-down and the box take the place of the links that do the same without this script.
    const choice = document.getElementById("embed-controls-field");
    if (choice) { choice.hidden = false; }
    const full = document.getElementById("embed-calculator-field");
    if (full) { full.hidden = false; }
    const links = document.getElementById("embed-choices");
    if (links) { links.hidden = true; }
    if (panel && embedOpen) { panel.open = true; }
    const select = document.getElementById("embed-controls");
    const box = document.getElementById("embed-calculator");
    if (box instanceof HTMLInputElement && calculator !== null) { box.checked = calculator; }
    if (select && controls !== null) { select.value = controls; }
    if (select && (controls !== null || calculator !== null)) { choose(select); }
  }

  // A preset's count is read-only without this script; with it, a count typed there is another model's.
  function prepareWeights() {
    const count = document.getElementById("f-params");
    if (count instanceof HTMLInputElement && count.readOnly) {
      count.readOnly = false;
      count.title = "A count typed here is another model's: the model becomes “Another model”";
    }
  }

  function prepare() { prepareFullscreen(); prepareEmbedPanel(); prepareWeights(); }

  async function copy(button) {
    const field = document.getElementById(button.dataset.copy || "");
    const status = document.getElementById("embed-copy-status");
    if (!field) { return; }
    let copied = false;
    try {
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(field.value);
        copied = true;
      }
    } catch (error) {
      copied = false;
    }
    // Without the clipboard (an insecure origin, a refused permission) the text is selected, ready
    // for Ctrl+C or a long press.
    if (!copied) { field.focus(); field.select(); }
    if (status) { status.textContent = copied ? "Copied." : "Selected: press Ctrl+C (⌘C) to copy."; }
  }

  document.addEventListener("click", function (event) {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) { return; }
    if (target.closest("#fullscreen")) {
      if (document.fullscreenElement) {
        document.exitFullscreen().catch(prepareFullscreen);
      } else if (fullscreenAllowed()) {
        stage().requestFullscreen().catch(prepareFullscreen);
      }
      return;
    }
    const copyButton = target.closest("#embed-copy");
    if (copyButton) { copy(copyButton); }
  });

  document.addEventListener("change", function (event) {
    const select = event.target instanceof HTMLSelectElement && event.target.id === "embed-controls" ? event.target : null;
    if (select) { controls = select.value; choose(select); }
    if (event.target instanceof HTMLInputElement && event.target.id === "embed-calculator") {
      calculator = event.target.checked;
      const chosen = document.getElementById("embed-controls");
      if (chosen instanceof HTMLSelectElement) { choose(chosen); }
    }
    // "Another model" starts from the count of the model shown, ready to edit: the field holds it,
    // and is sent only now. A preset brings its own count: the one in the field is then not sent.
    const count = document.getElementById("f-params");
    if (event.target instanceof HTMLSelectElement && event.target.id === "f-model" && count instanceof HTMLInputElement) {
      if (event.target.value === "custom") { count.name = "params"; } else { count.removeAttribute("name"); }
    }
  });

  // Typing a count into Weights makes the model "Another model", before the form's request reads it.
  document.addEventListener("input", function (event) {
    const count = event.target;
    const model = document.getElementById("f-model");
    if (!(count instanceof HTMLInputElement) || count.id !== "f-params" || count.name || !model) { return; }
    count.name = "params";
    model.value = "custom";
  }, true);

  // "toggle" does not bubble: listen while it comes down.
  document.addEventListener("toggle", function (event) {
    if (event.target instanceof HTMLDetailsElement && event.target.id === "embed-this") {
      embedOpen = event.target.open;
    }
  }, true);

  // A refused or lost request would change nothing on the screen, and a student clicks again into
  // the void: say why, seen at the foot of the window and heard through the live region.
  let troubleTimer = 0;
  function trouble(message) {
    const note = document.getElementById("request-trouble");
    if (!note) { return; }
    clearTimeout(troubleTimer);
    note.textContent = message;
    note.hidden = !message;
    if (message) {
      document.getElementById("narration").textContent = message;
      troubleTimer = setTimeout(trouble, 8000, "");
    }
  }

  document.addEventListener("htmx:responseError", function (event) {
    const status = event.detail.xhr.status;
    trouble(status === 503 ? "Busy: many people are using it at once. Try again in a second."
      : [400, 414, 431].includes(status) ? "Refused: is a value far too long?"
      : "The server answered error " + status + ". Try again.");
  });
  document.addEventListener("htmx:sendError", function () { trouble("No answer from the server: check the connection."); });
  document.addEventListener("htmx:afterSwap", function () { trouble(""); });

  document.addEventListener("fullscreenchange", prepareFullscreen);
  document.addEventListener("htmx:afterSettle", prepare);
  document.addEventListener("DOMContentLoaded", prepare);
})();
