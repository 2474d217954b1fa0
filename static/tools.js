// The widget's tools: full screen, the "Embed this" panel's copy button and choice of controls, the
// "Copy as DeepSpeed config" and "Copy as FSDP2" links, the
// Weights field that makes the model "Another model" when typed in, and the note that says why a
// request changed nothing. Delegated from the document, so they keep working through the swaps.
"use strict";

(function () {
  // An element, or where the page has none (the share page, an embed without the panel) a stand-in
  // that takes any setting: each tool below does what it can with what is there.
  const byId = (id) => document.getElementById(id) || {};
  // <main> holds the widget and outlives its swaps, so full screen survives a click.
  const main = () => document.querySelector("main");
  const fullscreenAllowed = () => Boolean(document.fullscreenEnabled && main() && main().requestFullscreen);
  // What was chosen in the "Embed this" panel, which every swap brings back closed.
  let embedOpen = false, controls = null, calculator = null;

  // The snippet for the controls chosen, with the calculator or without: each option carries both.
  function choose() {
    const option = byId("embed-controls").selectedOptions && byId("embed-controls").selectedOptions[0];
    if (!option || !byId("embed-snippet").id) { return; }
    const full = byId("embed-calculator").checked;
    byId("embed-snippet").value = (full ? option.dataset.snippetCalculator : option.dataset.snippet) || byId("embed-snippet").value;
    const address = full ? option.dataset.urlCalculator : option.dataset.url;
    if (address) { byId("embed-url").href = address; byId("embed-url").textContent = address; }
    byId("embed-copy-status").textContent = "";
  }

  // Rendered hidden, what needs this script: the full-screen button (unless the host page forbids full
  // screen: a note says so instead), the copy button, and the drop-down and box that take the place of
  // the links that do the same without it. A preset's count is read-only without this script; with it,
  // a count typed there is another model's.
  function prepare() {
    const allowed = fullscreenAllowed();
    const on = Boolean(document.fullscreenElement);
    Object.assign(byId("fullscreen"), { hidden: !allowed, textContent: on ? "Leave full screen" : "Full screen" });
    if (byId("fullscreen").id) { byId("fullscreen").setAttribute("aria-pressed", String(on)); }
    byId("fullscreen-note").hidden = allowed;
    for (const id of ["embed-copy", "embed-controls-field", "embed-calculator-field"]) { byId(id).hidden = false; }
    byId("embed-choices").hidden = true;
    if (embedOpen) { byId("embed-this").open = true; }
    if (calculator !== null) { byId("embed-calculator").checked = calculator; choose(); }
    if (controls !== null) { byId("embed-controls").value = controls; choose(); }
    const count = "A count typed here is another model's: the model becomes “Another model”";
    if (byId("f-params").readOnly) { Object.assign(byId("f-params"), { readOnly: false, title: count }); }
  }

  // Without the clipboard (an insecure origin, a refused permission) the text is selected, for Ctrl+C;
  // or, for a text with no field on the page (a config), `otherwise` is done instead.
  function copy(field, status = "embed-copy-status", otherwise = null) {
    const done = function (copied) {
      if (!copied && otherwise) { otherwise(); return; }
      if (!copied) { field.focus(); field.select(); }
      byId(status).textContent = copied ? "Copied." : "Selected: press Ctrl+C (⌘C) to copy.";
    };
    const clipboard = window.isSecureContext && navigator.clipboard;
    (clipboard ? clipboard.writeText(field.value) : Promise.reject(new Error("no clipboard"))).then(() => done(true), () => done(false));
  }

  document.addEventListener("click", function (event) {
    const target = event.target instanceof Element ? event.target : document.body;
    if (target.closest("#fullscreen")) {
      const asked = document.fullscreenElement ? document.exitFullscreen() : fullscreenAllowed() && main().requestFullscreen();
      if (asked) { asked.catch(prepare); }
    } else if (target.closest("#embed-copy") && byId(target.closest("#embed-copy").dataset.copy).id) {
      copy(byId(target.closest("#embed-copy").dataset.copy));
    } else if (target.closest("a[data-copy-config]") && !(event.ctrlKey || event.metaKey || event.shiftKey)) {
      // "Copy as …": the config the link opens, fetched and copied; where that fails, the link is followed.
      const link = target.closest("a[data-copy-config]");
      event.preventDefault();
      const follow = () => { window.location.href = link.href; };
      fetch(link.href).then((r) => (r.ok ? r.text() : Promise.reject(new Error(String(r.status)))))
        .then((text) => copy({ value: text }, "config-copy-status", follow), follow);
    }
  });

  document.addEventListener("change", function (event) {
    const id = event.target.id;
    if (id === "embed-controls") { controls = event.target.value; }
    if (id === "embed-calculator") { calculator = event.target.checked; }
    if (id === "embed-controls" || id === "embed-calculator") { choose(); }
    // "Another model" starts from the count of the model shown, ready to edit: the field holds it, and
    // is sent only now. A preset brings its own count: the one in the field is then not sent.
    if (id === "f-model" && byId("f-params").id) {
      if (event.target.value === "custom") { byId("f-params").name = "params"; } else { byId("f-params").removeAttribute("name"); }
    }
  });

  // Typing a count into Weights makes the model "Another model", before the form's request reads it.
  document.addEventListener("input", function (event) {
    if (event.target.id !== "f-params" || event.target.name || !byId("f-model").id) { return; }
    event.target.name = "params"; byId("f-model").value = "custom";
  }, true);

  // "toggle" does not bubble: listen while it comes down.
  document.addEventListener("toggle", (event) => { if (event.target.id === "embed-this") { embedOpen = event.target.open; } }, true);

  // A refused or lost request changes nothing on the screen, and a student clicks again into the void:
  // say why, seen at the foot of the window and heard through the live region.
  let troubleTimer = 0;
  function trouble(message) {
    clearTimeout(troubleTimer);
    byId("request-trouble").textContent = message;
    byId("request-trouble").hidden = !message;
    if (message) {
      byId("narration").textContent = message;
      troubleTimer = setTimeout(trouble, 8000, "");
    }
  }
  document.addEventListener("htmx:responseError", function (event) {
    const status = event.detail.xhr.status;
    trouble(status === 503 ? "Busy: many people are using it at once. Try again in a second."
      : [400, 414, 431].includes(status) ? "Refused: is a value far too long?"
        : "The server answered error " + status + ". Try again.");
  });
  document.addEventListener("htmx:sendError", () => trouble("No answer from the server: check the connection."));
  document.addEventListener("htmx:afterSwap", () => trouble(""));

  document.addEventListener("fullscreenchange", prepare);
  document.addEventListener("htmx:afterSettle", prepare);
  document.addEventListener("DOMContentLoaded", prepare);
})();
