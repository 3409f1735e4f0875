import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');
/** What tsconfig.build.json compiles into dist/. */
const SOURCE_DIRS = ['lib', path.join('benchmarks', 'cli')];

/** The first .ts under dir (subfolders included) whose dist/ .js is missing or older, or undefined. */
function staleSource(dir: string): string | undefined {
  for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      const stale = staleSource(rel);
      if (stale !== undefined) return stale;
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
      const js = path.join(ROOT, 'dist', rel.replace(/\.ts$/, '.js'));
      if (!fs.existsSync(js) || fs.statSync(js).mtimeMs < fs.statSync(path.join(ROOT, rel)).mtimeMs) return rel;
    }
  }
  return undefined;
}

/**
 * Brings dist/ up to date with lib/ and benchmarks/cli/ (tsc -p tsconfig.build.json) when a source,
 * in any subfolder, is newer than its compiled file. For the tests that load the compiled package in
 * child processes and workers: without it they would run the dist/ of an earlier edit.
 */
export function ensureCompiled(): void {
  if (SOURCE_DIRS.every((dir) => staleSource(dir) === undefined)) return;
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], {
    cwd: ROOT,
    stdio: 'pipe',
  });
}
