// The widget is morphed, not replaced (idiomorph's htmx extension, hx-ext="morph" on <body>). Its links and forms
// ask for outerHTML, which works without this script and in the static export: here those swaps become morphs.
"use strict";

(function () {
  document.addEventListener("htmx:beforeSwap", function (event) {
    const d = event.detail;
    if (d.target && d.target.id === "widget" && (d.swapOverride || "outerHTML") === "outerHTML") { d.swapOverride = "morph"; }
  });

  if (!window.Idiomorph) { return; }
  const FIELDS = ["INPUT", "SELECT", "TEXTAREA"];
  const callbacks = window.Idiomorph.defaults.callbacks;
  // What the answer does not change is left unwalked: the browser compares a subtree far quicker than a morph
  // walks it. A card's plot, whose cells a new stage mostly all changes, is put in whole, quicker than the walk
  // of each cell (docs/performance.md); not while a cell has the focus, which the morph keeps.
  callbacks.beforeNodeMorphed = function (old, fresh) {
    if (old.isEqualNode(fresh)) { return false; }
    if (old.className !== "plot" || fresh.className !== "plot" || old.contains(document.activeElement)) { return true; }
    old.replaceChildren(...fresh.childNodes);
    return false;
  };
  // The field typed in keeps what was typed or chosen since the request was sent, whatever else changes about
  // it; not the phase slider, which Play moves.
  callbacks.beforeAttributeUpdated = function (name, node) {
    const field = document.activeElement;
    return !(["value", "selected", "checked"].includes(name) && field && FIELDS.includes(field.nodeName)
      && field.type !== "range" && field.contains(node));
  };
})();
