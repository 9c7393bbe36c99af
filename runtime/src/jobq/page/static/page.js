// The page's own script (its CSP runs no other): beside each time in UTC, the same
// time in the reader's zone; and the sections marked data-live read again every few
// seconds while the tab is shown, so the lists stay current without a reload.
"use strict";

const REFRESH_MS = 5000;
// Each live section's HTML as the server last sent it: one that comes back the same is
// left as it is (no flicker, and what the reader holds in it stays theirs).
const served = new Map();

function localTimes(root) {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const local = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
  for (const time of root.querySelectorAll("time[datetime]")) {
    const at = new Date(time.getAttribute("datetime"));
    if (Number.isNaN(at.getTime())) continue;
    const span = document.createElement("span");
    span.className = "local";
    span.textContent = ` (${local.format(at)} ${zone})`;
    time.after(span);
  }
  const told = document.querySelector(".local-zone");
  if (told) told.textContent = `, and in yours (${zone}) beside them`;
}

// A section the reader is using (a box checked, a field in focus) is left as it is.
function inUse(section) {
  return section.querySelector("input[type=checkbox]:checked") !== null
    || section.contains(document.activeElement) && document.activeElement !== document.body;
}

async function refresh() {
  const live = document.querySelectorAll("[data-live][id]");
  if (live.length === 0 || document.hidden) return;
  let response;
  try {
    response = await fetch(window.location.href, { credentials: "same-origin" });
  } catch {
    return;  // the app is down or restarting: the next turn tries again
  }
  if (!response.ok) return;
  const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
  for (const section of live) {
    const now = fresh.getElementById(section.id);
    if (now === null || inUse(section) || served.get(section.id) === now.outerHTML) continue;
    served.set(section.id, now.outerHTML);
    section.replaceWith(now);
    localTimes(now);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  for (const section of document.querySelectorAll("[data-live][id]")) {
    served.set(section.id, section.outerHTML);
  }
  localTimes(document);
  let timer = null;
  const start = () => { if (timer === null) timer = setInterval(refresh, REFRESH_MS); };
  const stop = () => { if (timer !== null) { clearInterval(timer); timer = null; } };
  // A hidden tab reads nothing; shown again, it reads at once, then every few seconds.
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) { stop(); } else { refresh(); start(); }
  });
  if (!document.hidden) start();
});
