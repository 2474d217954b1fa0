// Moves through the widget: the step's keys (a clicker's PageDown and PageUp are → and ←), Play at the pace chosen
// beside it, and where focus and the page stay. Every move is a request of one of the widget's links, one at a time
// and in turn (hx-sync on <main>: queue all; a stage's link, queue last). A move that waited goes where its link
// points once the page before it is in place, so every press counts and the address always names the phase shown.
"use strict";

(function () {
  const SPEEDS = { slow: 2400, normal: 1400, fast: 700 };
  const MOVES = { ArrowLeft: "prev", ArrowRight: "next", PageUp: "prev", PageDown: "next", Home: "first", End: "last" };
  let playing = false, timer = 0, failed = false, focusAfter = null, kept = null;

  // A link's id, or a key's move ("key-next": with no Next, at rest, it starts the step at phase 1; "key-prev" with
  // no Previous, at phase 0, leaves it), found when its request is sent.
  function find(id) {
    const key = id.startsWith("key-") ? id.slice(4) : "";
    const link = byId(key ? "step-" + key : id);
    const instead = byId({ next: "step-enter", prev: "step-leave" }[key] || "");
    return instead && !(link && link.hasAttribute("hx-get")) ? instead : link;
  }
  // A click on its link; while a swap is on its way, a request that waits on <main>, which outlives the swaps, for
  // the link it finds may be gone by then (→ twice at rest is phase 1, then phase 2). Refused or lost: tools.js says so.
  function move(id) {
    if (!document.querySelector(".htmx-request")) { return find(id) && find(id).click(); }
    htmx.ajax("get", "", { source: "main", target: "#widget", swap: "morph", push: "true", headers: { "ZB-Move": id } }).catch(() => {});
  }

  // A request that failed swaps nothing: the moves that waited for it, sent at once in the same task, are dropped.
  ["htmx:responseError", "htmx:sendError"].forEach((name) => document.addEventListener(name, () => {
    failed = true; setTimeout(() => { failed = false; });
  }));
  // At either end a control stays, disabled, so focus has somewhere to stay; the stage shown, asked again, would
  // come back without the marks of what changed (and a double click is two clicks).
  document.addEventListener("htmx:configRequest", function (event) {
    const d = event.detail, id = d.headers["ZB-Move"];
    delete d.headers["ZB-Move"];
    const link = id ? find(id) : d.elt;
    if (!(link instanceof HTMLAnchorElement)) { return id && event.preventDefault(); }
    d.path = link.getAttribute("hx-get");
    if (failed || !d.path || link.getAttribute("aria-current") === "page") { return event.preventDefault(); }
    Object.assign(d, { move: id || link.id, link });
  });
  // Cut off by a change of the run (the run form replaces what is on its way), a move is made again after it.
  document.addEventListener("htmx:sendAbort", function (event) {
    if (event.detail.requestConfig.move) { setTimeout(move, 0, event.detail.requestConfig.move); }
  });

  // A control whose replacement has another id names it in data-focus-after; one whose replacement may land
  // elsewhere, in data-keep-place (the page scrolls by the difference). Other links and the field typed in keep
  // their own place; a button of the step's bar fixed at the foot of a narrow window keeps the cards in place.
  function placeKept(elt) {
    const at = (id, box = byId(id)) => ({ id, top: box.getBoundingClientRect().top, bottom: box.getBoundingClientRect().bottom });
    const active = document.activeElement;
    if (elt.dataset.keepPlace) { return at(elt.dataset.keepPlace, elt); }
    if (elt instanceof HTMLFormElement && active && active.id && elt.contains(active)) { return at(active.id); }
    if (!(elt instanceof HTMLAnchorElement) || !elt.id) { return null; }
    const bar = elt.closest(".step-bar");
    if (!bar || getComputedStyle(bar).position !== "fixed") { return at(elt.id); }
    const cards = byId("grid") && at("grid");
    return cards && cards.top < bar.getBoundingClientRect().top && cards.bottom > 0 ? cards : null;
  }
  document.addEventListener("htmx:beforeRequest", function (event) {
    const elt = event.detail.requestConfig.link || event.detail.elt;
    focusAfter = elt.dataset.focusAfter;
    kept = placeKept(elt);
  });
  function restore() {
    // More than a line's worth: less is the control's own padding, and the page keeps its place.
    const moved = kept && byId(kept.id) ? byId(kept.id).getBoundingClientRect().top - kept.top : 0;
    if (Math.abs(moved) > 8) { window.scrollBy(0, moved); }
    const lost = !document.activeElement || document.activeElement === document.body;
    if (lost && focusAfter && byId(focusAfter)) { byId(focusAfter).focus({ preventScroll: true }); }
    kept = focusAfter = null;
  }

  // Play and its pace are rendered hidden: they need this script. The pace is kept on <body>, which outlives the
  // swaps. Stepping is not animation: it plays under reduced motion too.
  const speed = () => (SPEEDS[document.body.dataset.playSpeed] ? document.body.dataset.playSpeed : "normal");
  function render() {
    const button = byId("step-play");
    if (!button) { playing = false; return; }
    Object.assign(button, { hidden: false, textContent: playing ? "⏸ Pause" : "▶ Play" });
    button.setAttribute("aria-pressed", String(playing));
    if (byId("step-speed-field")) { byId("step-speed-field").hidden = false; byId("step-speed").value = speed(); }
  }
  // The next phase waits for this one to settle, then for the pace chosen.
  function setPlaying(on) {
    playing = Boolean(on);
    clearTimeout(timer);
    render();
    const next = () => byId("step-next") && byId("step-next").hasAttribute("hx-get");
    if (playing) { timer = setTimeout(() => (next() ? move("step-next") : setPlaying(false)), SPEEDS[speed()]); }
  }
  document.addEventListener("change", function (event) {
    if (event.target.id === "step-speed") { document.body.dataset.playSpeed = event.target.value; }
  });
  document.addEventListener("click", function (event) {
    if (event.target instanceof Element && event.target.closest("#step-play")) { setPlaying(!playing); }
  });
  document.addEventListener("htmx:afterSettle", function () {
    // After every listener of this event (tools.js shows the widget's tools again), before the frame is drawn.
    queueMicrotask(restore);
    setPlaying(playing && byId("step"));
  });
  document.addEventListener("DOMContentLoaded", render);

  const ARROW_OWNERS = "#grid, input, select, textarea, summary";
  const PAGING_OWNERS = "input:not([data-not-typed]), select:not([data-not-typed]), textarea";
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || document.querySelector("dialog[open]")) { return; }
    // At rest only → and PageDown, and only where the step can be watched.
    const which = MOVES[event.key];
    if (!byId("step") && (which !== "next" || !byId("step-enter"))) { return; }
    // Arrows belong to the grid and to a field with the focus; PageUp and PageDown to the run's fields, not the
    // step's (a clicker steps wherever a click left the focus). On a button or link both step; Space clicks it.
    const target = event.target instanceof Element ? event.target : document.body;
    if (target.closest(event.key === "PageUp" || event.key === "PageDown" ? PAGING_OWNERS : ARROW_OWNERS)) { return; }
    if (!which && (event.key !== " " || target.closest("button, a"))) { return; }
    event.preventDefault();
    if (which) { setPlaying(false); move("key-" + which); } else { setPlaying(!playing); }
  });
})();
