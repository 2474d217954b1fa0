// Keyboard movement inside the grid: one tab stop, arrow keys between cells (a roving tabindex).
// Delegated from the document, so it keeps working after htmx swaps the widget.
"use strict";

(function () {
  function find(grid, card, weight, band) {
    return grid.querySelector(
      '.cell[data-card="' + card + '"][data-weight="' + weight + '"][data-band="' + band + '"]'
    );
  }

  function target(grid, cell, key) {
    const card = Number(cell.dataset.card);
    const weight = Number(cell.dataset.weight);
    // The column's own cells give the band order, as the server drew it.
    const bands = Array.from(cell.closest(".column").children, function (el) { return el.dataset.band; });
    const b = bands.indexOf(cell.dataset.band);
    const cards = grid.querySelectorAll(".card").length;
    const weights = cell.closest(".plot").children.length;
    let c = card, w = weight, band = b;
    if (key === "ArrowRight") { w += 1; if (w >= weights) { w = 0; c = (c + 1) % cards; } }
    else if (key === "ArrowLeft") { w -= 1; if (w < 0) { w = weights - 1; c = (c - 1 + cards) % cards; } }
    else if (key === "ArrowDown") { band = Math.min(b + 1, bands.length - 1); }
    else if (key === "ArrowUp") { band = Math.max(b - 1, 0); }
    else if (key === "Home") { w = 0; }
    else if (key === "End") { w = weights - 1; }
    else { return null; }
    return find(grid, c, w, bands[band]);
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
