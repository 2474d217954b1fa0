// Keyboard movement inside the grid: one tab stop, arrow keys between cells (a roving tabindex).
// Delegated from the document, so it keeps working after htmx swaps the widget. A cell's place is
// read from the page itself (its card, its column, its row), so cells carry no coordinates.
"use strict";

(function () {
  function columns(grid) {
    return Array.from(grid.querySelectorAll(".card .plot > .column:not(.gap)"));
  }

  function target(grid, cell, key) {
    const column = cell.parentElement;
    const row = Array.prototype.indexOf.call(column.children, cell);
    const all = columns(grid);
    const here = all.indexOf(column);
    const plot = column.parentElement;
    const inCard = all.filter(function (c) { return c.parentElement === plot; });
    let to = here, r = row;
    if (key === "ArrowRight") { to = (here + 1) % all.length; }
    else if (key === "ArrowLeft") { to = (here - 1 + all.length) % all.length; }
    else if (key === "ArrowDown") { r = Math.min(row + 1, column.children.length - 1); }
    else if (key === "ArrowUp") { r = Math.max(row - 1, 0); }
    else if (key === "Home") { to = all.indexOf(inCard[0]); }
    else if (key === "End") { to = all.indexOf(inCard[inCard.length - 1]); }
    else { return null; }
    const cells = all[to].children;
    return cells[Math.min(r, cells.length - 1)] || null;
  }

  document.addEventListener("keydown", function (event) {
    const cell = event.target instanceof Element ? event.target.closest("#grid .cell") : null;
    if (!cell) { return; }
    const next = target(cell.closest("#grid"), cell, event.key);
    if (!next) { return; }
    event.preventDefault();
    cell.tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
  });

  // The rings round what changed hold for 1.5 s, then fade (app.css, .rings-fade; not under reduced
  // motion). A patched swap keeps the grid element but resets its classes, so each new arrangement
  // starts its own wait; the last one's pending fade is dropped.
  let fade = 0;
  function fadeRingsLater() {
    clearTimeout(fade);
    const grid = document.getElementById("grid");
    if (!grid || !grid.querySelector(".cell.changed")) { return; }
    fade = setTimeout(function () { grid.classList.add("rings-fade"); }, 1500);
  }
  document.addEventListener("DOMContentLoaded", fadeRingsLater);
  document.addEventListener("htmx:afterSettle", fadeRingsLater);

  // A click or tap focuses a cell too; keep the single tab stop where the person is.
  document.addEventListener("focusin", function (event) {
    const cell = event.target instanceof Element ? event.target.closest("#grid .cell") : null;
    if (!cell) { return; }
    cell.closest("#grid").querySelectorAll('.cell[tabindex="0"]').forEach(function (other) {
      if (other !== cell) { other.tabIndex = -1; }
    });
    cell.tabIndex = 0;
  });
})();
