// Re-renders each [data-live] part of a page from the URL it names, every
// data-every milliseconds, until the part marks itself final (data-final).
"use strict";

function follow(part) {
  const every = Number(part.dataset.every || 3000);
  const tick = async () => {
    if (part.querySelector("[data-final]")) return;
    try {
      const response = await fetch(part.dataset.live, { cache: "no-store" });
      if (response.redirected) {  // signed out: the sign-in form
        window.location.assign(response.url);
        return;
      }
      if (response.ok) part.innerHTML = await response.text();
      part.classList.toggle("stale", !response.ok);
    } catch (error) {  // the service is away: keep the last view, marked stale
      part.classList.add("stale");
    }
    setTimeout(tick, every);
  };
  setTimeout(tick, every);
}

document.querySelectorAll("[data-live]").forEach(follow);
