// Refresh the pending count without reloading the page. Same-origin, allowed by the CSP.
"use strict";
(function () {
  const badge = document.getElementById("pending-count");
  if (!badge) return;
  async function refresh() {
    try {
      const response = await fetch("/api/count", { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) return;
      const data = await response.json();
      badge.textContent = data.pending + " pending";
      if (String(data.pending) !== badge.dataset.count) badge.classList.add("changed");
    } catch (e) { /* offline for a moment: try again next tick */ }
  }
  setInterval(refresh, 5000);
})();
