/**
 * `--svg FILE`: the timed rows of a report as a bar chart, written as plain SVG
 * (no dependency). Per workload, one horizontal bar per timed row, grouped by
 * thread count; a bar's length is the row's rate in the workload's metric
 * (GFLOP/s or GB/s, as the workload's heading says), so longer is faster.
 * Workloads differ by orders of magnitude (64³ against 2048³), so each has its
 * own scale, from 0 to its fastest row. A peer's label adds its time as a
 * multiple of mhsa's at the same thread count (the table's `mhsa x` column).
 */
import { runKind, type Report, type Row } from './report';

const WIDTH = 980;
const MARGIN = 16;
/** Where the bars start: the thread count and the implementation's name are written to their left. */
const BAR_X = 230;
/** Bar length of the workload's fastest row; its value label follows it. */
const BAR_MAX = 500;
const ROW = 16;
const BAR = 11;
const GROUP_GAP = 4;
const HEADING = 22;
const WORKLOAD_GAP = 10;
const LINE = 16;
/** Characters of the 11 px monospace command line that fit across the chart. */
const COMMAND_CHARS = 140;

/** One colour per implementation, the same in every chart; mhsa the darkest. */
const COLOURS: Record<string, string> = {
  mhsa: '#1f4e9c',
  'mhsa-alloc': '#5b8bd6',
  'mhsa-unfused': '#9dbbe8',
  onnxruntime: '#d9771e',
  'onnxruntime-mha': '#f2b266',
  pytorch: '#b8322a',
  'pytorch-mha': '#e58a82',
  'tfjs-wasm': '#3c8d4a',
  js: '#7a7a7a',
};
const SPARE_COLOURS = ['#8e5ea2', '#c9a227', '#2a9d8f', '#6d4c41'];

function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]!);
}

/** A coordinate or length: finite, one decimal. */
function n(x: number): string {
  return (Number.isFinite(x) ? Math.round(x * 10) / 10 : 0).toString();
}

function text(x: number, y: number, s: string, attrs = ''): string {
  return `<text x="${n(x)}" y="${n(y)}"${attrs ? ` ${attrs}` : ''}>${escapeXml(s)}</text>`;
}

/** s in lines of at most `width` characters, broken at spaces (a longer word stays whole). */
function wrap(s: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of s.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  return [...lines, line];
}

function rate(r: Row): number | null {
  return r.metric === 'GB/s' ? r.gbs : r.gflops;
}

function fmtRate(v: number): string {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

function fmtRatio(x: number): string {
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
}

function fmtMs(x: number): string {
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x.toFixed(3);
}

/** Workloads in report order, each with its thread counts (ascending) and their shown rows in report order. */
function groups(rows: readonly Row[]): { workload: string; shape: string; metric: string; byThreads: [number, Row[]][] }[] {
  const out = new Map<string, { workload: string; shape: string; metric: string; threads: Map<number, Row[]> }>();
  for (const r of rows) {
    if (r.status === 'skipped') continue;
    let g = out.get(r.workload);
    if (!g) out.set(r.workload, (g = { workload: r.workload, shape: r.shape, metric: r.metric, threads: new Map() }));
    g.threads.set(r.threads, [...(g.threads.get(r.threads) ?? []), r]);
  }
  return [...out.values()].map((g) => ({
    workload: g.workload,
    shape: g.shape,
    metric: g.metric,
    byThreads: [...g.threads].sort(([a], [b]) => a - b),
  }));
}

/** The chart of a timing report's rows (skipped rows are left out; wrong and failed rows are named, with no bar). */
export function renderChart(report: Report, rows: readonly Row[] = report.results): string {
  const shown = new Set(rows.filter((r) => r.status !== 'skipped').map((r) => r.impl));
  // The report's order (mhsa first, then the peers as --peers lists them), then any it does not list.
  const impls = [...new Set([...report.impls.map((i) => i.impl).filter((i) => shown.has(i)), ...shown])];
  const colour = new Map(impls.map((impl, i) => [impl, COLOURS[impl] ?? SPARE_COLOURS[i % SPARE_COLOURS.length]]));
  const labels = new Map(report.impls.map((i) => [i.impl, i.label]));
  const host = report.host;
  const title =
    `mhsa-bench ${runKind(report)}: mhsa and its peers on ${host.cpu ?? 'an unknown CPU'}, ${host.cores} cores`;
  const body: string[] = [];
  let y = MARGIN + 16;
  body.push(text(MARGIN, y, title, 'font-size="16" font-weight="bold"'));
  y += LINE + 2;
  body.push(text(MARGIN, y, `${report.date} · Node ${host.node} · ${host.platform} · mhsa ${report.info.version ?? '?'} (${report.info.isa ?? '?'})`, 'fill="#444"'));
  y += LINE;
  for (const line of wrap(report.command, COMMAND_CHARS)) {
    body.push(text(MARGIN, y, line, 'fill="#444" font-family="monospace" font-size="11"'));
    y += LINE - 2;
  }
  y += 2;
  body.push(text(MARGIN, y, "Bar: the row's rate at its median time, in the workload's metric (longer is faster); each workload on its own scale.", 'fill="#444"'));
  y += LINE;
  body.push(text(MARGIN, y, "× mhsa: the peer's median time over mhsa's at the same thread count (> 1: mhsa is faster).", 'fill="#444"'));
  y += LINE + 6;
  for (const impl of impls) {
    body.push(`<rect x="${n(MARGIN)}" y="${n(y - BAR + 1)}" width="${BAR}" height="${BAR}" fill="${colour.get(impl)}"/>`);
    body.push(text(MARGIN + BAR + 6, y, impl, 'font-weight="bold"'));
    const label = labels.get(impl);
    if (label && label !== impl) body.push(text(MARGIN + BAR + 140, y, label, 'fill="#444"'));
    y += LINE;
  }
  y += WORKLOAD_GAP;

  for (const g of groups(rows)) {
    y += HEADING - LINE;
    body.push(
      `<text x="${n(MARGIN)}" y="${n(y)}"><tspan font-weight="bold">${escapeXml(g.workload)}</tspan>` +
        `<tspan dx="8" fill="#444">${escapeXml(g.shape)} · ${escapeXml(g.metric)}</tspan></text>`,
    );
    y += 6;
    const max = Math.max(0, ...g.byThreads.flatMap(([, rs]) => rs.map((r) => (r.status === 'ok' ? rate(r) ?? 0 : 0))));
    for (const [threads, rs] of g.byThreads) {
      body.push(text(MARGIN + 10, y + BAR, `${threads} thr`, 'fill="#444"'));
      for (const r of rs) {
        const top = y + (ROW - BAR) / 2;
        body.push(text(MARGIN + 60, y + BAR, r.impl));
        if (r.status === 'ok') {
          const v = rate(r) ?? 0;
          const w = max > 0 ? (BAR_MAX * v) / max : 0;
          const vs = r.impl !== 'mhsa' && r.vs_mhsa !== null ? ` · ${fmtRatio(r.vs_mhsa)}× mhsa` : '';
          const peak = r.pct_peak !== null ? ` · ${r.pct_peak.toFixed(0)} % of peak` : '';
          const tip = `${r.workload} ${r.shape}, ${r.threads} thr, ${r.impl}: median ${fmtMs(r.median_ms ?? NaN)} ms, ${fmtRate(v)} ${r.metric}${peak}${vs}`;
          body.push(
            `<rect class="bar" x="${n(BAR_X)}" y="${n(top)}" width="${n(w)}" height="${BAR}" fill="${colour.get(r.impl)}" ` +
              `data-workload="${escapeXml(r.workload)}" data-threads="${r.threads}" data-impl="${escapeXml(r.impl)}" data-rate="${Number(v.toPrecision(6))}">` +
              `<title>${escapeXml(tip)}</title></rect>`,
          );
          body.push(text(BAR_X + w + 5, y + BAR, `${fmtRate(v)} ${r.metric}${vs}`));
        } else {
          body.push(text(BAR_X, y + BAR, `${r.status.toUpperCase()}: ${r.note ?? ''}`, 'fill="#b00"'));
        }
        y += ROW;
      }
      y += GROUP_GAP;
    }
    y += WORKLOAD_GAP;
  }
  const height = y + MARGIN;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${n(height)}" viewBox="0 0 ${WIDTH} ${n(height)}" ` +
      'font-family="Helvetica, Arial, sans-serif" font-size="12" fill="#111">',
    `<title>${escapeXml(title)}</title>`,
    `<rect class="background" x="0" y="0" width="${WIDTH}" height="${n(height)}" fill="#fff"/>`,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}
