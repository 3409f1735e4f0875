#!/usr/bin/env node
// npm run check: the fast loop while editing. The typecheck of lib/, test/ and
// benchmarks/, then the jest files of the ops, the block and decoder, the
// cache, bad inputs, async ops, the argument layouts and the PyTorch fixtures
// against the current build (about 2 minutes on 2 cores). npm test runs all
// of it and the slower files: soak, concurrency, workers, packaging, the CLI.
//   node scripts/check.js [extra jest arguments]
'use strict';

const { spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const FAST_TESTS = [
  'matmul', 'prepack', 'int8', 'bf16', 'softmax', 'layernorm', 'rope', 'attention', 'kv-cache', 'kv-cache-bf16',
  'block', 'block-plan', 'block-decoder', 'block-decoder-ops', 'bad-inputs', 'async', 'descriptor-layouts', 'safetensors', 'fixtures',
].map((t) => `test/${t}.test.ts`);

function run(args) {
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

run([path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json', '--noEmit']);
run([path.join(root, 'node_modules', 'jest', 'bin', 'jest.js'), ...FAST_TESTS, ...process.argv.slice(2)]);
