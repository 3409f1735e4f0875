#!/usr/bin/env node
'use strict';
/**
 * The mhsa-bench command (package.json "bin"; also `npm run bench`).
 *
 * Runs the compiled CLI, dist/benchmarks/cli/cli.js (built with lib/ by `npm install`,
 * `npm run build` or `npx tsc -p tsconfig.build.json`). When that is missing or
 * older than a source file in benchmarks/cli/ or lib/ (a checkout being edited), it runs
 * the TypeScript sources through ts-node instead, if ts-node is installed. An installed
 * package (no tsconfig.json: npm ships lib/*.ts, and unpacks them after dist/, so
 * they always look newer; it ships no benchmarks/cli/*.ts) runs dist/ as it is.
 */
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..', '..', '..');
const compiled = path.join(root, 'dist', 'benchmarks', 'cli', 'cli.js');

function mtime(file) {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return -1;
  }
}

/** A .ts file under dir (recursively, not bin/) newer than its compiled .js. */
function staleSource(dir) {
  let entries;
  try {
    entries = fs.readdirSync(path.join(root, dir), { withFileTypes: true });
  } catch {
    return null;
  }
  for (const e of entries) {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name === 'bin') continue;
      const s = staleSource(rel);
      if (s) return s;
    } else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) {
      const js = path.join(root, 'dist', rel.replace(/\.ts$/, '.js'));
      if (mtime(path.join(root, rel)) > mtime(js)) return rel;
    }
  }
  return null;
}

function hasTsNode() {
  try {
    require.resolve('ts-node', { paths: [root] });
    return true;
  } catch {
    return false;
  }
}

// --backend wasm: lib/ picks its addon when it first loads, so the choice is made here, before it does.
const backendArg = process.argv.findIndex((a) => a === '--backend' || a.startsWith('--backend='));
if (backendArg >= 0) {
  const a = process.argv[backendArg];
  const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : process.argv[backendArg + 1];
  if (v === 'wasm') process.env.MHSA_ADDON = 'wasm';
}

const checkout = fs.existsSync(path.join(root, 'tsconfig.json'));
const stale = !fs.existsSync(compiled)
  ? 'dist/benchmarks/cli/cli.js'
  : checkout
    ? staleSource(path.join('benchmarks', 'cli')) || staleSource('lib')
    : null;
let cli;
if (stale && hasTsNode()) {
  require(require.resolve('ts-node', { paths: [root] })).register({
    project: path.join(root, 'tsconfig.json'),
    transpileOnly: true,
  });
  cli = require(path.join(root, 'benchmarks', 'cli', 'cli.ts'));
} else if (fs.existsSync(compiled)) {
  if (stale) process.stderr.write(`mhsa-bench: warning: dist/ is older than ${stale}; run \`npm run build\`\n`);
  cli = require(compiled);
} else {
  process.stderr.write('mhsa-bench: dist/benchmarks/cli/cli.js is missing: run `npm run build` (or `npx tsc -p tsconfig.build.json`)\n');
  process.exit(1);
}
cli.run(process.argv.slice(2));
