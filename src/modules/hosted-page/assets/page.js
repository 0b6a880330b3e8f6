// Hosted payment page: copy button, expiry countdown, and live status. It polls the public
// status endpoint and, when the status changes, swaps in the freshly rendered page content —
// the payer sees success without reloading.
(() => {
  const main = document.getElementById("payment");
  if (!main) return;
  const id = main.dataset.paymentId;
  const waiting = ["pending", "detected", "confirmed"];
  let timer;

  const bind = () => {
    const copy = document.getElementById("copy");
    const copyStatus = document.getElementById("copy-status");
    if (copy) {
      copy.addEventListener("click", async () => {
        try {
          await navigator.clipboard.writeText(copy.dataset.copy || "");
          if (copyStatus) copyStatus.textContent = "Address copied";
        } catch {
          const input = document.getElementById("address");
          if (input) input.select();
          if (copyStatus) copyStatus.textContent = "Select the address and copy it";
        }
      });
    }
    clearInterval(timer);
    const countdown = document.getElementById("countdown");
    if (countdown) {
      const end = Date.parse(countdown.getAttribute("datetime") || "");
      const tick = () => {
        const left = Math.max(0, Math.floor((end - Date.now()) / 1000));
        countdown.textContent = `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`;
      };
      tick();
      timer = setInterval(tick, 1000);
    }
  };

  const refresh = async () => {
    // The same page the payer has open (its network choice included).
    const res = await fetch(`/pay/${encodeURIComponent(id)}${location.search}`, { cache: "no-store" });
    if (!res.ok) return;
    const doc = new DOMParser().parseFromString(await res.text(), "text/html");
    const fresh = doc.getElementById("payment");
    if (!fresh) return;
    main.innerHTML = fresh.innerHTML;
    main.dataset.status = fresh.dataset.status;
    document.title = doc.title;
    bind();
  };

  const poll = async () => {
    try {
      const res = await fetch(`/pay/${encodeURIComponent(id)}/status`, { cache: "no-store" });
      if (res.ok) {
        const body = await res.json();
        if (body.status !== main.dataset.status) await refresh();
      }
    } catch {}
    if (waiting.includes(main.dataset.status)) setTimeout(poll, 1500);
  };

  bind();
  if (waiting.includes(main.dataset.status)) setTimeout(poll, 1500);
})();
