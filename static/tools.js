// The widget's tools: full screen (page and embed), and the "Embed this" panel's copy button and
// controls choice. Delegated from the document, so they keep working after htmx swaps the widget.
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

  function choose(select) {
    const option = select.selectedOptions[0];
    const snippet = document.getElementById("embed-snippet");
    const url = document.getElementById("embed-url");
    if (!option || !snippet) { return; }
    snippet.value = option.dataset.snippet || snippet.value;
    if (url && option.dataset.url) { url.href = option.dataset.url; url.textContent = option.dataset.url; }
    const status = document.getElementById("embed-copy-status");
    if (status) { status.textContent = ""; }
  }

  function prepareEmbedPanel() {
    const panel = document.getElementById("embed-this");
    const copy = document.getElementById("embed-copy");
    if (copy) { copy.hidden = false; }
    const choice = document.getElementById("embed-controls-field");
    if (choice) { choice.hidden = false; }
    if (panel && embedOpen) { panel.open = true; }
    const select = document.getElementById("embed-controls");
    if (select && controls !== null) { select.value = controls; choose(select); }
  }

  function prepare() { prepareFullscreen(); prepareEmbedPanel(); }

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
    // "Another model" starts from the count of the model shown, ready to edit: the read-only field
    // holds it, and is sent only now (a preset brings its own count, so it is otherwise not sent).
    if (event.target instanceof HTMLSelectElement && event.target.id === "f-model" && event.target.value === "custom") {
      const count = document.getElementById("f-params");
      if (count instanceof HTMLInputElement && count.readOnly) { count.name = "params"; }
    }
  });

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
