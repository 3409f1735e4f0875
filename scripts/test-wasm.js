#!/usr/bin/env node
// npm run test:wasm: the jest suites for ops, the block, the decoder, bad inputs, async ops and the
// PyTorch fixtures, against the WebAssembly addon (build-wasm/, from npm run build:wasm).
//   node scripts/test-wasm.js [extra jest arguments]
'use strict';

const { spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
/** Exported for the release rehearsal, which runs the same files against the installed package. */
const WASM_TESTS = [
  'matmul', 'prepack', 'int8', 'softmax', 'layernorm', 'rope', 'attention', 'kv-cache', 'safetensors',
  'block', 'block-decoder', 'block-decoder-ops', 'bad-inputs', 'async', 'fixtures',
].map((t) => `test/${t}.test.ts`);

if (require.main === module) {
  const jest = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');
  const r = spawnSync(process.execPath, [jest, ...WASM_TESTS, ...process.argv.slice(2)], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, MHSA_ADDON: 'wasm' },
  });
  process.exit(r.status ?? 1);
}

module.exports = { WASM_TESTS };
