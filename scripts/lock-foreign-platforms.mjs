// This machine's npm registry serves only the packages of its own platform, so `npm install`
// leaves the other platforms' optional native packages (biome, EDR …) out of package-lock.json,
// and `npm ci` then refuses the lockfile as out of sync. This adds an entry for each such
// package, marked optional with its os/cpu/libc, so npm ci skips it on this platform and a
// machine of that platform still knows the version to fetch. Run after `npm install`.
import { readFileSync, writeFileSync } from "node:fs";

const path = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(path, "utf8"));
const packages = lock.packages;
let added = 0;
for (const [location, entry] of Object.entries(packages)) {
  for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
    const key = `node_modules/${name}`;
    if (packages[key] || packages[`${location}/${key}`]) continue;
    const os = ["darwin", "win32", "linux", "android", "freebsd", "openbsd", "sunos", "aix"].find((o) =>
      name.includes(o),
    );
    const cpu = ["arm64", "x64", "arm", "ia32", "ppc64", "s390x", "riscv64", "loong64"].find((c) =>
      name.includes(c),
    );
    if (!os || !cpu) continue;
    const stub = {
      version: range.replace(/^[\^~=]/, ""),
      dev: entry.dev,
      optional: true,
      os: [os],
      cpu: [cpu],
    };
    if (name.includes("musl")) stub.libc = ["musl"];
    else if (os === "linux" && name.includes("gnu")) stub.libc = ["glibc"];
    if (!stub.dev) delete stub.dev;
    packages[key] = stub;
    added++;
  }
}
lock.packages = Object.fromEntries(
  Object.entries(packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b))),
);
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`added ${added} foreign-platform lock entries`);
