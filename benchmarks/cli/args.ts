/** Command-line options of mhsa-bench. A usage error throws {@link UsageError} (exit code 2). */
import * as os from 'node:os';
import { precisionOf, selectWorkloads, suiteWorkloads, type Suite, type Workload } from './workloads';

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface Options {
  workloads: Workload[];
  suite: Suite;
  /** True when --workload picked the workloads (the suite then only sets the defaults). */
  explicitWorkloads: boolean;
  threads: number[];
  /** Seconds of timed calls per row, at least. */
  minTime: number;
  /** Timed calls per row, at least. */
  repeat: number;
  /** File to write the JSON report to; '-' writes it to stdout instead of the table. */
  json?: string;
  markdown: boolean;
  /** File to write the chart of the timed rows to (SVG). */
  svg?: string;
  /** A saved JSON report to render (table, --markdown, --svg) instead of running anything. */
  fromJson?: string;
  /** True when --threads picked the thread counts (with --from-json: which rows to show). */
  explicitThreads: boolean;
  /** Peer names to run (empty: mhsa only). */
  peers: string[];
  list: boolean;
  help: boolean;
  check: boolean;
  /** Time mhsa and the peers of a row group in alternating bursts instead of one after another. */
  interleave: boolean;
  /** Time each row in new processes of its own (--fresh-process). */
  freshProcess: boolean;
  /** Processes per row with --fresh-process (--fresh-process=N; default 3). */
  freshProcessRounds: number;
  /** Internal (--child-row IMPL): run the one row of IMPL as a --fresh-process child, print it as JSON. */
  childRow?: string;
  /** --dtype: only the workloads whose weights mhsa holds in this type (undefined: all). */
  dtype?: 'fp32' | 'bf16' | 'int8';
  /** --backend: which addon mhsa runs on (bin/mhsa-bench.js sets MHSA_ADDON before lib/ loads). */
  backend: 'native' | 'wasm';
}

export const PEER_NAMES = ['onnxruntime', 'onnxruntime-mha', 'onnxruntime-gqa', 'onnxruntime-int8', 'pytorch', 'pytorch-mha', 'mhsa-alloc', 'mhsa-unfused', 'tfjs-wasm', 'js'] as const;

export const DEFAULTS: Record<Suite, { minTime: number; repeat: number }> = {
  quick: { minTime: 0.3, repeat: 3 },
  full: { minTime: 1.0, repeat: 5 },
};

export function defaultThreads(): number[] {
  const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  return cores > 1 ? [1, cores] : [1];
}

export const USAGE = `Usage: mhsa-bench [options]

Times mhsa on the standard workloads (GEMM g_*, softmax s_*, attention a_*,
the seed-004 ViT block m_*), checks every result against a float64 reference,
and optionally runs the same problems on peer libraries.

Options:
  --suite quick|full     workload set and timing defaults (default: quick, < 1 min)
  --workload LIST        comma-separated workload names (a * matches anything: g_*)
  --threads LIST         thread counts, e.g. 1,2 (default: 1 and the core count)
  --min-time SECONDS     timed seconds per row, at least (quick 0.3, full 1)
  --repeat N             timed calls per row, at least (quick 3, full 5)
  --peers[=LIST]         also run peers: onnxruntime, onnxruntime-mha, onnxruntime-gqa, onnxruntime-int8, pytorch, pytorch-mha, mhsa-alloc, mhsa-unfused, tfjs-wasm, js (default: all)
  --json FILE            write the JSON report to FILE ('-': to stdout, no table)
  --markdown             print the table as Markdown
  --svg FILE             write a bar chart of the timed rows to FILE (SVG)
  --from-json REPORT     run nothing: print the table of a saved JSON report (and
                         --svg its chart); --workload and --threads select its rows
  --interleave           time mhsa and its peers in alternating bursts (same host noise
                         for each; the fair comparison on a shared machine)
  --fresh-process[=N]    time each row in N new processes of its own (default 3), as a
                         script that runs once meets the library (with --peers=mhsa-alloc:
                         the naive-user mode, every result allocated by the call)
  --dtype fp32|bf16|int8 only the workloads in float32, or those where mhsa's weights are
                         bf16 (*_bf16: % of the bf16 peak) or int8 (*_int8: no % of peak);
                         peers stay float32
  --backend native|wasm  the addon mhsa runs on: the native one (default) or the
                         WebAssembly one (@mhsa/wasm32, or a checkout's build-wasm/)
  --check                run every workload once at a small size and verify it; no timing
  --list                 list the workloads and peers, then exit
  -h, --help             show this help

Exit codes: 0 success, 1 a wrong result (or an mhsa error), 2 a usage error.
The JSON schema is documented in benchmarks/README.md.`;

function positiveInt(opt: string, s: string): number {
  if (!/^\d+$/.test(s) || Number(s) < 1 || Number(s) > 1024) {
    throw new UsageError(`${opt} expects integers from 1 to 1024, received '${s}'`);
  }
  return Number(s);
}

export function parseArgs(argv: readonly string[]): Options {
  let suite: Suite = 'quick';
  let workloadList: string | undefined;
  let threads: number[] | undefined;
  let minTime: number | undefined;
  let repeat: number | undefined;
  let json: string | undefined;
  let markdown = false;
  let svg: string | undefined;
  let fromJson: string | undefined;
  /** Options given that only a run uses (refused with --from-json). */
  const runOnly: string[] = [];
  let peers: string[] = [];
  let list = false;
  let help = false;
  let check = false;
  let interleave = false;
  let freshProcess = false;
  let freshProcessRounds = 3;
  let childRow: string | undefined;
  let dtype: 'fp32' | 'bf16' | 'int8' | undefined;
  let backend: 'native' | 'wasm' = 'native';

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('-')) throw new UsageError(`unexpected argument '${arg}' (options start with --; see --help)`);
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(0, eq) : arg;
    const inline = eq >= 0 ? arg.slice(eq + 1) : undefined;
    const value = (): string => {
      if (inline !== undefined) return inline;
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) throw new UsageError(`${name} needs a value (see --help)`);
      i++;
      return next;
    };
    const noValue = () => {
      if (inline !== undefined) throw new UsageError(`${name} takes no value, received '${arg}'`);
    };
    if (['--suite', '--min-time', '--repeat', '--json', '--peers', '--interleave', '--fresh-process', '--check', '--list', '--dtype', '--backend'].includes(name)) {
      runOnly.push(name);
    }
    switch (name) {
      case '--suite': {
        const v = value();
        if (v !== 'quick' && v !== 'full') throw new UsageError(`--suite expects quick or full, received '${v}'`);
        suite = v;
        break;
      }
      case '--dtype': {
        const v = value();
        if (v !== 'fp32' && v !== 'bf16' && v !== 'int8') throw new UsageError(`--dtype expects fp32, bf16 or int8, received '${v}'`);
        dtype = v;
        break;
      }
      case '--backend': {
        const v = value();
        if (v !== 'native' && v !== 'wasm') throw new UsageError(`--backend expects native or wasm, received '${v}'`);
        backend = v;
        break;
      }
      case '--workload':
      case '--workloads':
        workloadList = value();
        break;
      case '--threads': {
        const v = value();
        threads = [...new Set(v.split(',').map((s) => positiveInt('--threads', s.trim())))];
        break;
      }
      case '--min-time': {
        const v = value();
        const n = Number(v);
        if (v.trim() === '' || !Number.isFinite(n) || n < 0 || n > 3600) {
          throw new UsageError(`--min-time expects seconds from 0 to 3600, received '${v}'`);
        }
        minTime = n;
        break;
      }
      case '--repeat':
        repeat = positiveInt('--repeat', value());
        break;
      case '--json':
        json = value();
        break;
      case '--markdown':
        noValue();
        markdown = true;
        break;
      case '--svg':
        svg = value();
        break;
      case '--from-json':
        fromJson = value();
        break;
      case '--peers': {
        if (inline === undefined) {
          peers = [...PEER_NAMES];
          break;
        }
        const names = inline.split(',').map((s) => s.trim()).filter((s) => s !== '');
        const bad = names.filter((n) => !(PEER_NAMES as readonly string[]).includes(n));
        if (bad.length > 0 || names.length === 0) {
          throw new UsageError(`--peers= expects names from ${PEER_NAMES.join(', ')}, received '${inline}'`);
        }
        peers = PEER_NAMES.filter((n) => names.includes(n));
        break;
      }
      case '--list':
        noValue();
        list = true;
        break;
      case '--check':
        noValue();
        check = true;
        break;
      case '--interleave':
        noValue();
        interleave = true;
        break;
      case '--fresh-process':
        freshProcess = true;
        if (inline !== undefined) freshProcessRounds = positiveInt('--fresh-process', inline);
        break;
      case '--child-row': {
        const v = value();
        if (v !== 'mhsa' && !(PEER_NAMES as readonly string[]).includes(v)) throw new UsageError(`--child-row expects mhsa or a peer, received '${v}'`);
        childRow = v;
        break;
      }
      case '-h':
      case '--help':
        noValue();
        help = true;
        break;
      default:
        throw new UsageError(`unknown option '${name}' (see --help)`);
    }
  }

  if (fromJson !== undefined && runOnly.length > 0) {
    throw new UsageError(`${runOnly[0]} is for a run; --from-json renders a saved report (it takes --markdown, --svg, --workload and --threads)`);
  }
  if (svg !== undefined && check) throw new UsageError('--svg charts timings, and --check times nothing');
  if (freshProcess && (interleave || check)) {
    throw new UsageError(`--fresh-process times each row in its own process; it cannot be combined with ${interleave ? '--interleave' : '--check'}`);
  }

  let workloads: Workload[];
  if (workloadList !== undefined) {
    try {
      workloads = selectWorkloads(workloadList);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
  } else {
    // --check covers every workload (at its small size) unless --workload narrows it.
    workloads = suiteWorkloads(check ? 'full' : suite);
  }
  if (dtype !== undefined) {
    workloads = workloads.filter((w) => precisionOf(w.problem) === dtype);
    if (workloads.length === 0) throw new UsageError(`--dtype ${dtype} leaves no workload (the bf16 and int8 ones are in --suite full)`);
  }
  return {
    workloads,
    suite,
    explicitWorkloads: workloadList !== undefined,
    threads: threads ?? defaultThreads(),
    explicitThreads: threads !== undefined,
    minTime: minTime ?? DEFAULTS[suite].minTime,
    repeat: repeat ?? DEFAULTS[suite].repeat,
    json,
    markdown,
    svg,
    fromJson,
    peers,
    list,
    help,
    check,
    interleave,
    freshProcess,
    freshProcessRounds,
    ...(childRow !== undefined ? { childRow } : {}),
    ...(dtype !== undefined ? { dtype } : {}),
    backend,
  };
}
