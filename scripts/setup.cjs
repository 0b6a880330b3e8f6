// Makes a fresh clone runnable with one npm command, whatever Node.js the machine has.
//
// npm runs this before `start`, `test`, `devnet`, `cli` and `bench` (their pre-scripts), under the
// first `node` on PATH: the system's, possibly older than the Node.js 24 the service needs. The
// project pins Node.js 24 as a dependency (the registry's `node` package), so once installed,
// every npm script runs on node_modules/.bin/node. What this script ensures is that the
// dependencies were installed by a Node.js 24 and from the current lock file: npm skips native
// packages whose engines want a newer Node.js (Hardhat's EDR), so a tree installed by Node.js 20
// cannot run the devnet, and installing Node.js 24 afterwards does not repair it.
//
// When they were not (no node_modules, a lock file changed since, or an install by an older
// Node.js), it gets a Node.js 24 first (the running one, or the pinned `node` package installed
// into .cache/), then runs `npm ci` with it. `npm ci` records who installed the tree through the
// project's postinstall (`node scripts/setup.cjs --record`), also when run by hand.
//
// Plain CommonJS without dependencies: it must run on any Node.js a system may have.
"use strict";

const { spawnSync } = require("node:child_process");
const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");

const REQUIRED_MAJOR = 24;
const root = path.resolve(__dirname, "..");
const recordFile = path.join(root, "node_modules", ".installed-by.json");

function major(version) {
  return Number(String(version).replace(/^v/, "").split(".")[0]);
}

function lockHash() {
  return crypto
    .createHash("sha256")
    .update(fs.readFileSync(path.join(root, "package-lock.json")))
    .digest("hex");
}

/** One line saying what to do, never a stack trace. */
function fail(message) {
  process.stderr.write(`setup: ${message}\n`);
  process.exit(1);
}

/** The Node.js version running the npm that runs this script (npm's user agent names it). */
function npmNodeVersion() {
  const match = /\bnode\/(v[0-9.]+)/.exec(process.env.npm_config_user_agent || "");
  return match ? match[1] : process.version;
}

function record() {
  const node = npmNodeVersion();
  fs.writeFileSync(recordFile, `${JSON.stringify({ node, lock: lockHash() })}\n`);
}

/** Why the installed tree cannot be used as it is, or null when it can. */
function reinstallReason() {
  if (!fs.existsSync(path.join(root, "node_modules"))) return "no dependencies are installed";
  let installed;
  try {
    installed = JSON.parse(fs.readFileSync(recordFile, "utf8"));
  } catch {
    return "the installed dependencies carry no record of their install";
  }
  if (major(installed.node) < REQUIRED_MAJOR) {
    return `the dependencies were installed by Node.js ${installed.node}, which skips packages Node.js ${REQUIRED_MAJOR} needs`;
  }
  if (installed.lock !== lockHash()) return "package-lock.json changed since the last install";
  if (!fs.existsSync(path.join(root, "node_modules", ".bin", "node"))) return "the pinned Node.js is missing";
  return null;
}

function pinnedNodeVersion() {
  const lock = JSON.parse(fs.readFileSync(path.join(root, "package-lock.json"), "utf8"));
  const entry = lock.packages?.["node_modules/node"];
  if (!entry?.version) fail("package-lock.json pins no `node` package");
  return entry.version;
}

function versionOf(binary) {
  const run = spawnSync(binary, ["--version"], { encoding: "utf8" });
  return run.status === 0 ? run.stdout.trim() : undefined;
}

/** A Node.js 24 binary: this one, else the pinned `node` package installed into .cache/. */
function node24(npmCli) {
  if (major(process.version) >= REQUIRED_MAJOR) return process.execPath;
  const version = pinnedNodeVersion();
  const prefix = path.join(root, ".cache", `node-v${version}`);
  const binary = path.join(prefix, "node_modules", "node", "bin", "node");
  if (major(versionOf(binary)) !== REQUIRED_MAJOR) {
    process.stderr.write(
      `setup: Node.js ${process.version} is older than ${REQUIRED_MAJOR}: installing Node.js ${version} for this project into .cache/ (npm's \`node\` package)\n`,
    );
    const install = spawnSync(
      process.execPath,
      [
        npmCli,
        "install",
        "--prefix",
        prefix,
        "--no-save",
        "--no-package-lock",
        "--no-audit",
        "--no-fund",
      ].concat(["--loglevel=error", `node@${version}`]),
      { cwd: root, stdio: ["ignore", "ignore", "inherit"] },
    );
    if (install.status !== 0 || major(versionOf(binary)) !== REQUIRED_MAJOR) {
      fail(
        `could not install Node.js ${version} from the npm registry; install Node.js ${REQUIRED_MAJOR} yourself (https://nodejs.org), then run npm ci`,
      );
    }
  }
  return binary;
}

function main() {
  if (process.argv.includes("--record")) return record();
  const reason = reinstallReason();
  if (reason === null) return;
  const npmCli = process.env.npm_execpath;
  if (!npmCli) fail("run this through npm (npm start, npm test): it needs npm's own path");
  const node = node24(npmCli);
  process.stderr.write(`setup: ${reason}: running npm ci with Node.js ${versionOf(node)}\n`);
  const env = Object.assign({}, process.env, {
    PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH || ""}`,
  });
  // npm reads npm_config_* variables as its settings: the user agent this npm was started with
  // names the old Node.js, and the install would record it.
  delete env.npm_config_user_agent;
  const install = spawnSync(node, [npmCli, "ci", "--no-audit", "--no-fund"], {
    cwd: root,
    stdio: "inherit",
    env,
  });
  if (install.status !== 0) fail("npm ci failed (see above); fix what it names, then run the command again");
  if (reinstallReason() !== null) fail(`npm ci left the dependencies unusable: ${reinstallReason()}`);
}

main();
