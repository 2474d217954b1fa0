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

  // But not the field being typed in (the run form answers as it is typed): patched in place, it keeps
  // its focus, its caret and what was typed since its request was sent, and so is what holds it, even
  // where a message beside it comes or goes. Not the phase slider, which Play moves under its focus.
  function typedIn() {
    const field = document.activeElement;
    return field && field.nodeName === "INPUT" && field.type !== "range" ? field : null;
  }

  function sameAttributes(a, b) {
    if (a.attributes.length !== b.attributes.length) { return false; }
    for (const attr of b.attributes) {
      if (a.getAttribute(attr.name) !== attr.value) { return false; }
    }
    return true;
  }

  // Whether an attribute is one htmx reads when it wires up an element (hx-get, hx-trigger, …).
  function wiring(name) { return name.startsWith("hx-") || name.startsWith("data-hx-"); }

  // Returns whether any of htmx's own attributes changed, so the element must be wired up again.
  function copyAttributes(old, fresh) {
    let rewired = false;
    const wanted = fresh.attributes;
    for (let i = 0; i < wanted.length; i++) {
      const attr = wanted[i];
      if (old.getAttribute(attr.name) !== attr.value) {
        old.setAttribute(attr.name, attr.value);
        rewired = rewired || wiring(attr.name);
      }
    }
    // Now `old` has every attribute of `fresh`: only if it has more are there any to remove.
    const had = old.attributes;
    if (had.length === wanted.length) { return rewired; }
    for (let i = had.length - 1; i >= 0; i--) {
      const name = had[i].name;
      if (!fresh.hasAttribute(name)) {
        old.removeAttribute(name);
        rewired = rewired || wiring(name);
      }
    }
    return rewired;
  }

  function alike(old, fresh) {
    if (old.nodeType !== fresh.nodeType || old.nodeName !== fresh.nodeName) { return false; }
    if (old.nodeType !== Node.ELEMENT_NODE) { return true; }
    const field = typedIn();
    if (field === old) { return old.id === fresh.id; }
    if (old.childNodes.length !== fresh.childNodes.length && !(field && old.contains(field))) { return false; }
    return !FIELDS.has(old.nodeName) || sameAttributes(old, fresh);
  }

  // Make `old` look like `fresh`, in place where the two are alike, by replacement where not.
  // `wire` collects what htmx must process: elements put in whole, and kept ones whose hx- changed.
  function patch(old, fresh, wire) {
    if (old.nodeType !== Node.ELEMENT_NODE) {
      if (old.nodeValue !== fresh.nodeValue) { old.nodeValue = fresh.nodeValue; }
      return;
    }
    if (copyAttributes(old, fresh)) { wire.push(old); }
    let o = old.firstChild;
    let f = fresh.firstChild;
    while (o && f) {
      const nextOld = o.nextSibling;
      const nextFresh = f.nextSibling;
      // Most of the widget is as it was (the form, the key, most cells): the browser's own
      // comparison of a subtree is far quicker than walking it here.
      if (o.isEqualNode(f)) {
        // Nothing to do.
      } else if (alike(o, f)) {
        patch(o, f, wire);
      } else {
        old.replaceChild(f, o);
        if (f.nodeType === Node.ELEMENT_NODE) { wire.push(f); }
      }
      o = nextOld;
      f = nextFresh;
    }
    // Around the field being typed in, a message gone or come: the rest removed, or added.
    while (o) { const next = o.nextSibling; old.removeChild(o); o = next; }
    while (f) {
      const next = f.nextSibling;
      old.appendChild(f);
      if (f.nodeType === Node.ELEMENT_NODE) { wire.push(f); }
      f = next;
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
      const wire = [];
      patch(target, fresh, wire);
      // htmx wires up what it is given (and fires htmx:load on it): only what is new or now points
      // elsewhere, not the 800 elements that are as they were.
      return wire;
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
