/**
 * The benchmark CLI (benchmarks/cli/, `npx mhsa-bench`): `--check` runs every
 * workload once at a small size and verifies it against float64; usage errors
 * exit with code 2; a wrong result exits with code 1.
 *
 * Runs the real command (benchmarks/cli/bin/mhsa-bench.js) in child processes.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { parseArgs, UsageError } from '../benchmarks/cli/args';
import { makeInputs } from '../benchmarks/cli/data';
import { pytorchImpl } from '../benchmarks/cli/peers/pytorch';
import type { Prepared } from '../benchmarks/cli/peers/types';
import { buildReference, relativeError } from '../benchmarks/cli/reference';
import { burstGap, measure } from '../benchmarks/cli/runner';
import { outputLength, WORKLOADS } from '../benchmarks/cli/workloads';

const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'benchmarks', 'cli', 'bin', 'mhsa-bench.js');

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

function bench(args: string[], env: Record<string, string> = {}): Run {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 150_000,
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

interface JsonRow {
  workload: string;
  threads: number;
  impl: string;
  status: string;
  rel_err: number | null;
}

describe('mhsa-bench --check', () => {
  test('verifies every workload at a small size on 1 and 2 threads, exit code 0', () => {
    const r = bench(['--check', '--threads', '1,2', '--json', '-']);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
    const report = JSON.parse(r.stdout) as { schema: string; results: JsonRow[] };
    expect(report.schema).toBe('mhsa-bench/1');
    const mhsa = report.results.filter((x) => x.impl === 'mhsa');
    expect(mhsa.map((x) => `${x.workload}@${x.threads}`).sort()).toEqual(
      WORKLOADS.flatMap((w) => [`${w.name}@1`, `${w.name}@2`]).sort(),
    );
    for (const row of mhsa) {
      expect({ row: `${row.workload}@${row.threads}`, status: row.status }).toEqual({ row: `${row.workload}@${row.threads}`, status: 'ok' });
      // bf16 rows: the rounding of weights and activations (~2e-3), within the CLI's 1e-2 for them;
      // int8 rows: quantization (~1 %), within its 3e-2.
      expect(row.rel_err).toBeLessThan(row.workload.endsWith('_int8') ? 3e-2 : row.workload.endsWith('_bf16') ? 1e-2 : 1e-5);
    }
  }, 180_000);

  test('with --peers: every installed peer agrees with the float64 reference (a missing one is a note, not a failure)', () => {
    const r = bench(['--check', '--peers', '--threads', '1', '--json', '-']);
    expect(r.status).toBe(0);
    const rows = (JSON.parse(r.stdout) as { results: JsonRow[] }).results;
    const bad = rows.filter((x) => x.status !== 'ok' && x.status !== 'skipped');
    expect(bad).toEqual([]);
    expect(rows.filter((x) => x.impl === 'js' && x.status === 'ok')).toHaveLength(WORKLOADS.length);
  }, 180_000);

  test('a wrong result is reported loudly and exits with code 1', () => {
    const r = bench(['--check', '--workload', 'g_sq256,a_vit', '--threads', '1'], { MHSA_BENCH_FAULT: 'mhsa' });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/WRONG RESULT: mhsa on g_sq256/);
    expect(r.stdout).toMatch(/WRONG/);
  }, 180_000);
});

/** The Python the pytorch peer picks when one imports torch and numpy (as with python3-torch installed), else undefined. */
const TORCH_PYTHON = ((forced) => (forced ? [forced] : ['python3', '/usr/bin/python3']))(process.env.MHSA_BENCH_PYTHON).find(
  (py) => spawnSync(py, ['-c', 'import torch, numpy'], { timeout: 120_000 }).status === 0,
);

describe('mhsa-bench --peers=pytorch', () => {
  interface ImplInfo {
    impl: string;
    label: string;
    available: boolean;
    note: string | null;
  }

  test('where torch imports, every workload runs in the Python worker and agrees with float64; elsewhere the peer is a note that says how to install it', () => {
    const r = bench(['--check', '--peers=pytorch', '--threads', '1,2', '--json', '-']);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
    const report = JSON.parse(r.stdout) as { impls: ImplInfo[]; results: JsonRow[] };
    const info = report.impls.find((i) => i.impl === 'pytorch')!;
    const rows = report.results.filter((x) => x.impl === 'pytorch');
    if (TORCH_PYTHON) {
      expect(rows).toHaveLength(2 * WORKLOADS.length);
      expect(info).toEqual(expect.objectContaining({ available: true, label: expect.stringMatching(/^PyTorch \d+\.\d+/) }));
      for (const row of rows) {
        expect({ row: `${row.workload}@${row.threads}`, status: row.status }).toEqual({ row: `${row.workload}@${row.threads}`, status: 'ok' });
        expect(row.rel_err).toBeLessThan(1e-5);
      }
    } else {
      expect(info.available).toBe(false);
      expect(info.note).toMatch(/apt-get install python3-torch/);
      expect(rows).toEqual([]);
    }
  }, 180_000);

  test('a peer whose packages are missing is a note saying how to install them, and counted as unavailable', () => {
    const r = bench(['--check', '--workload', 'g_sq64', '--threads', '1', '--peers=onnxruntime,tfjs-wasm'], {
      NODE_OPTIONS: `--require ${path.join(__dirname, 'helpers', 'hide-modules.js')}`,
      MHSA_TEST_HIDE_MODULES: 'onnxruntime-node,@tensorflow/tfjs',
    });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/note: skipped onnxruntime: onnxruntime-node is not installed .*npm_config_onnxruntime_node_install=skip npm i onnxruntime-node onnx-proto/);
    expect(r.stdout).toMatch(/note: skipped tfjs-wasm: @tensorflow\/tfjs is not installed .*npm i @tensorflow\/tfjs @tensorflow\/tfjs-backend-wasm/);
    expect(r.stdout).toMatch(/1 ok, 0 wrong, 0 errors, 0 skipped, 2 peers unavailable \(see the notes above\)/);
  }, 180_000);

  test('an interpreter that cannot import torch is named in the skip note, and the run still succeeds', () => {
    const r = bench(['--check', '--workload', 'g_sq64', '--threads', '1', '--peers=pytorch', '--json', '-'], {
      MHSA_BENCH_PYTHON: '/nonexistent/python3',
    });
    expect(r.status).toBe(0);
    const report = JSON.parse(r.stdout) as { impls: ImplInfo[]; results: JsonRow[] };
    expect(report.impls.find((i) => i.impl === 'pytorch')).toEqual(
      expect.objectContaining({ available: false, note: expect.stringMatching(/\/nonexistent\/python3: .*ENOENT.*MHSA_BENCH_PYTHON/) }),
    );
    expect(report.results.map((x) => `${x.impl}:${x.status}`)).toEqual(['mhsa:ok']);
  }, 180_000);

  test('a worker that does not answer is killed after MHSA_BENCH_PYTORCH_TIMEOUT seconds, and the peer becomes a note', () => {
    // A stand-in "python" that passes the import probe, then never answers.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-fake-python-'));
    const fake = path.join(dir, 'python3');
    fs.writeFileSync(fake, '#!/bin/sh\n[ "$1" = "-c" ] && exit 0\nexec sleep 600\n', { mode: 0o755 });
    try {
      const started = Date.now();
      const r = bench(['--check', '--workload', 'g_sq64', '--threads', '1', '--peers=pytorch', '--json', '-'], {
        MHSA_BENCH_PYTHON: fake,
        MHSA_BENCH_PYTORCH_TIMEOUT: '1',
      });
      expect(r.status).toBe(0);
      expect(Date.now() - started).toBeLessThan(60_000);
      const report = JSON.parse(r.stdout) as { impls: ImplInfo[]; results: JsonRow[] };
      expect(report.impls.find((i) => i.impl === 'pytorch')).toEqual(
        expect.objectContaining({ available: false, note: expect.stringMatching(/did not answer hello within 1 s/) }),
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);

  // Without torch the worker cannot start (the skip is tested above).
  const withTorch = TORCH_PYTHON ? test : test.skip;

  withTorch("pytorch-mha runs the ViT block on nn.MultiheadAttention's fast path, verified at its timed size", () => {
    // The --check sizes have 3 heads, which the fast path refuses, so the full size is timed once.
    const r = bench(['--workload', 'm_vit1', '--peers=pytorch-mha', '--threads', '1', '--min-time', '0.01', '--repeat', '1', '--json', '-']);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
    const report = JSON.parse(r.stdout) as { impls: ImplInfo[]; results: JsonRow[] };
    expect(report.impls.find((i) => i.impl === 'pytorch-mha')!.label).toMatch(/nn\.MultiheadAttention \(fast path\)/);
    const row = report.results.find((x) => x.impl === 'pytorch-mha')!;
    expect({ status: row.status, relErrBelow1e5: row.rel_err! < 1e-5 }).toEqual({ status: 'ok', relErrBelow1e5: true });
  }, 180_000);

  withTorch('the worker answers each request under its seq, an error as one line, and keeps serving', () => {
    const requests = [
      { seq: 4, op: 'run', id: 7 },
      { seq: 5, op: 'prepare', id: 1, problem: { kind: 'conv' }, threads: 1, inputs: {}, out: '/dev/null', size: 1 },
      { seq: 6, op: 'hello' },
    ];
    const r = spawnSync(TORCH_PYTHON!, [path.join(ROOT, 'benchmarks', 'cli', 'peers', 'pytorch_worker.py')], {
      input: requests.map((q) => JSON.stringify(q)).join('\n') + '\n',
      encoding: 'utf8',
      timeout: 120_000,
    });
    const replies = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { ok?: boolean; error?: string });
    expect(replies).toEqual([
      { error: 'KeyError: 7', seq: 4 },
      { error: "ValueError: unknown problem kind 'conv'", seq: 5 },
      expect.objectContaining({ ok: true, seq: 6, torch: expect.any(String) }),
    ]);
  }, 180_000);

  withTorch('a prepared problem runs in the worker: causal with fewer queries than keys (bottom-right), its own clock, its own memory', async () => {
    const problem = { kind: 'attention', B: 1, H: 2, Nq: 3, Nkv: 7, d: 8, causal: true } as const;
    const inputs = makeInputs(problem, 'pytorch-causal');
    expect(await pytorchImpl.load()).toBeNull();
    const prepared = await pytorchImpl.prepare(problem, inputs, 1);
    try {
      const y = await prepared.run();
      expect(relativeError(y, buildReference(problem, inputs, true), outputLength(problem))).toBeLessThan(1e-5);
      // The top-left mask (is_causal) would hide keys 1..6 from the first query: a different result.
      expect(prepared.lastCallMs!()).toBeGreaterThan(0);
      expect(prepared.memory!().rss).toBeGreaterThan(10 * 2 ** 20); // the worker's, with torch loaded
      expect(prepared.memory!().rss).not.toBe(process.memoryUsage.rss());
    } finally {
      await prepared.dispose();
    }
  }, 180_000);
});

describe('the runner', () => {
  test("records an impl's own clock when it reports one (a worker process's call without the round trip)", async () => {
    const slowCall = (): Prepared => ({
      run: () => new Promise<Float32Array>((resolve) => setTimeout(() => resolve(new Float32Array(1)), 15)),
      dispose: () => undefined,
    });
    const opts = { minTime: 0.01, repeat: 3 };
    const ownClock = await measure({ ...slowCall(), lastCallMs: () => 0.25 }, opts);
    expect(ownClock.samples.every((ms) => ms === 0.25)).toBe(true);
    const wallClock = await measure(slowCall(), opts);
    expect(wallClock.minMs).toBeGreaterThanOrEqual(10);
  }, 30_000);

  test("reports the RSS growth of an impl's own worker process when it gives one", async () => {
    let rss = 100 * 2 ** 20;
    const p: Prepared = {
      run: () => {
        rss += 8 * 2 ** 20; // the worker grows by 8 MiB a call; this process does not
        return new Float32Array(1);
      },
      memory: () => ({ rss, maxRss: rss }),
      dispose: () => undefined,
    };
    const m = await measure(p, { minTime: 0.01, repeat: 3 });
    expect(m.rssMb).toBeGreaterThanOrEqual(8 * (m.samples.length + 1));
  }, 30_000);
});

describe('the pause between interleaved bursts', () => {
  test('waits while another thread of this process still spins, and not much longer', async () => {
    // A thread busy for 120 ms of wall time, as a library's pool winding down after a call. When
    // other processes keep it off the cores for a whole span, the pause rightly ends early: the
    // longest of three tries must still see it (a fixed 20 ms pause measures ~20 ms every time).
    const pauses: number[] = [];
    for (let attempt = 0; attempt < 3 && Math.max(0, ...pauses) < 90; attempt++) {
      const spinner = new Worker('const end = Date.now() + 120; while (Date.now() < end) {}', { eval: true });
      const exited = new Promise((resolve) => spinner.once('exit', resolve));
      await new Promise((resolve) => spinner.once('online', resolve));
      pauses.push(await burstGap());
      await exited;
    }
    expect(Math.max(...pauses)).toBeGreaterThanOrEqual(90);
    expect(Math.max(...pauses)).toBeLessThan(400);
    const quiet = Math.min(await burstGap(), await burstGap(), await burstGap());
    expect(quiet).toBeGreaterThanOrEqual(20);
    expect(quiet).toBeLessThan(90);
  }, 30_000);
});

describe('mhsa-bench --dtype', () => {
  test('--dtype bf16 selects the bf16 workloads; their mhsa rows are % of the bf16 peak, the peers of the FMA peak', () => {
    expect(parseArgs(['--suite', 'full', '--dtype', 'bf16']).workloads.map((w) => w.name)).toEqual(
      WORKLOADS.filter((w) => w.name.endsWith('_bf16')).map((w) => w.name),
    );
    expect(parseArgs(['--suite', 'full', '--dtype', 'fp32']).workloads.some((w) => w.name.endsWith('_bf16'))).toBe(false);
    const r = bench(['--workload', 'g_qkv197_bf16', '--threads', '1', '--peers=js', '--min-time', '0.02', '--repeat', '1', '--json', '-']);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
    const report = JSON.parse(r.stdout) as {
      calibration: { start: Array<{ gflops: number; bf16Gflops: number }> };
      results: Array<JsonRow & { gflops: number; pct_peak: number }>;
    };
    const peak = report.calibration.start[0];
    const bf16Peak = peak.bf16Gflops > 0 ? peak.bf16Gflops : peak.gflops;
    const [mhsa, js] = ['mhsa', 'js'].map((impl) => report.results.find((x) => x.impl === impl)!);
    expect(mhsa.pct_peak).toBeCloseTo((100 * mhsa.gflops) / bf16Peak, 6);
    expect(js.pct_peak).toBeCloseTo((100 * js.gflops) / peak.gflops, 6);
  }, 120_000);

  test('--dtype int8 selects the int8 workloads; their mhsa rows have no % of peak (none is measured), the peers have theirs', () => {
    expect(parseArgs(['--suite', 'full', '--dtype', 'int8']).workloads.map((w) => w.name)).toEqual(
      WORKLOADS.filter((w) => w.name.endsWith('_int8')).map((w) => w.name),
    );
    const r = bench(['--workload', 'g_qkv197_int8', '--threads', '1', '--peers=js', '--min-time', '0.02', '--repeat', '1', '--json', '-']);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
    const report = JSON.parse(r.stdout) as {
      calibration: { start: Array<{ gflops: number }> };
      results: Array<JsonRow & { gflops: number; pct_peak: number | null }>;
    };
    const [mhsa, js] = ['mhsa', 'js'].map((impl) => report.results.find((x) => x.impl === impl)!);
    expect(mhsa.pct_peak).toBeNull();
    expect(js.pct_peak).toBeCloseTo((100 * js.gflops) / report.calibration.start[0].gflops, 6);
  }, 120_000);
});

describe('mhsa-bench --interleave', () => {
  test('times mhsa and its peers in alternating bursts: every row timed and verified, the mode recorded', () => {
    const r = bench(['--workload', 'g_sq64,s_512', '--threads', '1', '--peers=js,mhsa-unfused', '--interleave',
      '--min-time', '0.05', '--repeat', '4', '--json', '-']);
    expect(r.status).toBe(0);
    const report = JSON.parse(r.stdout) as {
      settings: { interleave: boolean };
      results: (JsonRow & { samples: number | null; median_ms: number | null; rss_mb: number | null })[];
    };
    expect(report.settings.interleave).toBe(true);
    const timed = report.results.filter((x) => x.status === 'ok');
    // mhsa and js on both workloads; mhsa-unfused runs only attention workloads.
    expect(timed.map((x) => `${x.workload}:${x.impl}`).sort()).toEqual(['g_sq64:js', 'g_sq64:mhsa', 's_512:js', 's_512:mhsa']);
    for (const row of timed) {
      expect(row.samples).toBeGreaterThanOrEqual(4);
      expect(row.median_ms).toBeGreaterThan(0);
      expect(row.rss_mb).not.toBeNull();
      expect(row.rel_err).toBeLessThan(1e-5);
    }
  }, 180_000);

  test('a wrong result is still caught when interleaved', () => {
    const r = bench(['--workload', 'g_sq64', '--threads', '1', '--peers=js', '--interleave', '--min-time', '0.02'], {
      MHSA_BENCH_FAULT: 'mhsa',
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/WRONG RESULT: mhsa on g_sq64/);
    // The header's info() is the pool as loaded (2 threads here); it says what the rows run at.
    expect(r.stdout).toMatch(/^info\(\) at start-up: \{.*"threads":\d+.*\}; rows run at --threads 1$/m);
  }, 180_000);
});

describe('mhsa-bench --fresh-process', () => {
  test('times each row in processes of its own: every row timed and verified, the mode recorded', () => {
    const r = bench(['--workload', 's_512', '--threads', '1', '--peers=mhsa-alloc', '--fresh-process',
      '--min-time', '0.02', '--repeat', '3', '--json', '-']);
    expect(r.status).toBe(0);
    const report = JSON.parse(r.stdout) as {
      settings: { fresh_process: number };
      results: (JsonRow & { samples: number | null; median_ms: number | null; note: string | null; vs_mhsa: number | null })[];
    };
    expect(report.settings.fresh_process).toBe(3);
    expect(report.results.map((x) => `${x.impl}:${x.status}`)).toEqual(['mhsa:ok', 'mhsa-alloc:ok']);
    for (const row of report.results) {
      // Three processes of at least three timed calls each; the row is the median process.
      expect(row.samples).toBeGreaterThanOrEqual(9);
      const medians = /^median of 3 processes: ([\d.]+), ([\d.]+), ([\d.]+) ms$/.exec(row.note ?? '');
      expect(medians).not.toBeNull();
      const sorted = medians!.slice(1).map(Number).sort((a, b) => a - b);
      expect(row.median_ms).toBeCloseTo(sorted[1], sorted[1] >= 10 ? 1 : 3);
      expect(row.rel_err).toBeLessThan(1e-5);
    }
    expect(report.results[1].vs_mhsa).toBeGreaterThan(0);
  }, 180_000);

  test('a wrong result in the process of a row is caught, and --interleave is refused', () => {
    const r = bench(['--workload', 's_512', '--threads', '1', '--peers=mhsa-alloc', '--fresh-process', '--min-time', '0.02'], {
      MHSA_BENCH_FAULT: 'mhsa-alloc',
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/mhsa-alloc on s_512 \(1 thr\): wrong result/);
    const both = bench(['--workload', 's_512', '--fresh-process', '--interleave']);
    expect(both.status).toBe(2);
    expect(both.stderr).toMatch(/--fresh-process times each row in its own process; it cannot be combined with --interleave/);
  }, 180_000);
});

describe('mhsa-bench --svg and --from-json', () => {
  interface Bar {
    x: number;
    y: number;
    width: number;
    height: number;
    key: string;
    rate: number;
  }

  /** The chart read as XML-ish text: its size, its title, and every bar (whose numbers must all be finite). */
  function readChart(svg: string): { width: number; height: number; title: string; bars: Bar[] } {
    const root = /^<svg ([^>]*)>/.exec(svg);
    expect(root).not.toBeNull();
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    const attrs = (s: string) => Object.fromEntries([...s.matchAll(/([\w:-]+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    const top = attrs(root![1]);
    const [width, height] = [Number(top.width), Number(top.height)];
    expect(top.viewBox).toBe(`0 0 ${top.width} ${top.height}`);
    // Every element opened is closed (titles, texts, tspans), or closes itself.
    for (const tag of ['title', 'text', 'tspan', 'svg']) {
      expect({ tag, open: svg.split(`<${tag}`).length - 1 }).toEqual({ tag, open: svg.split(`</${tag}>`).length - 1 });
    }
    const bars = [...svg.matchAll(/<rect class="bar" ([^>]*)>/g)].map((m) => {
      const a = attrs(m[1]);
      const bar = {
        x: Number(a.x), y: Number(a.y), width: Number(a.width), height: Number(a.height), rate: Number(a['data-rate']),
        key: `${a['data-workload']}@${a['data-threads']}:${a['data-impl']}`,
      };
      for (const v of [bar.x, bar.y, bar.width, bar.height, bar.rate]) expect(Number.isFinite(v) && v >= 0).toBe(true);
      expect(bar.x + bar.width).toBeLessThanOrEqual(width);
      expect(bar.y + bar.height).toBeLessThanOrEqual(height);
      return bar;
    });
    const title = /^<svg [^>]*>\s*<title>([^<]+)<\/title>/.exec(svg)?.[1] ?? '';
    return { width, height, title, bars };
  }

  interface TimedRow extends JsonRow {
    gflops: number | null;
    gbs: number | null;
    metric: string;
  }

  /** One bar per timed row, each as long as its rate over its workload's fastest. */
  function expectBarsFor(rows: TimedRow[], bars: Bar[]): void {
    const ok = rows.filter((r) => r.status === 'ok');
    expect(bars.map((b) => b.key).sort()).toEqual(ok.map((r) => `${r.workload}@${r.threads}:${r.impl}`).sort());
    for (const w of new Set(ok.map((r) => r.workload))) {
      const mine = bars.filter((b) => b.key.startsWith(`${w}@`));
      const longest = Math.max(...mine.map((b) => b.width));
      const fastest = Math.max(...mine.map((b) => b.rate));
      for (const b of mine) expect(b.width / longest).toBeCloseTo(b.rate / fastest, 2);
    }
  }

  test('a run writes its chart; --from-json renders the same rows (Markdown table and chart) from the saved report', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-bench-svg-'));
    try {
      const [json, svg, again] = ['r.json', 'r.svg', 'sub/again.svg'].map((f) => path.join(dir, f));
      const r = bench(['--workload', 'g_sq64,s_512', '--threads', '1', '--peers=js', '--min-time', '0.02', '--repeat', '2',
        '--json', json, '--svg', svg]);
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
      expect(r.stdout).toContain(`SVG chart written to ${svg}`);
      const report = JSON.parse(fs.readFileSync(json, 'utf8')) as { results: TimedRow[] };
      expect(report.results.filter((x) => x.status === 'ok')).toHaveLength(4);
      const chart = readChart(fs.readFileSync(svg, 'utf8'));
      expect(chart.title).toMatch(/^mhsa-bench custom: mhsa and its peers on .+, \d+ cores$/);
      expectBarsFor(report.results, chart.bars);
      expect(fs.readFileSync(svg, 'utf8')).toMatch(/<tspan[^>]*>6144x512 · GB\/s<\/tspan>/);

      const saved = bench(['--from-json', json, '--svg', again, '--markdown']);
      expect({ status: saved.status, stderr: saved.stderr }).toEqual({ status: 0, stderr: '' });
      const table = saved.stdout.split('\n').filter((l) => l.startsWith('|'));
      expect(table[0]).toBe('| workload | shape | thr | impl | median ms | min ms | max ms | rate | % peak | RSS MB | rel err | mhsa x |');
      expect(table.slice(2).map((l) => l.split(' | ').slice(0, 4).join(' ')).sort()).toEqual(
        report.results.map((x) => `| ${x.workload} ${(x as unknown as { shape: string }).shape} ${x.threads} ${x.impl}`).sort(),
      );
      expect(saved.stdout).toContain(`SVG chart written to ${again}`);
      expect(readChart(fs.readFileSync(again, 'utf8')).bars).toEqual(chart.bars);

      // --workload and --threads select rows of the saved report.
      const one = bench(['--from-json', json, '--workload', 's_*', '--svg', again]);
      expect(one.status).toBe(0);
      expectBarsFor(report.results.filter((x) => x.workload === 's_512'), readChart(fs.readFileSync(again, 'utf8')).bars);
      expect(bench(['--from-json', json, '--threads', '2', '--svg', again]).status).toBe(0);
      expect(readChart(fs.readFileSync(again, 'utf8')).bars).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);

  test('a wrong row is named in the chart, with no bar; escaping keeps the text well formed', () => {
    const { renderChart } = require('../benchmarks/cli/chart') as typeof import('../benchmarks/cli/chart');
    const row = (impl: string, gflops: number, status = 'ok') => ({
      workload: 'g_sq64', shape: '64x64x64', threads: 1, impl, status, median_ms: status === 'ok' ? 1 : null, min_ms: null, max_ms: null,
      samples: null, metric: 'GFLOP/s', gflops: status === 'ok' ? gflops : null, gbs: null, pct_peak: null, rss_mb: null, rel_err: null,
      checked: null, vs_mhsa: impl === 'mhsa' ? null : 2, note: status === 'ok' ? null : 'wrong result: rel err <1 & "big"', problem: { kind: 'gemm', M: 64, K: 64, N: 64 },
    });
    const report = {
      schema: 'mhsa-bench/1', command: 'mhsa-bench --peers=js', date: '2026-01-01T00:00:00.000Z', elapsed_s: 1,
      host: { cpu: 'CPU <R> & "co"', cores: 2, platform: 'linux-x64', node: '20.0.0', loadavg_start: [], loadavg_end: [] },
      info: { version: '0.1.0', isa: 'avx2' }, calibration: null,
      settings: { mode: 'timing', suite: 'quick', workloads: ['g_sq64'], threads: [1], min_time_s: 1, repeat: 1, interleave: false, tolerance: 1e-3 },
      impls: [{ impl: 'mhsa', label: 'mhsa 0.1.0', available: true, note: null, timed: {} }],
      results: [row('mhsa', 50), row('js', 25), row('onnxruntime', 0, 'wrong')],
    } as unknown as Parameters<typeof renderChart>[0];
    const svg = renderChart(report);
    const chart = readChart(svg);
    expect(chart.title).toBe('mhsa-bench custom: mhsa and its peers on CPU &lt;R&gt; &amp; &quot;co&quot;, 2 cores');
    expect(chart.bars.map((b) => [b.key, b.width])).toEqual([['g_sq64@1:mhsa', chart.bars[0].width], ['g_sq64@1:js', chart.bars[0].width / 2]]);
    expect(svg).toContain('WRONG: wrong result: rel err &lt;1 &amp; &quot;big&quot;');
    expect(svg).toContain('25.0 GFLOP/s · 2.00× mhsa');
  });

  test('a --check report has no timings to chart: --from-json prints its table, and refuses --svg (exit code 2)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-bench-check-'));
    try {
      const json = path.join(dir, 'check.json');
      expect(bench(['--check', '--workload', 'g_sq64', '--threads', '1', '--json', json]).status).toBe(0);
      const table = bench(['--from-json', json]);
      expect(table.status).toBe(0);
      expect(table.stdout).toMatch(/^g_sq64 +7x9x11 +1 +mhsa +\S+ +77 +OK$/m);
      const svg = bench(['--from-json', json, '--svg', path.join(dir, 'x.svg')]);
      expect(svg.status).toBe(2);
      expect(svg.stderr).toMatch(/--svg charts timings, and .*check\.json is a --check report/);
      expect(fs.existsSync(path.join(dir, 'x.svg'))).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);

  test.each([
    [['--from-json', '/nonexistent/report.json'], /--from-json cannot read '\/nonexistent\/report\.json' \(ENOENT\)/],
    [['--from-json', 'package.json'], /--from-json expects an mhsa-bench\/1 report .*'package\.json'/],
    [['--from-json', 'package.json', '--peers'], /--peers is for a run; --from-json renders a saved report/],
    [['--from-json'], /--from-json needs a value/],
    [['--check', '--svg', 'x.svg'], /--svg charts timings, and --check times nothing/],
    [['--svg'], /--svg needs a value/],
  ])('%j is a usage error (exit code 2)', (args, message) => {
    const r = bench(args);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  }, 180_000);
});

describe('mhsa-bench usage errors exit with code 2', () => {
  test.each([
    [['--bogus'], /unknown option '--bogus'/],
    [['--workload', 'g_sq1024,nope'], /unknown workload 'nope'; known: g_sq64/],
  ])('%j', (args, message) => {
    const r = bench(args);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  }, 180_000);

  test.each([
    [['--suite', 'slow'], /--suite expects quick or full/],
    [['--threads', '0'], /--threads expects integers/],
    [['--threads', '1,x'], /--threads expects integers/],
    [['--min-time', 'abc'], /--min-time expects seconds/],
    [['--repeat', '0'], /--repeat expects integers/],
    [['--json'], /--json needs a value/],
    [['--peers=foo'], /--peers= expects names/],
    [['--markdown=yes'], /--markdown takes no value/],
    [['--interleave=1'], /--interleave takes no value/],
    [['--dtype', 'fp16'], /--dtype expects fp32, bf16 or int8, received 'fp16'/],
    [['--fresh-process=0'], /--fresh-process expects integers/],
    [['--fresh-process', '--check'], /it cannot be combined with --check/],
    [['--child-row', 'nobody'], /--child-row expects mhsa or a peer, received 'nobody'/],
    [['--dtype', 'bf16', '--suite', 'quick'], /--dtype bf16 leaves no workload/],
    [['positional'], /unexpected argument 'positional'/],
    [['--workload', 'q_*'], /unknown workload 'q_\*'/],
  ])('parseArgs(%j) is a usage error', (args, message) => {
    let thrown: unknown;
    try {
      parseArgs(args);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(UsageError);
    expect((thrown as Error).message).toMatch(message);
  });

  test('defaults and valid forms parse', () => {
    const q = parseArgs([]);
    expect(q.suite).toBe('quick');
    expect(q.workloads.length).toBeGreaterThan(0);
    expect(q.workloads.every((w) => w.suites.includes('quick'))).toBe(true);
    const f = parseArgs(['--suite=full', '--workload', 'g_*,a_decode', '--threads', '2,1,2', '--peers=js', '--min-time', '0.5', '--repeat=7']);
    expect(f.workloads.map((w) => w.name)).toEqual([...WORKLOADS.filter((w) => w.name.startsWith('g_')).map((w) => w.name), 'a_decode']);
    expect(f.threads).toEqual([2, 1]);
    expect(f.peers).toEqual(['js']);
    expect([f.minTime, f.repeat]).toEqual([0.5, 7]);
    expect([f.freshProcess, f.freshProcessRounds]).toEqual([false, 3]);
    expect([parseArgs(['--fresh-process']).freshProcessRounds, parseArgs(['--fresh-process=7']).freshProcessRounds]).toEqual([3, 7]);
  });
});

describe('busyMachineWarning', () => {
  // Imported here, not at the top: the other tests run the CLI as a child process.
  const { busyMachineWarning } = require('../benchmarks/cli/cli') as typeof import('../benchmarks/cli/cli');
  const peak = (threads: number, gflops: number) => ({ threads, gflops, gbs: 30 });

  test('quiet: a 2-thread peak near twice the 1-thread one; one thread count alone', () => {
    expect(busyMachineWarning([peak(1, 116), peak(2, 229)], 2)).toBeNull();
    expect(busyMachineWarning([peak(2, 229)], 2)).toBeNull();
  });

  test('busy: a 2-thread peak that barely grew (a fresh-user run at load average 6)', () => {
    expect(busyMachineWarning([peak(2, 108.5), peak(1, 116.6)], 2)).toBe(
      'warning: the machine looks busy (2 threads measured 108.5 GFLOP/s against 116.6 on 1): ' +
        'timings and % of peak will be unreliable; rerun on an idle machine',
    );
    expect(busyMachineWarning([peak(1, 116), peak(2, 170)], 2)).toMatch(/2 threads measured 170\.0 GFLOP\/s against 116\.0 on 1/);
    expect(busyMachineWarning([peak(1, 116), peak(2, 175)], 2)).toBeNull();
  });

  test('more threads than cores are not expected to scale', () => {
    expect(busyMachineWarning([peak(2, 229), peak(4, 230)], 2)).toBeNull();
  });
});

describe('speedChangeWarning', () => {
  const { speedChangeWarning } = require('../benchmarks/cli/cli') as typeof import('../benchmarks/cli/cli');
  const peak = (threads: number, gflops: number, gbs = 30) => ({ threads, gflops, gbs });

  test('steady: peaks within a fifth at every thread count, bandwidth ignored, thread counts matched', () => {
    expect(speedChangeWarning([peak(1, 101.5), peak(2, 202.6)], [peak(1, 100.7), peak(2, 200.9)])).toBeNull();
    expect(speedChangeWarning([peak(2, 180.2)], [peak(2, 200.3)])).toBeNull();
    expect(speedChangeWarning([peak(2, 200, 26.0)], [peak(2, 199, 34.7)])).toBeNull();
    expect(speedChangeWarning([peak(1, 100)], [peak(2, 200)])).toBeNull();
    expect(speedChangeWarning([peak(2, 200)], [])).toBeNull();
  });

  test('changed: a peak that moved by more than a fifth, either way, names the thread count', () => {
    expect(speedChangeWarning([peak(2, 102.3)], [peak(2, 197.5)])).toBe(
      "warning: the machine's speed changed during the run (2 thr 102.3 GFLOP/s at the start, 197.5 at the end): " +
        'rows timed minutes apart are not comparable, and a ratio is fair only with --interleave; rerun to confirm',
    );
    expect(speedChangeWarning([peak(1, 100), peak(2, 200)], [peak(1, 100), peak(2, 160)])).toMatch(
      /\(2 thr 200\.0 GFLOP\/s at the start, 160\.0 at the end\)/,
    );
    expect(speedChangeWarning([peak(1, 100), peak(2, 200)], [peak(1, 100), peak(2, 167)])).toBeNull();
  });
});
