'use strict';
/**
 * Run as `node --expose-gc gc-child.js <package root> <seed> <count>` (by
 * test/concurrency.test.ts). Starts <count> async ops of the mixed kinds whose
 * inputs are fresh copies referenced by nothing but the call, collects garbage
 * over and over (and churns the heap) while they are in flight, then checks
 * every result bit for bit against the one computed synchronously up front.
 * Prints one JSON line: { ops, mismatches, gcCalls, gcWhileInFlight }.
 */
const [root, seedArg, countArg] = process.argv.slice(2);
const m = require(root);
const mix = require('./op-mix');

if (typeof global.gc !== 'function') throw new Error('gc-child.js needs node --expose-gc');
const seed = Number(seedArg);
const count = Number(countArg);

async function main() {
  const ops = mix.makeOps(seed, count);
  const block = mix.makeBlock(m, mix.blockWeights(seed));
  const expected = ops.map((op) => mix.callOp(m, block, op, 'sync'));

  // callOp copies each op's inputs inside itself: only the pending call can reach them.
  const promises = ops.map((op) => mix.callOp(m, block, op, 'async'));
  let settled = false;
  const all = Promise.all(promises).finally(() => {
    settled = true;
  });

  let gcCalls = 0;
  let gcWhileInFlight = 0;
  while (!settled) {
    const busy = m.info().inFlight + m.info().queued > 0;
    global.gc();
    gcCalls++;
    if (busy) gcWhileInFlight++;
    const junk = [];
    for (let i = 0; i < 8; i++) junk.push(new Float32Array(16 * 1024).fill(i));
    await new Promise((resolve) => setImmediate(resolve));
  }
  global.gc();

  const results = await all;
  const mismatches = [];
  results.forEach((r, i) => {
    if (!mix.sameBits(r.output, expected[i].output) || !mix.sameBits(r.weights, expected[i].weights)) {
      mismatches.push({ index: i, kind: ops[i].kind });
    }
  });
  process.stdout.write(`${JSON.stringify({ ops: results.length, mismatches, gcCalls, gcWhileInFlight })}\n`);
}

main().catch((e) => {
  process.stderr.write(`${(e && e.stack) || e}\n`);
  process.exit(1);
});
