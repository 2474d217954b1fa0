// Live sessions (app/web/live.py). The teacher's page sends each view shown to the session, in order (the theme
// toggle too, then reloads: the teacher's own screen). A follower's: each SSE event (in #live-slot) names the
// teacher's view in the follower's own theme, fetched unless older; the follower's own move leaves the teacher
// ("exploring") until "Back to the teacher"; its theme toggle reloads its page in the other theme, following.
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
    document.addEventListener("htmx:afterSettle", function () {
      if (address() && address() !== sent) { sent = address(); send(sent); }
    });
    // The QR code is open over the page as the session starts: any click or tap elsewhere (on it too), or
    // Escape, folds it away, as a pop-up's, so nothing under it is out of reach for long.
    const fold = (event) => {
      const box = byId("live-qr-box");
      if (box && box.open && !event.target.closest("#live-qr-box summary")) { box.open = false; }
    };
    document.addEventListener("click", fold, true);
    document.addEventListener("keydown", (event) => { if (event.key === "Escape") { fold(event); } });
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
  const follow = byId("live-follow");
  if (!follow) { return; }
  const state = () => byId("live-state");
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
    const toggle = event.target.closest("#theme-toggle");
    if (toggle) {
      event.preventDefault();  // the follower's own theme, on the follower's page: not the plain page's address
      const page = new URL(byId("live-back").href), theme = new URL(toggle.href).searchParams.get("theme");
      if (theme && theme !== "default") { page.searchParams.set("theme", theme); } else { page.searchParams.delete("theme"); }
      window.location.assign(page.href);
    } else if (event.target.closest("#live-back")) {
      event.preventDefault();
      [away, applied, shown] = [false, 0, ""];
      follow.classList.remove("away");
      byId("live-away").hidden = true;
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
  document.addEventListener("htmx:beforeRequest", function (event) {
    const d = event.detail;
    if (d.target && d.target.id === "widget" && !d.requestConfig.following) { leave(); }
  });
  document.addEventListener("zero-bands:explore", leave);
})();
