/**
 * Timing of one prepared problem: warm-up calls, then timed calls until both
 * `repeat` calls and `minTime` seconds of timed work are reached (for slow
 * calls: at least 3 calls, stopping once 10 × minTime seconds are spent); plus
 * the peak RSS growth over those calls.
 */
import { performance } from 'node:perf_hooks';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import type { Prepared } from './peers/types';

export interface TimingOptions {
  /** Seconds of timed calls, at least. */
  minTime: number;
  /** Timed calls, at least. */
  repeat: number;
}

export interface Measurement {
  /** Milliseconds of each timed call. */
  samples: number[];
  medianMs: number;
  minMs: number;
  maxMs: number;
  /** Peak resident set during the calls minus the resident set just before them, in MiB (≥ 0). */
  rssMb: number;
  /** The output of the last timed call: the one that is verified. */
  output: Float32Array;
}

/** At most this many timed calls per row, however small the problem. */
const MAX_SAMPLES = 20000;

async function call(p: Prepared): Promise<Float32Array> {
  const r = p.run();
  return r instanceof Promise ? await r : r;
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** A process's resident set now and its high-water mark, in bytes. */
export interface MemoryReading {
  rss: number;
  maxRss: number;
}

function thisProcess(): MemoryReading {
  return { rss: process.memoryUsage.rss(), maxRss: process.resourceUsage().maxRSS * 1024 };
}

/**
 * RSS tracking: the resident set sampled after every call, and the kernel's
 * high-water mark (getrusage maxrss) when it rises during the run: a rise
 * means a peak above every earlier one happened inside these calls. The
 * process is this one, or the impl's own worker when it reports one
 * ({@link Prepared.memory}).
 */
class RssTracker {
  private readonly read: () => MemoryReading;
  private readonly base: number;
  private readonly maxBefore: number;
  private peak: number;

  constructor(p: Prepared) {
    this.read = p.memory ? () => p.memory!() : thisProcess;
    const now = this.read();
    this.base = this.peak = now.rss;
    this.maxBefore = now.maxRss;
  }

  sample(): void {
    const r = this.read().rss;
    if (r > this.peak) this.peak = r;
  }

  growthMb(): number {
    const maxAfter = this.read().maxRss;
    const peak = maxAfter > this.maxBefore ? Math.max(this.peak, maxAfter) : this.peak;
    return Math.max(0, peak - this.base) / 2 ** 20;
  }
}

/** V8's gc(), reachable without --expose-gc through a new context once the flag is set. */
const fullGc: (() => void) | undefined = (() => {
  try {
    v8.setFlagsFromString('--expose-gc');
    return vm.runInNewContext('gc') as () => void;
  } catch {
    return undefined;
  }
})();

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const QUIET_POLL_MS = 5;

/**
 * Waits at least minMs, then until this process has used less than `share`
 * of a core over the last spanMs, or about maxMs in all; returns the wait in
 * ms. The span should be longer than the clock tick at which the kernel adds
 * up a thread running on another core (4 ms here, 10 ms on some kernels;
 * Windows updates process times every 15.6 ms), so that a spinning thread
 * cannot read as idle between two ticks.
 */
async function untilQuiet(minMs: number, spanMs: number, share: number, maxMs: number): Promise<number> {
  const cpuMs = (): number => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const start = performance.now();
  // Samples every QUIET_POLL_MS, the first of them the latest at least a span old.
  const samples = [{ at: start, cpu: cpuMs() }];
  for (;;) {
    await sleep(QUIET_POLL_MS);
    const now = { at: performance.now(), cpu: cpuMs() };
    samples.push(now);
    while (samples.length > 2 && now.at - samples[1].at >= spanMs) samples.shift();
    const elapsed = now.at - start;
    if (elapsed >= maxMs) break;
    const from = samples[0];
    if (elapsed >= minMs && now.at - from.at >= spanMs && now.cpu - from.cpu < share * (now.at - from.at)) break;
  }
  return performance.now() - start;
}

/**
 * Collects garbage, then waits (up to 2 s) until this process is quiet: less
 * than 10% of a core of its own CPU time over 100 ms. A previous row's leftovers
 * (a peer's garbage, whose collection would otherwise start inside this row and
 * take a core from a multi-threaded kernel; V8 compiling; a thread pool winding
 * down) then do not land in this row's timings.
 */
export async function settle(): Promise<void> {
  fullGc?.();
  await untilQuiet(0, 100, 0.1, 2000);
}

/** Warm-up: at least one call (first-call allocations, JIT, thread start), up to ~20% of min-time. */
async function warmUp(p: Prepared, opts: TimingOptions, rss: RssTracker): Promise<void> {
  const warmEnd = performance.now() + Math.min(0.2 * opts.minTime * 1000, 500);
  let n = 0;
  do {
    p.beforeRun?.();
    await call(p);
    rss.sample();
    n++;
  } while (performance.now() < warmEnd && n < 1000);
}

/**
 * The timed calls of one implementation: when it has enough (`repeat` calls
 * and `minTime` seconds, or MAX_SAMPLES, or the wall-clock limit; for slow
 * calls, 3 calls once ten times min-time is spent), and the Measurement.
 */
class TimedCalls {
  readonly samples: number[] = [];
  total = 0;
  output: Float32Array | undefined;

  constructor(
    private readonly p: Prepared,
    private readonly opts: TimingOptions,
    private readonly wallEnd: number,
  ) {}

  done(): boolean {
    const n = this.samples.length;
    const { minTime, repeat } = this.opts;
    const enough = n >= repeat && (this.total >= minTime * 1000 || n >= MAX_SAMPLES || performance.now() >= this.wallEnd);
    const overBudget = n >= Math.min(3, repeat) && this.total >= 10 * minTime * 1000;
    return enough || overBudget;
  }

  async timeOne(): Promise<void> {
    this.p.beforeRun?.();
    const t0 = performance.now();
    const r = this.p.run();
    this.output = r instanceof Promise ? await r : r;
    const ms = this.p.lastCallMs?.() ?? performance.now() - t0;
    this.samples.push(ms);
    this.total += ms;
  }

  result(rssMb: number): Measurement {
    return {
      samples: this.samples,
      medianMs: median(this.samples),
      minMs: Math.min(...this.samples),
      maxMs: Math.max(...this.samples),
      rssMb,
      output: this.output!,
    };
  }
}

export async function measure(p: Prepared, opts: TimingOptions): Promise<Measurement> {
  await settle();
  const rss = new RssTracker(p);
  await warmUp(p, opts, rss);
  const timed = new TimedCalls(p, opts, performance.now() + 3 * opts.minTime * 1000);
  while (!timed.done()) {
    await timed.timeOne();
    rss.sample();
  }
  return timed.result(rss.growthMb());
}

/**
 * The pause between two bursts (see untilQuiet): at least 20 ms, then until
 * this process has used under a fifth of a core over the last 20 ms, 250 ms at
 * most; returns its length in ms. A library's pool threads spin for a while
 * after a call: mhsa's for 2 ms, onnxruntime's intra-op worker for ~40 ms
 * (measured on Zen 4: a core's worth of CPU in each window up to 40 ms after a
 * session.run, on every workload tried; both spins: docs/design/thread-pool.md).
 * A fixed 20 ms gap let each burst after onnxruntime's start with one of two
 * cores still taken by its spinning.
 */
export function burstGap(): Promise<number> {
  return untilQuiet(20, 20, 0.2, 250);
}

/**
 * Times several implementations of one problem in alternating bursts (--interleave):
 * each burst runs one implementation for about a tenth of minTime (one call
 * when calls are longer), the order reverses every round, and rounds continue
 * until every implementation has what {@link measure} would require. On a
 * shared machine whose speed drifts over seconds, each implementation then
 * sees the same drift, so the ratios are not decided by which one ran during
 * a slow spell. Each burst starts after a pause (burstGap: until the previous
 * library's threads stop spinning) and one untimed call (for calls under
 * 20 ms), so neither the previous library's spinning threads nor its cache
 * footprint lands in the timings. A peer that computes in another process
 * (pytorch's worker) is not watched by burstGap and gets its minimum pause.
 * RSS growth is measured during each implementation's warm-up, which runs
 * alone.
 */
export async function measureInterleaved(ps: readonly Prepared[], opts: TimingOptions): Promise<Measurement[]> {
  const rssMb: number[] = [];
  for (const p of ps) {
    await settle();
    const rss = new RssTracker(p);
    await warmUp(p, opts, rss);
    rssMb.push(rss.growthMb());
  }
  const wallEnd = performance.now() + 3 * opts.minTime * 1000 * ps.length;
  const timed = ps.map((p) => new TimedCalls(p, opts, wallEnd));
  const burstMs = Math.min(500, Math.max(20, (opts.minTime * 1000) / 10));
  await settle();
  for (let round = 0; timed.some((t) => !t.done()); round++) {
    const order = ps.map((_, i) => i);
    if (round % 2) order.reverse();
    for (const i of order) {
      const t = timed[i];
      if (t.done()) continue;
      await burstGap();
      if (t.samples.length === 0 || t.total / t.samples.length < 20) {
        ps[i].beforeRun?.();
        await call(ps[i]);
      }
      const burstEnd = performance.now() + burstMs;
      do await t.timeOne();
      while (performance.now() < burstEnd && t.samples.length < MAX_SAMPLES);
    }
  }
  return timed.map((t, i) => t.result(rssMb[i]));
}

/** One untimed call for --check (after beforeRun). */
export async function once(p: Prepared): Promise<Float32Array> {
  p.beforeRun?.();
  return call(p);
}
