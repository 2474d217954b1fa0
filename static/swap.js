// The widget is morphed (hx-swap="morph", idiomorph's extension): how the morph walks, and the bundle's one lookup.
"use strict";
// The bundle's one lookup (app/serving/assets.py BUNDLES puts this file first): null where the page has none.
const byId = (id) => document.getElementById(id);
(function () {
  if (!window.Idiomorph) { return; }
  const FIELDS = ["INPUT", "SELECT", "TEXTAREA"];
  const callbacks = window.Idiomorph.defaults.callbacks;
  // What the answer leaves equal is not walked, and a card's plot is put in whole, both quicker than the morph's walk
  // (docs/performance.md); not while a cell has the focus, which the morph keeps.
  callbacks.beforeNodeMorphed = function (old, fresh) {
    if (old.isEqualNode(fresh)) { return false; }
    if (old.className !== "plot" || fresh.className !== "plot" || old.contains(document.activeElement)) { return true; }
    old.replaceChildren(...fresh.childNodes);
    return false;
  };
  // The field typed in keeps its value, whatever else changes; not the phase slider, which Play moves.
  callbacks.beforeAttributeUpdated = function (name, node) {
    const field = document.activeElement;
    return !(["value", "selected", "checked"].includes(name) && field && FIELDS.includes(field.nodeName)
      && field.type !== "range" && field.contains(node));
  };
})();
