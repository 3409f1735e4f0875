'use strict';
/**
 * A bounded load test of examples/server/server.js: starts it as a child
 * process on port 0, checks one /attention and one /block reply against a
 * float64 reference, warms up, then drives POST /attention (B1 H12 N197 d64,
 * binary) and POST /block (197 × dim, binary) with autocannon, one after the
 * other, reading the server's /stats around each run. Prints a markdown
 * summary; exits 1 on a wrong result, any error or non-2xx reply, or a server
 * that does not shut down cleanly on SIGTERM.
 *
 * Run: npm run loadtest -- [--duration S] [--connections N] [--json file]
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const autocannon = require('autocannon');
const { randomBlockConfig, uniform, xorshift } = require('./server.js');

const SERVER = path.join(__dirname, 'server.js');
const ATTENTION_SHAPE = [1, 12, 197, 64]; // ViT-B/16: batch 1, 12 heads, 197 tokens, head dim 64
const BLOCK_TOKENS = 197;
const USAGE = 'usage: node examples/server/loadtest.js [--duration S (10)] [--connections N (8)] [--json file]';

function parseArgs(argv) {
  const options = { duration: 10, connections: 8, json: undefined };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === '--help' || flag === '-h') {
      console.log(USAGE);
      process.exit(0);
    }
    if (i + 1 >= argv.length) throw new Error(`${flag} needs a value\n${USAGE}`);
    const text = argv[++i];
    if (flag === '--duration') {
      options.duration = Number(text);
      if (!(options.duration > 0) || !Number.isFinite(options.duration)) throw new Error(`--duration must be a positive number of seconds, received '${text}'`);
    } else if (flag === '--connections') {
      options.connections = Number(text);
      if (!Number.isSafeInteger(options.connections) || options.connections < 1) {
        throw new Error(`--connections must be a positive integer, received '${text}'`);
      }
    } else if (flag === '--json') {
      options.json = text;
    } else {
      throw new Error(`unknown argument '${flag}'\n${USAGE}`);
    }
  }
  return options;
}

// ---------------------------------------------------------------------------
// The server process

/** Starts server.js on port 0; resolves with { child, port } once it prints where it listens. */
function startServer() {
  const child = spawn(process.execPath, [SERVER], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr.on('data', (chunk) => process.stderr.write(`[server] ${chunk}`));
  return new Promise((resolve, reject) => {
    let output = '';
    let listening = false;
    const timer = setTimeout(() => fail(new Error('the server did not print its port within 60 s')), 60000);
    const fail = (err) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(err);
    };
    const onEarlyExit = (code, signal) => fail(new Error(`the server exited (code ${code}, signal ${signal}) before listening:\n${output}`));
    child.once('exit', onEarlyExit);
    child.stdout.on('data', (chunk) => {
      process.stderr.write(`[server] ${chunk}`);
      if (listening) return;
      output += chunk;
      const match = /listening on http:\/\/\S+:(\d+)/.exec(output);
      if (match) {
        listening = true;
        clearTimeout(timer);
        child.off('exit', onEarlyExit);
        resolve({ child, port: Number(match[1]) });
      }
    });
  });
}

/** SIGTERM, then the exit code (SIGKILL and null after 15 s). */
function stopServer(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve(null);
    }, 15000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    child.kill('SIGTERM');
  });
}

async function getStats(base, reset) {
  const res = await fetch(`${base}/stats${reset ? '?reset=1' : ''}`);
  if (!res.ok) throw new Error(`GET /stats: ${res.status} ${await res.text()}`);
  return res.json();
}

// ---------------------------------------------------------------------------
// Correctness

/** The benchmarks' float64 references (compiled into dist/ with the library). */
function loadReferences() {
  const file = path.join(__dirname, '..', '..', 'dist', 'benchmarks', 'cli', 'reference.js');
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: compile it with \`npx tsc -p tsconfig.build.json\``);
  return require(file);
}

/** POSTs one body and checks the reply against a float64 reference; throws with the details when it is wrong. */
async function checkReply(base, endpoint, request, expectShape, problem, inputs) {
  const { buildReference, relativeError, TOLERANCE } = loadReferences();
  const res = await fetch(`${base}${endpoint}`, { method: 'POST', headers: request.headers, body: request.body });
  if (res.status !== 200) throw new Error(`correctness check: POST ${endpoint} returned ${res.status}: ${await res.text()}`);
  const shape = res.headers.get('x-shape');
  if (shape !== expectShape.join(',')) throw new Error(`correctness check: POST ${endpoint} returned shape ${shape}, expected ${expectShape}`);
  const got = new Float32Array(await res.arrayBuffer());
  const expectedLength = expectShape.reduce((a, b) => a * b, 1);
  const err = relativeError(got, buildReference(problem, { kind: problem.kind, ...inputs }, problem.kind === 'attention'), expectedLength);
  if (!(err <= TOLERANCE)) {
    throw new Error(`correctness check: POST ${endpoint} is WRONG: relative error ${err} (tolerance ${TOLERANCE}, ${got.length} floats)`);
  }
  return err;
}

// ---------------------------------------------------------------------------
// Load

function bytesOf(...arrays) {
  return Buffer.concat(arrays.map((a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)));
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** One autocannon run; latencies are taken from every response (autocannon's own histogram rounds to whole ms). */
async function drive(base, endpoint, request, { duration, connections, amount }) {
  const latencies = [];
  const run = autocannon({
    url: `${base}${endpoint}`,
    method: 'POST',
    headers: request.headers,
    body: request.body,
    connections,
    ...(amount ? { amount } : { duration }),
    timeout: 30,
  });
  run.on('response', (client, status, bytes, latency) => latencies.push(latency));
  const result = await run;
  latencies.sort((a, b) => a - b);
  return {
    requests: result.requests.total,
    seconds: result.duration,
    perSecond: result.requests.total / result.duration,
    latencyMs: {
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      p999: percentile(latencies, 99.9),
      max: latencies.length ? latencies[latencies.length - 1] : null,
    },
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    statusCodes: result.statusCodeStats,
  };
}

const mb = (bytes) => (bytes / 1e6).toFixed(1);
const ms = (value) => (value === null ? '–' : value.toFixed(2));

function markdown(report) {
  const lines = [
    `mhsa ${report.mhsa.version} (${report.mhsa.isa}, ${report.mhsa.threads} threads), Node ${report.node}, ` +
      `${report.cpus} × ${report.cpuModel}; ${report.options.connections} connections, ${report.options.duration} s per endpoint`,
    '',
    '| endpoint | body | req/s | p50 ms | p99 ms | p99.9 ms | errors | non-2xx | server RSS before → after (MB) | event-loop delay p99 / max (ms) |',
    '|:---|:---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const p of report.phases) {
    lines.push(
      `| POST ${p.endpoint} | ${p.body} | ${p.perSecond.toFixed(1)} | ${ms(p.latencyMs.p50)} | ${ms(p.latencyMs.p99)} | ` +
        `${ms(p.latencyMs.p999)} | ${p.errors + p.timeouts} | ${p.non2xx} | ` +
        `${mb(p.rssBefore)} → ${mb(p.rssAfter)} | ${ms(p.eventLoopDelayMs.p99)} / ${ms(p.eventLoopDelayMs.max)} |`,
    );
  }
  lines.push(
    '',
    '| endpoint | requests | time in the server p50 / p99 ms | server CPU ms / request | server event-loop utilization | load generator CPU ms / request |',
    '|:---|---:|---:|---:|---:|---:|',
  );
  for (const p of report.phases) {
    lines.push(
      `| POST ${p.endpoint} | ${p.requests} | ${ms(p.serverTimeMs.p50)} / ${ms(p.serverTimeMs.p99)} | ${p.serverCpuMsPerRequest.toFixed(2)} | ${(100 * p.serverEventLoopUtilization).toFixed(0)} % | ` +
        `${p.clientCpuMsPerRequest.toFixed(2)} |`,
    );
  }
  lines.push(
    '',
    `Server RSS: ${mb(report.rss.start)} MB after start-up, ${mb(report.rss.end)} MB at the end ` +
      `(external ${mb(report.external.end)} MB, arrayBuffers ${mb(report.arrayBuffers.end)} MB). ` +
      `Correctness before the load: /attention relative error ${report.correctness.attention.toExponential(2)}, ` +
      `/block ${report.correctness.block === null ? 'not checked (weights from a file)' : report.correctness.block.toExponential(2)} ` +
      `(float64 references). Shutdown on SIGTERM: exit code ${report.shutdownExitCode}.`,
  );
  return lines.join('\n');
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const { child, port } = await startServer();
  const base = `http://127.0.0.1:${port}`;
  let report;
  try {
    const first = await getStats(base, false);
    const blockInfo = first.block;

    const next = xorshift(20261122);
    const count = ATTENTION_SHAPE.reduce((a, b) => a * b, 1);
    const [q, k, v] = [0, 1, 2].map(() => uniform(next, count, 1));
    const shape = ATTENTION_SHAPE.join(',');
    const attentionRequest = {
      headers: { 'content-type': 'application/octet-stream', 'x-q-shape': shape, 'x-k-shape': shape, 'x-v-shape': shape },
      body: bytesOf(q, k, v),
    };
    const x = uniform(next, BLOCK_TOKENS * blockInfo.dim, 1);
    const blockRequest = {
      headers: { 'content-type': 'application/octet-stream', 'x-shape': `${BLOCK_TOKENS},${blockInfo.dim}` },
      body: bytesOf(x),
    };

    console.error('checking one reply of each endpoint against float64…');
    const [B, H, N, d] = ATTENTION_SHAPE;
    const attentionProblem = { kind: 'attention', B, H, Nq: N, Nkv: N, d, causal: false };
    const correctness = {
      attention: await checkReply(base, '/attention', attentionRequest, ATTENTION_SHAPE, attentionProblem, { q, k, v }),
      block: null,
    };
    if (blockInfo.weights.seed !== undefined) {
      const { dim, heads, dimHead } = blockInfo;
      const { weights, norm } = randomBlockConfig({ dim, heads, dimHead, seed: blockInfo.weights.seed });
      const blockInputs = {
        x,
        gamma: norm.weight.data,
        beta: norm.bias.data,
        wqkv: weights.qkvWeight.data,
        wo: weights.outWeight.data,
        bo: weights.outBias.data,
      };
      const blockProblem = { kind: 'block', B: 1, N: BLOCK_TOKENS, dim, heads, dimHead };
      correctness.block = await checkReply(base, '/block', blockRequest, [BLOCK_TOKENS, dim], blockProblem, blockInputs);
    }

    console.error('warming up…');
    const warm = { connections: options.connections, amount: 10 * options.connections };
    await drive(base, '/attention', attentionRequest, warm);
    await drive(base, '/block', blockRequest, warm);

    const phases = [];
    const runs = [
      ['/attention', attentionRequest, `B1 H12 N197 d64 q,k,v (${mb(attentionRequest.body.length)} MB)`],
      ['/block', blockRequest, `x [${BLOCK_TOKENS}, ${blockInfo.dim}] (${mb(blockRequest.body.length)} MB)`],
    ];
    for (const [endpoint, request, body] of runs) {
      console.error(`POST ${endpoint}: ${options.duration} s, ${options.connections} connections…`);
      const before = await getStats(base, true); // starts a new event-loop delay window
      const clientCpu = process.cpuUsage();
      const result = await drive(base, endpoint, request, options);
      const clientUsed = process.cpuUsage(clientCpu);
      const after = await getStats(base, false);
      const serverSeconds = (s) => s.cpuSeconds.user + s.cpuSeconds.system;
      phases.push({
        endpoint,
        body,
        ...result,
        serverErrors: after.requests.errors - before.requests.errors,
        serverCpuMsPerRequest: (1000 * (serverSeconds(after) - serverSeconds(before))) / result.requests,
        clientCpuMsPerRequest: (clientUsed.user + clientUsed.system) / 1000 / result.requests,
        serverEventLoopUtilization: after.eventLoopUtilization,
        serverTimeMs: after.serviceTimeMs[endpoint],
        rssBefore: before.memory.rss,
        rssAfter: after.memory.rss,
        eventLoopDelayMs: after.eventLoopDelayMs,
      });
    }
    const last = await getStats(base, false);
    report = {
      date: new Date().toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? 'unknown CPU',
      mhsa: first.mhsa,
      block: blockInfo,
      options,
      correctness,
      phases,
      rss: { start: first.memory.rss, end: last.memory.rss },
      external: { start: first.memory.external, end: last.memory.external },
      arrayBuffers: { start: first.memory.arrayBuffers, end: last.memory.arrayBuffers },
    };
  } finally {
    const code = await stopServer(child);
    if (report) report.shutdownExitCode = code;
  }

  console.log(markdown(report));
  if (options.json) fs.writeFileSync(options.json, JSON.stringify(report, null, 2) + '\n');
  const failures = report.phases
    .filter((p) => p.errors + p.timeouts + p.non2xx + p.serverErrors > 0)
    .map((p) => `POST ${p.endpoint}: ${p.errors} errors, ${p.timeouts} timeouts, ${p.non2xx} non-2xx, ${p.serverErrors} server-side errors`);
  if (report.shutdownExitCode !== 0) failures.push(`the server exited with code ${report.shutdownExitCode} on SIGTERM`);
  if (failures.length) {
    console.error(`FAILED:\n${failures.join('\n')}`);
    process.exitCode = 1;
  }
}

main().catch((err) => {
  console.error(`loadtest: ${err.message}`);
  process.exitCode = 1;
});
