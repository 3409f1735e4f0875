/**
 * PyTorch, as a Python service would run it: `torch.mm(a, b, out=c)`,
 * `torch.softmax`, scaled dot-product attention (the op the installed PyTorch
 * has) and seed 004's module (vit-pytorch's Attention at inference, SDPA in
 * place of its explicit attention), each under `torch.inference_mode()`. It runs in a Python worker
 * (pytorch_worker.py beside this file) that times each call itself with
 * `perf_counter`, so the pipe's round trip is not counted
 * ({@link Prepared.lastCallMs}); inputs go over as float32 files once
 * (untimed) and each result comes back, untimed, through a memory-mapped file.
 * The RSS column is the worker's ({@link Prepared.memory}).
 *
 * The interpreter is `MHSA_BENCH_PYTHON` when set, else the first of
 * `python3` and `/usr/bin/python3` that can import torch and numpy; when none
 * can (`apt-get install python3-torch` provides Debian's build), this peer is
 * skipped with a note. With libopenblas0-openmp installed too, the worker
 * loads that OpenBLAS (see the Worker constructor).
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import type { Socket } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import type { Inputs } from '../data';
import { outputLength, type Problem } from '../workloads';
import type { Impl, Prepared } from './types';

/** The worker script: beside this file in the sources, under benchmarks/cli/peers from dist/benchmarks/cli/peers. */
function workerScript(): string {
  const candidates = [
    path.join(__dirname, 'pytorch_worker.py'),
    path.resolve(__dirname, '..', '..', '..', '..', 'benchmarks', 'cli', 'peers', 'pytorch_worker.py'),
  ];
  return candidates.find((f) => fs.existsSync(f)) ?? candidates[0];
}

interface Reply {
  seq?: number | null;
  ok?: boolean;
  error?: string;
  ms?: number;
  rss?: number;
  maxrss?: number;
  torch?: string;
  python?: string;
  blas?: string;
  sdpa?: string;
}

/**
 * How long one request may take: `MHSA_BENCH_PYTORCH_TIMEOUT` seconds, else
 * 600 (PyTorch 1.13 took 1.7 s a call on the largest workload, a_4096 on one
 * thread, and the loading of its inputs is a few seconds).
 */
function requestTimeoutMs(): number {
  const s = Number(process.env.MHSA_BENCH_PYTORCH_TIMEOUT);
  return (Number.isFinite(s) && s > 0 ? s : 600) * 1000;
}

/** Bytes free in /dev/shm below which the worker's files go to the temporary directory (s_4096 needs ~130 MB). */
const SHM_MIN_FREE = 1024 * 2 ** 20;

/** A RAM-backed directory when there is room (Docker's default /dev/shm is 64 MB), else the temporary one. */
function scratchRoot(): string {
  try {
    const st = fs.statfsSync('/dev/shm');
    if (st.bavail * st.bsize >= SHM_MIN_FREE) return '/dev/shm';
  } catch {
    // no /dev/shm
  }
  return os.tmpdir();
}

/**
 * One Python process answering JSON lines, each reply matched to its request
 * by `seq`. Its handles keep Node's event loop alive only while a request is
 * pending, so a finished benchmark exits without closing it (the worker ends on
 * its stdin's EOF).
 */
class Worker {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly pending = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  private nextSeq = 0;
  private stderrTail = '';
  /** Why the worker cannot answer any more, once it has exited or failed to start. */
  exited: string | null = null;
  readonly dir = fs.mkdtempSync(path.join(scratchRoot(), 'mhsa-bench-torch-'));

  constructor(python: string) {
    // Debian's torch calls OpenBLAS, whose default build runs its own threads
    // beside torch's OpenMP ones: at 2 threads each pool's spinning took the
    // cores from the other (a_vit: median 17.5 ms against a 1.9 ms minimum).
    // The OpenMP build of OpenBLAS (libopenblas0-openmp) shares torch's pool,
    // as MKL does in PyTorch's own wheels, so it is put first when installed.
    const env = { ...process.env };
    if (fs.existsSync(OPENBLAS_OPENMP_DIR)) {
      env.LD_LIBRARY_PATH = [OPENBLAS_OPENMP_DIR, env.LD_LIBRARY_PATH].filter(Boolean).join(':');
    }
    this.child = spawn(python, ['-u', workerScript()], { stdio: ['pipe', 'pipe', 'pipe'], env });
    createInterface({ input: this.child.stdout }).on('line', (line) => this.onLine(line));
    this.child.stderr.on('data', (d: Buffer) => {
      this.stderrTail = (this.stderrTail + d.toString()).slice(-2000);
    });
    this.child.on('error', (e) => this.fail(`the PyTorch worker could not run (${e.message})`));
    this.child.on('exit', (code, signal) => this.fail(`the PyTorch worker exited (${signal ?? `code ${code}`})`));
    this.child.stdin.on('error', (e) => this.fail(`the PyTorch worker stopped reading (${e.message})`));
    process.once('exit', () => {
      this.child.kill();
      fs.rmSync(this.dir, { recursive: true, force: true });
    });
    this.idle();
  }

  /** Marks the worker unusable (the first reason stays) and rejects every pending request. */
  private fail(why: string): void {
    this.exited ??= why;
    for (const w of this.pending.values()) w.reject(new Error(`${why}${this.lastError()}`));
    this.pending.clear();
  }

  private onLine(line: string): void {
    let reply: Reply;
    try {
      reply = JSON.parse(line) as Reply;
    } catch {
      return; // not a reply (the worker sends only JSON to this pipe)
    }
    const waiter = typeof reply.seq === 'number' ? this.pending.get(reply.seq) : undefined;
    if (!waiter) return;
    this.pending.delete(reply.seq as number);
    if (this.pending.size === 0) this.idle();
    waiter.resolve(reply);
  }

  private lastError(): string {
    const line = this.stderrTail.trim().split('\n').pop();
    return line ? `: ${line}` : '';
  }

  /** The process and its output pipes (sockets, though typed as plain streams). */
  private handles(): { ref(): unknown; unref(): unknown }[] {
    return [this.child, this.child.stdout as unknown as Socket, this.child.stderr as unknown as Socket];
  }

  private idle(): void {
    for (const h of this.handles()) h.unref();
  }

  /**
   * Sends one request; resolves with the reply, rejects with the worker's error
   * line. A worker that does not answer within {@link requestTimeoutMs} is
   * killed (its rows then fail, and the next row starts a new one).
   */
  request(msg: Record<string, unknown>): Promise<Reply> {
    if (this.exited) return Promise.reject(new Error(`${this.exited}${this.lastError()}`));
    for (const h of this.handles()) h.ref();
    const seq = this.nextSeq++;
    const limit = requestTimeoutMs();
    let timer: NodeJS.Timeout | undefined;
    return new Promise<Reply>((resolve, reject) => {
      this.pending.set(seq, { resolve, reject });
      timer = setTimeout(() => {
        this.fail(`the PyTorch worker did not answer ${String(msg.op)} within ${limit / 1000} s`);
        this.child.kill('SIGKILL');
      }, limit);
      this.child.stdin.write(`${JSON.stringify({ ...msg, seq })}\n`);
    })
      .finally(() => clearTimeout(timer))
      .then((r) => {
        if (r.error !== undefined || !r.ok) throw new Error(`PyTorch: ${r.error ?? 'no answer'}`);
        return r;
      });
  }
}

/** The interpreter to use, or why there is none; probed once per process (importing torch takes a second or two). */
let probed: { python: string } | { reason: string } | undefined;
function findPython(): { python: string } | { reason: string } {
  probed ??= probePython();
  return probed;
}

function probePython(): { python: string } | { reason: string } {
  const forced = process.env.MHSA_BENCH_PYTHON;
  const candidates = forced ? [forced] : ['python3', '/usr/bin/python3'];
  const tried: string[] = [];
  for (const py of candidates) {
    const r = spawnSync(py, ['-c', 'import torch, numpy'], { encoding: 'utf8', timeout: 120_000 });
    if (r.status === 0) return { python: py };
    const why = r.error ? r.error.message : r.stderr.trim().split('\n').pop() || `exit code ${r.status}`;
    tried.push(`${py}: ${why}`);
  }
  return {
    reason:
      `no Python that imports torch and numpy (${tried.join('; ')}); ` +
      'apt-get install python3-torch, or set MHSA_BENCH_PYTHON',
  };
}

/** Where Debian's libopenblas0-openmp puts its libopenblas.so.0 and libblas.so.3. */
const OPENBLAS_OPENMP_DIR = `/usr/lib/${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}-linux-gnu/openblas-openmp`;

let python: string | undefined;
let worker: Worker | undefined;
let nextId = 0;

/** Every Float32Array of an Inputs, by field name. */
function arrays(x: Inputs): [string, Float32Array][] {
  return Object.entries(x).filter((e): e is [string, Float32Array] => e[1] instanceof Float32Array);
}

/**
 * Inputs go over as files the worker reads once (they are deleted when it has);
 * the result file is unlinked as soon as both sides hold it open, so nothing is
 * left on disk whatever happens to either process. A worker that died (say, out
 * of memory on a big row) is replaced for the next row.
 */
async function prepare(p: Problem, x: Inputs, threads: number, variant?: 'mha'): Promise<Prepared> {
  if (worker!.exited) worker = new Worker(python!);
  const w = worker!;
  const id = nextId++;
  const files: Record<string, string> = {};
  const outFile = path.join(w.dir, `out-${id}.f32`);
  const output = new Float32Array(outputLength(p));
  let memory = { rss: 0, maxRss: 0 };
  const noteMemory = (r: Reply) => {
    memory = { rss: r.rss!, maxRss: r.maxrss! };
  };
  let fd: number;
  try {
    for (const [name, data] of arrays(x)) {
      files[name] = path.join(w.dir, `in-${id}-${name}.f32`);
      fs.writeFileSync(files[name], new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    }
    noteMemory(await w.request({ op: 'prepare', id, problem: p, threads, inputs: files, out: outFile, size: output.length, variant }));
    fd = fs.openSync(outFile, 'r');
  } finally {
    for (const f of [...Object.values(files), outFile]) fs.rmSync(f, { force: true });
  }
  let lastMs = NaN;
  return {
    run: async () => {
      const reply = await w.request({ op: 'run', id });
      lastMs = reply.ms!;
      noteMemory(reply);
      const bytes = new Uint8Array(output.buffer);
      for (let at = 0; at < bytes.length; ) {
        const n = fs.readSync(fd, bytes, at, bytes.length - at, at);
        if (n === 0) throw new Error(`PyTorch: its result file ended after ${at} of ${bytes.length} bytes`);
        at += n;
      }
      return output;
    },
    // No beforeRun: the worker poisons the result file with NaN before each call, and run() overwrites all of output.
    lastCallMs: () => lastMs,
    memory: () => memory,
    dispose: async () => {
      fs.closeSync(fd);
      await w.request({ op: 'dispose', id }).catch(() => undefined);
    },
  };
}

/** For `mhsa-bench --list`: null when a usable Python is found, else why not. */
export function pytorchMissing(): string | null {
  const found = findPython();
  return 'reason' in found ? found.reason : null;
}

/** Finds Python and starts the worker, once for both PyTorch peers: its hello reply, or why not. */
let loaded: Promise<{ reason: string } | { hello: Reply }> | undefined;
function loadWorker(): Promise<{ reason: string } | { hello: Reply }> {
  loaded ??= (async () => {
    const found = findPython();
    if ('reason' in found) return found;
    python = found.python;
    try {
      worker = new Worker(python);
      return { hello: await worker.request({ op: 'hello' }) };
    } catch (e) {
      return { reason: e instanceof Error ? e.message : String(e) };
    }
  })();
  return loaded;
}

export const pytorchImpl: Impl = {
  name: 'pytorch',
  label: 'PyTorch',
  maxThreads: 1024,
  timed: {
    gemm: 'torch.mm(a, b, out=c), timed in Python (perf_counter)',
    softmax: 'torch.softmax(x, -1)',
    attention: 'scaled dot-product attention on [B, H, N, d] q, k, v (is_causal for square causal, else a bottom-right mask; a window as a boolean mask; GQA by repeat_interleave of k and v; with a softcap, the scores, tanh, mask, softmax and product written out); the op is named in the label',
    block: "seed 004's module: vit-pytorch's Attention at inference with SDPA for its matmul-softmax-matmul: LayerNorm → Linear (to_qkv) → chunk, heads → SDPA → merge → Linear (to_out)",
    decoder: "LLaMA's attention layer as transformers runs a decode step with its DynamicCache: RMSNorm → Linear (q, k, v fused) → RoPE → torch.cat onto the cache → kv heads repeated → SDPA → Linear (o_proj)",
  },
  async load() {
    const r = await loadWorker();
    if ('reason' in r) return r.reason;
    this.label = `PyTorch ${r.hello.torch} (Python ${r.hello.python}, BLAS: ${r.hello.blas}; attention: ${r.hello.sdpa})`;
    return null;
  },
  supports() {
    return null;
  },
  prepare: (p, x, threads) => prepare(p, x, threads),
};

/**
 * The block through `nn.MultiheadAttention` after `nn.LayerNorm`: its inference
 * fast path (`torch._native_multi_head_attention`, checked at prepare) is
 * PyTorch's own fused attention layer, where the seed-004 module above is
 * what vit-pytorch users run.
 */
export const pytorchMhaImpl: Impl = {
  name: 'pytorch-mha',
  label: 'PyTorch nn.MultiheadAttention',
  maxThreads: 1024,
  timed: {
    block: 'nn.LayerNorm → nn.MultiheadAttention(dim, heads, batch_first=True)(h, h, h, need_weights=False) on its fast path (in_proj_bias zero)',
  },
  async load() {
    const r = await loadWorker();
    if ('reason' in r) return r.reason;
    this.label = `PyTorch ${r.hello.torch} nn.MultiheadAttention (fast path)`;
    return null;
  },
  supports(p: Problem) {
    if (p.kind !== 'block') return 'pytorch-mha runs the block workloads only';
    if (p.heads * p.dimHead !== p.dim) return 'nn.MultiheadAttention needs heads × dimHead = dim';
    // PyTorch 1.13's fast path also refuses an odd head count (the --check sizes have 3).
    return p.heads % 2 === 0 ? null : 'nn.MultiheadAttention takes its fast path only with an even head count';
  },
  prepare: (p, x, threads) => prepare(p, x, threads, 'mha'),
};
