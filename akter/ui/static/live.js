// Live refresh for the akter inspector: while the #live section says data-live="true", ask the
// same URL for its live part (?part=live) every data-refresh milliseconds and swap it in place.
// A finished subject stops the polling; a failed request is tried again at the next tick.
(function () {
  "use strict";
  const section = document.getElementById("live");
  if (!section) return;
  const every = Number(document.body.dataset.refresh || 1000);
  let refreshed = 0;
  async function tick() {
    const inner = section.firstElementChild;
    if (!inner || inner.dataset.live !== "true") {
      section.dataset.live = "false";
      return;
    }
    const url = new URL(window.location.href);
    url.searchParams.set("part", "live");
    try {
      const response = await fetch(url, { headers: { Accept: "text/html" } });
      if (response.ok) {
        const open = new Set(
          Array.from(section.querySelectorAll("details[open]"), (d) => d.parentElement && d.parentElement.id)
        );
        section.innerHTML = await response.text();
        section.querySelectorAll("details").forEach((d) => {
          if (d.parentElement && open.has(d.parentElement.id)) d.open = true;
        });
        refreshed += 1;
        section.dataset.refreshed = String(refreshed);
      }
    } catch (err) {
      // the server may be restarting: keep the last good view and try again
    }
    window.setTimeout(tick, every);
  }
  window.setTimeout(tick, every);
})();
