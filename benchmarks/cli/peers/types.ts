/**
 * The adapter interface every implementation is measured through: mhsa itself
 * (benchmarks/cli/mhsa-impl.ts) and each peer (one file each in this folder).
 */
import type { Inputs } from '../data';
import type { Problem } from '../workloads';

/** A problem made ready to run: inputs converted, sessions built, buffers allocated. */
export interface Prepared {
  /**
   * One timed call. Returns the output in the problem's canonical layout
   * (see workloads.ts): this very output is verified against the reference.
   */
  run(): Float32Array | Promise<Float32Array>;
  /**
   * Re-lays a run's output out into the canonical layout when the impl computes
   * another one (e.g. [B, N, H·d] for [B, H, N, d]); used for the check only, untimed.
   */
  canonical?(output: Float32Array): Float32Array;
  /**
   * For an impl whose calls cross a process boundary (the PyTorch worker): the
   * milliseconds the last run() took by the impl's own clock, which the runner
   * records instead of its own so the round trip is not counted.
   */
  lastCallMs?(): number;
  /**
   * For an impl that computes in another process: that process's resident set
   * and high-water mark (bytes) as of its last reply, which the runner's RSS
   * column then reports instead of this process's.
   */
  memory?(): { rss: number; maxRss: number };
  /** Called (untimed) before each timed call, e.g. to poison a reused output buffer. */
  beforeRun?(): void;
  /** Frees sessions, tensors and threads. */
  dispose(): void | Promise<void>;
}

export interface Impl {
  /** Short name used in tables, JSON (`impl`) and --peers=...: 'mhsa', 'onnxruntime', 'tfjs-wasm', 'js'. */
  readonly name: string;
  /** What is measured, with its version once loaded: 'onnxruntime-node 1.30.0 (CPU EP)'. */
  label: string;
  /**
   * Loads the package. Returns null when ready, or a one-line reason it is
   * unavailable (not installed, failed to initialize): the impl is then skipped.
   */
  load(): Promise<string | null>;
  /** Largest thread count it can be set to; rows with more threads are skipped with a note. */
  readonly maxThreads: number;
  /** null when it runs this problem; otherwise a one-line reason to skip it. */
  supports(p: Problem): string | null;
  /** One line per problem kind: what a timed call contains. */
  readonly timed: Partial<Record<Problem['kind'], string>>;
  prepare(p: Problem, inputs: Inputs, threads: number): Promise<Prepared>;
}
