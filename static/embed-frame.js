// Inside an embed, after app.js (its byId). The height, once after load, to any parent ("*", the host checks):
// {type: "zero-bands:resize", height: N}, and Canvas's '{"subject":"lti.frameResize","height":N}'. The state API (as
// PhET-iO's): "zero-bands:get-state" gets {type: "zero-bands:state", stage, phase, run, following, error}; set-state
// {stage, phase, run} shows that view. Only from the parent window and origin, which alone hears.
"use strict";
(function () {
  if (window.parent === window) { return; }
  let last = 0;
  // The root element's own box, not scrollHeight, which is never less than the frame: a frame would never shrink back.
  // The embed is as tall in every stage and phase (embed.css), so a click sends nothing: only content that outgrows
  // the frame (it would scroll) or leaves more than 8 px of it empty (the calculator's details) is sent again.
  function report() {
    const height = Math.ceil(document.documentElement.getBoundingClientRect().height);
    if (height <= last && last - height <= 8) { return; }
    last = height;
    window.parent.postMessage({ type: "zero-bands:resize", height }, "*");
    window.parent.postMessage(JSON.stringify({ subject: "lti.frameResize", height }), "*");
  }
  window.addEventListener("load", () => { report(); new ResizeObserver(report).observe(document.documentElement); });
  const ancestors = window.location.ancestorOrigins;
  let parentOrigin = ancestors && ancestors.length ? ancestors[0] : null;
  try { parentOrigin = parentOrigin || new URL(document.referrer).origin; } catch (e) { parentOrigin = null; }
  const OWN = ["stage", "phase", "from", "controls", "calculator", "theme", "live"];
  const here = () => new URL(byId("widget").dataset.address || window.location.href, window.location.href);
  function state() {
    const widget = byId("widget"), run = {};
    here().searchParams.forEach((value, key) => { if (!OWN.includes(key)) { run[key] = value; } });
    // Following: a follower neither exploring nor in a session the teacher has ended (static/live.js marks it .ended).
    const follow = byId("live-follow"), following = Boolean(follow) && !follow.classList.contains("ended") && byId("live-away").hidden;
    const notice = widget.querySelector(".notice-message");  // a view the app refused says why, as the widget does
    return { type: "zero-bands:state", stage: widget.dataset.stage || null, phase: widget.dataset.phase ? Number(widget.dataset.phase) : null,
      run, following, error: notice ? notice.textContent.trim() : null };
  }
  function set(data) {
    const url = here();
    if (typeof data.stage === "string") { url.searchParams.set("stage", data.stage); }
    // As get-state gives it: null at rest, 0 the step's first moment, 1-20 its phases.
    if (data.phase === null) { url.searchParams.delete("phase"); }
    if (Number.isInteger(data.phase) && data.phase >= 0) { url.searchParams.set("phase", String(data.phase)); }
    if (data.run && typeof data.run === "object") {
      [...url.searchParams.keys()].filter((key) => !OWN.includes(key)).forEach((key) => url.searchParams.delete(key));
      Object.entries(data.run).forEach(([key, value]) => url.searchParams.set(key, String(value)));
    }
    url.searchParams.delete("from");
    document.dispatchEvent(new CustomEvent("zero-bands:explore"));
    return htmx.ajax("get", url.pathname + url.search, { source: "#widget", target: "#widget", swap: "morph" });
  }
  window.addEventListener("message", function (event) {
    const data = event.data;
    if (event.source !== window.parent || event.origin !== parentOrigin || !data || typeof data !== "object") { return; }
    const answer = () => window.parent.postMessage(state(), event.origin);
    if (data.type === "zero-bands:get-state") { answer(); }
    if (data.type === "zero-bands:set-state") { set(data).then(answer, answer); }
  });
})();
