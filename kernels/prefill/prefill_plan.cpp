// The plan question the dispatcher asks the prefill path (prefill.h
// plan_balance, grouped_tile_rows), routed by compute capability like prefill_launch.cpp routes
// the launch, so that the dispatcher includes no architecture's planner. Plain
// C++ (no CUDA): tests/test_dispatch.py links it into the dispatcher's CPU
// driver (kernels/dispatch/tests/select_table_main.cpp).
#include "kernels/prefill/prefill.h"
#include "kernels/prefill/sm90/prefill_sm90_plan.h"

namespace swordfish {
namespace prefill {

double plan_balance(const GemmProblem& p) {
  if (p.cc_major == 9 && p.cc_minor == 0) return sm90::make_plan(p).balance;
  return 1.0;  // no plan model on other architectures yet
}

int grouped_tile_rows(const GemmProblem& expert, double avg_rows) {
  if (expert.cc_major == 9 && expert.cc_minor == 0) return sm90::grouped_tile_rows(expert.bits, avg_rows);
  return 0;  // the grouped GEMM exists on sm90a only
}

}  // namespace prefill
}  // namespace swordfish
