// Times each stage of the seed-004 block (ViT-B/16 attention, 197 tokens) next to the whole
// MultiHeadSelfAttention.forward, for RESULTS.md's stage shares. Usage: node benchmarks/block-stages.js [batch]
// Needs the compiled package (npm install).
const m = require('..');
function rnd(n,s=0.05){const a=new Float32Array(n); for(let i=0;i<n;i++) a[i]=(Math.random()-0.5)*s; return a;}
const [B,T,D,H]=[+process.argv[2]||1,197,768,12]; const inner=D;
const x={data:rnd(B*T*D,1),shape:[B,T,D]};
const wqkv={data:rnd(3*inner*D),shape:[3*inner,D]}, wo={data:rnd(D*inner),shape:[D,inner]}, bo={data:rnd(D),shape:[D]};
const blk=new m.MultiHeadSelfAttention({dim:D,heads:H,dimHead:64,weights:{qkvWeight:wqkv,outWeight:wo,outBias:bo},norm:{weight:{data:new Float32Array(D).fill(1),shape:[D]},bias:{data:new Float32Array(D),shape:[D]}}});
const out={data:new Float32Array(B*T*D),shape:[B,T,D]};
const pq=m.prepack({data:wqkv.data.subarray(0,inner*D),shape:[inner,D]},{transpose:true});
const pall=m.prepack(wqkv,{transpose:true}); const po=m.prepack(wo,{transpose:true});
const xn={data:new Float32Array(B*T*D),shape:[B,T,D]}, q={data:new Float32Array(B*T*inner),shape:[B,T,inner]}, qkv={data:new Float32Array(B*T*3*inner),shape:[B,T,3*inner]};
const o={data:new Float32Array(B*T*inner),shape:[B,T,inner]};
function time(name, f, flops){ for(let i=0;i<5;i++) f(); const ts=[]; const t0=Date.now(); while(Date.now()-t0<1500||ts.length<10){const s=process.hrtime.bigint(); f(); ts.push(Number(process.hrtime.bigint()-s)/1e6);} ts.sort((a,b)=>a-b); const med=ts[ts.length>>1]; console.log(name.padEnd(28), med.toFixed(3),'ms', flops? (flops/med/1e6).toFixed(1)+' GFLOP/s':''); return med;}
const tb=time('block.forward', ()=>blk.forward(x,{out}), 2*B*T*D*3*inner+4*B*H*T*T*64+2*B*T*inner*D);
time('layerNorm', ()=>m.layerNorm(x,{out:xn}));
time('one projection (packed)', ()=>m.matmul(xn,pq,{out:q}), 2*B*T*D*inner);
time('fused qkv (packed, N=2304)', ()=>m.matmul(xn,pall,{out:qkv}), 2*B*T*D*3*inner);
time('attention heads=12', ()=>m.attention(q,q,q,{heads:H,out:o}), 4*B*H*T*T*64);
time('out projection + bias', ()=>m.matmul(o,po,{c:bo,out}), 2*B*T*inner*D);
