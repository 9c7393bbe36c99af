// Beside each time in UTC, the same time in the reader's own zone.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const local = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
  for (const time of document.querySelectorAll("time[datetime]")) {
    const at = new Date(time.getAttribute("datetime"));
    if (Number.isNaN(at.getTime())) continue;
    const span = document.createElement("span");
    span.className = "local";
    span.textContent = ` (${local.format(at)} ${zone})`;
    time.after(span);
  }
  const told = document.querySelector(".local-zone");
  if (told) told.textContent = `, and in yours (${zone}) beside them`;
});
