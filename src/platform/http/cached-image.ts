import type { FastifyReply, FastifyRequest } from "fastify";

// An image kept in the database, answered with its sha256 as the ETag: a browser that already has
// it gets a 304 and no bytes (the hosted page's logo, and the dashboard's preview of it).

export interface StoredImage {
  content_type: string;
  bytes: Uint8Array;
  sha256: string;
}

export function sendStoredImage(
  request: FastifyRequest,
  reply: FastifyReply,
  image: StoredImage,
  cacheControl: string,
): FastifyReply {
  const etag = `"${image.sha256}"`;
  reply.header("cache-control", cacheControl).header("etag", etag);
  const asked = request.headers["if-none-match"];
  if (asked?.split(",").some((tag) => tag.trim().replace(/^W\//, "") === etag))
    return reply.status(304).send();
  return reply.type(image.content_type).send(Buffer.from(image.bytes));
}
