/** Result rows, the aligned text / Markdown table, and the JSON report (written, and read back by --from-json). */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { UsageError } from './args';
import { suiteWorkloads, type Metric, type Problem } from './workloads';

export const SCHEMA = 'mhsa-bench/1';

export type Status = 'ok' | 'wrong' | 'error' | 'skipped';

/** One (workload, threads, impl) result: the JSON report's `results[]` entry. */
export interface Row {
  workload: string;
  shape: string;
  threads: number;
  impl: string;
  status: Status;
  median_ms: number | null;
  min_ms: number | null;
  max_ms: number | null;
  samples: number | null;
  metric: Metric;
  gflops: number | null;
  gbs: number | null;
  pct_peak: number | null;
  rss_mb: number | null;
  rel_err: number | null;
  checked: number | null;
  vs_mhsa: number | null;
  note: string | null;
  problem: Problem;
}

function fmtMs(x: number | null): string {
  if (x === null) return '';
  if (x >= 100) return x.toFixed(0);
  if (x >= 10) return x.toFixed(1);
  if (x >= 1) return x.toFixed(2);
  return x.toFixed(3);
}

function fmtRate(r: Row): string {
  const v = r.metric === 'GB/s' ? r.gbs : r.gflops;
  if (v === null) return '';
  return `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} ${r.metric === 'GB/s' ? 'GB/s' : 'GF/s'}`;
}

function fmtErr(x: number | null): string {
  return x === null ? 'NaN' : x === 0 ? '0' : x.toExponential(1);
}

/** The cells of a row, for the timing table. */
function timingCells(r: Row): string[] {
  const bad = r.status === 'wrong' ? 'WRONG' : r.status === 'error' ? 'ERROR' : '';
  return [
    r.workload,
    r.shape,
    String(r.threads),
    r.impl,
    bad || fmtMs(r.median_ms),
    bad ? '' : fmtMs(r.min_ms),
    bad ? '' : fmtMs(r.max_ms),
    bad ? '' : fmtRate(r),
    r.pct_peak === null ? '' : `${r.pct_peak.toFixed(0)}%`,
    r.rss_mb === null ? '' : r.rss_mb.toFixed(1),
    r.status === 'error' ? '' : fmtErr(r.rel_err),
    r.vs_mhsa === null ? '' : `${r.vs_mhsa.toFixed(2)}x`,
  ];
}

const TIMING_HEAD = ['workload', 'shape', 'thr', 'impl', 'median ms', 'min ms', 'max ms', 'rate', '% peak', 'RSS MB', 'rel err', 'mhsa x'];
const TIMING_RIGHT = [false, false, true, false, true, true, true, true, true, true, true, true];

function checkCells(r: Row): string[] {
  return [r.workload, r.shape, String(r.threads), r.impl, r.status === 'error' ? '' : fmtErr(r.rel_err), String(r.checked ?? ''), r.status.toUpperCase()];
}
const CHECK_HEAD = ['workload', 'shape', 'thr', 'impl', 'rel err', 'checked', 'status'];
const CHECK_RIGHT = [false, false, true, false, true, true, false];

function textTable(head: string[], rows: string[][], right: boolean[], groupBy = 0): string {
  const widths = head.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)));
  const line = (cells: string[]) =>
    cells.map((s, c) => (right[c] ? s.padStart(widths[c]) : s.padEnd(widths[c]))).join('  ').trimEnd();
  const out = [line(head), widths.map((w) => '-'.repeat(w)).join('  ')];
  let prev: string | undefined;
  for (const r of rows) {
    if (prev !== undefined && r[groupBy] !== prev) out.push('');
    out.push(line(r));
    prev = r[groupBy];
  }
  return out.join('\n');
}

function markdownTable(head: string[], rows: string[][], right: boolean[]): string {
  const esc = (s: string) => s.replace(/\|/g, '\\|');
  const out = [`| ${head.map(esc).join(' | ')} |`, `|${right.map((r) => (r ? '---:' : ':---')).join('|')}|`];
  for (const r of rows) out.push(`| ${r.map(esc).join(' | ')} |`);
  return out.join('\n');
}

/** The table of the rows that ran (skipped rows are summarized as notes instead). */
export function formatTable(rows: readonly Row[], opts: { markdown: boolean; check: boolean }): string {
  const shown = rows.filter((r) => r.status !== 'skipped');
  const cells = opts.check ? checkCells : timingCells;
  let head = opts.check ? CHECK_HEAD : TIMING_HEAD;
  let right = opts.check ? CHECK_RIGHT : TIMING_RIGHT;
  let body = shown.map(cells);
  if (!opts.check && shown.every((r) => r.impl === 'mhsa')) {
    // No peers: drop the comparison column.
    head = head.slice(0, -1);
    right = right.slice(0, -1);
    body = body.map((r) => r.slice(0, -1));
  }
  return opts.markdown ? markdownTable(head, body, right) : textTable(head, body, right);
}

/** The lines under the timing table (the comparison line only when peers ran). */
export function legend(withPeers: boolean): string {
  return [
    'rate: GFLOP/s (GF/s) for compute-bound work, GB/s for memory-bound work (softmax, decode)',
    '% peak: of the FMA peak (GF/s rows) or DRAM read bandwidth (GB/s rows) measured for that thread count;',
    '  a GB/s row whose data stays partly in the caches (s_512) can pass 100 %',
    'RSS MB: peak resident-set growth during the calls; rel err: ‖y − ref‖₂/‖ref‖₂ against float64 on a sample',
    ...(withPeers ? ['mhsa x: peer median / mhsa median at the same thread count (> 1: mhsa is faster)'] : []),
  ].join('\n');
}

/** A measured peak of one thread count: the FMA rate and the read bandwidth. */
export interface Peak {
  threads: number;
  gflops: number;
  /** GFLOP/s of the bf16 path's own loop (AMX or VDPBF16PS; 0 where bf16 widens to float32). Absent in older reports. */
  bf16Gflops?: number;
  gbs: number;
}

/** One implementation as the report lists it (loaded or skipped, and what its call times). */
export interface ImplInfo {
  impl: string;
  label: string;
  available: boolean;
  note: string | null;
  timed: Record<string, string>;
}

/** The JSON report, schema mhsa-bench/1 (documented in benchmarks/README.md). */
export interface Report {
  schema: string;
  command: string;
  date: string;
  elapsed_s: number;
  host: { cpu: string | null; cores: number; platform: string; node: string; loadavg_start: number[]; loadavg_end: number[] };
  /** mhsa's info() at start-up (more fields than these two). */
  info: { version?: string; isa?: string };
  calibration: { start: Peak[]; end: Peak[] | null } | null;
  settings: {
    mode: 'timing' | 'check';
    suite: string;
    workloads: string[];
    threads: number[];
    min_time_s: number;
    repeat: number;
    interleave: boolean;
    /** Processes per row with --fresh-process=N, 0 without; absent in older reports. */
    fresh_process?: number;
    tolerance: number;
  };
  impls: ImplInfo[];
  results: Row[];
}

/** A saved report (--from-json); a missing, unreadable or foreign file is a usage error. */
export function loadReport(file: string): Report {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`--from-json cannot read '${file}' (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let report: Partial<Report>;
  try {
    report = JSON.parse(text) as Partial<Report>;
  } catch (e) {
    throw new UsageError(`--from-json expects a JSON report, and '${file}' is not JSON (${(e as Error).message})`);
  }
  if (report?.schema !== SCHEMA || !Array.isArray(report.results) || !report.settings || !report.host) {
    throw new UsageError(`--from-json expects an ${SCHEMA} report (mhsa-bench --json), received '${file}' with schema ${JSON.stringify(report?.schema ?? null)}`);
  }
  return report as Report;
}

/** What ran, as the run's first line names it: check, quick, full, or custom (workloads picked with --workload). */
export function runKind(report: Report): string {
  const { mode, suite, workloads } = report.settings;
  if (mode === 'check') return 'check';
  const names = suite === 'quick' || suite === 'full' ? suiteWorkloads(suite).map((w) => w.name) : [];
  return names.join() === workloads.join() ? suite : 'custom';
}

/** Skipped rows, collapsed to one note per (impl, reason). */
export function skipNotes(rows: readonly Row[], workloadCount: number): string[] {
  const byReason = new Map<string, Map<number, string[]>>();
  for (const r of rows) {
    if (r.status !== 'skipped') continue;
    const key = `${r.impl}: ${r.note}`;
    const perThreads = byReason.get(key) ?? new Map<number, string[]>();
    byReason.set(key, perThreads);
    perThreads.set(r.threads, [...(perThreads.get(r.threads) ?? []), r.workload]);
  }
  return [...byReason].map(([key, perThreads]) => {
    const lists = [...perThreads];
    const names = (ws: string[]) => (ws.length === workloadCount ? 'every workload' : ws.join(', '));
    const same = lists.every(([, ws]) => ws.join() === lists[0][1].join());
    const where = same
      ? `${names(lists[0][1])} at ${lists.map(([t]) => t).join(' and ')} thr`
      : lists.map(([t, ws]) => `${names(ws)} at ${t} thr`).join('; ');
    return `note: skipped ${key} (${where})`;
  });
}

/** Writes a report file (JSON, SVG), making its directory. */
export function writeReportFile(file: string, text: string): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  fs.writeFileSync(file, text);
}
