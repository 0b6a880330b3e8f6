import { randomUUID } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import nodemailer, { type Transporter } from "nodemailer";

// Outgoing mail (D6): through SMTP when SMTP_URL is set, otherwise written as .eml files under
// DATA_DIR/mail so that a laptop install still shows what would have been sent.

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(message: MailMessage): Promise<void>;
  close(): void;
}

const FROM = "Payments Service <no-reply@payments.invalid>";

export function createMailer(options: {
  smtpUrl: string | undefined;
  dataDir: string;
  from?: string;
}): Mailer {
  const from = options.from ?? FROM;
  if (options.smtpUrl) {
    const transport: Transporter = nodemailer.createTransport(options.smtpUrl);
    return {
      async send(message) {
        await transport.sendMail({ from, ...message });
      },
      close: () => transport.close(),
    };
  }
  const folder = join(options.dataDir, "mail");
  const transport = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: "unix" });
  return {
    async send(message) {
      const info = await transport.sendMail({ from, ...message });
      await mkdir(folder, { recursive: true });
      const name = `${new Date().toISOString().replace(/[:.]/g, "-")}-${randomUUID()}.eml`;
      await writeFile(join(folder, name), info.message as Buffer);
    },
    close: () => transport.close(),
  };
}
