// The widget's tools, delegated so they work through swaps: full screen, "Embed this" (copy; choices kept across
// swaps), the config copies, Weights making "Another model", and the note saying why a request changed nothing.
"use strict";
(function () {
  const main = () => document.querySelector("main");  // holds the widget and outlives its swaps: full screen stays
  const fullscreenAllowed = () => Boolean(document.fullscreenEnabled && main() && main().requestFullscreen);
  const show = (id, on = true) => { if (byId(id)) { byId(id).hidden = !on; } };
  let embedOpen = false, controls = null, calculator = null;  // what was chosen in the panel a swap brings back closed
  function choose() {  // the snippet and address chosen: each option carries them with the calculator and without
    const option = byId("embed-controls") && byId("embed-controls").selectedOptions[0];
    if (!option || !byId("embed-snippet")) { return; }
    const full = byId("embed-calculator").checked;
    byId("embed-snippet").value = (full ? option.dataset.snippetCalculator : option.dataset.snippet) || byId("embed-snippet").value;
    const address = full ? option.dataset.urlCalculator : option.dataset.url;
    if (address) { Object.assign(byId("embed-url"), { href: address, textContent: address }); }
    byId("embed-copy-status").textContent = "";
  }
  // Shown here, as they need this script: full screen (else a note), copy, the panel's drop-down and box (its links
  // instead); a preset's count, read-only without it, becomes another model's when typed in.
  function prepare() {
    const button = byId("fullscreen"), on = Boolean(document.fullscreenElement);
    if (button) { Object.assign(button, { hidden: !fullscreenAllowed(), textContent: on ? "Leave full screen" : "Full screen" }).setAttribute("aria-pressed", String(on)); }
    show("fullscreen-note", !fullscreenAllowed());
    ["embed-copy", "embed-controls-field", "embed-calculator-field"].forEach((id) => show(id));
    show("embed-choices", false);
    if (embedOpen && byId("embed-this")) { byId("embed-this").open = true; }
    if (calculator !== null && byId("embed-calculator")) { byId("embed-calculator").checked = calculator; }
    if (controls !== null && byId("embed-controls")) { byId("embed-controls").value = controls; }
    if (calculator !== null || controls !== null) { choose(); }
    const params = byId("f-params");
    if (params && params.readOnly) { Object.assign(params, { readOnly: false, title: "A count typed here is another model's: the model becomes “Another model”" }); }
  }
  // Without a clipboard the text is selected, for Ctrl+C; with no field (a config), `otherwise` is done instead.
  function copy(field, status = "embed-copy-status", otherwise = null) {
    const done = function (copied) {
      if (!copied && otherwise) { otherwise(); return; }
      if (!copied) { field.focus(); field.select(); }
      if (byId(status)) { byId(status).textContent = copied ? "Copied." : "Selected: press Ctrl+C (⌘C) to copy."; }
    };
    const clipboard = window.isSecureContext && navigator.clipboard;
    (clipboard ? clipboard.writeText(field.value) : Promise.reject(new Error("no clipboard"))).then(() => done(true), () => done(false));
  }
  document.addEventListener("click", function (event) {
    const target = event.target instanceof Element ? event.target : document.body;
    const copyButton = target.closest("#embed-copy"), link = target.closest("a[data-copy-config]");
    if (target.closest("#fullscreen")) {
      const asked = document.fullscreenElement ? document.exitFullscreen() : fullscreenAllowed() && main().requestFullscreen();
      if (asked) { asked.catch(prepare); }
    } else if (copyButton && byId(copyButton.dataset.copy)) {
      copy(byId(copyButton.dataset.copy));
    } else if (link && !(event.ctrlKey || event.metaKey || event.shiftKey)) {
      // The config the link opens, fetched and copied; where that fails, the link is followed.
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
    // "Another model" starts from the count shown, which the field holds and sends only now; a preset brings its own.
    if (id === "f-model" && byId("f-params")) { byId("f-params").name = event.target.value === "custom" ? "params" : ""; }
  });
  // Typing a count into Weights makes the model "Another model", before the form's request reads it.
  document.addEventListener("input", function (event) {
    if (event.target.id !== "f-params" || event.target.name || !byId("f-model")) { return; }
    event.target.name = "params"; byId("f-model").value = "custom";
  }, true);
  // "toggle" does not bubble: listen while it comes down.
  document.addEventListener("toggle", (event) => { if (event.target.id === "embed-this") { embedOpen = event.target.open; } }, true);
  // A refused or lost request changes nothing: say why, at the window's foot and through the live region.
  let troubleTimer = 0;
  function trouble(message) {
    clearTimeout(troubleTimer);
    if (byId("request-trouble")) { Object.assign(byId("request-trouble"), { textContent: message, hidden: !message }); }
    if (message && byId("narration")) { byId("narration").textContent = message; troubleTimer = setTimeout(trouble, 8000, ""); }
  }
  document.addEventListener("htmx:responseError", function (event) {
    const status = event.detail.xhr.status;
    trouble(status === 503 ? "Busy: many people are using it at once. Try again in a second."
      : [400, 414, 431].includes(status) ? "Refused: is a value far too long?" : "The server answered error " + status + ". Try again.");
  });
  document.addEventListener("htmx:sendError", () => trouble("No answer from the server: check the connection."));
  document.addEventListener("htmx:afterSwap", () => trouble(""));
  ["fullscreenchange", "htmx:afterSettle", "DOMContentLoaded"].forEach((name) => document.addEventListener(name, prepare));
})();
