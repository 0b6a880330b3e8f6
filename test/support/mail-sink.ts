import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";

// A real SMTP listener on 127.0.0.1 for the app's mailer (SMTP_URL): what it was sent, raw, with
// the envelope and the headers and text body read back.

export interface ReceivedMail {
  mailFrom: string;
  rcptTo: string[];
  raw: string;
  subject: string;
  /** The body as sent (quoted-printable soft line breaks undone). */
  text: string;
}

export function headerOf(raw: string, name: string): string {
  const head = (raw.split(/\r?\n\r?\n/)[0] ?? "").replace(/\r?\n[ \t]+/g, " ");
  const match = new RegExp(`^${name}:[ \\t]*(.*)$`, "im").exec(head);
  return match?.[1]?.trim() ?? "";
}

function bodyOf(raw: string): string {
  const body = raw
    .split(/\r?\n\r?\n/)
    .slice(1)
    .join("\n\n");
  if (!/quoted-printable/i.test(headerOf(raw, "Content-Transfer-Encoding"))) return body;
  return body
    .replace(/=\r?\n/g, "")
    .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

export class MailSink {
  readonly received: ReceivedMail[] = [];
  readonly #server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onData: (stream, session, callback) => {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        const envelope = session.envelope;
        this.received.push({
          mailFrom: envelope.mailFrom ? envelope.mailFrom.address : "",
          rcptTo: envelope.rcptTo.map((r) => r.address),
          raw,
          subject: headerOf(raw, "Subject"),
          text: bodyOf(raw),
        });
        callback();
      });
    },
  });

  /** Listens on a free port of 127.0.0.1; the SMTP_URL to give the app. */
  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", () => resolve()));
    const { port } = this.#server.server.address() as AddressInfo;
    return `smtp://127.0.0.1:${port}`;
  }

  to(address: string): ReceivedMail[] {
    return this.received.filter((m) => m.rcptTo.includes(address));
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}
