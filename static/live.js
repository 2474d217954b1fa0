// Live sessions (app/web/live.py). The teacher's page sends each view shown to the session, in order (the theme
// toggle too, then reloads: the teacher's screen only). A follower's: each SSE event (in #live-slot) names the
// teacher's view in the follower's own theme, fetched unless older; its own move leaves the teacher ("exploring").
"use strict";
(function () {
  const address = () => (byId("widget") && byId("widget").dataset.address) || "";
  if (byId("live-teach")) {
    // The latest view, until the server takes it: after a 5xx or no answer, again in Retry-After or 0.5, 1, 2 s (a
    // newer view in its place), the bar saying the class is not hearing. The class may then be on either: none is heard.
    let latest = address(), heard = latest, queue = Promise.resolve();
    const post = (wait, view = latest) => (view === heard ? null : fetch(byId("live-teach").dataset.show, {
      method: "POST", headers: { "ZB-Live": "1" }, body: new URLSearchParams({ view }), credentials: "same-origin",
    }).then((r) => (r.status < 500 ? r : Promise.reject(r))).then((r) => {  // 404, 410: ended elsewhere, or lost
      [heard, byId("live-deaf").hidden, byId("live-lost").hidden] = [view, true, ![404, 410].includes(r.status)];
    }, (r) => {
      [heard, byId("live-deaf").hidden] = [null, false];
      return new Promise((go) => setTimeout(go, 1000 * (Number(r.headers?.get("Retry-After")) || wait))).then(() => post(Math.min(2 * wait, 2)));
    }));
    const send = (view) => { latest = view; return (queue = queue.then(() => post(0.5))); };
    document.addEventListener("htmx:afterSettle", () => address() && address() !== latest && send(address()));
    // The QR code, open over the page as the session starts, folds away as a pop-up does: a click elsewhere or on it, Escape.
    const fold = (event) => { const box = byId("live-qr-box"); if (box && !event.target.closest("#live-qr-box summary")) { box.open = false; } };
    document.addEventListener("click", fold, true);
    document.addEventListener("keydown", (event) => event.key === "Escape" && fold(event));
    document.addEventListener("click", function (event) {
      const toggle = event.target.closest(".theme-toggle a"), away = event.target.closest("a[href]:not([hx-get])");
      if (toggle) {  // sent, then the page reloads in the other theme
        event.preventDefault(); send(toggle.getAttribute("href")).then(() => window.location.reload());
      } else if (away && !away.closest("#live-teach") && !away.hasAttribute("data-copy-config")) {
        event.preventDefault();  // a page of its own (compare, measured, home) in a new tab: this one stays the class's
        window.open(away.href, "_blank", "noopener");
      }
    });
  }
  const follow = byId("live-follow"), state = () => byId("live-state");
  if (!follow) { return; }
  let applied = Number(state().dataset.version), shown = state().dataset.view, away = false, retry = 0, wait = 500;
  const FOLLOWING = "ZB-Following";  // marks the requests apply() sends (the server reads no such header)
  function apply() {
    const s = state();
    if (!s || s.hasAttribute("data-away")) { return; }
    follow.classList.toggle("ended", s.hasAttribute("data-ended"));
    if (s.hasAttribute("data-ended")) { byId("live-away").hidden = true; return; }
    if (!(Number(s.dataset.version) > applied)) { return; }
    applied = Number(s.dataset.version);
    if (away || s.dataset.view === shown) { return; }
    shown = s.dataset.view;
    htmx.ajax("get", shown, { source: "#widget", target: "#widget", swap: "morph", headers: { [FOLLOWING]: "1" } }).catch(() => {});
  }
  document.addEventListener("htmx:sseMessage", apply);
  // A fetch of the teacher's view that failed (offline, a 5xx) is not applied: asked for again in 1, 2, 4 s, or at once
  // back online (the stream may have nothing new to say), the bar saying so until a request is answered.
  ["htmx:sendError", "htmx:responseError"].forEach((name) => document.addEventListener(name, ({ detail: d }) => {
    if (!d.requestConfig.headers[FOLLOWING] || (d.xhr.status > 0 && d.xhr.status < 500)) { return; }
    [applied, shown, byId("live-reconnecting").hidden] = [0, "", false];
    clearTimeout(retry); retry = setTimeout(apply, (wait = Math.min(2 * wait, 4000)));
  }));
  document.addEventListener("htmx:afterRequest", ({ detail: d }) => d.successful && ([wait, byId("live-reconnecting").hidden] = [500, true]));
  window.addEventListener("online", apply);
  const leave = () => { away = true; follow.classList.add("away"); byId("live-away").hidden = follow.classList.contains("ended"); };  // app.css: exploring
  // The follower's own move: a widget link, a form field typed in (before its delayed request), or any widget
  // request apply() did not send (step.js's queued keys, embed-frame.js's set-state); not full screen, pace, Copy.
  document.addEventListener("click", function (event) {
    const toggle = event.target.closest(".theme-toggle a"), page = new URL(byId("live-back").href);
    if (toggle) {  // the follower's own theme, on the follower's page (not the plain page's): still following
      event.preventDefault(); page.searchParams.set("theme", new URL(toggle.href).searchParams.get("theme") || "default");
      window.location.assign(page.href);
    } else if (event.target.closest("#live-back")) {
      event.preventDefault();
      [away, applied, shown, byId("live-away").hidden] = [false, 0, "", true];
      follow.classList.remove("away"); apply();
    } else if (event.target.closest("#widget a[href]") && !event.target.closest("[data-copy-config]")) {
      leave();
    }
  }, true);
  ["input", "change"].forEach((name) => document.addEventListener(name, (event) => event.target.closest("#widget form") && leave(), true));
  document.addEventListener("htmx:beforeRequest", ({ detail: d }) => d.target && d.target.id === "widget" && !d.requestConfig.headers[FOLLOWING] && leave());
  document.addEventListener("zero-bands:explore", leave);
})();
