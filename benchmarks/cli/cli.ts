/**
 * mhsa-bench: times mhsa (and optionally its peers) on the standard
 * workloads, verifies every result against a float64 reference, and prints an
 * aligned table (stdout) and/or a JSON report. Run `mhsa-bench --help`.
 */
import * as os from 'node:os';
import { info, setNumThreads, getNumThreads } from '../../lib';
import { native } from '../../lib/native';
import { parseArgs, USAGE, UsageError, type Options } from './args';
import { makeInputs, type Inputs } from './data';
import { rowInChild } from './fresh-process';
import { mhsaImpl } from './mhsa-impl';
import { PEERS, type Impl, type Prepared } from './peers';
import { pytorchMissing } from './peers/pytorch';
import { BF16_TOLERANCE, buildReference, INT8_TOLERANCE, relativeError, TOLERANCE, type Reference } from './reference';
import { renderChart } from './chart';
import { renderSaved } from './from-json';
import { formatTable, legend, SCHEMA, skipNotes, writeReportFile, type ImplInfo, type Peak, type Report, type Row } from './report';
import { measure, measureInterleaved, once, type Measurement } from './runner';
import { bytes, flops, outputLength, precisionOf, shapeString, WORKLOADS, type Problem, type Workload } from './workloads';

/**
 * A warning when the start-up calibration shows other work on the machine: an
 * FMA peak that grew by less than half a core's worth from one thread count to
 * the next (a core kept busy by another process gives a 2-thread peak near the
 * 1-thread one). Then the timings, and % of peak, say more about the
 * neighbours than about the libraries. Null on a quiet machine, and with one
 * thread count (nothing to compare). The load average is not used: right after
 * `npm install` it still counts the compiler.
 */
export function busyMachineWarning(peaks: readonly Peak[], cores: number): string | null {
  const reasons: string[] = [];
  const sorted = [...peaks].sort((a, b) => a.threads - b.threads);
  for (let i = 1; i < sorted.length; i++) {
    const [lo, hi] = [sorted[i - 1], sorted[i]];
    const perThread = lo.gflops / lo.threads;
    if (hi.threads <= cores && hi.gflops < lo.gflops + 0.5 * perThread * (hi.threads - lo.threads)) {
      reasons.push(`${hi.threads} threads measured ${hi.gflops.toFixed(1)} GFLOP/s against ${lo.gflops.toFixed(1)} on ${lo.threads}`);
    }
  }
  if (reasons.length === 0) return null;
  return `warning: the machine looks busy (${reasons.join('; ')}): timings and % of peak will be unreliable; rerun on an idle machine`;
}

/**
 * A warning when the FMA peak measured at the end of a full run differs from
 * the start-up one by more than a fifth at some thread count: the machine ran
 * at different speeds during the run (on a shared VM, a neighbour came or
 * went), so rows timed minutes apart are not comparable, and a row's ratio is
 * fair only when its implementations were timed side by side (--interleave).
 * Seen here: 102.3 GFLOP/s at the start of a 2-thread run and 197.5 at its
 * end. Read bandwidth is left out: it moved by a third between two
 * calibrations of an otherwise steady run.
 */
export function speedChangeWarning(start: readonly Peak[], end: readonly Peak[]): string | null {
  const reasons: string[] = [];
  for (const s of start) {
    const e = end.find((p) => p.threads === s.threads);
    if (!e || !(s.gflops > 0) || !(e.gflops > 0)) continue;
    if (Math.max(s.gflops, e.gflops) > 1.2 * Math.min(s.gflops, e.gflops)) {
      reasons.push(`${s.threads} thr ${s.gflops.toFixed(1)} GFLOP/s at the start, ${e.gflops.toFixed(1)} at the end`);
    }
  }
  if (reasons.length === 0) return null;
  return (
    `warning: the machine's speed changed during the run (${reasons.join('; ')}): rows timed minutes apart ` +
    'are not comparable, and a ratio is fair only with --interleave; rerun to confirm'
  );
}

/** Writes a one-line, overwritten progress bar on stderr (only when enabled). */
class Progress {
  private done = 0;
  constructor(private readonly total: number, private readonly enabled: boolean) {}

  show(label: string): void {
    if (!this.enabled) return;
    const width = 20;
    const filled = this.total === 0 ? width : Math.round((this.done / this.total) * width);
    const bar = '#'.repeat(filled) + '-'.repeat(width - filled);
    const cols = process.stderr.columns || 100;
    const text = `[${bar}] ${this.done}/${this.total} ${label}`;
    process.stderr.write(`\r\x1b[K${text.slice(0, cols - 1)}`);
  }

  step(): void {
    this.done++;
  }

  clear(): void {
    if (this.enabled) process.stderr.write('\r\x1b[K');
  }
}

function firstLine(e: unknown): string {
  return String(e instanceof Error ? e.message : e).split('\n')[0];
}

function calibrate(threads: number[], quick: boolean): Peak[] {
  // ~0.1 s of FMAs and 256 MiB read (128 MiB for quick runs) per thread count, best of 3 each.
  return threads.map((t) => {
    const r = native.calibrate(t, 2e7, (quick ? 128 : 256) * 2 ** 20);
    return { threads: t, gflops: r.gflops, bf16Gflops: r.bf16Gflops, gbs: r.gbs };
  });
}

/**
 * A row's % of the machine's peak: of read bandwidth for GB/s rows, else of
 * the FMA peak, or of the bf16 peak for mhsa's bf16 rows where the CPU
 * multiplies bf16 (peers on those rows compute in float32: theirs stays of the
 * FMA peak); none for the rows computed in int8 (mhsa's, onnxruntime-int8's).
 */
function percentOfPeak(row: Row, peak: Peak): number | null {
  if (row.metric === 'GB/s') return (100 * row.gbs!) / peak.gbs;
  const mhsa = row.impl === 'mhsa' || row.impl === 'mhsa-alloc';
  const precision = precisionOf(row.problem);
  // No int8 peak is measured: a rate computed in int8 has nothing to be a share of.
  if ((mhsa || row.impl === 'onnxruntime-int8') && precision === 'int8') return null;
  const bf16 = mhsa && precision === 'bf16' && (peak.bf16Gflops ?? 0) > 0;
  return (100 * row.gflops!) / (bf16 ? peak.bf16Gflops! : peak.gflops);
}

/**
 * The normwise tolerance of a problem's check: bf16 weights (and activations)
 * round at 2^-9, far above float32's sums; int8 quantizes at 1/254 of a row's or column's range.
 */
function toleranceOf(p: Problem): number {
  const precision = precisionOf(p);
  return precision === 'int8' ? INT8_TOLERANCE : precision === 'bf16' ? BF16_TOLERANCE : TOLERANCE;
}

function describeProblemLine(w: Workload): string {
  return `${w.name.padEnd(10)} ${shapeString(w.problem).padEnd(28)} ${w.suites.includes('quick') ? 'quick ' : '      '}${w.metric.padEnd(8)} ${w.description}`;
}

function resolveModule(name: string): boolean {
  try {
    require.resolve(name);
    return true;
  } catch {
    return false;
  }
}

function listText(): string {
  const lines = ['Workloads (name, timed size, in quick suite, metric, description):', ''];
  for (const w of WORKLOADS) lines.push(`  ${describeProblemLine(w)}`);
  lines.push('', 'Peers (--peers[=LIST]):', '');
  const peerPkgs: Record<string, string[]> = {
    onnxruntime: ['onnxruntime-node', 'onnx-proto'],
    'onnxruntime-mha': ['onnxruntime-node', 'onnx-proto'],
    'tfjs-wasm': ['@tensorflow/tfjs', '@tensorflow/tfjs-backend-wasm'],
    js: [],
  };
  for (const p of PEERS) {
    if (p.name === 'pytorch' || p.name === 'pytorch-mha') {
      const why = pytorchMissing();
      lines.push(`  ${p.name.padEnd(12)} ${'python3 with torch and numpy'.padEnd(46)} ${why === null ? 'available' : `not available: ${why}`}`);
      continue;
    }
    const pkgs = peerPkgs[p.name] ?? [];
    const missing = pkgs.filter((n) => !resolveModule(n));
    const state = missing.length === 0 ? 'available' : `not installed: ${missing.join(', ')}`;
    lines.push(`  ${p.name.padEnd(12)} ${(pkgs.join(' + ') || 'built in').padEnd(46)} ${state}`);
  }
  return lines.join('\n');
}

interface Context {
  opts: Options;
  out: (s: string) => void;
  loud: (s: string) => void;
  peaks: Map<number, Peak>;
}

/** The (impl × threads) rows of one workload. */
async function runWorkload(ctx: Context, w: Workload, impls: Impl[], progress: Progress, rows: Row[]): Promise<void> {
  const { opts } = ctx;
  const p: Problem = opts.check ? w.small : w.problem;
  const shape = shapeString(p);
  // Built on first use: --fresh-process rows build their own in each child.
  let inputs: Inputs | undefined;
  const inputsOnce = (): Inputs => (inputs ??= makeInputs(p, `${w.name}:${shape}`));
  let ref: Reference | undefined;
  const f = flops(p);
  const nbytes = bytes(p);
  const mhsaMedian = new Map<number, number>();
  const timing = { minTime: opts.minTime, repeat: opts.repeat };

  /** Verifies an output (and fills the timing fields from m, when timed); pushes the row. */
  const finishRow = (impl: Impl, prepared: Prepared, base: Row, threads: number, m: Measurement | undefined, out: Float32Array) => {
    const row: Row = { ...base, status: 'ok', checked: ref!.indices.length };
    if (m) {
      const sec = m.medianMs / 1000;
      const peak = ctx.peaks.get(threads);
      Object.assign(row, {
        median_ms: m.medianMs, min_ms: m.minMs, max_ms: m.maxMs, samples: m.samples.length, rss_mb: m.rssMb,
        gflops: w.metric === 'GB/s' && p.kind === 'softmax' ? null : f / sec / 1e9,
        gbs: w.metric === 'GB/s' ? nbytes / sec / 1e9 : null,
      });
      if (peak) row.pct_peak = percentOfPeak(row, peak);
    }
    const output = prepared.canonical ? prepared.canonical(out) : out;
    const err = relativeError(output, ref!, outputLength(p));
    row.rel_err = Number.isFinite(err) ? err : null;
    const tolerance = toleranceOf(p);
    if (!(err <= tolerance)) {
      // A wrong result is never reported as a timing.
      Object.assign(row, { status: 'wrong', median_ms: null, min_ms: null, max_ms: null, gflops: null, gbs: null, pct_peak: null });
      row.note = `wrong result: rel err ${Number.isNaN(err) ? 'NaN (non-finite output or wrong length)' : err.toExponential(2)} > ${tolerance}`;
      progress.clear();
      ctx.loud(`mhsa-bench: WRONG RESULT: ${impl.name} on ${w.name} (${shape}, ${threads} thread${threads > 1 ? 's' : ''}): ${row.note}`);
    } else if (impl.name === 'mhsa' && row.median_ms !== null) {
      mhsaMedian.set(threads, row.median_ms);
    }
    rows.push(row);
  };
  const failRow = (impl: Impl, base: Row, threads: number, e: unknown) => {
    progress.clear();
    ctx.loud(`mhsa-bench: ${impl.name} failed on ${w.name} (${shape}, ${threads} thread${threads > 1 ? 's' : ''}): ${firstLine(e)}`);
    rows.push({ ...base, status: 'error', note: `error: ${firstLine(e)}` });
  };
  const dispose = async (prepared: Prepared | undefined) => {
    try {
      await prepared?.dispose();
    } catch {
      // nothing useful to do
    }
  };

  for (const threads of opts.threads) {
    // --interleave: every runnable impl is prepared first, then timed in alternating bursts.
    const group: { impl: Impl; prepared: Prepared; base: Row }[] = [];
    // --fresh-process: the runnable impls, timed in child processes once the list is complete.
    const fresh: { impl: Impl; base: Row }[] = [];
    for (const impl of impls) {
      const base: Row = {
        workload: w.name, shape, threads, impl: impl.name, status: 'skipped',
        median_ms: null, min_ms: null, max_ms: null, samples: null, metric: w.metric,
        gflops: null, gbs: null, pct_peak: null, rss_mb: null, rel_err: null, checked: null, vs_mhsa: null, note: null,
        problem: p,
      };
      const skip = threads > impl.maxThreads
        ? `${impl.name} runs on ${impl.maxThreads} thread${impl.maxThreads > 1 ? 's' : ''} at most`
        : impl.supports(p);
      if (skip) {
        rows.push({ ...base, note: skip });
        continue;
      }
      progress.show(`${w.name} · ${threads} thr · ${impl.name}`);
      if (opts.freshProcess) {
        fresh.push({ impl, base });
        continue;
      }
      let prepared: Prepared | undefined;
      let grouped = false;
      try {
        ref ??= buildReference(p, inputsOnce(), opts.check);
        prepared = withFault(impl, await impl.prepare(p, inputsOnce(), threads));
        if (opts.interleave && !opts.check) {
          group.push({ impl, prepared, base });
          prepared = undefined;  // disposed after the group is timed
          grouped = true;
          continue;
        }
        if (opts.check) {
          finishRow(impl, prepared, base, threads, undefined, await once(prepared));
        } else {
          const m = await measure(prepared, timing);
          finishRow(impl, prepared, base, threads, m, m.output);
        }
      } catch (e) {
        failRow(impl, base, threads, e);
      } finally {
        await dispose(prepared);
        if (!grouped) progress.step();
      }
    }
    if (fresh.length > 0) {
      progress.show(`${w.name} · ${threads} thr · ${fresh.map((g) => g.impl.name).join(' / ')}, each call in a new process`);
      await freshProcessRows(ctx, w, fresh, threads, mhsaMedian, failRow, rows);
      fresh.forEach(() => progress.step());
    }
    if (group.length > 0) {
      progress.show(`${w.name} · ${threads} thr · ${group.map((g) => g.impl.name).join(' / ')} interleaved`);
      try {
        const ms = await measureInterleaved(group.map((g) => g.prepared), timing);
        group.forEach((g, i) => finishRow(g.impl, g.prepared, g.base, threads, ms[i], ms[i].output));
      } catch (e) {
        // One failing call spoils the whole group's timing: report it on each.
        for (const g of group) failRow(g.impl, g.base, threads, e);
      } finally {
        for (const g of group) {
          await dispose(g.prepared);
          progress.step();
        }
      }
    }
  }
  for (const r of rows) {
    if (r.workload !== w.name || r.impl === 'mhsa' || r.median_ms === null) continue;
    const m = mhsaMedian.get(r.threads);
    if (m !== undefined) r.vs_mhsa = r.median_ms / m;
  }
}

/**
 * The --fresh-process rows of one workload and thread count: each impl timed
 * and verified in --fresh-process=N child processes (the row reports the one
 * with the median time), in an order that
 * reverses every round (so a drift in the host's speed reaches every impl
 * alike), then rated against this run's peaks.
 */
async function freshProcessRows(
  ctx: Context,
  w: Workload,
  entries: { impl: Impl; base: Row }[],
  threads: number,
  mhsaMedian: Map<number, number>,
  failRow: (impl: Impl, base: Row, threads: number, e: unknown) => void,
  rows: Row[],
): Promise<void> {
  const runs: Omit<Row, 'problem'>[][] = entries.map(() => []);
  const failed = new Set<number>();
  for (let round = 0; round < ctx.opts.freshProcessRounds; round++) {
    const order = entries.map((_, i) => i);
    if (round % 2) order.reverse();
    for (const i of order) {
      if (failed.has(i)) continue;
      try {
        const row = await rowInChild(ctx.opts, w.name, entries[i].impl.name, threads);
        runs[i].push(row);
        if (row.status !== 'ok') failed.add(i);
      } catch (e) {
        failRow(entries[i].impl, entries[i].base, threads, e);
        failed.add(i);
        runs[i] = [];
      }
    }
  }
  entries.forEach(({ impl, base }, i) => {
    if (runs[i].length === 0) return;
    const bad = runs[i].find((r) => r.status !== 'ok');
    const timed = [...runs[i]].sort((a, b) => (a.median_ms ?? Infinity) - (b.median_ms ?? Infinity));
    const chosen = bad ?? timed[timed.length >> 1];
    const row: Row = { ...base, ...chosen, problem: base.problem, vs_mhsa: null, pct_peak: null };
    if (!bad) {
      row.min_ms = Math.min(...runs[i].map((r) => r.min_ms!));
      row.max_ms = Math.max(...runs[i].map((r) => r.max_ms!));
      row.samples = runs[i].reduce((n, r) => n + r.samples!, 0);
      row.rss_mb = Math.max(...runs[i].map((r) => r.rss_mb ?? 0));
      row.note = `median of ${runs[i].length} process${runs[i].length > 1 ? 'es' : ''}: ${runs[i].map((r) => fmtMedian(r.median_ms!)).join(', ')} ms`;
    } else {
      ctx.loud(`mhsa-bench: ${impl.name} on ${w.name} (${threads} thr): ${bad.note}`);
    }
    const peak = ctx.peaks.get(threads);
    if (peak && row.median_ms !== null) row.pct_peak = percentOfPeak(row, peak);
    if (impl.name === 'mhsa' && row.status === 'ok' && row.median_ms !== null) mhsaMedian.set(threads, row.median_ms);
    rows.push(row);
  });
}

function fmtMedian(ms: number): string {
  return ms >= 10 ? ms.toFixed(1) : ms.toFixed(3);
}

/** --child-row: the one row of one impl, timed and verified here, printed as JSON on stdout for the parent. */
async function runChildRow(opts: Options, implName: string): Promise<number> {
  const impl = [mhsaImpl, ...PEERS].find((i) => i.name === implName)!;
  const rows: Row[] = [];
  const reason = await impl.load();
  const loud = (s: string) => process.stderr.write(`${s}\n`);
  const ctx: Context = { opts, out: () => {}, loud, peaks: new Map() };
  if (reason !== null) throw new Error(`${impl.name} is not available: ${reason}`);
  for (const w of opts.workloads) await runWorkload(ctx, w, [impl], new Progress(0, false), rows);
  process.stdout.write(`${JSON.stringify(rows.map(({ problem, ...r }) => r))}\n`);
  return rows.some((r) => r.status === 'wrong' || r.status === 'error') ? 1 : 0;
}

function plannedCount(opts: Options, impls: Impl[]): number {
  let n = 0;
  for (const w of opts.workloads) {
    const p = opts.check ? w.small : w.problem;
    for (const t of opts.threads) for (const i of impls) if (t <= i.maxThreads && !i.supports(p)) n++;
  }
  return n;
}

/**
 * Testing hook: MHSA_BENCH_FAULT=<impl> adds 1 to element 0 of that impl's
 * every output, so tests can see a wrong result reported (exit code 1).
 */
function withFault(impl: Impl, prepared: Prepared): Prepared {
  if (process.env.MHSA_BENCH_FAULT !== impl.name) return prepared;
  return {
    ...prepared,
    run: () => {
      const r = prepared.run();
      const spoil = (y: Float32Array) => {
        if (y.length > 0) y[0] += 1;
        return y;
      };
      return r instanceof Promise ? r.then(spoil) : spoil(r);
    },
  };
}

export async function main(argv: readonly string[]): Promise<number> {
  let opts: Options;
  try {
    opts = parseArgs(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`mhsa-bench: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  if (opts.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (opts.list) {
    process.stdout.write(`${listText()}\n`);
    return 0;
  }
  if (opts.fromJson !== undefined) {
    try {
      return renderSaved(opts);
    } catch (e) {
      if (!(e instanceof UsageError)) throw e;
      process.stderr.write(`mhsa-bench: ${e.message}\n`);
      return 2;
    }
  }

  if (opts.childRow !== undefined) return runChildRow(opts, opts.childRow);

  const jsonToStdout = opts.json === '-';
  // Everything but the JSON goes to stderr when stdout carries the JSON.
  const out = (s: string) => (jsonToStdout ? process.stderr : process.stdout).write(`${s}\n`);
  const loud = (s: string) => process.stderr.write(`${s}\n`);
  const started = new Date();
  const t0 = Date.now();
  const loadStart = os.loadavg();
  const threadsBefore = getNumThreads();
  const mhsaInfo = info();
  out(`mhsa-bench ${opts.check ? 'check' : opts.explicitWorkloads ? 'custom' : opts.suite} · ${os.cpus()[0]?.model ?? 'unknown CPU'} · ${os.cpus().length} cores · Node ${process.versions.node}`);
  // info() is the pool as loaded; each row sets its own thread count (--threads).
  out(`info() at start-up: ${JSON.stringify(mhsaInfo)}; rows run at --threads ${opts.threads.join(',')}`);

  const impls: Impl[] = [];
  const implInfo: ImplInfo[] = [];
  const notes: string[] = [];
  const candidates: Impl[] = [mhsaImpl, ...PEERS.filter((p) => opts.peers.includes(p.name))];
  for (const impl of candidates) {
    let reason: string | null;
    try {
      reason = await impl.load();
    } catch (e) {
      reason = `failed to load (${firstLine(e)})`;
    }
    implInfo.push({ impl: impl.name, label: impl.label, available: reason === null, note: reason, timed: { ...impl.timed } });
    if (reason === null) impls.push(impl);
    else notes.push(`note: skipped ${impl.name}: ${reason}`);
  }
  if (impls.length > 1) out(`impls: ${impls.map((i) => i.label).join(' · ')}`);
  for (const n of notes) out(n);

  const peaks = new Map<number, Peak>();
  let calibration: { start: Peak[]; end: Peak[] | null } | null = null;
  if (!opts.check) {
    const start = calibrate(opts.threads, opts.suite === 'quick' && !opts.explicitWorkloads);
    for (const p of start) peaks.set(p.threads, p);
    calibration = { start, end: null };
    out(
      `peak (measured at start-up): ${start
        .map((p) => `${p.threads} thr ${p.gflops.toFixed(1)} GFLOP/s FMA, ${(p.bf16Gflops ?? 0).toFixed(1)} GFLOP/s bf16 (${info().bf16}), ${p.gbs.toFixed(1)} GB/s read`)
        .join(' · ')}`,
    );
    const how = opts.interleave ? ', mhsa and its peers interleaved in bursts' : opts.freshProcess ? ', each row in a new process' : '';
    out(`timing: ≥ ${opts.repeat} calls and ≥ ${opts.minTime} s per row after warm-up${how}; load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
    const busy = busyMachineWarning(start, os.availableParallelism());
    if (busy) out(busy);
  } else {
    out(`check: every workload once at a small size, all output elements against float64 (tolerance ${TOLERANCE})`);
  }

  const progress = new Progress(plannedCount(opts, impls), process.stderr.isTTY === true && opts.json === undefined);
  const rows: Row[] = [];
  const ctx: Context = { opts, out, loud, peaks };
  try {
    for (const w of opts.workloads) await runWorkload(ctx, w, impls, progress, rows);
  } finally {
    progress.clear();
    setNumThreads(threadsBefore);
  }

  if (calibration && opts.suite === 'full') {
    // Calibrate again at the end: a busy machine shows as a difference; % peak uses the best of both.
    const end = calibrate(opts.threads, false);
    calibration.end = end;
    out(
      `peak (measured again at the end): ${end
        .map((p) => `${p.threads} thr ${p.gflops.toFixed(1)} GFLOP/s, ${(p.bf16Gflops ?? 0).toFixed(1)} GFLOP/s bf16, ${p.gbs.toFixed(1)} GB/s`)
        .join(' · ')}`,
    );
    const changed = speedChangeWarning(calibration.start, end);
    if (changed) out(changed);
    for (const e of end) {
      const s = peaks.get(e.threads)!;
      const best = {
        threads: e.threads,
        gflops: Math.max(s.gflops, e.gflops),
        bf16Gflops: Math.max(s.bf16Gflops ?? 0, e.bf16Gflops ?? 0),
        gbs: Math.max(s.gbs, e.gbs),
      };
      if (best.gflops !== s.gflops || best.gbs !== s.gbs || best.bf16Gflops !== s.bf16Gflops) {
        peaks.set(e.threads, best);
        for (const r of rows) {
          if (r.threads !== e.threads || r.pct_peak === null) continue;
          r.pct_peak = percentOfPeak(r, best);
        }
      }
    }
  }

  out('');
  out(formatTable(rows, { markdown: opts.markdown, check: opts.check }));
  out('');
  if (!opts.check) out(legend(rows.some((r) => r.impl !== 'mhsa' && r.status !== 'skipped')));
  for (const n of skipNotes(rows, opts.workloads.length)) out(n);

  const wrong = rows.filter((r) => r.status === 'wrong');
  const failed = rows.filter((r) => r.status === 'error');
  const mhsaFailed = failed.filter((r) => r.impl === 'mhsa');
  for (const r of [...wrong, ...failed]) out(`${r.status.toUpperCase()}: ${r.impl} ${r.workload} ${r.threads} thr: ${r.note}`);
  const elapsed = (Date.now() - t0) / 1000;
  out(
    `${rows.filter((r) => r.status === 'ok').length} ok, ${wrong.length} wrong, ${failed.length} errors, ` +
      `${rows.filter((r) => r.status === 'skipped').length} skipped` +
      (notes.length > 0 ? `, ${notes.length} peer${notes.length > 1 ? 's' : ''} unavailable (see the notes above)` : '') +
      ` in ${elapsed.toFixed(1)} s` +
      (opts.check ? '' : `; load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`),
  );

  if (opts.json !== undefined || opts.svg !== undefined) {
    const report: Report = {
      schema: SCHEMA,
      command: `mhsa-bench ${argv.join(' ')}`.trim(),
      date: started.toISOString(),
      elapsed_s: elapsed,
      host: {
        cpu: os.cpus()[0]?.model ?? null,
        cores: os.cpus().length,
        platform: `${process.platform}-${process.arch}`,
        node: process.versions.node,
        loadavg_start: loadStart,
        loadavg_end: os.loadavg(),
      },
      info: mhsaInfo,
      calibration,
      settings: {
        mode: opts.check ? 'check' : 'timing',
        suite: opts.suite,
        workloads: opts.workloads.map((w) => w.name),
        threads: opts.threads,
        min_time_s: opts.minTime,
        repeat: opts.repeat,
        interleave: opts.interleave,
        fresh_process: opts.freshProcess ? opts.freshProcessRounds : 0,
        tolerance: TOLERANCE,
      },
      impls: implInfo,
      results: rows.map(({ problem, ...r }) => ({ ...r, problem })),
    };
    if (opts.svg !== undefined) {
      writeReportFile(opts.svg, renderChart(report));
      out(`SVG chart written to ${opts.svg}`);
    }
    if (opts.json !== undefined) {
      const text = `${JSON.stringify(report, null, 2)}\n`;
      if (jsonToStdout) process.stdout.write(text);
      else {
        writeReportFile(opts.json, text);
        out(`JSON report written to ${opts.json}`);
      }
    }
  }
  return wrong.length > 0 || mhsaFailed.length > 0 ? 1 : 0;
}


/** Runs main() and exits with its code (peers may keep thread pools or workers alive). */
export function run(argv: readonly string[]): void {
  main(argv).then(
    (code) => {
      process.exitCode = code;
      setImmediate(() => process.exit(code));
    },
    (e) => {
      process.stderr.write(`mhsa-bench: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    },
  );
}

if (require.main === module) run(process.argv.slice(2));
