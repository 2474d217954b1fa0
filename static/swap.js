// The widget is morphed, not replaced (idiomorph's htmx extension, hx-ext="morph" on <body>). Its links
// and forms ask for outerHTML, which works without this script and in the static export; their swaps of
// the widget become morphs here, so what is the same keeps its element, its focus and its caret.
"use strict";

(function () {
  document.addEventListener("htmx:beforeSwap", function (event) {
    const d = event.detail;
    if (d.target && d.target.id === "widget" && (d.swapOverride || "outerHTML") === "outerHTML") { d.swapOverride = "morph"; }
  });

  if (!window.Idiomorph) { return; }
  // What the answer does not change is left unwalked (the browser compares a subtree far quicker than a
  // morph walks it), fields too, with what was typed or chosen since the request was sent. The field
  // typed in keeps its value whatever else changes about it; not the phase slider, which Play moves.
  const FIELDS = ["INPUT", "SELECT", "TEXTAREA"];
  const callbacks = window.Idiomorph.defaults.callbacks;
  callbacks.beforeNodeMorphed = (old, fresh) => !old.isEqualNode(fresh);
  callbacks.beforeAttributeUpdated = function (name, node) {
    const field = document.activeElement;
    return !(["value", "selected", "checked"].includes(name) && field && FIELDS.includes(field.nodeName)
      && field.type !== "range" && field.contains(node));
  };
})();
