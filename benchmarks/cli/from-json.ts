/** --from-json: a saved JSON report rendered again, without running anything. */
import { UsageError, type Options } from './args';
import { renderChart } from './chart';
import { formatTable, legend, loadReport, runKind, skipNotes, writeReportFile, type Peak } from './report';

/**
 * --from-json: a saved report's table (text or --markdown) and, with --svg, its
 * chart, without running anything; --workload and --threads select its rows.
 */
export function renderSaved(opts: Options): number {
  const report = loadReport(opts.fromJson!);
  const timing = report.settings.mode !== 'check';
  if (opts.svg !== undefined && !timing) throw new UsageError(`--svg charts timings, and ${opts.fromJson} is a --check report`);
  const names = new Set(opts.workloads.map((w) => w.name));
  const rows = report.results.filter(
    (r) => (!opts.explicitWorkloads || names.has(r.workload)) && (!opts.explicitThreads || opts.threads.includes(r.threads)),
  );
  const out = (s: string) => process.stdout.write(`${s}\n`);
  const { host, info: mhsaInfo, settings } = report;
  out(`mhsa-bench report ${opts.fromJson}: ${runKind(report)} · ${host.cpu ?? 'unknown CPU'} · ${host.cores} cores · Node ${host.node} · ${report.date}`);
  out(`command: ${report.command}`);
  out(`mhsa ${mhsaInfo.version ?? '?'} (${mhsaInfo.isa ?? '?'}); rows at --threads ${settings.threads.join(',')}${settings.interleave ? ', mhsa and its peers interleaved in bursts' : ''}`);
  const available = report.impls.filter((i) => i.available);
  if (available.length > 1) out(`impls: ${available.map((i) => i.label).join(' · ')}`);
  for (const i of report.impls.filter((i) => !i.available)) out(`note: skipped ${i.impl}: ${i.note}`);
  if (report.calibration) {
    const peaks = (ps: Peak[]) => ps.map((p) => `${p.threads} thr ${p.gflops.toFixed(1)} GFLOP/s FMA, ${p.gbs.toFixed(1)} GB/s read`).join(' · ');
    out(`peak (measured at start-up): ${peaks(report.calibration.start)}`);
    if (report.calibration.end) out(`peak (measured again at the end): ${peaks(report.calibration.end)}`);
  }
  out('');
  out(formatTable(rows, { markdown: opts.markdown, check: !timing }));
  out('');
  if (timing) out(legend(rows.some((r) => r.impl !== 'mhsa' && r.status !== 'skipped')));
  for (const n of skipNotes(rows, new Set(rows.map((r) => r.workload)).size)) out(n);
  if (opts.svg !== undefined) {
    writeReportFile(opts.svg, renderChart(report, rows));
    out(`SVG chart written to ${opts.svg}`);
  }
  return 0;
}
