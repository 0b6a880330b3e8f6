import type { FastifyReply } from "fastify";

// Headers of the pages we render (the hosted payment page, the dashboard): a strict CSP that lets
// only our own files and the one script tag carrying this response's nonce run, no framing, no
// referrer, no sniffing. Forms may post only to us (the dashboard) or nowhere (the payer's page).

export function pageSecurityHeaders(
  reply: FastifyReply,
  options: { nonce?: string; formAction: "'self'" | "'none'" },
): void {
  reply
    .header(
      "content-security-policy",
      [
        "default-src 'none'",
        `script-src 'self'${options.nonce ? ` 'nonce-${options.nonce}'` : ""}`,
        // A page's one <style> element (the merchant's brand colour) carries the same nonce.
        `style-src 'self'${options.nonce ? ` 'nonce-${options.nonce}'` : ""}`,
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        `form-action ${options.formAction}`,
        "frame-ancestors 'none'",
      ].join("; "),
    )
    .header("x-frame-options", "DENY")
    .header("referrer-policy", "no-referrer")
    .header("x-content-type-options", "nosniff");
}
