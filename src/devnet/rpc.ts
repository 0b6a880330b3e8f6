/** A minimal JSON-RPC call (the node's evm_* and hardhat_* methods are not in viem's types). */
export async function rpc(
  url: string,
  method: string,
  params: unknown[],
  timeoutMs = 10_000,
): Promise<unknown> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = (await response.json()) as { result?: unknown; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}
