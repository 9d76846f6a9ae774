// Host program for tests/test_type_shards.py: for every collective, element type, operator and reduce
// flag, the shard in which the launchers look for a call's kernel (typeShardOf) is the one that compiles
// it (shardOfTags, what heldKernels keeps), and every shard holds some kernel. Prints one line per shard
// and exits non-zero on a mismatch.
#include <cstdio>

#include "native/algorithms/collective_names.cuh"
#include "native/algorithms/type_shards.cuh"

using namespace mscclpp_nccl;

int main() {
  int mismatches = 0;
  int kernels[kTypeShards] = {};
  for (int c = 0; c < kNumCollectives; ++c)
    for (int t = 0; t < kNumDataTypes; ++t)
      for (int o = 0; o <= static_cast<int>(BinaryOp::kMin); ++o)
        for (bool reduce : {false, true}) {
          const auto type = static_cast<DataType>(t);
          const auto op = static_cast<BinaryOp>(o);
          const int compiled =
              dispatchExchange(static_cast<Collective>(c), reduce, type, op,
                               [](auto... tags) { return shardOfTags<decltype(tags)...>(); });
          const int looked = typeShardOf(type, op, reduce);
          if (compiled != looked || looked < 0 || looked >= kTypeShards) {
            std::printf("mismatch: collective %d type %d op %d reduce %d: compiled in %d, looked up in %d\n",
                        c, t, o, reduce, compiled, looked);
            ++mismatches;
          } else {
            ++kernels[looked];
          }
        }
  for (int k = 0; k < kTypeShards; ++k) std::printf("shard %d: %d calls\n", k, kernels[k]);
  return mismatches == 0 ? 0 : 1;
}
