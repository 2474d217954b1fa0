// The widget is morphed, not replaced: its links and forms ask for hx-swap="morph" (idiomorph's htmx extension,
// hx-ext="morph" on <body>). Here: how the morph treats what it walks, and the one element lookup of the bundle.
"use strict";

// The bundle's one lookup (app/serving/assets.py BUNDLES puts this file first): null where the page has none.
const byId = (id) => document.getElementById(id);

(function () {
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
