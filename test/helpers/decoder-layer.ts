/** A decoder layer's settings, as the decoder tests draw them. */
export interface DecoderLayer {
  dim: number;
  heads: number;
  kvHeads: number;
  dimHead: number;
  norm: 'layer' | 'rms' | 'none';
  bias: boolean;
  rope?: { theta: number; rotaryDim: number; interleaved: boolean };
  softcap?: number;
  window?: { left?: number; right?: number };
  sinks: boolean;
  /** Whether it has an output projection (it must unless heads = 1 and dimHead = dim). Default true. */
  out?: boolean;
  /** The weights' dtype. Default 'float32'. */
  dtype?: 'float32' | 'bf16';
}
