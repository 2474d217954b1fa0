// Swap only what changed. A new arrangement, phase or run comes back as the whole widget (the same
// markup the page and the no-JavaScript links get), but most of it is the same as what is on the
// screen: the same cards, columns and cells, with other classes and names. Replacing all of it
// makes the browser throw away and rebuild some 800 elements on every click; this extension walks
// the old and the new widget side by side instead and changes attributes and text in place, and
// replaces a node only where the two differ in kind or in number of children.
//
// It is an htmx extension (htmx.defineExtension, hx-ext="patch" on <body>): htmx still makes the
// request, pushes the address, fires its events and processes the new hx- attributes afterwards.
"use strict";

(function () {
  // Form fields keep their live value apart from their attributes: a changed one is replaced whole.
  const FIELDS = new Set(["INPUT", "SELECT", "TEXTAREA"]);

  function sameAttributes(a, b) {
    if (a.attributes.length !== b.attributes.length) { return false; }
    for (const attr of b.attributes) {
      if (a.getAttribute(attr.name) !== attr.value) { return false; }
    }
    return true;
  }

  function copyAttributes(old, fresh) {
    for (let i = old.attributes.length - 1; i >= 0; i--) {
      const name = old.attributes[i].name;
      if (!fresh.hasAttribute(name)) { old.removeAttribute(name); }
    }
    for (const attr of fresh.attributes) {
      if (old.getAttribute(attr.name) !== attr.value) { old.setAttribute(attr.name, attr.value); }
    }
  }

  function alike(old, fresh) {
    if (old.nodeType !== fresh.nodeType || old.nodeName !== fresh.nodeName) { return false; }
    if (old.nodeType !== Node.ELEMENT_NODE) { return true; }
    if (old.childNodes.length !== fresh.childNodes.length) { return false; }
    return !FIELDS.has(old.nodeName) || sameAttributes(old, fresh);
  }

  // Make `old` look like `fresh`, in place where the two are alike, by replacement where not.
  function patch(old, fresh) {
    if (old.nodeType !== Node.ELEMENT_NODE) {
      if (old.nodeValue !== fresh.nodeValue) { old.nodeValue = fresh.nodeValue; }
      return;
    }
    copyAttributes(old, fresh);
    let o = old.firstChild;
    let f = fresh.firstChild;
    while (o && f) {
      const nextOld = o.nextSibling;
      const nextFresh = f.nextSibling;
      if (alike(o, f)) { patch(o, f); } else { old.replaceChild(f, o); }
      o = nextOld;
      f = nextFresh;
    }
  }

  htmx.defineExtension("patch", {
    handleSwap: function (style, target, fragment) {
      if (style !== "patch") { return false; }
      const fresh = fragment.firstElementChild;
      if (!fresh || !alike(target, fresh) || fresh.id !== target.id) {
        // A different shape altogether: replace it, as outerHTML would.
        target.replaceWith(fragment);
        return fresh ? [fresh] : [];
      }
      patch(target, fresh);
      // htmx processes what it is given: the widget, whose links may now point elsewhere and
      // whose replaced parts are new.
      return [target];
    }
  });

  // The widget's links and forms ask for outerHTML (what works everywhere); the widget is patched.
  document.addEventListener("htmx:beforeSwap", function (event) {
    const target = event.detail.target;
    if (target && target.id === "widget" && (event.detail.swapOverride || "outerHTML") === "outerHTML") {
      event.detail.swapOverride = "patch";
    }
  });
})();
