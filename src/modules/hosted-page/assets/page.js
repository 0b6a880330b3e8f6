// Hosted payment page: copy button, expiry countdown, one-click payment from an injected wallet
// (EIP-1193), the receipt's Print button, and live status. Status arrives by server-sent events;
// without them (no EventSource, the stream never opened, or it closed while the payment waits) the
// page polls the public status. On a change it swaps in the freshly rendered page content — the
// payer sees success without reloading. Its words come as JSON data (#page-messages), never code.
(() => {
  const dataEl = document.getElementById("page-messages");
  let words = {};
  try {
    words = dataEl ? JSON.parse(dataEl.textContent || "{}") : {};
  } catch {}
  const say = (key, values) =>
    String(words[key] || key).replace(/\{(\w+)\}/g, (_, name) => String(values?.[name] ?? ""));

  const print = document.getElementById("print-receipt");
  if (print) {
    print.hidden = false;
    print.addEventListener("click", () => window.print());
  }

  const main = document.getElementById("payment");
  if (!main) return;
  const id = main.dataset.paymentId;
  const waiting = ["pending", "detected", "confirmed"];
  const isWaiting = () => waiting.includes(main.dataset.status);
  let timer;

  // Units are a decimal string of the token's smallest unit: BigInt keeps them exact.
  const hex = (value) => `0x${BigInt(value).toString(16)}`;
  const word32 = (hexDigits) => hexDigits.padStart(64, "0");

  const payWithWallet = (button) => {
    const status = document.getElementById("wallet-status");
    const show = (text) => {
      if (status) status.textContent = text;
    };
    button.addEventListener("click", async () => {
      const d = button.dataset;
      const ethereum = window.ethereum;
      button.disabled = true;
      try {
        show(say("connecting"));
        const accounts = await ethereum.request({ method: "eth_requestAccounts" });
        const from = accounts[0];
        show(say("switching"));
        const chainId = hex(d.chainId);
        try {
          await ethereum.request({ method: "wallet_switchEthereumChain", params: [{ chainId }] });
        } catch (error) {
          // 4902: the wallet does not know the network. It can add it when the operator names a
          // public endpoint (EIP-3085); otherwise the payer is told to add it themselves.
          if (error?.code !== 4902) throw error;
          if (!d.walletRpcUrl) {
            show(say("addNetwork", { network: d.networkName }));
            button.disabled = false;
            return;
          }
          show(say("addingNetwork", { network: d.networkName }));
          await ethereum.request({
            method: "wallet_addEthereumChain",
            params: [
              {
                chainId,
                chainName: d.networkName,
                nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
                rpcUrls: [d.walletRpcUrl],
                ...(d.explorerUrl ? { blockExplorerUrls: [d.explorerUrl] } : {}),
              },
            ],
          });
          // Adding may leave the wallet on its old network: switch once more (a no-op if it did).
          await ethereum.request({ method: "wallet_switchEthereumChain", params: [{ chainId }] });
        }
        const tx = d.tokenAddress
          ? {
              from,
              to: d.tokenAddress,
              // ERC-20 transfer(address,uint256): selector, then both arguments as 32-byte words.
              data: `0xa9059cbb${word32(d.receivingAddress.slice(2).toLowerCase())}${word32(BigInt(d.units).toString(16))}`,
            }
          : { from, to: d.receivingAddress, value: hex(d.units) };
        show(say("confirmInWallet"));
        const hash = await ethereum.request({ method: "eth_sendTransaction", params: [tx] });
        show(say("sent", { hash }));
      } catch (error) {
        show(
          error?.code === 4001
            ? say("rejected")
            : say("walletError", { message: error?.message || String(error) }),
        );
        button.disabled = false;
      }
    });
  };

  const bind = () => {
    const copy = document.getElementById("copy");
    const copyStatus = document.getElementById("copy-status");
    if (copy) {
      copy.addEventListener("click", async () => {
        try {
          await navigator.clipboard.writeText(copy.dataset.copy || "");
          if (copyStatus) copyStatus.textContent = say("copied");
        } catch {
          const input = document.getElementById("address");
          if (input) input.select();
          if (copyStatus) copyStatus.textContent = say("copyManually");
        }
      });
    }
    const wallet = document.getElementById("pay-with-wallet");
    if (wallet && window.ethereum && typeof window.ethereum.request === "function") {
      wallet.hidden = false;
      payWithWallet(wallet);
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
    // The same page the payer has open (its network choice and language included).
    const res = await fetch(`/pay/${encodeURIComponent(id)}${location.search}`, { cache: "no-store" });
    if (!res.ok) return;
    const doc = new DOMParser().parseFromString(await res.text(), "text/html");
    const fresh = doc.getElementById("payment");
    if (!fresh) return;
    main.innerHTML = fresh.innerHTML;
    main.dataset.status = fresh.dataset.status;
    if (fresh.dataset.refunded) main.dataset.refunded = fresh.dataset.refunded;
    else delete main.dataset.refunded;
    document.title = doc.title;
    const announce = document.getElementById("announce");
    if (announce) announce.textContent = doc.title;
    bind();
  };

  let polling = false;
  const poll = async () => {
    try {
      const res = await fetch(`/pay/${encodeURIComponent(id)}/status`, { cache: "no-store" });
      if (res.ok) {
        const body = await res.json();
        if (body.status !== main.dataset.status) await refresh();
      }
    } catch {}
    if (isWaiting()) setTimeout(poll, 1500);
    else polling = false;
  };
  const startPolling = () => {
    if (polling || !isWaiting()) return;
    polling = true;
    setTimeout(poll, 1500);
  };

  const listen = () => {
    // data-events: the service serves the stream (the page says so; no probing request).
    if (typeof EventSource !== "function" || !main.dataset.events) return startPolling();
    const source = new EventSource(main.dataset.events);
    let opened = false;
    source.addEventListener("open", () => {
      opened = true;
    });
    source.addEventListener("status", async (event) => {
      try {
        const body = JSON.parse(event.data);
        // The stream ends after a final status: closed here, its end is no reason to poll.
        if (!waiting.includes(body.status)) source.close();
        // `refunded` says whether any of it went back; the page shows how much (data-refunded).
        if (body.status !== main.dataset.status || Boolean(body.refunded) !== Boolean(main.dataset.refunded))
          await refresh();
      } catch {}
    });
    source.addEventListener("error", () => {
      // Never opened (no endpoint, refused), or closed while the payment still waits: poll instead.
      if (!opened || source.readyState === EventSource.CLOSED || isWaiting()) {
        source.close();
        startPolling();
      }
    });
  };

  bind();
  listen();
})();
