// Moves: the step's keys (a clicker's PageDown/PageUp are →/←), Play at its pace, where focus and the page stay. Each
// move is a link's request, in turn (hx-sync), going where its link points once the page before it is in place.
"use strict";
(function () {
  const SPEEDS = { slow: 2400, normal: 1400, fast: 700 };
  const MOVES = { ArrowLeft: "prev", ArrowRight: "next", PageUp: "prev", PageDown: "next", Home: "first", End: "last" };
  let playing = false, timer = 0, failed = false, focusAfter = null, kept = null;
  // A link's id, or a key's move, found when sent ("key-next" at rest starts the step; "key-prev" at phase 0 leaves it).
  function find(id) {
    const key = id.startsWith("key-") ? id.slice(4) : "";
    const link = byId(key ? "step-" + key : id);
    const instead = byId({ next: "step-enter", prev: "step-leave" }[key] || "");
    return instead && !(link && link.hasAttribute("hx-get")) ? instead : link;
  }
  // A click; during a swap, a request queued on <main> (which outlives swaps), as its link may be gone by its turn.
  function move(id) {
    if (!document.querySelector(".htmx-request")) { return find(id) && find(id).click(); }
    htmx.ajax("get", "", { source: "main", target: "#widget", swap: "morph", push: "true", headers: { "ZB-Move": id } }).catch(() => {});
  }
  // A request that failed swaps nothing: the moves that waited for it, sent at once in the same task, are dropped.
  ["htmx:responseError", "htmx:sendError"].forEach((name) => document.addEventListener(name, () => {
    failed = true; setTimeout(() => { failed = false; });
  }));
  // Cancelled: a disabled control's (kept for focus), or the stage shown's (it would come back without its marks).
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
  // data-focus-after names a control's replacement of another id; data-keep-place, what must stay where it was. A
  // button of the step's bar fixed at a narrow window's foot keeps the cards in place.
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
    [focusAfter, kept] = [elt.dataset.focusAfter, placeKept(elt)];
  });
  function restore() {
    const moved = kept && byId(kept.id) ? byId(kept.id).getBoundingClientRect().top - kept.top : 0;
    if (Math.abs(moved) > 8) { window.scrollBy(0, moved); }  // more than a line's worth: less is the control's padding
    const lost = !document.activeElement || document.activeElement === document.body;
    if (lost && focusAfter && byId(focusAfter)) { byId(focusAfter).focus({ preventScroll: true }); }
    kept = focusAfter = null;
  }
  // Play and its pace, rendered hidden, need this script; the pace is kept on <body>. Plays under reduced motion too.
  const speed = () => (SPEEDS[document.body.dataset.playSpeed] ? document.body.dataset.playSpeed : "normal");
  function render() {
    const button = byId("step-play");
    if (!button) { playing = false; return; }
    Object.assign(button, { hidden: false, textContent: playing ? "⏸ Pause" : "▶ Play" }).setAttribute("aria-pressed", String(playing));
    if (byId("step-speed-field")) { byId("step-speed-field").hidden = false; byId("step-speed").value = speed(); }
  }
  function setPlaying(on) {  // the next phase waits for this one to settle, then for the pace chosen
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
    queueMicrotask(restore);  // after every listener of this event (tools.js shows the tools again), before drawing
    setPlaying(playing && byId("step"));
  });
  document.addEventListener("DOMContentLoaded", render);
  const ARROW_OWNERS = "#grid, input, select, textarea, summary", PAGING_OWNERS = "input:not([data-not-typed]), select:not([data-not-typed]), textarea";
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || document.querySelector("dialog[open]")) { return; }
    const which = MOVES[event.key];  // at rest only → and PageDown, where the step can be watched
    if (!byId("step") && (which !== "next" || !byId("step-enter"))) { return; }
    // Arrows belong to the grid and fields; PageUp/PageDown to the run's fields only (a clicker steps from anywhere).
    const target = event.target instanceof Element ? event.target : document.body;
    if (target.closest(event.key === "PageUp" || event.key === "PageDown" ? PAGING_OWNERS : ARROW_OWNERS)) { return; }
    if (!which && (event.key !== " " || target.closest("button, a"))) { return; }
    event.preventDefault();
    if (which) { setPlaying(false); move("key-" + which); } else { setPlaying(!playing); }
  });
})();
