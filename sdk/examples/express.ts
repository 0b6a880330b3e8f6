// A webhook receiver on Express (sdk/README.md): express.raw keeps the bytes the signature covers.
import { verifyWebhook, type WebhookEvent } from "@payments-service/sdk";
import express from "express";

export function expressReceiver(secret: string, handle: (event: WebhookEvent) => void) {
  return express().post("/hooks", express.raw({ type: "application/json" }), async (req, res) => {
    const event = await verifyWebhook(req.body, req.headers, secret).catch(() => null);
    if (event) handle(event);
    res.sendStatus(event ? 204 : 400);
  });
}
