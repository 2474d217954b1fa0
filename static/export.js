// Only in a static copy (zero-bands export). A page opened from a file may not fetch another file from
// script, so there htmx stands aside and every link loads its whole page, as it does without JavaScript.
// Over HTTP, htmx swaps the widget out of each static page.
"use strict";
if (window.location.protocol === "file:") { document.body.setAttribute("hx-disable", ""); }
