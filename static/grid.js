// The grid's roving tabindex: one tab stop, a card (read by its sentence), arrows from it into its cells and between
// them, each cell's place read from the page (its card, column and row). (The rings fade by CSS alone: app.css.)
"use strict";
(function () {
  const KEYS = ["ArrowRight", "ArrowLeft", "ArrowDown", "ArrowUp", "Home", "End"];
  function target(grid, cell, key) {
    const column = cell.parentElement;
    const row = Array.prototype.indexOf.call(column.children, cell);
    const all = Array.from(grid.querySelectorAll(".card .plot > .column:not(.gap)"));
    const inCard = all.filter((c) => c.parentElement === column.parentElement);
    const here = all.indexOf(column);
    const to = key === "ArrowRight" ? (here + 1) % all.length : key === "ArrowLeft" ? (here - 1 + all.length) % all.length
      : key === "Home" ? all.indexOf(inCard[0]) : key === "End" ? all.indexOf(inCard[inCard.length - 1]) : here;
    const r = key === "ArrowDown" ? row + 1 : key === "ArrowUp" ? Math.max(row - 1, 0) : row;
    const cells = all[to].children;
    return cells[Math.min(r, cells.length - 1)];
  }
  document.addEventListener("keydown", function (event) {
    const at = event.target instanceof Element && KEYS.includes(event.key) ? event.target : null;
    const next = at && (at.matches("#grid .card") ? at.querySelector(".cell") : at.matches("#grid .cell") && target(at.closest("#grid"), at, event.key));
    if (next) { event.preventDefault(); next.focus(); }
  });
  // A click or tap focuses a cell too: the single tab stop is the card where the person is.
  document.addEventListener("focusin", function (event) {
    const card = event.target instanceof Element ? event.target.closest("#grid .card") : null;
    if (!card) { return; }
    card.closest("#grid").querySelectorAll('.card[tabindex="0"]').forEach((other) => { other.tabIndex = -1; });
    card.tabIndex = 0;
  });
})();
