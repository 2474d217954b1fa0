// Step controls: the keyboard (a presentation clicker's PageDown and PageUp are → and ←), and
// play/pause at the speed chosen beside Play. Every move is a click on a real link, so htmx
// fetches one phase at a time; play waits for each swap to settle before scheduling the next,
// and keys pressed while a swap is on its way wait their turn, so every press counts and the
// address always names the phase shown.
"use strict";

(function () {
  const DELAY_MS = 1400;
  // Play's wait between phases for each choice of speed; the choice is kept on <body>, which outlives the swaps.
  const SPEEDS = { slow: 2400, normal: DELAY_MS, fast: 700 };
  function speed() { return SPEEDS[document.body.dataset.playSpeed] ? document.body.dataset.playSpeed : "normal"; }
  const MAX_PENDING = 21;
  let playing = false;
  let timer = null;
  let busy = false;
  const pending = [];

  function panel() { return document.getElementById("step"); }

  // A key pressed during a swap would click the old page's link, which points where the swap
  // is already going: queue it, and follow it once the new links are in place.
  function press(which) {
    if (busy) {
      wait("key-" + which);
      return;
    }
    go("key-" + which);
  }

  // A key's move is found when it is made, on the page then shown: Next, Previous and so on, but →
  // with no Next (at rest) starts the step at its first move, and ← at phase 0 leaves it.
  function find(id) {
    if (!id.startsWith("key-")) { return document.getElementById(id); }
    const which = id.slice(4);
    const link = document.getElementById("step-" + which);
    const instead = document.getElementById({ next: "step-enter", prev: "step-leave" }[which] || "");
    return (!link || link.getAttribute("aria-disabled") === "true") && instead ? instead : link;
  }

  // What waits for the swap on its way: the ids of the links to follow, in order. Steps each count;
  // an arrangement replaces one still waiting, as the last one chosen is the one wanted.
  function wait(id) {
    if (id.startsWith("switch-")) { forget("switch-"); }
    if (pending.length < MAX_PENDING) { pending.push(id); }
  }

  // Drop the waiting links whose ids start with `prefix`.
  function forget(prefix) {
    for (let i = pending.length - 1; i >= 0; i--) {
      if (pending[i].startsWith(prefix)) { pending.splice(i, 1); }
    }
  }

  let replaying = false;

  function go(id) {
    const link = find(id);
    // At either end the control stays on the page, disabled, so that focus has somewhere to stay;
    // the stage shown is where the page already is.
    if (!link || link.getAttribute("aria-disabled") === "true" || current(link)) { return false; }
    // A key pressed right after a swap can beat htmx to the new links; processing them first keeps
    // the move an htmx swap instead of a full page load.
    if (window.htmx) { window.htmx.process(link); }
    replaying = true;
    try { link.click(); } finally { replaying = false; }
    return true;
  }

  // A click on one of the widget's links while a swap is on its way would be dropped (hx-sync on
  // <main>: one swap at a time, so the address always names what is shown): it waits its turn
  // like a key. Seen first, on the way down, so htmx's own listener on the link never hears it.
  // Not busy, a click on the stage shown does nothing: asked again, it would come back without
  // the marks of what changed (and a double click is two clicks).
  function current(link) { return link.getAttribute("aria-current") === "page"; }

  document.addEventListener("click", function (event) {
    if (replaying || event.button !== 0) { return; }
    if (event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) { return; }  // a new tab or window
    const link = event.target instanceof Element ? event.target.closest("#widget a[hx-get][id]") : null;
    if (!link || link.getAttribute("aria-disabled") === "true" || (!busy && !current(link))) { return; }
    event.preventDefault();
    event.stopImmediatePropagation();
    if (busy) { wait(link.id); }
  }, true);

  function setPlaying(on) {
    playing = on;
    if (timer) { clearTimeout(timer); timer = null; }
    const button = document.getElementById("step-play");
    if (button) {
      button.setAttribute("aria-pressed", String(on));
      button.textContent = on ? "⏸ Pause" : "▶ Play";
    }
    if (on) { schedule(); }
  }

  function schedule() {
    if (timer || !playing) { return; }
    timer = setTimeout(function () {
      timer = null;
      if (!playing) { return; }
      if (!go("step-next")) { setPlaying(false); }
    }, SPEEDS[speed()]);
  }

  // The play button is rendered hidden: it only works with this script. Stepping is not animation,
  // so it plays for people who asked for less motion too (the stylesheet drops the transitions).
  function prepare() {
    const button = document.getElementById("step-play");
    if (!button) { playing = false; return; }
    button.hidden = false;
    button.setAttribute("aria-pressed", String(playing));
    button.textContent = playing ? "⏸ Pause" : "▶ Play";
    const choice = document.getElementById("step-speed");
    const field = document.getElementById("step-speed-field");
    if (choice && field) { field.hidden = false; choice.value = speed(); }
  }

  document.addEventListener("change", function (event) {
    if (event.target instanceof HTMLSelectElement && event.target.id === "step-speed") {
      document.body.dataset.playSpeed = event.target.value;
    }
  });

  document.addEventListener("click", function (event) {
    const button = event.target instanceof Element ? event.target.closest("#step-play") : null;
    if (button && !button.disabled) { setPlaying(!playing); }
  });

  // htmx gives focus back to the element with the clicked control's id. A control whose
  // replacement has another id names it in data-focus-after: "Watch one training step" hands
  // focus to Next, "Leave the step" back to Watch. Never with a scroll: the reader stays put.
  let focusAfter = null;
  // A control whose replacement may land elsewhere (the step beside the cards on a wide screen)
  // names it in data-keep-place: the page scrolls by the difference, so it appears where it was clicked.
  // Any other link keeps its own place: on a phone the note of what changed comes above the table,
  // and a row tapped there would otherwise move down under the finger. A button of the step's bar
  // at the foot of a narrow window never moves: it keeps the cards in place instead, when they are
  // in view (the text of a phase above them is not always as tall as the last one's). A field of a
  // form keeps its own place too: on a phone the grid above the run form grows and shrinks with the
  // run (16 cards, or 1,024 drawn as 8), and the field being typed in must stay in view.
  let keepPlace = null;
  function placeKept(elt) {
    if (elt.dataset.keepPlace) { return { id: elt.dataset.keepPlace, top: elt.getBoundingClientRect().top }; }
    if (!(elt instanceof HTMLAnchorElement) || !elt.id) { return null; }
    const bar = elt.closest(".step-bar");
    if (!bar || getComputedStyle(bar).position !== "fixed") {
      return { id: elt.id, top: elt.getBoundingClientRect().top };
    }
    const cards = document.getElementById("grid");
    const box = cards && cards.getBoundingClientRect();
    return box && box.top < bar.getBoundingClientRect().top && box.bottom > 0 ? { id: "grid", top: box.top } : null;
  }
  document.addEventListener("htmx:beforeRequest", function (event) {
    const elt = event.detail && event.detail.elt;
    focusAfter = elt instanceof HTMLElement ? elt.dataset.focusAfter || null : null;
    keepPlace = elt instanceof HTMLElement ? placeKept(elt) : null;
    const active = document.activeElement;
    if (!keepPlace && elt instanceof HTMLFormElement && active && active.id && elt.contains(active)) {
      keepPlace = { id: active.id, top: active.getBoundingClientRect().top };
    }
  });

  function restorePlace() {
    const wanted = keepPlace;
    keepPlace = null;
    const target = wanted && document.getElementById(wanted.id);
    if (!target) { return; }
    // Only a move of more than a line's worth: smaller differences are the link's and the panel's own
    // padding, and the page already keeps its place (fixed heights, no scroll anchoring).
    const moved = target.getBoundingClientRect().top - wanted.top;
    if (Math.abs(moved) > 8) { window.scrollBy(0, moved); }
  }

  // Busy from the moment a request is sent until its XHR has ended: by then htmx has swapped and
  // settled (no delays are configured). Told by the XHR itself, which always ends, and not by
  // htmx's events on the element that asked, which the swap may have taken out of the page.
  let inflight = 0;
  document.addEventListener("htmx:beforeSend", function (event) {
    const xhr = event.detail && event.detail.xhr;
    if (!(xhr instanceof XMLHttpRequest)) { return; }
    const elt = event.detail.elt;
    inflight += 1;
    busy = true;
    // Cut off by a newer request (the run form replaces what is on its way): a link's click is
    // followed again after it, so a stage or a step chosen just before a change of the run still counts.
    let aborted = false;
    xhr.addEventListener("abort", function () { aborted = true; });
    xhr.addEventListener("loadend", function () {
      inflight -= 1;
      if (aborted) {
        const later = (id) => id.startsWith("switch-") && pending.some((p) => p.startsWith("switch-"));
        if (elt instanceof HTMLAnchorElement && elt.id && !later(elt.id) && pending.length < MAX_PENDING) {
          pending.unshift(elt.id);  // before what was chosen after it; a stage chosen later wins
        }
      } else if (!((xhr.status >= 200 && xhr.status < 400) || xhr.status === 422)) {
        pending.length = 0;  // a request that failed swaps nothing: forget the queue rather than replay it
      }
      // htmx lets go of the request after this turn (hx-sync would drop a click before then).
      setTimeout(afterSwap, 0);
    });
  });

  function afterSwap() {
    if (inflight > 0) { return; }  // a newer request replaced this one: its own end comes later
    if (pending.length) { drain(); return; }
    busy = false;
    if (playing) { schedule(); }
  }

  function restoreFocus() {
    const wanted = focusAfter;
    focusAfter = null;
    const active = document.activeElement;
    if (!wanted || (active && active !== document.body && document.contains(active))) { return; }
    const target = document.getElementById(wanted);
    if (target) { target.focus({ preventScroll: true }); }
  }

  // The next queued move that goes somewhere; the queue is done when none is left.
  function drain() {
    while (pending.length) {
      // Not busy while it clicks: the click starts the next swap, which makes it busy again.
      busy = false;
      if (go(pending.shift())) { return; }
    }
    busy = false;
  }

  document.addEventListener("htmx:afterSettle", function () {
    // After every other listener of this event (tools.js shows the widget's tools again above the
    // clicked control), still before the frame is drawn: htmx dispatches it from its own script.
    queueMicrotask(restorePlace);
    restoreFocus();
    prepare();
    if (!panel()) {
      setPlaying(false);
      // Steps have nowhere to go once the step is left; a link chosen elsewhere still does.
      forget("step-");
    }
  });

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) { return; }
    // At rest only → and PageDown, and only where the step can be watched.
    const resting = !panel();
    if (resting && !document.getElementById("step-enter")) { return; }
    // The list of keys (keys.js) is open: its own keys only.
    if (document.querySelector("dialog[open]")) { return; }
    const target = event.target instanceof Element ? event.target : null;
    // Arrow keys belong to the grid and to form fields when they have focus, PageUp and PageDown to
    // form fields; on a button or a link (Play, Next) they still step.
    const paging = event.key === "PageUp" || event.key === "PageDown";
    if (target && target.closest(paging ? "input, select, textarea" : "#grid, input, select, textarea, summary")) { return; }
    const moves = { ArrowLeft: "prev", ArrowRight: "next", PageUp: "prev", PageDown: "next", Home: "first", End: "last" };
    if (resting && moves[event.key] !== "next") { return; }
    if (moves[event.key]) {
      event.preventDefault();
      setPlaying(false);
      press(moves[event.key]);
    } else if (event.key === " " && !(target && target.closest("button, a"))) {
      // Space on a button or a link does what that control does; elsewhere it plays or pauses.
      event.preventDefault();
      setPlaying(!playing);
    }
  });

  document.addEventListener("DOMContentLoaded", prepare);
})();
