// Many calls of every op in a loop. Under AddressSanitizer its leak checker
// runs at exit, so anything an op allocates and loses fails the run; the
// per-thread scratch buffers must also stop growing once warmed up.
#include "check.h"
#include "support.h"

using namespace mhsa;
using namespace mhsa_test;

TEST(soak_every_op_repeatedly) {
  std::mt19937_64 rng(testSeed() + 30);
  const int iterations = 300;
  const auto a = randomFloats(rng, 33 * 65), b = randomFloats(rng, 65 * 17);
  const auto q = randomFloats(rng, 2 * 3 * 40 * 16), k = randomFloats(rng, 2 * 3 * 50 * 16),
             v = randomFloats(rng, 2 * 3 * 50 * 16);
  std::vector<float> mm(33 * 17), att(2 * 3 * 40 * 16), sm(33 * 65), ln(33 * 65);
  std::vector<float> packed;
  int failures = 0;
  for (int it = 0; it < iterations; ++it) {
    DescBuilder md;
    md.shape({33, 65}).shape({65, 17}).shape({}).shape({33, 17}).flag(false).flag(false).number(1).number(0).flag(false).flag(false).flag(false);
    MatmulCall mc;
    failures += !prepareMatmul(md.done(), buf(a), buf(b), none(), buf(mm), &mc).ok();
    runCall(mc);

    DescBuilder ad;
    ad.number(0).shape({2, 3, 40, 16}).shape({2, 3, 50, 16}).shape({2, 3, 50, 16}).shape({2, 3, 40, 16});
    ad.flag(false).number(0).flag(it % 2 == 0).shape({}).number(0).number(-1).number(-1).flag(false).flag(false);
    AttentionCall ac;
    failures += !prepareAttention(ad.done(), buf(q), buf(k), buf(v), buf(att), none(), none(), none(), none(), &ac).ok();
    runCall(ac);

    DescBuilder sd;
    sd.shape({33, 65}).shape({33, 65}).number(1);
    SoftmaxCall sc;
    failures += !prepareSoftmax(sd.done(), buf(a), buf(sm), &sc).ok();
    runCall(sc);

    DescBuilder ld;
    ld.shape({33, 65}).shape({33, 65}).number(1e-5).flag(it % 3 == 0);
    LayerNormCall lc;
    failures += !prepareLayerNorm(ld.done(), buf(a), buf(ln), none(), none(), &lc).ok();
    runCall(lc);

    DescBuilder pd;
    pd.shape({65, 17}).flag(false).flag(false);
    int64_t floats = 0;
    failures += !preparePackedSize(pd.done(), &floats).ok();
    packed.assign(static_cast<size_t>(floats), 0.0f);
    DescBuilder pk;
    pk.shape({65, 17}).flag(false).flag(false).flag(false);
    PackCall pc;
    failures += !preparePackMatrix(pk.done(), buf(b), buf(packed), none(), &pc).ok();
    runCall(pc);

    // Rejected calls allocate only their message.
    DescBuilder bad;
    bad.shape({33, 65}).shape({64, 17});
    MatmulCall rejected;
    failures += prepareMatmul(bad.done(), buf(a), buf(b), none(), buf(mm), &rejected).ok();
  }
  CHECK(failures == 0);
}
