// Live sessions (app/web/live.py). The teacher's page sends each view shown to the session, in order (the theme
// toggle too, then reloads: the teacher's screen only). A follower's: each SSE event (in #live-slot) names the
// teacher's view in the follower's own theme, fetched unless older; its own move leaves the teacher ("exploring").
"use strict";
(function () {
  const address = () => (byId("widget") && byId("widget").dataset.address) || "";
  if (byId("live-teach")) {
    let sent = address(), queue = Promise.resolve();
    const send = (view) => (queue = queue.then(() => fetch(byId("live-teach").dataset.show, {
      method: "POST", headers: { "ZB-Live": "1" }, body: new URLSearchParams({ view }), credentials: "same-origin",
    })).then((response) => {
      if ([404, 410].includes(response.status)) { byId("live-lost").hidden = false; }  // ended elsewhere, or lost
    }).catch(() => {}));
    document.addEventListener("htmx:afterSettle", () => { if (address() && address() !== sent) { sent = address(); send(sent); } });
    // The QR code, open over the page as the session starts, folds away as a pop-up does: a click elsewhere or on it, Escape.
    const fold = (event) => { const box = byId("live-qr-box"); if (box && !event.target.closest("#live-qr-box summary")) { box.open = false; } };
    document.addEventListener("click", fold, true);
    document.addEventListener("keydown", (event) => event.key === "Escape" && fold(event));
    document.addEventListener("click", function (event) {
      const toggle = event.target.closest("#theme-toggle"), away = event.target.closest("a[href]:not([hx-get])");
      if (toggle) {
        event.preventDefault();
        send(toggle.getAttribute("href")).then(() => window.location.reload());
      } else if (away && !away.closest("#live-teach") && !away.hasAttribute("data-copy-config")) {
        event.preventDefault();  // a page of its own (compare, measured, home) in a new tab: this one stays the class's
        window.open(away.href, "_blank", "noopener");
      }
    });
  }
  const follow = byId("live-follow"), state = () => byId("live-state");
  if (!follow) { return; }
  let applied = Number(state().dataset.version), shown = state().dataset.view, away = false;
  const FOLLOWING = "ZB-Following";  // marks the requests apply() sends, and is taken off before they go
  function apply() {
    const s = state();
    if (!s || s.hasAttribute("data-away")) { return; }
    follow.classList.toggle("ended", s.hasAttribute("data-ended"));
    if (s.hasAttribute("data-ended")) { byId("live-away").hidden = true; return; }
    const version = Number(s.dataset.version);
    if (!(version > applied)) { return; }
    applied = version;
    if (away || s.dataset.view === shown) { return; }
    shown = s.dataset.view;
    htmx.ajax("get", shown, { source: "#widget", target: "#widget", swap: "morph", headers: { [FOLLOWING]: "1" } }).catch(() => {});
  }
  document.addEventListener("htmx:sseMessage", apply);
  function leave() {
    away = true;
    follow.classList.add("away");  // the bar then says exploring, not following (app.css)
    byId("live-away").hidden = follow.classList.contains("ended");
  }
  // The follower's own move: a widget link, a form field typed in (before its delayed request), or any widget
  // request apply() did not send (step.js's queued keys, embed-frame.js's set-state); not full screen, pace, Copy.
  document.addEventListener("click", function (event) {
    const toggle = event.target.closest("#theme-toggle"), page = new URL(byId("live-back").href);
    if (toggle) {  // the follower's own theme, on the follower's page (not the plain page's): still following
      event.preventDefault();
      page.searchParams.set("theme", new URL(toggle.href).searchParams.get("theme") || "default");
      window.location.assign(page.href);
    } else if (event.target.closest("#live-back")) {
      event.preventDefault();
      [away, applied, shown] = [false, 0, ""];
      follow.classList.remove("away"); byId("live-away").hidden = true;
      apply();
    } else if (event.target.closest("#widget a[href]") && !event.target.closest("[data-copy-config]")) {
      leave();
    }
  }, true);
  ["input", "change"].forEach((name) => document.addEventListener(name, (event) => {
    if (event.target.closest("#widget form")) { leave(); }
  }, true));
  // Read here, not from ZB-Move: step.js's listener, which runs first, has taken that header off.
  document.addEventListener("htmx:configRequest", function (event) {
    const d = event.detail;
    if (d.headers[FOLLOWING]) { delete d.headers[FOLLOWING]; d.following = true; }
  });
  document.addEventListener("htmx:beforeRequest", ({ detail: d }) => d.target && d.target.id === "widget" && !d.requestConfig.following && leave());
  document.addEventListener("zero-bands:explore", leave);
})();
