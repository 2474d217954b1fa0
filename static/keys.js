// Page-wide shortcuts and the one polite live region.
// 0-3 switch the arrangement, f toggles full screen, b or . blanks the screen, ? opens the list of
// keys (step.js has the arrows, PageUp, PageDown, Home, End and space). None fires while typing in a
// field or with Ctrl, Alt or Meta.
// After every swap #narration is re-filled with one sentence: the stage change, else the phase,
// else the fit verdict; the region itself is outside the swapped widget, so it is never replaced.
"use strict";

(function () {
  const STAGES = ["dp", "zero1", "zero2", "zero3"];
  let before = null;

  function typing(target) {
    if (!(target instanceof Element)) { return false; }
    return Boolean(target.closest("input, select, textarea, [contenteditable]:not([contenteditable='false'])"));
  }

  function widget() { return document.getElementById("widget"); }

  function state() {
    const w = widget();
    return w ? { stage: w.dataset.stage || "", phase: w.dataset.phase || "" } : null;
  }

  function say(text) {
    const region = document.getElementById("narration");
    if (region && text) { region.textContent = text; }
  }

  document.addEventListener("htmx:beforeSwap", function () { before = state(); });

  document.addEventListener("htmx:afterSettle", function () {
    const w = widget();
    const now = state();
    if (!w || !now) { return; }
    const was = before;
    before = null;
    const d = w.dataset;
    if (!was || was.stage !== now.stage) {
      say(d.sayStage || "");
    } else if (was.phase !== now.phase && d.sayPhase) {
      say(d.sayPhase);
    } else {
      say(d.sayFit || d.sayPhase || d.sayStage || "");
    }
  });

  // Always a click, even on the tab marked current: during a swap the mark is the old page's, and
  // step.js decides (a click while a swap is on its way waits its turn; the stage shown, none).
  function switchTo(stage) {
    const link = document.getElementById("switch-" + stage);
    if (!link) { return; }
    if (window.htmx) { window.htmx.process(link); }
    link.click();
  }

  function fullScreen() {
    const target = document.querySelector("main");
    if (document.fullscreenElement) {
      if (document.exitFullscreen) { document.exitFullscreen().catch(function () {}); }
      return;
    }
    if (target && target.requestFullscreen) { target.requestFullscreen().catch(function () {}); }
  }

  // Blank, as presentation software does: black over the whole window (app.css: <main>'s, so full
  // screen too). Any key or click brings the picture back, and does nothing else.
  function blanked(on) { return document.documentElement.classList.toggle("blanked", on); }
  function unblank(event) {
    if (!document.documentElement.classList.contains("blanked")) { return; }
    blanked(false);
    event.preventDefault();
    event.stopImmediatePropagation();
  }
  window.addEventListener("keydown", unblank, true);
  window.addEventListener("click", unblank, true);

  let returnTo = null;

  let fetching = false;

  function openHelp() {
    const dialog = document.getElementById("keys-help");
    if (!dialog) {
      // Not on the page until first asked for: htmx fetches it (static/keys.html) into its slot.
      if (!fetching && document.getElementById("keys-help-slot") && window.htmx) {
        fetching = true;
        returnTo = document.activeElement;
        window.htmx.trigger(document.body, "keys-help");
      }
      return;
    }
    if (dialog.open || !dialog.showModal) { return; }
    returnTo = document.activeElement;
    dialog.showModal();
  }

  document.addEventListener("htmx:load", function (event) {
    const dialog = event.target;
    if (!fetching || !(dialog instanceof HTMLDialogElement) || dialog.id !== "keys-help") { return; }
    fetching = false;
    dialog.showModal();
  });

  document.addEventListener("close", function (event) {
    if (!(event.target instanceof HTMLDialogElement) || event.target.id !== "keys-help") { return; }
    const back = returnTo;
    returnTo = null;
    if (back instanceof HTMLElement && document.contains(back)) { back.focus({ preventScroll: true }); }
  }, true);

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey || event.isComposing) { return; }
    if (typing(event.target)) { return; }
    const dialog = document.getElementById("keys-help");
    if (dialog && dialog.open) { return; }
    const index = "0123".indexOf(event.key);
    if (event.key.length === 1 && index >= 0) {
      event.preventDefault();
      switchTo(STAGES[index]);
    } else if (event.key === "f" || event.key === "F") {
      if (event.shiftKey) { return; }
      event.preventDefault();
      fullScreen();
    } else if (event.key === "b" || event.key === "B" || event.key === ".") {
      event.preventDefault();
      blanked(true);
    } else if (event.key === "?") {
      event.preventDefault();
      openHelp();
    }
  });
})();
