// Page-wide shortcuts: 0-3 switch the arrangement, f is full screen, b or . blanks, ? lists the keys (step.js has the
// rest); none while typing in a field (data-not-typed marks the step's slider and pace, not typed in) or with Ctrl,
// Alt or Meta. (What #narration says after a swap comes with it, out of band.)
"use strict";
(function () {
  const html = document.documentElement;
  // Blank, as presentation software does (app.css); any key or click brings the picture back, and does nothing else.
  function unblank(event) {
    if (!html.classList.contains("blanked")) { return; }
    html.classList.remove("blanked");
    event.preventDefault();
    event.stopImmediatePropagation();
  }
  window.addEventListener("keydown", unblank, true);
  window.addEventListener("click", unblank, true);
  // The list of keys (static/keys.html) is fetched when first asked for, and opens as it comes; closed, focus returns.
  let asked = false;
  function openHelp() {
    const dialog = byId("keys-help");
    asked = !dialog;
    if (!dialog) { htmx.trigger(document.body, "keys-help"); } else if (!dialog.open) { dialog.showModal(); }
  }
  document.addEventListener("htmx:load", function (event) {
    if (asked && event.target.id === "keys-help") { asked = false; event.target.showModal(); }
  });
  const click = (id) => byId(id) && byId(id).click();
  const blank = () => html.classList.add("blanked");
  // A tab is clicked even when marked current: during a swap the mark is the old page's (step.js).
  const ACTIONS = { 0: () => click("switch-dp"), 1: () => click("switch-zero1"), 2: () => click("switch-zero2"),
    3: () => click("switch-zero3"), f: () => click("fullscreen"), b: blank, B: blank, ".": blank, "?": openHelp };
  const TYPING = "input:not([data-not-typed]), select:not([data-not-typed]), textarea, [contenteditable]:not([contenteditable='false'])";
  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey || event.isComposing) { return; }
    if ((event.target instanceof Element ? event.target : document.body).closest(TYPING)) { return; }
    const key = event.key === "F" && !event.shiftKey ? "f" : event.key;  // F with Caps Lock is f; with Shift, no shortcut
    if (Object.hasOwn(ACTIONS, key) && !document.querySelector("dialog[open]")) { event.preventDefault(); ACTIONS[key](); }
  });
})();
