// ZeRO Bands, for the page that embeds it: one <script src=".../static/embed.js" defer></script>, no dependencies.
// Sizes every ZeRO Bands frame on the page (an iframe with data-zero-bands, or one whose address is on this script's
// own origin) to the height its content reports: {type: "zero-bands:resize", height: N}, or Canvas's
// '{"subject":"lti.frameResize","height":N}'. A message counts only from the frame's own window and address's origin.
(function () {
  "use strict";
  var MAX_HEIGHT = 20000;
  function originOf(address, base) {
    try { return new URL(address, base).origin; } catch (e) { return null; }
  }
  var own = document.currentScript ? originOf(document.currentScript.src) : null;
  function heightIn(data) {
    if (data && typeof data === "object" && data.type === "zero-bands:resize") { return data.height; }
    try {
      var message = typeof data === "string" && data.charAt(0) === "{" ? JSON.parse(data) : null;
      return message && message.subject === "lti.frameResize" ? message.height : null;
    } catch (e) { return null; }
  }
  window.addEventListener("message", function (event) {
    var height = Number(heightIn(event.data)), frames = document.getElementsByTagName("iframe");
    if (!isFinite(height) || height <= 0) { return; }
    for (var i = 0; i < frames.length; i += 1) {
      var frame = frames[i], origin = originOf(frame.getAttribute("src") || "", window.location.href);
      if (frame.contentWindow === event.source && (frame.hasAttribute("data-zero-bands") || (own !== null && origin === own))
        && origin === event.origin) {
        frame.style.height = Math.min(Math.ceil(height), MAX_HEIGHT) + "px";
      }
    }
  });
})();
