// The dashboard's only script (served by us, allowed by the page's CSP nonce). Reading works
// without it; it adds copy buttons, confirmations before destructive forms, and times in the
// viewer's time zone.
(() => {
  // Times: the server writes UTC; show them in the viewer's zone, keeping UTC in the title.
  const format = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
  for (const el of document.querySelectorAll("time[datetime]")) {
    const date = new Date(el.getAttribute("datetime"));
    if (Number.isNaN(date.getTime())) continue;
    el.title = el.textContent;
    el.textContent = format.format(date);
  }

  // Copy buttons: the value is in data-copy; the result is announced.
  document.addEventListener("click", async (event) => {
    const button = event.target instanceof Element ? event.target.closest("button[data-copy]") : null;
    if (!button) return;
    const label = button.textContent;
    try {
      await navigator.clipboard.writeText(button.getAttribute("data-copy"));
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed: select the text";
    }
    setTimeout(() => {
      button.textContent = label;
    }, 1500);
  });

  // Wallet actions go to the part 4.14 endpoints with the session's CSRF token; the page then
  // reloads to show the result.
  const csrf = document.querySelector('meta[name="csrf-token"]')?.getAttribute("content") ?? "";
  const call = async (button, method, body) => {
    const status = button.parentElement?.querySelector(".action-status");
    button.disabled = true;
    if (status) status.textContent = "Working…";
    // The default wallet is per environment: the page's (D21).
    const environment = button.getAttribute("data-environment");
    const query = environment ? `?environment=${encodeURIComponent(environment)}` : "";
    try {
      const res = await fetch(`/api/workspaces/smart-wallet${query}`, {
        method,
        headers: { "x-csrf-token": csrf, ...(body ? { "content-type": "application/json" } : {}) },
        body: body ? JSON.stringify(body) : undefined,
        credentials: "same-origin",
      });
      const answer = await res.json().catch(() => ({}));
      if (!res.ok) throw new Error(answer.error || `HTTP ${res.status}`);
      if (status) status.textContent = answer.message || "Done";
      window.location.reload();
    } catch (err) {
      if (status) status.textContent = `Failed: ${err.message}`;
      button.disabled = false;
    }
  };
  document.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("button[data-action]") : null;
    if (!button) return;
    const action = button.getAttribute("data-action");
    if (action === "create-smart-wallet") void call(button, "POST");
    if (action === "save-default") {
      const chosen = document.querySelector('input[name="defaultWalletType"]:checked');
      if (chosen) void call(button, "PATCH", { defaultWalletType: chosen.value });
    }
  });

  // Destructive forms ask first (revoke, cancel, delete).
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement)) return;
    const question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });
})();
