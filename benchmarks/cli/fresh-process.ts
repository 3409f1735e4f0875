/**
 * --fresh-process: each row is timed in a Node process of its own, as a
 * script that loads the library, makes its calls and exits meets it: nothing
 * warmed by another row (allocator free lists, the result pool, page tables,
 * JIT). The parent spawns this CLI once per (workload, threads, impl) with
 * --child-row, which runs that one row and prints it as JSON on stdout.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Options } from './args';
import type { Row } from './report';

/** The mhsa-bench entry script (benchmarks/cli/bin/), from the sources or from dist/. */
function entryScript(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    const bin = path.join(dir, 'benchmarks', 'cli', 'bin', 'mhsa-bench.js');
    if (fs.existsSync(bin)) return bin;
    if (path.dirname(dir) === dir) throw new Error('mhsa-bench: cannot find benchmarks/cli/bin/mhsa-bench.js for --fresh-process');
  }
}

/** The arguments that make a child run one row with the parent's timing settings. */
export function childArguments(opts: Options, workload: string, impl: string, threads: number): string[] {
  return [
    '--workload', workload,
    '--threads', String(threads),
    '--suite', opts.suite,
    '--min-time', String(opts.minTime),
    '--repeat', String(opts.repeat),
    '--child-row', impl,
  ];
}

/** Runs one row in a new process and returns it (without its problem, which the caller has). */
export function rowInChild(opts: Options, workload: string, impl: string, threads: number): Promise<Omit<Row, 'problem'>> {
  const args = [...process.execArgv, entryScript(), ...childArguments(opts, workload, impl, threads)];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      try {
        // The row is the last line: a peer may print before it.
        const rows = JSON.parse(stdout.trim().split('\n').pop() ?? '') as Omit<Row, 'problem'>[];
        if (rows.length !== 1) throw new Error(`expected one row, received ${rows.length}`);
        resolve(rows[0]);
      } catch (e) {
        const last = stderr.trim().split('\n').pop() ?? '';
        const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
        reject(new Error(`the row's process ${how}: ${(e as Error).message}${last ? `; it said: ${last}` : ''}`));
      }
    });
  });
}
