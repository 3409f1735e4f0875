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

  let gcCalls = 0;
  let gcWhileInFlight = 0;
  const collect = async () => {
    const busy = m.info().inFlight + m.info().queued > 0;
    global.gc();
    gcCalls++;
    if (busy) gcWhileInFlight++;
    const junk = [];
    for (let i = 0; i < 8; i++) junk.push(new Float32Array(16 * 1024).fill(i));
    await new Promise((resolve) => setImmediate(resolve));
  };

  // callOp copies each op's inputs inside itself: only the pending call can reach them.
  // The ops start in ten waves, each followed at once by a collection, so at
  // least ten collections meet ops in flight however fast the ops run (with
  // every op started at once, a fast host finished them within 4 collections).
  const promises = [];
  const waves = 10;
  for (let w = 0; w < waves; w++) {
    const from = Math.floor((w * ops.length) / waves), to = Math.floor(((w + 1) * ops.length) / waves);
    for (const op of ops.slice(from, to)) promises.push(mix.callOp(m, block, op, 'async'));
    await collect();
  }
  let settled = false;
  const all = Promise.all(promises).finally(() => {
    settled = true;
  });
  while (!settled) await collect();
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
