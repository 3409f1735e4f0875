/**
 * scripts/soak.js (npm run soak) at a small call count: it exits 0, prints a
 * timing row for every op in both modes and the memory table, and its --json
 * report agrees with what it printed.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureCompiled } from './helpers/compiled';

const ROOT = path.resolve(__dirname, '..');
const OPS = ['matmul', 'softmax', 'attention', 'layerNorm', 'block forward'];
const MEMORY = ['rss', 'heapUsed', 'external', 'arrayBuffers'];


interface SoakReport {
  calls: number;
  timings: Array<{ op: string; mode: string; calls: number; seconds: number; mismatches: number }>;
  memory: Record<string, { start: number; end: number; growth: number; limit: number; ok: boolean }>;
  pass: boolean;
}

test('npm run soak with --calls 2000 passes and reports parseable figures', () => {
  ensureCompiled();
  const jsonFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-soak-')), 'soak.json');
  const run = spawnSync(process.execPath, ['--expose-gc', path.join(ROOT, 'scripts', 'soak.js'), '--calls', '2000', '--json', jsonFile], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
  });
  const stdout = run.stdout;
  if (run.status !== 0) throw new Error(`soak exited with ${run.status}:\n${stdout}\n${run.stderr}`);
  expect(stdout).toMatch(/^mhsa soak: 2000 calls per op, sync and async/);
  expect(stdout.trim().split('\n').pop()).toBe('soak: PASS');

  const report = JSON.parse(fs.readFileSync(jsonFile, 'utf8')) as SoakReport;
  expect(report.pass).toBe(true);
  for (const op of OPS) {
    for (const mode of ['sync', 'async']) {
      const row = new RegExp(`^${op} +${mode} +(\\d+) +([\\d.]+) +([\\d.]+) +(\\d+)$`, 'm').exec(stdout);
      expect(row).not.toBeNull();
      const [calls, seconds, perCall, mismatches] = row!.slice(1).map(Number);
      expect(calls).toBe(2000);
      expect(seconds).toBeGreaterThan(0);
      expect(perCall).toBeGreaterThan(0);
      expect(mismatches).toBe(0);
      expect(report.timings).toContainEqual(expect.objectContaining({ op, mode, calls: 2000, mismatches: 0 }));
    }
  }
  for (const key of MEMORY) {
    const row = new RegExp(`^${key} +(-?[\\d.]+) +(-?[\\d.]+) +(-?[\\d.]+) +([\\d.]+)$`, 'm').exec(stdout);
    expect(row).not.toBeNull();
    const [start, end, growth, limit] = row!.slice(1).map(Number);
    const fromJson = report.memory[key];
    expect(start).toBeCloseTo(fromJson.start / 2 ** 20, 1);
    expect(end).toBeCloseTo(fromJson.end / 2 ** 20, 1);
    expect(growth).toBeCloseTo(end - start, 1);
    expect(growth).toBeLessThanOrEqual(limit);
    expect(fromJson.ok).toBe(true);
  }
});

test('soak.js rejects a bad --calls and runs only with --expose-gc', () => {
  const script = path.join(ROOT, 'scripts', 'soak.js');
  const bad = spawnSync(process.execPath, ['--expose-gc', script, '--calls', 'many'], { cwd: ROOT, encoding: 'utf8' });
  expect(bad.status).toBe(1);
  expect(bad.stderr).toMatch(/--calls takes a positive integer, received many/);
  const noGc = spawnSync(process.execPath, [script, '--calls', '10'], { cwd: ROOT, encoding: 'utf8' });
  expect(noGc.status).toBe(1);
  expect(noGc.stderr).toMatch(/run with node --expose-gc/);
});
