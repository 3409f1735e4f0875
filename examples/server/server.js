'use strict';
/**
 * An HTTP service around mhsa, on node:http alone.
 *
 *   POST /attention  scaled dot-product attention of q, k, v (attentionAsync)
 *   POST /block      one MultiHeadSelfAttention built at startup (forwardAsync)
 *   GET  /health     liveness
 *   GET  /stats      memory, event-loop delay percentiles, request counters
 *
 * Bodies are JSON or application/octet-stream (raw little-endian float32,
 * shapes in X-*-Shape headers, options in the query string); the reply uses
 * the request's type unless Accept names the other one. See docs/api.md,
 * "Serving over HTTP", for the framing, the limits and the error codes.
 *
 * Run: npm run example:server   (environment: PORT, HOST, MHSA_MAX_BODY_BYTES,
 * MHSA_MAX_IN_FLIGHT, MHSA_WEIGHTS, MHSA_WEIGHTS_PREFIX, MHSA_DIM, MHSA_HEADS,
 * MHSA_DIM_HEAD, MHSA_SEED)
 */
const http = require('node:http');
const os = require('node:os');
const { createHistogram, monitorEventLoopDelay, performance } = require('node:perf_hooks');
const { attentionAsync, info, loadSafetensors, MultiHeadSelfAttention } = require('mhsa');

const MiB = 1024 * 1024;
const DEFAULT_MAX_BODY_BYTES = 16 * MiB;
const DEFAULT_MAX_IN_FLIGHT = 32;
const DEFAULT_BLOCK = { dim: 768, heads: 12, seed: 1 }; // dimHead: dim / heads = 64
const ATTENTION_OPTIONS = ['causal', 'scale', 'layout', 'heads', 'kvHeads'];
const BLOCK_OPTIONS = ['causal'];

/** An error that becomes a response with this status and `{ error: message }`. */
class HttpError extends Error {
  constructor(status, message, headers = {}) {
    super(message);
    this.status = status;
    this.headers = headers;
  }
}

// ---------------------------------------------------------------------------
// The block's weights

/** xorshift32 mapped to [0, 1): deterministic weights without a checkpoint. */
function xorshift(seed) {
  let s = seed >>> 0 || 0x6d2b79f5;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
}

/** n float32 values uniform in [center − halfWidth, center + halfWidth), drawn from next(). */
function uniform(next, n, halfWidth, center = 0) {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = center + (next() * 2 - 1) * halfWidth;
  return out;
}

/**
 * The constructor config of a block shaped like seed 004's ViT attention
 * (LayerNorm, QKV projection without bias, output projection with bias) with
 * pseudo-random weights in PyTorch layout, fan-in scaled so activations stay
 * near unit size; the same for the same { dim, heads, dimHead, seed }.
 */
function randomBlockConfig({ dim, heads, dimHead, seed }) {
  const inner = heads * dimHead;
  const next = xorshift(seed);
  const qkvWeight = uniform(next, 3 * inner * dim, 1 / Math.sqrt(dim));
  const outWeight = uniform(next, dim * inner, 1 / Math.sqrt(inner));
  const outBias = uniform(next, dim, 0.02);
  const normWeight = uniform(next, dim, 0.1, 1);
  const normBias = uniform(next, dim, 0.1);
  return {
    dim,
    heads,
    dimHead,
    weights: {
      qkvWeight: { data: qkvWeight, shape: [3 * inner, dim] },
      outWeight: { data: outWeight, shape: [dim, inner] },
      outBias: { data: outBias, shape: [dim] },
    },
    norm: { weight: { data: normWeight, shape: [dim] }, bias: { data: normBias, shape: [dim] } },
  };
}

/**
 * The block to serve and where its weights came from: options.block as given,
 * else one from options.weights (a .safetensors path), else pseudo-random weights.
 */
function buildBlock(options) {
  if (options.block) return { block: options.block, source: { given: true } };
  const heads = options.heads ?? DEFAULT_BLOCK.heads;
  if (options.weights) {
    const { tensors } = loadSafetensors(options.weights);
    let block;
    try {
      block = MultiHeadSelfAttention.fromTorch(tensors, { heads, prefix: options.weightsPrefix });
    } catch (e) {
      // fromTorch's advice names its own option; here the prefix comes from the environment.
      e.message = e.message.replace('(pass one as options.prefix)', '(set one with MHSA_WEIGHTS_PREFIX, or the weightsPrefix option)');
      throw e;
    }
    return { block, source: { file: options.weights, prefix: options.weightsPrefix ?? '' } };
  }
  const dim = options.dim ?? DEFAULT_BLOCK.dim;
  const dimHead = options.dimHead ?? dim / heads;
  const seed = options.seed ?? DEFAULT_BLOCK.seed;
  return { block: new MultiHeadSelfAttention(randomBlockConfig({ dim, heads, dimHead, seed })), source: { seed } };
}

// ---------------------------------------------------------------------------
// Requests

/** 'json' or 'binary' from Content-Type, else 415. */
function requestKind(req) {
  const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'application/json') return 'json';
  if (type === 'application/octet-stream') return 'binary';
  throw new HttpError(
    415,
    `unsupported Content-Type ${type ? `'${type}'` : '(none)'}: send application/json or application/octet-stream`,
  );
}

/** The reply's kind: the one Accept names when it names only one of the two, else the request's. */
function replyKind(req, requestType) {
  const accept = (req.headers.accept ?? '').toLowerCase();
  const json = accept.includes('application/json');
  const binary = accept.includes('application/octet-stream');
  if (json && !binary) return 'json';
  if (binary && !json) return 'binary';
  return requestType;
}

/** True while the client may still be sending a body nobody will read (then the connection must close). */
function hasUnreadBody(req) {
  if (req.complete) return false;
  return Number(req.headers['content-length']) > 0 || req.headers['transfer-encoding'] !== undefined;
}

/** A 413 for a declared Content-Length over the limit, before any byte of the body is read. */
function refuseOversized(req, limit) {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    throw new HttpError(413, `the body is ${declared} bytes; the limit is ${limit}`);
  }
}

/**
 * The whole body in one Buffer that owns its ArrayBuffer (offset 0, so
 * float32 views over it are aligned). A streamed body is a 413 as soon as it
 * passes `limit` bytes; the rest is discarded, never kept.
 */
function readBody(req, limit) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    const finish = (settle, value) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      settle(value);
    };
    const onData = (chunk) => {
      size += chunk.length;
      if (size > limit) {
        req.resume(); // keep draining into nothing until the reply closes the connection
        finish(reject, new HttpError(413, `the body is more than ${limit} bytes (the limit)`));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      const body = Buffer.allocUnsafeSlow(size);
      let at = 0;
      for (const chunk of chunks) {
        chunk.copy(body, at);
        at += chunk.length;
      }
      finish(resolve, body);
    };
    const onError = (err) => finish(reject, new HttpError(400, `reading the body failed: ${err.message}`));
    const onClose = () => finish(reject, new HttpError(400, 'the client closed the connection before the body ended'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

function parseJsonObject(body) {
  let value;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new HttpError(400, `malformed JSON: ${err.message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpError(400, 'the JSON body must be an object');
  }
  return value;
}

function checkKeys(object, allowed, where) {
  for (const key of Object.keys(object)) {
    if (!allowed.includes(key)) throw new HttpError(400, `unknown field "${key}" in ${where}; expected ${allowed.join(', ')}`);
  }
}

/** A tensor from JSON `{ shape, data }`; the shape itself is left for mhsa to judge (its errors name it). */
function jsonTensor(body, name) {
  const value = body[name];
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpError(400, `${name} must be an object {"shape": [...], "data": [...]}, received ${JSON.stringify(value) ?? 'nothing'}`);
  }
  checkKeys(value, ['shape', 'data'], name);
  if (!Array.isArray(value.data)) throw new HttpError(400, `${name}.data must be an array of numbers`);
  const data = new Float32Array(value.data.length);
  for (let i = 0; i < data.length; i++) {
    const x = value.data[i];
    if (typeof x !== 'number') throw new HttpError(400, `${name}.data[${i}] must be a number, received ${JSON.stringify(x)}`);
    data[i] = x;
    if (!Number.isFinite(data[i])) throw new HttpError(400, `${name}.data[${i}] = ${x} does not fit in float32`);
  }
  return { data, shape: value.shape };
}

/** Dims from a header such as `X-Q-Shape: 1,12,197,64`. */
function shapeHeader(req, header) {
  const raw = req.headers[header.toLowerCase()];
  if (raw === undefined) {
    throw new HttpError(400, `the ${header} header is required with application/octet-stream (comma-separated dims, e.g. 1,12,197,64)`);
  }
  return raw.split(',').map((part, i) => {
    const text = part.trim();
    const dim = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(dim)) {
      throw new HttpError(400, `${header}[${i}] must be a non-negative integer, received '${text}'`);
    }
    return dim;
  });
}

function elementCount(shape) {
  return shape.reduce((n, d) => n * d, 1);
}

/** Options from the query string, typed as the JSON body would carry them; mhsa checks their values. */
function queryOptions(query, allowed) {
  const options = {};
  for (const [key, text] of query) {
    if (!allowed.includes(key)) throw new HttpError(400, `unknown query parameter "${key}"; expected ${allowed.join(', ')}`);
    if (key === 'layout') {
      options.layout = text;
    } else if (key === 'causal') {
      if (text === 'true' || text === '1') options.causal = true;
      else if (text === 'false' || text === '0') options.causal = false;
      else throw new HttpError(400, `query parameter causal must be true, false, 1 or 0, received '${text}'`);
    } else {
      if (text.trim() === '') throw new HttpError(400, `query parameter ${key} must be a number, received ''`);
      options[key] = Number(text);
    }
  }
  return options;
}

/** Runs an mhsa call; its argument errors (TypeError, RangeError: matched by name, they may come from native code) are 400s. */
async function callMhsa(run) {
  try {
    return await run();
  } catch (err) {
    if (err && (err.name === 'TypeError' || err.name === 'RangeError')) throw new HttpError(400, err.message);
    throw err;
  }
}

// ---------------------------------------------------------------------------
// Responses

function sendJson(res, status, value, headers = {}) {
  const text = JSON.stringify(value);
  res.writeHead(status, {
    ...headers,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

function sendTensor(res, tensor, kind) {
  if (kind === 'json') {
    sendJson(res, 200, { shape: tensor.shape, data: Array.from(tensor.data) });
    return;
  }
  const bytes = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  res.writeHead(200, {
    'Content-Type': 'application/octet-stream',
    'Content-Length': bytes.length,
    'X-Shape': tensor.shape.join(','),
  });
  res.end(bytes);
}

/**
 * monitorEventLoopDelay records the time between its timer's runs, which
 * includes the timer's own interval: the delay is what exceeds that.
 */
const DELAY_RESOLUTION_MS = 2;

function delayMs(ns) {
  return Math.max(0, Math.round((ns / 1e6 - DELAY_RESOLUTION_MS) * 1000) / 1000);
}

/** count and p50/p99/p99.9/max in ms of a histogram of nanoseconds. */
function summarize(histogram) {
  const ms = (ns) => (histogram.count > 0 ? Math.round(ns / 1e3) / 1e3 : null);
  return {
    count: histogram.count,
    p50: ms(histogram.percentile(50)),
    p99: ms(histogram.percentile(99)),
    p999: ms(histogram.percentile(99.9)),
    max: ms(histogram.max),
  };
}

// ---------------------------------------------------------------------------
// The server

/**
 * Builds the service. Options (all optional): maxBodyBytes; maxInFlight (POST
 * requests being read or computed at once; more get 503); block (a
 * MultiHeadSelfAttention to serve), or weights (.safetensors path) with heads
 * and weightsPrefix, or dim, heads, dimHead, seed for pseudo-random weights;
 * log (a function for unexpected errors, default console.error).
 *
 * Returns { server, block, maxBodyBytes, maxInFlight, listen(port, host) →
 * Promise<port>, close(graceMs) → Promise, stats() }.
 */
function createServer(options = {}) {
  if (os.endianness() !== 'LE') throw new Error('this example frames float32 as little-endian and needs a little-endian host');
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 1) {
    throw new RangeError(`maxBodyBytes must be a positive integer, received ${maxBodyBytes}`);
  }
  const maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
  if (!Number.isSafeInteger(maxInFlight) || maxInFlight < 1) {
    throw new RangeError(`maxInFlight must be a positive integer, received ${maxInFlight}`);
  }
  const log = options.log ?? ((...args) => console.error(...args));
  const { block, source } = buildBlock(options);
  const startedAt = Date.now();
  const eventLoopDelay = monitorEventLoopDelay({ resolution: DELAY_RESOLUTION_MS });
  eventLoopDelay.enable();
  let delaySince = Date.now();
  let utilizationSince = performance.eventLoopUtilization();
  const counters = { total: 0, inFlight: 0, computing: 0, byStatus: {} };
  // Per POST route: ns from the request's headers to its reply handed to the socket (2xx only).
  const serviceTime = { '/attention': createHistogram(), '/block': createHistogram() };
  let closing = false;

  async function attentionRoute(req, res, query) {
    const kind = requestKind(req);
    let q, k, v, opts;
    if (kind === 'binary') {
      opts = queryOptions(query, ATTENTION_OPTIONS);
      const shapes = ['X-Q-Shape', 'X-K-Shape', 'X-V-Shape'].map((h) => shapeHeader(req, h));
      const body = await readBody(req, maxBodyBytes);
      const counts = shapes.map(elementCount);
      const needed = 4 * (counts[0] + counts[1] + counts[2]);
      if (body.length !== needed) {
        throw new HttpError(
          400,
          `the body has ${body.length} bytes; the shapes need 4·(${counts.join(' + ')}) = ${needed} (float32 q, then k, then v)`,
        );
      }
      const view = (at, i) => ({ data: new Float32Array(body.buffer, body.byteOffset + 4 * at, counts[i]), shape: shapes[i] });
      [q, k, v] = [view(0, 0), view(counts[0], 1), view(counts[0] + counts[1], 2)];
    } else {
      const body = parseJsonObject(await readBody(req, maxBodyBytes));
      checkKeys(body, ['q', 'k', 'v', ...ATTENTION_OPTIONS], 'the body');
      [q, k, v] = ['q', 'k', 'v'].map((name) => jsonTensor(body, name));
      opts = {};
      for (const key of ATTENTION_OPTIONS) opts[key] = body[key];
    }
    const out = await callMhsa(() => attentionAsync(q, k, v, opts));
    sendTensor(res, out, replyKind(req, kind));
  }

  async function blockRoute(req, res, query) {
    const kind = requestKind(req);
    let x, opts;
    if (kind === 'binary') {
      opts = queryOptions(query, BLOCK_OPTIONS);
      const shape = shapeHeader(req, 'X-Shape');
      const body = await readBody(req, maxBodyBytes);
      const count = elementCount(shape);
      if (body.length !== 4 * count) {
        throw new HttpError(400, `the body has ${body.length} bytes; X-Shape [${shape.join(', ')}] needs 4·${count} = ${4 * count}`);
      }
      x = { data: new Float32Array(body.buffer, body.byteOffset, count), shape };
    } else {
      const body = parseJsonObject(await readBody(req, maxBodyBytes));
      checkKeys(body, ['x', ...BLOCK_OPTIONS], 'the body');
      x = jsonTensor(body, 'x');
      opts = { causal: body.causal };
    }
    const out = await callMhsa(() => block.forwardAsync(x, opts));
    sendTensor(res, out, replyKind(req, kind));
  }

  function stats() {
    const memory = process.memoryUsage();
    const cpu = process.cpuUsage();
    const sampled = eventLoopDelay.count > 0;
    const pct = (p) => (sampled ? delayMs(eventLoopDelay.percentile(p)) : null);
    return {
      uptimeSeconds: (Date.now() - startedAt) / 1000,
      requests: {
        total: counters.total,
        inFlight: counters.inFlight,
        computing: counters.computing,
        byStatus: { ...counters.byStatus },
        errors: Object.entries(counters.byStatus).reduce((n, [s, c]) => (Number(s) >= 400 ? n + c : n), 0),
      },
      memory: { rss: memory.rss, heapUsed: memory.heapUsed, external: memory.external, arrayBuffers: memory.arrayBuffers },
      cpuSeconds: { user: cpu.user / 1e6, system: cpu.system / 1e6 },
      eventLoopDelayMs: {
        windowSeconds: (Date.now() - delaySince) / 1000,
        samples: eventLoopDelay.count,
        min: sampled ? delayMs(eventLoopDelay.min) : null,
        mean: sampled ? delayMs(eventLoopDelay.mean) : null,
        p50: pct(50),
        p90: pct(90),
        p99: pct(99),
        p999: pct(99.9),
        max: sampled ? delayMs(eventLoopDelay.max) : null,
      },
      // the share of the window the JS thread was busy (not waiting for I/O or native work)
      eventLoopUtilization: performance.eventLoopUtilization(utilizationSince).utilization,
      serviceTimeMs: Object.fromEntries(Object.entries(serviceTime).map(([route, h]) => [route, summarize(h)])),
      block: { description: String(block), dim: block.dim, heads: block.heads, dimHead: block.dimHead, weights: source },
      mhsa: info(),
    };
  }

  const routes = {
    '/attention': { POST: attentionRoute },
    '/block': { POST: blockRoute },
    '/health': { GET: (req, res) => sendJson(res, 200, { status: closing ? 'closing' : 'ok' }) },
    '/stats': {
      // ?reset=1 starts a new window for the event-loop figures and service times once this reply is taken
      GET: (req, res, query) => {
        sendJson(res, 200, stats());
        if (query.get('reset') === '1') {
          eventLoopDelay.reset();
          for (const h of Object.values(serviceTime)) h.reset();
          delaySince = Date.now();
          utilizationSince = performance.eventLoopUtilization();
        }
      },
    },
  };

  function sendError(req, res, err) {
    let status = 500;
    let message = 'internal server error';
    let headers = {};
    if (err instanceof HttpError) {
      ({ status, message, headers } = err);
    } else {
      log(`mhsa server: ${req.method} ${req.url}:`, err);
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (hasUnreadBody(req)) headers = { ...headers, Connection: 'close' };
    sendJson(res, status, { error: message }, headers);
  }

  async function handle(req, res) {
    counters.total++;
    counters.inFlight++;
    res.once('close', () => counters.inFlight--);
    res.once('finish', () => {
      counters.byStatus[res.statusCode] = (counters.byStatus[res.statusCode] ?? 0) + 1;
    });
    if (closing) res.setHeader('Connection', 'close');
    try {
      const queryAt = req.url.indexOf('?');
      const path = queryAt < 0 ? req.url : req.url.slice(0, queryAt);
      const query = new URLSearchParams(queryAt < 0 ? '' : req.url.slice(queryAt + 1));
      const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
      if (!route) throw new HttpError(404, `no route ${req.method} ${path}`);
      const handler = route[req.method === 'HEAD' ? 'GET' : req.method];
      if (!handler) {
        const allowed = Object.keys(route).join(', ');
        throw new HttpError(405, `${path} takes ${allowed}, received ${req.method}`, { Allow: allowed });
      }
      refuseOversized(req, maxBodyBytes);
      if (req.method !== 'POST') {
        await handler(req, res, query);
        return;
      }
      // Each one holds its body, its output and (for /block) a workspace the block keeps afterwards;
      // counted until its handler ends, even if the client has gone.
      if (counters.computing >= maxInFlight) {
        throw new HttpError(503, `${maxInFlight} requests are already being computed; retry later`, { 'Retry-After': '1' });
      }
      counters.computing++;
      const started = process.hrtime.bigint();
      res.once('finish', () => {
        if (res.statusCode < 300) serviceTime[path].record(process.hrtime.bigint() - started);
      });
      try {
        await handler(req, res, query);
      } finally {
        counters.computing--;
      }
    } catch (err) {
      sendError(req, res, err);
    }
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err) => {
      log('mhsa server: failed to send an error reply:', err);
      res.destroy();
    });
  });

  function listen(port = 0, host = '127.0.0.1') {
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve(server.address().port);
      });
    });
  }

  /** Stops accepting, lets requests in flight finish (at most graceMs), then closes every connection. */
  function close(graceMs = 10000) {
    closing = true;
    return new Promise((resolve) => {
      const done = () => {
        eventLoopDelay.disable();
        resolve();
      };
      if (!server.listening) {
        done();
        return;
      }
      const force = setTimeout(() => server.closeAllConnections(), graceMs);
      force.unref();
      server.close(() => {
        clearTimeout(force);
        done();
      });
      server.closeIdleConnections();
    });
  }

  return { server, block, maxBodyBytes, maxInFlight, listen, close, stats };
}

// ---------------------------------------------------------------------------
// Command line

/** An optional positive integer from the environment. */
function envInteger(env, name) {
  const text = env[name];
  if (text === undefined || text === '') return undefined;
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value)) {
    throw new RangeError(`${name} must be a non-negative integer, received '${text}'`);
  }
  return value;
}

function optionsFromEnv(env) {
  return {
    port: envInteger(env, 'PORT') ?? 3000,
    host: env.HOST || '127.0.0.1',
    maxBodyBytes: envInteger(env, 'MHSA_MAX_BODY_BYTES'),
    maxInFlight: envInteger(env, 'MHSA_MAX_IN_FLIGHT'),
    weights: env.MHSA_WEIGHTS || undefined,
    weightsPrefix: env.MHSA_WEIGHTS_PREFIX || undefined,
    dim: envInteger(env, 'MHSA_DIM'),
    heads: envInteger(env, 'MHSA_HEADS'),
    dimHead: envInteger(env, 'MHSA_DIM_HEAD'),
    seed: envInteger(env, 'MHSA_SEED'),
  };
}

async function main() {
  const options = optionsFromEnv(process.env);
  const app = createServer(options);
  const port = await app.listen(options.port, options.host);
  const { isa, threads } = info();
  console.log(
    `mhsa server listening on http://${options.host}:${port} ` +
      `(${app.block}, ${isa}, ${threads} threads, body limit ${app.maxBodyBytes} bytes, ${app.maxInFlight} requests in flight)`,
  );
  let stopping = false;
  const stop = (signal) => {
    if (stopping) {
      console.error(`${signal} again: exiting without waiting`);
      process.exit(1);
    }
    stopping = true;
    console.log(`${signal}: closing, waiting for requests in flight`);
    app.close().then(() => {
      console.log('closed');
      process.exitCode = 0;
    });
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

if (require.main === module) {
  main().catch((err) => {
    console.error(`mhsa server: ${err.message}`);
    process.exit(1);
  });
}

module.exports = { createServer, randomBlockConfig, xorshift, uniform, HttpError };
