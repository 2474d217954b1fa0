// Inside an embed: tell the page around the frame how tall the content is, so it can size the
// frame to fit (static/embed.js does this). Two messages each time, to window.parent:
//   {type: "zero-bands:resize", height: N}                    this app's own format, an object
//   '{"subject":"lti.frameResize","height":N}'                Canvas's, as a JSON string
// after load, after every htmx swap and settle, and whenever the content's size changes.
// The height is not secret, so any parent may read it ("*"); the host checks where it came from.
"use strict";

(function () {
  if (window.parent === window) { return; }

  function height() {
    // The root element's own box, not scrollHeight: that is never less than the frame, so a frame
    // made taller than its content would never shrink back.
    return Math.ceil(document.documentElement.getBoundingClientRect().height);
  }

  function report() {
    const h = height();
    window.parent.postMessage({ type: "zero-bands:resize", height: h }, "*");
    window.parent.postMessage(JSON.stringify({ subject: "lti.frameResize", height: h }), "*");
  }

  let last = -1;
  function reportChange() {
    if (height() !== last) { last = height(); report(); }
  }

  document.addEventListener("DOMContentLoaded", report);
  window.addEventListener("load", report);
  document.addEventListener("htmx:afterSwap", report);
  document.addEventListener("htmx:afterSettle", report);
  window.addEventListener("resize", reportChange);
  // Details opening, fonts arriving, the frame's width changing: anything that changes the height.
  if ("ResizeObserver" in window) {
    new ResizeObserver(reportChange).observe(document.documentElement);
  }
})();
