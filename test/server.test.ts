/**
 * examples/server/server.js in-process on port 0 with a small block (dim 32,
 * 4 heads): /attention (JSON and binary) against the float64 reference,
 * /block against MultiHeadSelfAttention.forward run directly, and every error
 * reply (400, 404, 405, 413, 415, 500, 503), after which /health still answers.
 * Replay a failure with MHSA_TEST_SEED=<seed>.
 */
import * as http from 'node:http';
import { MultiHeadSelfAttention, type Tensor } from '../lib';
import { expectClose, pickSeed, randomFloat32, rngFor } from './helpers/random';
import { refAttention } from './helpers/reference';

interface App {
  server: http.Server;
  block: MultiHeadSelfAttention;
  maxBodyBytes: number;
  listen(port?: number, host?: string): Promise<number>;
  close(graceMs?: number): Promise<void>;
  stats(): { requests: { total: number; inFlight: number; computing: number; byStatus: Record<string, number>; errors: number } };
}

interface ServerModule {
  createServer(options: Record<string, unknown>): App;
}

// Plain CommonJS, as `node examples/server/server.js` runs it.
const { createServer } = require('../examples/server/server.js') as ServerModule;

const SEED = pickSeed();
const TOL = 1e-5;
const DIM = 32;
const HEADS = 4;
const LIMIT = 64 * 1024;

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

let app: App;
let port: number;
let block: MultiHeadSelfAttention;
const logged: unknown[][] = [];

/**
 * One request. `body` is sent whole, or a function sends it (or part of it)
 * itself; the request is dropped once the reply has arrived, and an error
 * after that (the server closed while a body was still going out) is ignored.
 */
function request(
  method: string,
  path: string,
  headers: Record<string, string | number>,
  body?: Buffer | string | ((req: http.ClientRequest) => void),
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
      });
    });
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    if (typeof body === 'function') body(req);
    else req.end(body);
  });
}

function postJson(path: string, value: unknown): Promise<Reply> {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return request('POST', path, { 'Content-Type': 'application/json' }, text);
}

function postBinary(path: string, shapes: Record<string, number[]>, parts: Float32Array[], accept?: string): Promise<Reply> {
  const headers: Record<string, string> = { 'Content-Type': 'application/octet-stream' };
  for (const [name, shape] of Object.entries(shapes)) headers[name] = shape.join(',');
  if (accept) headers.Accept = accept;
  const body = Buffer.concat(parts.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength)));
  return request('POST', path, headers, body);
}

function json(reply: Reply): Record<string, unknown> {
  expect(reply.headers['content-type']).toMatch(/^application\/json/);
  return JSON.parse(reply.body.toString('utf8')) as Record<string, unknown>;
}

/** The tensor of a 200 reply, JSON or binary. */
function tensorOf(reply: Reply): Tensor {
  if (reply.status !== 200) throw new Error(`status ${reply.status}: ${reply.body.toString('utf8')}`);
  if (reply.headers['content-type'] === 'application/octet-stream') {
    const bytes = new Uint8Array(reply.body); // a copy that owns its (aligned) buffer
    return { data: new Float32Array(bytes.buffer), shape: String(reply.headers['x-shape']).split(',').map(Number) };
  }
  const value = json(reply) as { shape: number[]; data: number[] };
  return { data: Float32Array.from(value.data), shape: value.shape };
}

/** Expects a 400 whose { error } contains every fragment. */
function expect400(reply: Reply, ...fragments: string[]): void {
  expect(reply.status).toBe(400);
  const { error } = json(reply) as { error: string };
  for (const f of fragments) expect(error).toContain(f);
}

function random(label: string, shape: number[]): Tensor {
  return { data: randomFloat32(rngFor(SEED, label), shape.reduce((a, b) => a * b, 1)), shape };
}

beforeAll(async () => {
  const rng = rngFor(SEED, 'weights');
  const inner = DIM;
  const scaled = (n: number, s: number) => randomFloat32(rng, n).map((x) => x * s);
  block = new MultiHeadSelfAttention({
    dim: DIM,
    heads: HEADS,
    weights: {
      qkvWeight: { data: scaled(3 * inner * DIM, 0.3), shape: [3 * inner, DIM] },
      qkvBias: { data: scaled(3 * inner, 0.1), shape: [3 * inner] },
      outWeight: { data: scaled(DIM * inner, 0.3), shape: [DIM, inner] },
      outBias: { data: scaled(DIM, 0.1), shape: [DIM] },
    },
    norm: { weight: { data: scaled(DIM, 1), shape: [DIM] } },
  });
  app = createServer({ block, maxBodyBytes: LIMIT, log: (...args: unknown[]) => logged.push(args) });
  port = await app.listen(0);
});

afterAll(async () => {
  await app?.close(1000);
});

describe(`examples/server: /attention (seed ${SEED})`, () => {
  test('JSON in, JSON out, with causal and scale, matches the float64 reference', async () => {
    const shape = [2, 3, 5, 4];
    const [q, k, v] = ['q', 'k', 'v'].map((n) => random(`json ${n}`, shape));
    const body = {
      q: { shape, data: Array.from(q.data) },
      k: { shape, data: Array.from(k.data) },
      v: { shape, data: Array.from(v.data) },
      causal: true,
      scale: 0.7,
    };
    const out = tensorOf(await postJson('/attention', body));
    const ref = refAttention(q.data, shape, k.data, shape, v.data, shape, { causal: true, scale: 0.7 }).output;
    expect(out.shape).toEqual(shape);
    expectClose(out.data, ref.data, TOL, { seed: SEED, label: 'JSON /attention', shape });
  });

  test('binary in, binary out (grouped-query 3-D inputs, heads in the query) matches the reference', async () => {
    const qShape = [2, 7, 4 * 8];
    const kvShape = [2, 9, 2 * 8];
    const q = random('bin q', qShape);
    const k = random('bin k', kvShape);
    const v = random('bin v', kvShape);
    const reply = await postBinary(
      '/attention?heads=4&kvHeads=2',
      { 'X-Q-Shape': qShape, 'X-K-Shape': kvShape, 'X-V-Shape': kvShape },
      [q.data, k.data, v.data],
    );
    expect(reply.headers['content-type']).toBe('application/octet-stream');
    const out = tensorOf(reply);
    const ref = refAttention(q.data, qShape, k.data, kvShape, v.data, kvShape, { heads: 4, kvHeads: 2 }).output;
    expect(out.shape).toEqual(qShape);
    expectClose(out.data, ref.data, TOL, { seed: SEED, label: 'binary /attention', shape: qShape });
  });

  test('binary in with Accept: application/json gives JSON (causal from the query)', async () => {
    const shape = [1, 2, 6, 3];
    const [q, k, v] = ['q', 'k', 'v'].map((n) => random(`accept ${n}`, shape));
    const s = { 'X-Q-Shape': shape, 'X-K-Shape': shape, 'X-V-Shape': shape };
    const reply = await postBinary('/attention?causal=1', s, [q.data, k.data, v.data], 'application/json');
    const out = tensorOf(reply);
    const ref = refAttention(q.data, shape, k.data, shape, v.data, shape, { causal: true }).output;
    expectClose(out.data, ref.data, TOL, { seed: SEED, label: 'binary→JSON /attention', shape });
  });
});

describe(`examples/server: /block (seed ${SEED})`, () => {
  test('JSON [tokens, dim] equals block.forward', async () => {
    const x = random('block json x', [11, DIM]);
    const out = tensorOf(await postJson('/block', { x: { shape: x.shape, data: Array.from(x.data) }, causal: true }));
    const direct = block.forward(x, { causal: true });
    expect(out.shape).toEqual([11, DIM]);
    expectClose(out.data, direct.data, 1e-6, { seed: SEED, label: 'JSON /block', shape: x.shape });
  });

  test('binary [batch, tokens, dim] equals block.forward', async () => {
    const x = random('block bin x', [3, 17, DIM]);
    const out = tensorOf(await postBinary('/block', { 'X-Shape': x.shape as number[] }, [x.data]));
    const direct = block.forward(x);
    expect(out.shape).toEqual([3, 17, DIM]);
    expectClose(out.data, direct.data, 1e-6, { seed: SEED, label: 'binary /block', shape: x.shape });
  });
});

describe('examples/server: bad requests', () => {
  const shape = [1, 1, 2, 2];
  const t = (data: unknown[] = [1, 2, 3, 4], s: unknown = shape) => ({ shape: s, data });

  test('400: malformed JSON, a body that is not an object, an unknown field', async () => {
    expect400(await postJson('/attention', '{"q": {"shape": [1'), 'malformed JSON');
    expect400(await postJson('/attention', '[1, 2]'), 'must be an object');
    expect400(await postJson('/attention', { q: t(), k: t(), v: t(), returnWeights: true }), 'unknown field "returnWeights"');
  });

  test('400: wrong shapes and mismatched lengths name the argument (mhsa messages pass through)', async () => {
    expect400(await postJson('/attention', { q: t([1, 2, 3, 4], [2, 2]), k: t(), v: t() }), 'attentionAsync', 'q must have 4 dims');
    expect400(await postJson('/attention', { q: t([1, 2, 3]), k: t(), v: t() }), 'q.data.length must equal', 'received 3');
    expect400(await postJson('/attention', { q: t(), k: t(), v: t([1, 2, 3, 4, 5, 6], [1, 1, 3, 2]) }), 'v.shape[2] (seq)');
    expect400(await postJson('/attention', { q: t([1, 'a', 3, 4]), k: t(), v: t() }), 'q.data[1] must be a number');
    expect400(await postJson('/attention', { q: t(), k: t() }), 'v must be an object');
    expect400(await postJson('/attention', { q: t(), k: t(), v: t(), causal: 'yes' }), 'options.causal');
    expect400(await postJson('/block', { x: t([1, 2], [1, 2]) }), 'MultiHeadSelfAttention.forwardAsync', `dim = ${DIM}`);
  });

  test('400: NaN and non-integer dims, JSON and binary', async () => {
    expect400(await postJson('/attention', { q: t(undefined, [1, 1, 'NaN', 2]), k: t(), v: t() }), 'q.shape[2]');
    expect400(await postJson('/attention', { q: t(undefined, [1, 1, 2, 2.5]), k: t(), v: t() }), 'q.shape[3]');
    const four = new Float32Array(4);
    const reply = await postBinary(
      '/attention',
      { 'X-Q-Shape': [1, NaN, 2, 2], 'X-K-Shape': shape, 'X-V-Shape': shape },
      [four, four, four],
    );
    expect400(reply, "X-Q-Shape[1] must be a non-negative integer, received 'NaN'");
    expect400(await postBinary('/block', {}, [four]), 'X-Shape header is required');
  });

  test('400: a binary body whose length does not match the shapes; bad query options', async () => {
    const s = { 'X-Q-Shape': shape, 'X-K-Shape': shape, 'X-V-Shape': shape };
    const four = new Float32Array(4);
    expect400(await postBinary('/attention', s, [four, four, four.subarray(1)]), 'the body has 44 bytes', '= 48');
    expect400(await postBinary('/block', { 'X-Shape': [2, DIM] }, [new Float32Array(DIM)]), `needs 4·${2 * DIM}`);
    expect400(await postBinary('/attention?causal=maybe', s, [four, four, four]), 'causal must be');
    expect400(await postBinary('/attention?scale=abc', s, [four, four, four]), 'options.scale');
    expect400(await postBinary('/attention?returnWeights=1', s, [four, four, four]), 'unknown query parameter');
  });

  test('413: a declared Content-Length over the limit is refused before the body is sent', async () => {
    const headers = { 'Content-Type': 'application/octet-stream', 'Content-Length': LIMIT + 1 };
    const reply = await request('POST', '/attention', headers, (req) => req.flushHeaders()); // and no body
    expect(reply.status).toBe(413);
    expect(reply.headers.connection).toBe('close');
    expect((json(reply) as { error: string }).error).toContain(`the limit is ${LIMIT}`);
  });

  test('413: a streamed (chunked) body is cut off once it passes the limit', async () => {
    let sent = 0;
    const chunk = Buffer.alloc(8 * 1024, 0x20);
    const reply = await request('POST', '/block', { 'Content-Type': 'application/json' }, (req) => {
      const pump = setInterval(() => {
        if (req.destroyed || sent > 64 * LIMIT) return clearInterval(pump);
        req.write(chunk);
        sent += chunk.length;
      }, 1);
    });
    expect(reply.status).toBe(413);
    expect(reply.headers.connection).toBe('close');
    expect(sent).toBeLessThan(64 * LIMIT); // answered mid-stream, not after the client gave up
  });

  test('415 for another or no Content-Type, 404 for an unknown route, 405 for a wrong method', async () => {
    const plain = await request('POST', '/attention', { 'Content-Type': 'text/plain' }, 'q');
    expect(plain.status).toBe(415);
    expect((json(plain) as { error: string }).error).toContain("'text/plain'");
    expect((await request('POST', '/block', {}, 'x')).status).toBe(415);
    const missing = await request('GET', '/attention/extra', {});
    expect(missing.status).toBe(404);
    expect(json(missing).error).toBe('no route GET /attention/extra');
    const wrongMethod = await request('GET', '/attention', {});
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.allow).toBe('POST');
  });

  test('400: a JSON number beyond float32', async () => {
    expect400(await postJson('/attention', { q: t([1, 2, 1e39, 4]), k: t(), v: t() }), 'q.data[2] = 1e+39 does not fit in float32');
  });

  /** Runs fn with requests going to another server built from options, then closes it. */
  async function withServer(options: Record<string, unknown>, fn: (other: App) => Promise<void>): Promise<void> {
    const other = createServer({ log: (...args: unknown[]) => logged.push(args), ...options });
    const mainPort = port;
    port = await other.listen(0);
    try {
      await fn(other);
    } finally {
      port = mainPort;
      await other.close(1000);
    }
  }

  test('500 for an unexpected error, logged, and the server keeps serving', async () => {
    await withServer({ block: { forwardAsync: () => Promise.reject(new Error('boom')) } }, async () => {
      const reply = await postBinary('/block', { 'X-Shape': [1, 1] }, [new Float32Array(1)]);
      expect(reply.status).toBe(500);
      expect(json(reply)).toEqual({ error: 'internal server error' });
      expect(logged.some((args) => args.some((a) => a instanceof Error && a.message === 'boom'))).toBe(true);
      expect((await request('GET', '/health', {})).status).toBe(200);
    });
  });

  test('503 with Retry-After beyond maxInFlight computing requests; GETs still answer', async () => {
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slowBlock = { forwardAsync: async (x: Tensor) => (await gate, x) };
    await withServer({ block: slowBlock, maxInFlight: 1 }, async (other) => {
      const first = postBinary('/block', { 'X-Shape': [1, 2] }, [new Float32Array([3, 4])]);
      while (other.stats().requests.computing < 1) await new Promise((r) => setTimeout(r, 2));
      const second = await postBinary('/block', { 'X-Shape': [1, 2] }, [new Float32Array([5, 6])]);
      expect(second.status).toBe(503);
      expect(second.headers['retry-after']).toBe('1');
      expect((await request('GET', '/health', {})).status).toBe(200);
      release();
      expect(Array.from(tensorOf(await first).data)).toEqual([3, 4]);
    });
  });

  test('after all of that, /health answers and /stats counts the errors', async () => {
    const health = await request('GET', '/health', {});
    expect(health.status).toBe(200);
    expect(json(health)).toEqual({ status: 'ok' });
    const stats = json(await request('GET', '/stats?reset=1', {})) as {
      requests: { total: number; byStatus: Record<string, number>; errors: number };
      memory: Record<string, number>;
      eventLoopDelayMs: Record<string, number | null>;
    };
    expect(stats.requests.byStatus['400']).toBeGreaterThanOrEqual(15);
    expect(stats.requests.byStatus['413']).toBe(2);
    expect(stats.requests.byStatus['500']).toBeUndefined(); // that one and the 503 were other servers'
    expect(stats.requests.errors).toBeGreaterThan(20);
    for (const key of ['rss', 'external', 'arrayBuffers']) expect(stats.memory[key]).toBeGreaterThan(0);
    expect(Object.keys(stats.eventLoopDelayMs)).toEqual(
      expect.arrayContaining(['p50', 'p99', 'p999', 'max', 'samples']),
    );
    expect(logged.filter((args) => !args.some((a) => a instanceof Error && a.message === 'boom'))).toEqual([]);
  });
});

test('a weights file with several layers and no prefix: the error says how to choose one here (MHSA_WEIGHTS_PREFIX)', () => {
  const fs = require('node:fs') as typeof import('node:fs');
  const os = require('node:os') as typeof import('node:os');
  const path = require('node:path') as typeof import('node:path');
  // Two layers of torch.nn.MultiheadAttention names, dim 4, as a safetensors file.
  const header: Record<string, unknown> = {};
  const parts: Float32Array[] = [];
  let offset = 0;
  for (const layer of ['layers.0.attn.', 'layers.1.attn.']) {
    for (const [name, shape] of [['in_proj_weight', [12, 4]], ['out_proj.weight', [4, 4]]] as const) {
      const data = new Float32Array(shape[0] * shape[1]).fill(0.01);
      header[layer + name] = { dtype: 'F32', shape, data_offsets: [offset, offset + data.byteLength] };
      offset += data.byteLength;
      parts.push(data);
    }
  }
  const json = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-server-')), 'two-layers.safetensors');
  fs.writeFileSync(file, Buffer.concat([length, json, ...parts.map((p) => Buffer.from(p.buffer))]));
  try {
    expect(() => createServer({ weights: file, heads: 2, log: () => {} })).toThrow(
      /keys found under "layers\.0\.attn\.", "layers\.1\.attn\." \(set one with MHSA_WEIGHTS_PREFIX, or the weightsPrefix option\)/,
    );
    const app = createServer({ weights: file, weightsPrefix: 'layers.1.attn.', heads: 2, log: () => {} });
    expect(app.block.dim).toBe(4);
  } finally {
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  }
});
