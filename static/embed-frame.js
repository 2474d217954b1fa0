// Inside an embed: tell the page around the frame how tall the content is, so it can size the frame to
// fit (static/embed.js does). Two messages each time, to window.parent: {type: "zero-bands:resize",
// height: N}, this app's own, and '{"subject":"lti.frameResize","height":N}', Canvas's; after load and
// every swap, and whenever the height changes. Not secret: any parent may read it ("*"), and the host
// checks where it came from.
"use strict";

(function () {
  if (window.parent === window) { return; }
  let last = -1;
  // The root element's own box, not scrollHeight: that is never less than the frame, so a frame made
  // taller than its content would never shrink back.
  function report(always) {
    const height = Math.ceil(document.documentElement.getBoundingClientRect().height);
    if (always !== true && height === last) { return; }
    last = height;
    window.parent.postMessage({ type: "zero-bands:resize", height }, "*");
    window.parent.postMessage(JSON.stringify({ subject: "lti.frameResize", height }), "*");
  }
  window.addEventListener("load", () => report(true));
  document.addEventListener("htmx:afterSettle", () => report(true));
  // Details opening, fonts arriving, the frame's width changing: anything that changes the height.
  new ResizeObserver(() => report(false)).observe(document.documentElement);
})();
