import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

// Another release's code, to run as a service process beside this tree's (startService's
// `sourceDir`): the rolling-upgrade suite runs the previous release against the new migrations.

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export interface ReleaseTree {
  dir: string;
  remove(): void;
}

/**
 * Extracts `commit`'s tree (`git archive`) into a temporary folder, with this repository's
 * node_modules linked in: the release runs on today's dependencies (the same, as long as
 * package-lock.json has not changed since). A commit missing from the clone (a shallow one) is an
 * error that says so, not a reason to skip.
 */
export function releaseTree(commit: string): ReleaseTree {
  try {
    execFileSync("git", ["cat-file", "-e", `${commit}^{commit}`], { cwd: ROOT, stdio: "ignore" });
  } catch {
    throw new Error(
      `commit ${commit} (the release to upgrade from) is not in this clone's history: ` +
        "this suite needs the full history (`git fetch --unshallow`, or clone without --depth)",
    );
  }
  const dir = mkdtempSync(join(tmpdir(), `release-${commit}-`));
  try {
    const archive = execFileSync("git", ["archive", "--format=tar", commit], {
      cwd: ROOT,
      maxBuffer: 256 * 1024 * 1024,
    });
    execFileSync("tar", ["-x", "-C", dir], { input: archive });
    symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
